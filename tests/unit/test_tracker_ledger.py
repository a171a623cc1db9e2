"""The embedded ledger: concurrent syncs, a corrupt ledger or links file, reopen policy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK, EXIT_TRACKER, TrackerError
from device_matrix.issues.ledger import Ledger
from device_matrix.issues.sync import sync
from tests import records as R


def _write_results(root: Path, run_url: str = "https://ci/runs/1") -> None:
    (root / "pyproject.toml").write_text("[tool.device-matrix]\nresults_dir = 'results'\n")
    for row in ("cpu", "tpu"):
        tests = [R.test("s/t.py::test_crash", "crashed", crash_id=f"{row}-1")]
        tests += [R.test(f"s/t.py::test_skip_{i}", "skipped", skip=R.skip_info(None)) for i in range(5)]
        rec = R.record(row, tests, [R.crash(row, "s/t.py::test_crash", "fp42")], run_url=run_url)
        (root / "results" / row).mkdir(parents=True, exist_ok=True)
        (root / "results" / row / "run.json").write_text(json.dumps(rec))


def test_syncing_the_same_results_twice_adds_no_comment(tmp_path: Path) -> None:
    _write_results(tmp_path)
    for _ in range(2):
        assert main(["--project", str(tmp_path), "issues", "sync"]) == EXIT_OK
    _write_results(tmp_path, run_url="https://ci/runs/2")
    for _ in range(2):
        assert main(["--project", str(tmp_path), "issues", "sync"]) == EXIT_OK
    ledger = Ledger(tmp_path / ".device-matrix" / "ledger.sqlite")
    crash = next(i for i in ledger.list_issues() if i.fingerprint == "crash-fp42")
    comments = ledger.comments(crash)
    assert len(comments) == 1 and "https://ci/runs/2" in comments[0] and "cpu, tpu" in comments[0]


def test_a_recurring_crash_reopens_its_closed_ledger_issue(tmp_path: Path) -> None:
    rec: Any = R.record(
        "cpu",
        [R.test("s/t.py::test_crash", "crashed", crash_id="cpu-1")],
        [R.crash("cpu", "s/t.py::test_crash", "fp42")],
        run_url="https://ci/runs/1",
    )
    ledger = Ledger(tmp_path / "l.sqlite")
    first = sync([rec], ledger, apply=True, labels=[])
    key = first.filed[0][1]
    ledger.set_state(key, "closed")
    rec["run_url"] = "https://ci/runs/2"
    second = sync([rec], ledger, apply=True, labels=[])
    assert second.reopened == [key] and second.filed == []
    issue = ledger.get(key)
    assert issue is not None and issue.state == "open"
    assert "https://ci/runs/2" in ledger.comments(issue)[0]


@pytest.mark.parametrize(
    "content",
    [b"this is not a database" * 100, b"SQLite format 3\x00" + b"\xff" * 4000, b""],
    ids=["text", "bad-pages", "empty"],
)
def test_a_corrupt_ledger_is_a_tracker_error_naming_the_file(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_results(tmp_path)
    ledger = tmp_path / ".device-matrix" / "ledger.sqlite"  # the project's (#42)
    ledger.parent.mkdir()
    ledger.write_bytes(content)
    code = main(["--project", str(tmp_path), "issues", "sync"])
    err = capsys.readouterr().err
    if content == b"":
        assert code == EXIT_OK  # an empty file is a new, empty database
        return
    assert code == EXIT_TRACKER, err
    assert str(ledger) in err and "TIP" in err and "Move" in err
    assert "Traceback" not in err


def test_a_ledger_path_that_is_a_folder_is_a_tracker_error(tmp_path: Path) -> None:
    (tmp_path / "ledger.sqlite").mkdir()
    with pytest.raises(TrackerError, match="ledger"):
        Ledger(tmp_path / "ledger.sqlite")


@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage", b'{"version": 1, "links": [1, 2]}', b"[" * 100_000])
def test_a_corrupt_issues_json_is_ignored_and_rewritten(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_results(tmp_path)
    (tmp_path / "results" / "issues.json").write_bytes(content)
    assert main(["--project", str(tmp_path), "issues", "sync"]) == EXIT_OK, capsys.readouterr().err
    state = json.loads((tmp_path / "results" / "issues.json").read_text())
    assert state["links"]["crash-fp42"].startswith("ledger:")


def test_issues_json_that_cannot_be_written_is_an_environment_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_results(tmp_path)
    (tmp_path / "results" / "issues.json").mkdir()
    code = main(["--project", str(tmp_path), "issues", "sync"])
    err = capsys.readouterr().err
    assert code == 5 and "issues.json" in err and "Traceback" not in err
