"""A failure group carries its issue (#32), as a crash does: ``issues sync`` files one issue
for a group of failures of one cause, never twice, keyed by a hash of the group's
signature in the hidden marker crashes and skips use; a pull request's failures file
nothing but link the issue already there; the reports show the group's issue and its
state; a closed issue whose failure is back is reopened.

The records are shaped as the runner writes them for pytest's long tracebacks: 14 tests
that cannot reach one server, on two rows, each message with its own temp dir, port and
UUID.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from device_matrix.cli import main
from device_matrix.findings import FAILURE_PREFIX, failure_key, group_key
from device_matrix.issues.base import FINGERPRINT_MARKER
from device_matrix.report import groups
from device_matrix.report.verdict_views import comment
from tests import records as R
from tests.github_server import FakeGitHub, serve

TOKEN = "t0ken-for-tests"
RUN1 = "https://github.com/acme/xla/actions/runs/1"
RUN2 = "https://github.com/acme/xla/actions/runs/2"
ROWS = {"cpu": 11, "tpu": 3}  # 14 failures of one cause on 2 rows


def _failure(i: int, temp: str) -> dict[str, Any]:
    """A test that cannot reach the hub, as pytest's long traceback writes it."""
    exception = (
        f"OSError: We couldn't connect to 'https://huggingface.co:{40000 + i}' to load "
        f"{temp}/test_load_{i}0/config-{uuid.UUID(int=i * 7919 + 1)}.json"
    )
    message = "\n".join(
        [
            "    def test_load(tmp_path):",
            ">       hub.fetch(tmp_path)",
            "",
            f"tests/test_models.py:{10 + i % 3}: ",
            "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
            "    def fetch(p):",
            ">       raise OSError(p)",
            f"E       {exception}",
            "",
            "src/pkg/hub.py:41: OSError",
        ]
    )
    t = R.test(f"tests/test_models.py::test_load[{i}]", "failed", message=message)
    t["cause"], t["file"], t["line"] = exception, "tests/test_models.py", 10 + i % 3
    return t


def _records(*, run_url: str = RUN1, temp: str = "/tmp/pytest-of-ci/pytest-3", pr: int | None = None) -> list[Any]:
    recs = []
    first = 0
    for row, n in ROWS.items():
        tests = [_failure(i, temp) for i in range(first, first + n)]
        tests += [R.test(f"tests/test_ok.py::test_ok[{i}]") for i in range(5)]
        first += n
        rec = R.record(row, tests, run_url=run_url)
        rec["source"] = R.source(pr=pr, commit="b" * 40 if pr else "a" * 40)
        recs.append(rec)
    return recs


