"""#40: what a test opens through another process, recorded in real runs: a forked copy
(multiprocessing's fork, pytest-forked) is the test itself, its opens kept as the test's; a
program it starts (a subprocess, a process of multiprocessing's spawn) opens what no audit
hook sees, so the map says the test's opens are unseen and a change to a file that is not
Python runs it; sqlite3's own open of a database counts as an open."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from device_matrix.records import testmap
from tests.builders import git, git_project
from tests.conftest import Project
from tests.runs import outcomes_of

MINE = "suites/mine"
READER = "def read(path):\n    with open(path) as fh:\n        return fh.read()\n"
TESTS = """
import multiprocessing
import os
import sqlite3
import subprocess
import sys

import pytest

from reader import read

HERE = os.path.dirname(os.path.abspath(__file__))


def _expect(name, text):
    assert read(os.path.join(HERE, "data", name)) == text


def _in_child(name):
    _expect(name, "1\\n")


def _child(method, name):
    p = multiprocessing.get_context(method).Process(target=_in_child, args=(name,))
    p.start()
    p.join()
    assert p.exitcode == 0


def test_fork():
    _child("fork", "fork.txt")


def test_spawn():
    _child("spawn", "spawn.txt")


def test_subprocess():
    code = "import sys; sys.exit(open(sys.argv[1]).read() != '1\\\\n')"
    subprocess.run([sys.executable, "-c", code, os.path.join(HERE, "data", "sub.txt")], check=True)


@pytest.mark.forked
def test_forked():
    _expect("forked.txt", "1\\n")


def test_sqlite():
    with sqlite3.connect(os.path.join(HERE, "data", "t.db")) as db:
        assert db.execute("select count(*) from t").fetchone() == (0,)


def test_plain():
    _expect("plain.txt", "1\\n")


def test_other():
    assert True
"""
NAMES = ("fork", "spawn", "sub", "forked", "plain")


def _recorded(tmp_path: Path) -> Project:
    p = git_project(tmp_path, {"reader.py": READER, "test_p.py": TESTS, **{f"data/{n}.txt": "1\n" for n in NAMES}})
    with contextlib.closing(sqlite3.connect(p.root / MINE / "data" / "t.db")) as db:
        db.execute("create table t (a)")
        db.commit()
    git(p.root, "add", "-A")
    git(p.root, "commit", "-q", "-m", "a database")
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    return p


def test_what_a_test_opens_through_another_process_is_recorded_or_said_unseen(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    m = testmap.read(p.results / "fixture" / testmap.FILE_NAME)
    assert m.reads is not None
    reads = {n.rsplit("::", 1)[-1]: r for n, r in m.reads.items()}
    # a forked copy's opens are the test's, and none of coverage's own listings as it saves
    assert reads["test_fork"] == {f"{MINE}/data/fork.txt"}
    assert reads["test_forked"] == {f"{MINE}/data/forked.txt"}
    assert reads["test_plain"] == {f"{MINE}/data/plain.txt"}
    assert reads["test_sqlite"] == {f"{MINE}/data/t.db"}  # sqlite3 opens it in C
    unseen = {n.rsplit("::", 1)[-1]: why for n, why in m.unseen.items()}
    assert set(unseen) == {"test_spawn", "test_subprocess"}
    assert unseen["test_subprocess"].startswith("it started `") and " -c import sys; " in unseen["test_subprocess"]
    assert "ran Python the recording does not follow" in unseen["test_spawn"]  # no audit event starts it
    first = TESTS.splitlines().index("def test_subprocess():") + 1
    assert f"{MINE}/test_p.py:{first}" in m.starters  # test_subprocess's own code started its program


def test_a_data_file_read_through_a_forked_copy_or_a_program_runs_its_test(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    for name in ("fork", "forked", "sub"):
        (p.root / MINE / "data" / f"{name}.txt").write_text("2\n")
    with contextlib.closing(sqlite3.connect(p.root / MINE / "data" / "t.db")) as db:
        db.execute("insert into t values (1)")
        db.commit()
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    outcomes = outcomes_of(p.record())
    # spawn's process was started by code the recording cannot name: what it kept of what it
    # read cannot be followed, and every test runs
    assert outcomes == {
        "test_fork": "failed",
        "test_forked": "failed",
        "test_subprocess": "failed",
        "test_sqlite": "failed",
        "test_spawn": "passed",
        "test_plain": "passed",
        "test_other": "passed",
    }, proc.stdout + proc.stderr
    assert "test_p.py::test_spawn started may have opened" in proc.stdout + proc.stderr


def test_without_a_process_the_recording_cannot_follow_a_data_change_runs_its_readers_alone(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    tests = p.root / MINE / "test_p.py"
    tests.write_text(tests.read_text().replace('_child("spawn", "spawn.txt")', '_child("fork", "spawn.txt")'))
    git(p.root, "commit", "-q", "-am", "fork alone")
    assert p.run("run", "--device", "fixture", "--record-map").returncode == 0
    (p.root / MINE / "data" / "sub.txt").write_text("2\n")
    (p.root / MINE / "data" / "forked.txt").write_text("2\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    outcomes = outcomes_of(p.record())
    assert outcomes == {
        "test_subprocess": "failed",
        "test_forked": "failed",
        **dict.fromkeys(("test_fork", "test_spawn", "test_sqlite", "test_plain", "test_other"), "deselected"),
    }, proc.stdout + proc.stderr
