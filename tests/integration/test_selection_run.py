"""``device-matrix run --select changed`` end to end (#34): a row runs what its change can
break, records the rest deselected with why, and runs everything, saying why, when it
cannot tell (no map, conftest.py or pyproject.toml changed, no git)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from device_matrix.errors import EXIT_RESULTS, EXIT_USAGE
from device_matrix.records import testmap
from device_matrix.records.testmap import TestMap
from tests.builders import git as _git
from tests.builders import git_project
from tests.conftest import Project
from tests.runs import outcomes_of

DOUBLE = "suites/mine/test_double.py::test_double"
TRIPLE = "suites/mine/test_triple.py::test_triple"


@pytest.fixture
def repo(tmp_path: Path) -> Project:
    """A project in git, committed, with a test map of that commit in its results."""
    p = git_project(tmp_path)
    head = _git(p.root, "rev-parse", "HEAD")
    mine = "suites/mine"
    m = TestMap(
        row="fixture",
        commit=head,
        created=dt.datetime.now(dt.UTC).isoformat(),
        tests={
            DOUBLE: frozenset({f"{mine}/test_double.py", f"{mine}/helpers.py"}),
            TRIPLE: frozenset({f"{mine}/test_triple.py", f"{mine}/other.py"}),
        },
    )
    testmap.write(p.results / "fixture" / testmap.FILE_NAME, m)
    return p


def _select(p: Project, *more: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    proc = p.run("run", "--device", "fixture", "--select", "changed", *more)
    return proc, p.record()


def test_a_change_runs_the_tests_that_cover_it_and_records_the_rest_deselected(repo: Project) -> None:
    helpers = repo.root / "suites" / "mine" / "helpers.py"
    helpers.write_text(helpers.read_text() + "\n# touched\n")
    (repo.root / "suites" / "mine" / "test_new.py").write_text("def test_new():\n    pass\n")
    proc, rec = _select(repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert outcomes_of(rec) == {"test_double": "passed", "test_triple": "deselected", "test_new": "passed"}
    (left,) = [t for t in rec["tests"] if t["nodeid"] == TRIPLE]
    assert left["message"] == "covers none of the 2 changed files"
    assert rec["status"] == "passed"
    sel = rec["test_selection"]
    assert (sel["mode"], sel["full_reason"], sel["ran"], sel["total"]) == ("changed", None, 2, 3)
    assert sel["changed"] == ["suites/mine/helpers.py", "suites/mine/test_new.py"]
    assert sel["by_reason"] == {"covers": 1, "new": 1, "deselected": 1}
    assert rec["summary"]["passed"] == 2 and rec["summary"]["deselected"] == 1
    # junit.xml and report.json: never a pass
    junit = ET.fromstring((repo.results / "fixture" / "junit.xml").read_text())
    (case,) = [c for c in junit.iter("testcase") if c.get("name") == "test_triple"]
    skipped = case.find("skipped")
    assert skipped is not None and skipped.get("type") == "deselected"
    report = json.loads((repo.results / "fixture" / "report.json").read_text())
    assert {t["nodeid"]: t["outcome"] for t in report["tests"]}[TRIPLE] == "deselected"
    # triage: the left-out test is counted deselected, and the row says how much ran
    tri = repo.run("triage", str(repo.results), "--no-history")
    assert tri.returncode == 0, tri.stdout + tri.stderr
    md = (repo.results / "triage" / "triage.md").read_text()
    assert "ran 2 of 3 tests: 2 changed files; 1 new" in md


def test_a_change_no_test_covers_leaves_every_test_out_and_the_row_green(repo: Project) -> None:
    # a module imported (its def ran) whose function no test calls: a change to its body
    unused = repo.root / "suites" / "mine" / "unused.py"
    unused.write_text("def f():\n    return 1\n")
    _git(repo.root, "add", "-A")
    _git(repo.root, "commit", "-qm", "unused")
    path = repo.results / "fixture" / testmap.FILE_NAME
    m = testmap.read(path)
    head = _git(repo.root, "rev-parse", "HEAD")
    testmap.write(path, TestMap(m.row, head, m.created, m.tests, {"suites/mine/unused.py": frozenset({1})}))
    unused.write_text("def f():\n    return 2\n")
    proc, rec = _select(repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # pytest's "no tests ran" (5) is not a failure here
    assert outcomes_of(rec) == {"test_double": "deselected", "test_triple": "deselected"}
    assert rec["status"] == "passed" and rec["reason"] is None
    assert rec["test_selection"]["ran"] == 0 and rec["test_selection"]["total"] == 2


@pytest.mark.parametrize("changed", ["suites/mine/conftest.py", "pyproject.toml"])
def test_a_change_to_conftest_or_pyproject_runs_every_test_and_says_why(repo: Project, changed: str) -> None:
    path = repo.root / changed
    path.write_text(path.read_text() + "\n# touched\n")
    proc, rec = _select(repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(outcomes_of(rec).values()) == {"passed"}
    assert len(rec["tests"]) == 2
    reason = f"{changed} changes, which the test map cannot follow"
    assert rec["test_selection"]["full_reason"] == reason
    assert rec["test_selection"]["by_reason"] == {"full": 2}
    assert reason in proc.stdout + proc.stderr


def test_a_run_without_a_test_map_runs_every_test_and_says_why(repo: Project) -> None:
    (repo.results / "fixture" / testmap.FILE_NAME).unlink()
    proc, rec = _select(repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(outcomes_of(rec).values()) == {"passed"} and len(rec["tests"]) == 2
    assert rec["test_selection"]["full_reason"] == "no test map for row 'fixture'"
    assert "every test runs: no test map for row 'fixture'" in proc.stdout + proc.stderr


def test_a_map_of_a_commit_git_does_not_know_runs_every_test(repo: Project) -> None:
    path = repo.results / "fixture" / testmap.FILE_NAME
    m = testmap.read(path)
    testmap.write(path, TestMap(row=m.row, commit="f" * 40, created=m.created, tests=m.tests))
    proc, rec = _select(repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(rec["tests"]) == 2 and "deselected" not in outcomes_of(rec).values()
    assert rec["test_selection"]["full_reason"].startswith(f"git cannot diff from {'f' * 12}")


def test_select_all_and_a_named_map(repo: Project, tmp_path: Path) -> None:
    # a map the command line names must be there: a results error that says so, and nothing runs
    proc = repo.run("run", "--device", "fixture", "--select", "changed", "--map", str(tmp_path / "missing.json"))
    assert proc.returncode == EXIT_RESULTS and "no test map there" in proc.stderr
    assert not (repo.results / "fixture" / "run.json").exists()
    proc = repo.run("run", "--device", "fixture", "--select", "all")
    rec = repo.record()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rec["test_selection"]["mode"] == "all" and rec["test_selection"]["full_reason"] == "--select all"
    proc = repo.run("run", "--device", "fixture", "--map", "x.json")
    assert proc.returncode == EXIT_USAGE and "--map needs --select changed" in proc.stderr
    proc = repo.run("run", "--device", "fixture", "--select", "changed", "--shards", "2")
    assert proc.returncode == EXIT_USAGE and "--select does not spread a row yet" in proc.stderr
    proc = repo.run("run", "--device", "fixture", "--select", "changed", "--rerun-disabled")
    assert proc.returncode == EXIT_USAGE and "--select does not go with --rerun-disabled" in proc.stderr


def _source(**kw: Any) -> Any:
    from device_matrix.records.source import detect, override

    return override(detect(environ={}, cwd=Path("/nonexistent")), **kw)


def test_recent_failures_and_skips_of_the_base_and_the_pull_request_run_from_the_history(tmp_path: Path) -> None:
    from device_matrix.cli.select import read_history, recent_tests
    from device_matrix.report.history import History
    from device_matrix.report.model import build
    from tests import records as R

    path = tmp_path / "history.sqlite"
    h = History.open(path)
    main = _source(branch="main")
    base_run = [R.test("t.py::fails"), R.test("t.py::skipped", "skipped"), R.test("t.py::fine")]
    for outcome in ("failed", "passed"):
        base_run[0]["outcome"] = outcome
        h.record(build([R.record("cpu", base_run)], [], {}), f"main {outcome}", source=main)  # type: ignore[arg-type]
    pr = _source(branch="feature", pull_request=7, base="main")
    h.record(build([R.record("cpu", [R.test("t.py::mine", "failed"), R.test("t.py::fine")])], [], {}), "pr", source=pr)  # type: ignore[arg-type]
    other_row = [R.test("t.py::elsewhere", "failed")]
    h.record(build([R.record("tpu", other_row)], [], {}), "main tpu", source=main)  # type: ignore[arg-type]
    h.close()
    with read_history(path) as (store, why):
        recent = recent_tests(store, pr, "cpu")
    assert why == ""
    assert recent == {
        "t.py::fails": "recently failing on main",
        "t.py::skipped": "recently skipped or disabled on main",
        "t.py::mine": "recently failing on pull request 7",
    }
    with read_history(tmp_path / "none.sqlite") as (store, why):
        assert (recent_tests(store, pr, "cpu"), why) == ({}, "")
    (tmp_path / "bad.sqlite").write_bytes(b"not a database at all, not even close")
    with read_history(tmp_path / "bad.sqlite") as (store, why):
        assert store is None and why.startswith("the history's recent failures are unknown: ")


def test_a_row_of_one_process_per_file_leaves_the_same_tests_out(repo: Project) -> None:
    pyproject = repo.root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            "[tool.device-matrix.devices.fixture]\n", '[tool.device-matrix.devices.fixture]\nisolation = "file"\n'
        )
    )
    _git(repo.root, "commit", "-qam", "one process per file")
    path = repo.results / "fixture" / testmap.FILE_NAME
    m = testmap.read(path)
    testmap.write(
        path, TestMap(row=m.row, commit=_git(repo.root, "rev-parse", "HEAD"), created=m.created, tests=m.tests)
    )
    other = repo.root / "suites" / "mine" / "other.py"
    other.write_text(other.read_text() + "\n# touched\n")
    proc, rec = _select(repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert outcomes_of(rec) == {"test_double": "deselected", "test_triple": "passed"}
    assert rec["test_selection"]["by_reason"] == {"covers": 1, "deselected": 1}
    # collected once, then a process for the one file that has a test to run
    assert [a["purpose"] for a in rec["attempts"]] == ["collect", "run"]


def test_the_change_is_what_git_says_since_the_maps_commit_and_the_merge_base(repo: Project) -> None:
    from device_matrix.cli.select import changed_files, merge_base

    head = _git(repo.root, "rev-parse", "HEAD")
    assert changed_files(repo.root, [head]) == ([], "")
    _git(repo.root, "rm", "-q", "suites/mine/other.py")  # a deleted file is a change too
    (repo.root / "suites" / "mine" / "fresh.py").write_text("Y = 2\n")  # untracked
    _git(repo.root, "checkout", "-qb", "feature")
    (repo.root / "suites" / "mine" / "helpers.py").write_text("def double(x):\n    return x + x\n")
    _git(repo.root, "commit", "-qam", "feature")
    base, why = merge_base(repo.root, "HEAD~1")
    assert (base, why) == (head, "")
    assert changed_files(repo.root, [head, base or ""]) == (
        ["suites/mine/fresh.py", "suites/mine/helpers.py", "suites/mine/other.py"],
        "",
    )
    # a project in a folder of its repository: its own files, relative to it
    assert changed_files(repo.root / "suites", [head])[0] == ["mine/fresh.py", "mine/helpers.py", "mine/other.py"]
    assert merge_base(repo.root, "no-such-branch")[0] is None
    missing, why = changed_files(repo.root / "suites", ["f" * 40])
    assert missing is None and why.startswith(f"git cannot diff from {'f' * 12}: ")