def _project(root: Path, gh: FakeGitHub, extra: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(
        f"[tool.device-matrix.tracker]\nkind = 'github'\nrepository = '{gh.repo}'\napi_url = '{gh.url}'\n"
        f"write_interval = 0\n{extra}"
    )
    return root


def _results(root: Path, recs: list[Any]) -> Path:
    results = root / "results"
    for rec in recs:
        (results / rec["row"]).mkdir(parents=True, exist_ok=True)
        (results / rec["row"] / "run.json").write_text(json.dumps(rec))
    return results


def _sync(root: Path, results: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["--project", str(root), "issues", "sync", str(results), "--apply", "--no-history"])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    return printed.out


def _triage(root: Path, results: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str, str]:
    out = root / "triage"
    code = main(["--project", str(root), "triage", str(results), "--out", str(out), "--no-history"])
    printed = capsys.readouterr()
    assert code in (0, 1), printed.out + printed.err
    data = json.loads((out / "triage.json").read_text())
    return data, (out / "triage.md").read_text(), (out / "triage.html").read_text()


@pytest.fixture
def gh(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    with serve() as server:
        yield server


# --- the key ------------------------------------------------------------------------------


def test_the_same_failure_with_another_temp_dir_uuid_or_port_has_one_key() -> None:
    one = _failure(3, "/tmp/pytest-of-ci/pytest-3")
    other = _failure(4, "/tmp/pytest-of-runner/pytest-88")
    assert one["message"] != other["message"]
    assert groups.test_signature(one) == groups.test_signature(other)
    assert failure_key(groups.test_signature(one)) == failure_key(groups.test_signature(other))
    assert failure_key(groups.test_signature(one)).startswith(FAILURE_PREFIX)
    # another cause, or the same words raised elsewhere in the project, is another group
    elsewhere = _failure(3, "/tmp/x")
    elsewhere["message"] = elsewhere["message"].replace("src/pkg/hub.py:41", "src/pkg/cache.py:7")
    assert failure_key(groups.test_signature(elsewhere)) != failure_key(groups.test_signature(one))


# --- filing, once ---------------------------------------------------------------------------


def test_fourteen_failures_of_one_cause_on_two_rows_file_one_issue_and_triage_shows_it(
    tmp_path: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path, gh)
    results = _results(root, _records())
    printed = _sync(root, results, capsys)
    (issue,) = gh.filed()
    key = group_key(groups.test_signature(_failure(0, "/tmp/x")))  # #42: the issue's key, its line left out
    assert issue["body"].rstrip().endswith(FINGERPRINT_MARKER.format(key))
    assert issue["title"].startswith("Failing: OSError: We couldn't connect to")
    assert "14 tests: 11 on cpu, 3 on tpu" in issue["body"]
    assert "tests/test_models.py::test_load[0]" in issue["body"] and "src/pkg/hub.py:41" in issue["body"]
    assert f"filed acme/xla#{issue['number']}" in printed

    data, md, page = _triage(root, results, capsys)
    (group,) = data["groups"]
    assert (group["count"], group["issue"], group["issue_state"]) == (14, f"acme/xla#{issue['number']}", "open")
    row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    assert row.rstrip().endswith(f"| acme/xla#{issue['number']} (open) |")
    assert f"acme/xla#{issue['number']} (open)" in page[page.index("id='groups'") :]


def test_a_second_sync_files_nothing_and_another_run_with_other_temp_paths_is_the_same_issue(
    tmp_path: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path, gh)
    results = _results(root, _records())
    _sync(root, results, capsys)
    writes = len(gh.writes())
    printed = _sync(root, results, capsys)
    assert len(gh.filed()) == 1 and len(gh.writes()) == writes  # not filed, not commented again
    assert "0 filed" in printed and "1 linked" in printed

    # the next run: another temp dir, other ports and UUIDs in every message
    later = _results(tmp_path / "later", _records(run_url=RUN2, temp="/tmp/pytest-of-runner/pytest-12"))
    _sync(root, later, capsys)
    (issue,) = gh.filed()
    (said,) = gh.comments[issue["number"]]
    assert said.startswith(f"Seen again in {RUN2} on cpu, tpu.")


def test_a_pull_requests_failures_file_nothing_but_its_triage_links_the_issue(
    tmp_path: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path, gh)
    pr = _results(tmp_path / "pr", _records(run_url=RUN2, pr=7, temp="/tmp/pytest-of-pr/pytest-1"))
    printed = _sync(root, pr, capsys)
    assert gh.filed() == [] and gh.writes() == []  # the author's to fix, not a tracker item
    assert "0 to file" in printed

    _sync(root, _results(tmp_path / "main", _records()), capsys)  # main fails the same way
    (issue,) = gh.filed()
    writes = len(gh.writes())
    _sync(root, pr, capsys)
    assert len(gh.filed()) == 1 and len(gh.writes()) == writes  # linked: no comment, no issue
    data, md, _ = _triage(root, pr, capsys)
    (group,) = data["groups"]
    assert group["issue"] == f"acme/xla#{issue['number']}" and group["issue_state"] == "open"
    t = data | {"groups": None}
    for text in (md, comment(t, None)):  # the report and the pull request's comment
        row = next(line for line in text.splitlines() if line.startswith("| 1 |"))
        assert f"acme/xla#{issue['number']} (open)" in row


def test_the_step_summary_shows_a_groups_issue(
    tmp_path: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path, gh)
    results = _results(root, _records())
    _sync(root, results, capsys)
    (issue,) = gh.filed()
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    _triage(root, results, capsys)
    row = next(line for line in summary.read_text().splitlines() if line.startswith("| 1 |"))
    assert f"acme/xla#{issue['number']} (open)" in row


# --- closure noticed ------------------------------------------------------------------------


def test_a_closed_issue_whose_failure_is_back_is_reopened(
    tmp_path: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path, gh)
    _sync(root, _results(root, _records()), capsys)
    (issue,) = gh.filed()
    gh.issues[issue["number"]]["state"] = "closed"  # a maintainer thought it fixed
    printed = _sync(root, _results(tmp_path / "later", _records(run_url=RUN2, temp="/tmp/other")), capsys)
    (again,) = gh.filed()
    assert again["state"] == "open"
    assert f"reopened acme/xla#{issue['number']}: its failure is back" in printed
    (said,) = gh.comments[issue["number"]]
    assert said.startswith(f"Reopened: seen again in {RUN2}")


def test_a_closed_issue_whose_failure_is_back_gets_a_new_one_with_on_recurrence_new(
    tmp_path: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path, gh, "on_recurrence = 'new'\n")
    _sync(root, _results(root, _records()), capsys)
    (old,) = gh.filed()
    gh.issues[old["number"]]["state"] = "closed"
    _sync(root, _results(tmp_path / "later", _records(run_url=RUN2, temp="/tmp/other")), capsys)
    closed, new = sorted(gh.filed(), key=lambda i: i["number"])
    assert closed["state"] == "closed" and new["state"] == "open"
    assert f"acme/xla#{old['number']} (closed) had the same fingerprint" in new["body"]


def test_a_pull_requests_failure_never_reopens_a_closed_issue(
    tmp_path: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path, gh)
    _sync(root, _results(root, _records()), capsys)
    (issue,) = gh.filed()
    gh.issues[issue["number"]]["state"] = "closed"
    writes = len(gh.writes())
    _sync(root, _results(tmp_path / "pr", _records(run_url=RUN2, pr=7)), capsys)
    assert gh.issues[issue["number"]]["state"] == "closed" and len(gh.writes()) == writes


# --- turned off, and the embedded ledger ----------------------------------------------------


def test_file_failures_false_links_a_failure_groups_issue_but_files_none(
    tmp_path: Path, gh: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    off = _project(tmp_path / "off", gh, "file_failures = false\n")
    printed = _sync(off, _results(tmp_path / "first", _records()), capsys)
    assert gh.filed() == [] and gh.writes() == [] and "0 to file" in printed
    on = _project(tmp_path / "on", gh)
    _sync(on, _results(tmp_path / "main", _records()), capsys)
    (issue,) = gh.filed()
    printed = _sync(off, _results(tmp_path / "later", _records(run_url=RUN2, temp="/tmp/elsewhere")), capsys)
    assert f"-> acme/xla#{issue['number']}" in printed and len(gh.filed()) == 1


def test_the_ledger_files_a_failure_group_once_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "pyproject.toml").write_text("[tool.device-matrix]\n")
    results = _results(root, _records())
    for _ in range(2):
        code = main(["--project", str(root), "issues", "sync", str(results), "--no-history"])
        assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    code = main(["--project", str(root), "issues", "list", str(results)])
    listed = capsys.readouterr().out
    assert code == 0, listed
    assert listed.count("Failing: OSError") == 1, listed
    data, _, _ = _triage(root, results, capsys)
    assert data["groups"][0]["issue"] == "ledger:1" and data["groups"][0]["issue_state"] == "open"
