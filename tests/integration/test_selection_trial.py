"""What a first use of ``run --select changed`` found (#34): a map recorded from a changed
tree names no commit, ``--test`` always runs what it names, and a map dated in the future
is not trusted."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from device_matrix.records import testmap
from device_matrix.records.testmap import TestMap
from tests.builders import git as _git
from tests.builders import git_project
from tests.conftest import Project
from tests.runs import outcomes_of

MINE = "suites/mine"
DOUBLE = f"{MINE}/test_double.py::test_double"
TRIPLE = f"{MINE}/test_triple.py::test_triple"


def _project(tmp_path: Path) -> Project:
    return git_project(tmp_path)


def test_a_map_recorded_from_a_changed_tree_names_no_commit_and_says_why(tmp_path: Path) -> None:
    p = _project(tmp_path)
    helpers = p.root / MINE / "helpers.py"
    helpers.write_text(helpers.read_text() + "\n# not committed\n")
    assert _git(p.root, "status", "--porcelain", "--untracked-files=no")  # the tree has changes
    proc = p.run("run", "--device", "fixture", "--record-map")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recorded = testmap.read(p.results / "fixture" / testmap.FILE_NAME)
    # its coverage is of the changed file, not of HEAD's: it stands for no commit
    assert recorded.commit is None
    assert set(recorded.tests) == {DOUBLE, TRIPLE}
    assert "the test map names no commit: the tree had uncommitted changes" in proc.stdout + proc.stderr
    # and a selection by it runs everything, saying so
    sel = p.run("run", "--device", "fixture", "--select", "changed")
    assert sel.returncode == 0, sel.stdout + sel.stderr
    rec = p.record()
    assert set(outcomes_of(rec).values()) == {"passed"}
    assert "the test map names no commit" in rec["test_selection"]["full_reason"]


def test_a_map_recorded_from_a_clean_tree_names_its_commit(tmp_path: Path) -> None:
    p = _project(tmp_path)
    (p.root / MINE / "scratch.py").write_text("X = 1\n")  # untracked: not a change to the tree's files
    proc = p.run("run", "--device", "fixture", "--record-map")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert testmap.read(p.results / "fixture" / testmap.FILE_NAME).commit == _git(p.root, "rev-parse", "HEAD")
    assert "names no commit" not in proc.stdout + proc.stderr


def test_tests_named_with_test_run_whatever_the_selection_says(tmp_path: Path) -> None:
    p = _project(tmp_path)
    head = _git(p.root, "rev-parse", "HEAD")
    m = TestMap(
        row="fixture",
        commit=head,
        created=dt.datetime.now(dt.UTC).isoformat(),
        tests={
            DOUBLE: frozenset({f"{MINE}/test_double.py", f"{MINE}/helpers.py"}),
            TRIPLE: frozenset({f"{MINE}/test_triple.py", f"{MINE}/other.py"}),
        },
    )
    testmap.write(p.results / "fixture" / testmap.FILE_NAME, m)
    # nothing changed: the map alone would leave both out; a nodeid and a file are named
    proc = p.run(
        "run", "--device", "fixture", "--select", "changed", "--test", DOUBLE, "--test", f"{MINE}/test_triple.py"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = p.record()
    assert outcomes_of(rec) == {"test_double": "passed", "test_triple": "passed"}
    sel = rec["test_selection"]
    assert (sel["ran"], sel["total"], sel["by_reason"]) == (2, 2, {"named": 2})
    tri = p.run("triage", str(p.results), "--no-history")
    assert tri.returncode == 0, tri.stdout + tri.stderr
    assert "ran 2 of 2 tests: 0 changed files; 2 named with --test" in (p.results / "triage" / "triage.md").read_text()
    # #39: the same test by its absolute path, a file by ./FILE
    proc = p.run(
        "run",
        "--device",
        "fixture",
        "--select",
        "changed",
        "--test",
        str(p.root / DOUBLE),
        "--test",
        f"./{MINE}/test_triple.py",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.record()["test_selection"]["by_reason"] == {"named": 2}
    # one named test among others: only it escapes the selection
    proc = p.run("run", "--device", "fixture", "--select", "changed", "--test", MINE, "--test", DOUBLE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = p.record()
    assert outcomes_of(rec) == {"test_double": "passed", "test_triple": "deselected"}
    assert rec["test_selection"]["by_reason"] == {"named": 1, "deselected": 1}
