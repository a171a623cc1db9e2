"""#33, end to end: a DISABLED issue skips a test on cuda only, without a change to the project."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from device_matrix.issues.ledger import Ledger, read_issues
from tests.conftest import Project, clean_env
from tests.github_server import Scripted, serve

SUITE = """import pytest


def test_plain():
    pass

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    pass
"""
SCRIPT = """import unittest

class TestY(unittest.TestCase):
    def test_x(self):
        pass

    def test_other(self):
        pass

if __name__ == "__main__":
    unittest.main()
"""


def _row(name: str) -> str:
    return f"""
[tool.device-matrix.devices.{name}]
pjrt_device = "CPU"
run_in = "host"
suites = ["dis"]
presence = ["always"]
test_timeout = 60

[[tool.device-matrix.devices.{name}.scripts]]
file = "test/test_script.py"
"""


def _project(tmp_path: Path, tracker: str = "") -> Project:
    """Rows named like devices (cuda, cpu), both on this host: a suite and a unittest script each."""
    root = tmp_path / "proj"
    (root / "suites" / "dis").mkdir(parents=True)
    (root / "suites" / "dis" / "test_dis.py").write_text(SUITE)
    (root / "test").mkdir()
    (root / "test" / "test_script.py").write_text(SCRIPT)
    (root / "pyproject.toml").write_text(
        f"[tool.device-matrix]\ncrash_reruns = 1\n{tracker}\n{_row('cuda')}{_row('cpu')}"
    )
    return Project(root)


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in root.rglob("*")
        if p.is_file() and not {"results", ".device-matrix", "__pycache__"} & set(p.relative_to(root).parts)
    }


def _outcomes(p: Project, row: str) -> dict[str, tuple[str, str]]:
    return {
        t["nodeid"]: (t["outcome"], str(t.get("message") or "").removeprefix("Skipped: "))
        for t in p.record(row)["tests"]
    }


DISABLED = [
    "suites/dis/test_dis.py::test_plain",
    "suites/dis/test_dis.py::test_param[2]",
    "test_x (__main__.TestY)",
]


def test_a_ledger_disable_skips_on_cuda_only_and_enable_runs_it_again(tmp_path: Path) -> None:
    p = _project(tmp_path)
    before = _tree(p.root)
    for test in DISABLED:
        filed = p.run("issues", "disable", test, "--device", "cuda", "--reason", "flaky since the bump")
        assert filed.returncode == 0, filed.stdout + filed.stderr
    assert "already disables" in p.run("issues", "disable", DISABLED[0], "--device", "cuda").stdout
    proc = p.run("run", "--device", "cuda", "--device", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cuda, cpu = _outcomes(p, "cuda"), _outcomes(p, "cpu")
    since = json.loads((p.results / "cuda" / "disables.json").read_text())["disables"][0]["since"]
    assert cuda["suites/dis/test_dis.py::test_plain"] == (
        "skipped",
        f"[device-matrix] disabled on cuda by ledger:1 since {since}",
    )
    assert cuda["suites/dis/test_dis.py::test_param[2]"][0] == "skipped"
    assert cuda["suites/dis/test_dis.py::test_param[1]"][0] == "passed"
    # #42: the disable's --reason is in the skip's record
    skips = {t["nodeid"]: t["skip"] for t in p.record("cuda")["tests"] if t["outcome"] == "skipped"}
    assert (
        skips["suites/dis/test_dis.py::test_plain"]["reason"]
        == f"disabled by ledger:1 since {since}: flaky since the bump"
    )
    script_x = cuda["test/test_script.py::TestY::test_x"]
    assert script_x[0] == "skipped" and f"disabled on cuda by ledger:3 since {since}" in script_x[1]
    assert cuda["test/test_script.py::TestY::test_other"][0] == "passed"
    assert {o for o, _ in cpu.values()} == {"passed"} and len(cpu) == len(cuda)
    assert p.record("cuda")["status"] == "passed"
    assert _tree(p.root) == before  # not a file of the project changed

    for test in DISABLED:
        assert p.run("issues", "enable", test).returncode == 0
    assert p.run("issues", "enable", DISABLED[0]).returncode == 2
    again = p.run("run", "--device", "cuda")
    assert again.returncode == 0, again.stdout + again.stderr
    assert {o for o, _ in _outcomes(p, "cuda").values()} == {"passed"}
    assert not (p.results / "cuda" / "disables.json").exists()


def test_a_github_disable_by_a_writer_applies_and_by_anyone_else_is_answered(tmp_path: Path) -> None:
    with serve() as gh:
        gh.permissions = {"maintainer": "maintain", "passer-by": "read"}
        ok = gh.add_issue("DISABLED suites/dis/test_dis.py::test_plain", "devices: cuda", author="maintainer")
        no = gh.add_issue("DISABLED suites/dis/test_dis.py::test_param", "devices: cuda", author="passer-by")
        tracker = f'[tool.device-matrix.tracker]\nkind = "github"\nrepository = "{gh.repo}"\napi_url = "{gh.url}"\n'
        p = _project(tmp_path, tracker)
        env = {"GITHUB_TOKEN": gh.token}
        proc = p.run("run", "--device", "cuda", "--device", "cpu", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        cuda, cpu = _outcomes(p, "cuda"), _outcomes(p, "cpu")
        assert cuda["suites/dis/test_dis.py::test_plain"] == (
            "skipped",
            f"[device-matrix] disabled on cuda by #{ok} since 2026-11-02",
        )
        assert cuda["suites/dis/test_dis.py::test_param[1]"][0] == "passed"
        assert cpu["suites/dis/test_dis.py::test_plain"][0] == "passed"
        (answer,) = gh.comments[no]
        assert "did not apply" in answer and "@passer-by has read permission" in answer
        assert ok not in gh.comments
        # one search for the whole run (two rows)
        assert len([r for r in gh.received if r.path.startswith("/search/issues")]) == 1

        # the tracker down: the cached list applies, and the run says how old it is
        gh.fail_next("GET", "search", *[Scripted(status=503)] * 6)
        down = p.run("run", "--device", "cuda", env=env)
        assert down.returncode == 0, down.stdout + down.stderr
        assert _outcomes(p, "cuda")["suites/dis/test_dis.py::test_plain"][0] == "skipped"
        assert "the tracker could not be read" in down.stdout + down.stderr
        assert "using the list read 0 min ago" in down.stdout + down.stderr
        assert len(gh.comments[no]) == 1

        # rate limited for two minutes: a run does not wait for it, the cached list serves
        gh.fail_next("GET", "search", Scripted(status=429, headers={"Retry-After": "120"}))
        started = time.monotonic()
        limited = p.run("run", "--device", "cuda", env=env)
        assert limited.returncode == 0, limited.stdout + limited.stderr
        assert time.monotonic() - started < 100
        assert "GitHub rate limit" in limited.stdout and "using the list read" in limited.stdout


def test_plain_pytest_applies_the_list_the_runner_wrote(tmp_path: Path) -> None:
    """The child reads the row's list through the same option and variable as the project's."""
    p = _project(tmp_path)
    Ledger(p.root / ".device-matrix" / "ledger.sqlite").create(
        "DISABLED suites/dis/test_dis.py::test_param", "devices: cuda", []
    )
    assert p.run("run", "--device", "cuda").returncode == 0
    listed = p.results / "cuda" / "device-matrix-disabled.toml"
    env = {**clean_env(), "DEVICE_MATRIX_DISABLE_LIST": str(listed), "PJRT_DEVICE": "CUDA"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "suites/dis"],
        cwd=p.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "2 skipped" in proc.stdout and "disabled on cuda by ledger:1 since" in proc.stdout, proc.stdout


def test_the_tracker_unreachable_never_fails_a_run(tmp_path: Path) -> None:
    p = _project(tmp_path, '[tool.device-matrix.tracker]\nkind = "github"\nrepository = "acme/xla"\n')
    proc = p.run("run", "--device", "cpu")  # no token: the tracker cannot be read
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no list read before" in proc.stdout + proc.stderr


def test_skips_list_and_check_show_the_trackers_disables_beside_the_ones_in_code(tmp_path: Path) -> None:
    p = _project(tmp_path)
    assert p.run("issues", "disable", "test_x (__main__.TestY)", "--device", "cuda").returncode == 0
    Ledger(p.root / ".device-matrix" / "ledger.sqlite").create("DISABLED the flaky one", "devices: cuda", [])
    listed = p.run("skips", "list", "--json")
    rows = json.loads(listed.stdout)
    assert [(r["test"], r["source"], r["issue"], r["devices"], r["problem"]) for r in rows] == [
        ("test/test_script.py::TestY::test_x", "tracker", "ledger:1", ["cuda"], None),
        (None, "tracker", "ledger:2", [], rows[1]["problem"]),
    ]
    assert "neither a nodeid" in rows[1]["problem"]
    text = p.run("skips", "list").stdout
    assert "tracker ledger:1 (test/test_script.py::TestY::test_x)  disabled skip on cuda  ledger:1" in text
    checked = p.run("skips", "check")
    assert checked.returncode == 1
    assert "tracker ledger:2: disabled not applied: the title's test 'the flaky one'" in checked.stdout
    assert "disable(s) read from the ledger tracker" in checked.stdout


def test_the_reenable_check_closes_what_passes_and_keeps_what_fails_each_with_its_evidence_once(
    tmp_path: Path,
) -> None:
    p = _project(tmp_path)
    (p.root / "suites" / "dis" / "test_broken.py").write_text(
        "import os\n\ndef test_broken():\n    assert 1 == 2, 'still off'\n\ndef test_aborts():\n    os.abort()\n"
    )
    for test in (
        "suites/dis/test_dis.py::test_param[2]",
        "suites/dis/test_broken.py::test_broken",
        DISABLED[2],
        "suites/dis/test_broken.py::test_aborts",
    ):
        assert p.run("issues", "disable", test, "--device", "cuda").returncode == 0
    proc = p.run("run", "--device", "cuda", "--device", "cpu", "--rerun-disabled", "--times", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cpu: no disabled tests" in proc.stdout
    assert "ledger:1 (suites/dis/test_dis.py::test_param[2]) on cuda: 3 of 3 run(s) passed" in proc.stdout
    assert "ledger:2 (suites/dis/test_broken.py::test_broken) on cuda: 0 of 3 run(s) passed" in proc.stdout
    assert "ledger:3 (TestY::test_x) on cuda: 3 of 3 run(s) passed" in proc.stdout
    # the reruns are not the row's results: the history and the verdicts never see them
    assert not (p.results / "cuda" / "run.json").exists()

    dry = p.run("issues", "sync")  # the ledger is written directly, as sync always does
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "ledger:1: 3 of 3 passed: closes it" in dry.stdout
    assert "ledger:2: 0 of 3 passed: keeps it" in dry.stdout
    again = p.run("issues", "sync")
    assert "ledger:2: this re-enable check is already reported" in again.stdout
    assert "ledger:1: closed, not reported" in again.stdout
    kept = {
        k.issue.key: k
        for k in read_issues(p.root / "device-matrix-issues.toml", p.root / ".device-matrix" / "ledger.sqlite")
    }
    assert kept["ledger:1"].issue.state == "closed" and kept["ledger:3"].issue.state == "closed"
    assert kept["ledger:2"].issue.state == "open"
    (evidence,) = kept["ledger:2"].comments
    assert "0 of 3 run(s) passed" in evidence and "`suites/dis/test_broken.py::test_broken` failed" in evidence
    assert "still off" in evidence and "Still failing" in evidence
    (crashed,) = kept["ledger:4"].comments
    assert kept["ledger:4"].issue.state == "open"
    assert "`suites/dis/test_broken.py::test_aborts` crashed (fingerprint `" in crashed and "SIGABRT" in crashed
    assert "3 of 3 run(s) passed" in kept["ledger:1"].comments[0] and "closed" in kept["ledger:1"].comments[0]
    # the closed one runs again on cuda; the one still failing is still skipped
    run = p.run("run", "--device", "cuda")
    outcomes = _outcomes(p, "cuda")
    assert outcomes["suites/dis/test_dis.py::test_param[2]"][0] == "passed"
    assert outcomes["suites/dis/test_broken.py::test_broken"][0] == "skipped", run.stdout


def test_a_disabled_test_appears_in_triage_with_its_issue_and_age(tmp_path: Path) -> None:
    p = _project(tmp_path)
    Ledger(p.root / ".device-matrix" / "ledger.sqlite").create(
        "DISABLED suites/dis/test_dis.py::test_plain", "devices: cuda", []
    )
    assert p.run("run", "--device", "cuda", "--device", "cpu").returncode == 0
    triage = p.run("triage")
    assert triage.returncode == 0, triage.stdout + triage.stderr
    report = "\n".join(f.read_text() for f in (p.results / "triage").glob("*.md"))
    (line,) = [x for x in report.splitlines() if x.startswith("- `suites/dis/test_dis.py::test_plain` (skip")]
    since = json.loads((p.results / "cuda" / "disables.json").read_text())["disables"][0]["since"]
    assert line.endswith(f"(skip on cuda): ledger:1 (open), disabled for 0 days (since {since})"), line


def test_in_a_row_job_the_run_only_reads_and_the_issues_jobs_sync_answers_once(tmp_path: Path) -> None:
    with serve() as gh:
        gh.permissions = {"passer-by": "triage"}
        no = gh.add_issue("DISABLED suites/dis/test_dis.py::test_plain", "devices: cuda", author="passer-by")
        bad = gh.add_issue("DISABLED it crashes sometimes", "devices: cuda", author="passer-by")
        tracker = f'[tool.device-matrix.tracker]\nkind = "github"\nrepository = "{gh.repo}"\napi_url = "{gh.url}"\n'
        p = _project(tmp_path, tracker)
        env = {"GITHUB_TOKEN": gh.readonly_token, "GITHUB_ACTIONS": "true"}
        proc = p.run("run", "--device", "cuda", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert _outcomes(p, "cuda")["suites/dis/test_dis.py::test_plain"][0] == "passed"  # not applied
        assert gh.writes() == []  # a row job's token is read-only: nothing is attempted
        for _ in range(2):
            synced = p.run("issues", "sync", "--apply", env={"GITHUB_TOKEN": gh.token})
            assert synced.returncode == 0, synced.stdout + synced.stderr
        assert "2 DISABLED issue(s) not applied, answered" in synced.stdout
        assert len(gh.comments[no]) == 1 and "@passer-by has triage permission" in gh.comments[no][0]
        assert len(gh.comments[bad]) == 1 and "could not read" in gh.comments[bad][0]


def test_issues_disable_and_enable_file_and_close_on_github(tmp_path: Path) -> None:
    with serve() as gh:
        tracker = f'[tool.device-matrix.tracker]\nkind = "github"\nrepository = "{gh.repo}"\napi_url = "{gh.url}"\n'
        p = _project(tmp_path, tracker)
        env = {"GITHUB_TOKEN": gh.token}
        test = "suites/dis/test_dis.py::test_param[2]"
        filed = p.run("issues", "disable", test, "--device", "cuda", "--reason", "wrong sums on cuda", env=env)
        assert filed.returncode == 0, filed.stdout + filed.stderr
        (issue,) = gh.filed()
        assert issue["title"] == f"DISABLED {test}"
        assert issue["body"] == "devices: cuda\n\nwrong sums on cuda"
        assert "already disables" in p.run("issues", "disable", test, "--device", "cuda", env=env).stdout
        assert len(gh.filed()) == 1
        bad = p.run("issues", "disable", "the sum test", env=env)
        assert bad.returncode == 2 and "neither a nodeid" in bad.stderr + bad.stdout
        enabled = p.run("issues", "enable", test, env=env)
        assert enabled.returncode == 0, enabled.stdout + enabled.stderr
        assert gh.issues[issue["number"]]["state"] == "closed"


def test_the_reenable_checks_options_are_refused_where_they_mean_nothing(tmp_path: Path) -> None:
    p = _project(tmp_path)
    times = p.run("run", "--device", "cuda", "--times", "3")
    assert times.returncode == 2 and "--times is for --rerun-disabled" in times.stderr + times.stdout
    picked = p.run("run", "--device", "cuda", "--rerun-disabled", "--test", "suites/dis/test_dis.py")
    assert picked.returncode == 2 and "Leave out --test" in picked.stderr + picked.stdout
    zero = p.run("run", "--device", "cuda", "--rerun-disabled", "--times", "0")
    assert zero.returncode == 2
    assert not (p.results / "disabled-reruns.json").exists()
