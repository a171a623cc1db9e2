"""#40: what a test opens through another process, recorded in real runs: a forked copy
(multiprocessing's fork, pytest-forked) is the test itself, its opens kept as the test's; a
program it starts (a subprocess, a process of multiprocessing's spawn, a Python process
native code starts) opens what no audit hook sees, so the map says the test's opens are
unseen and any change runs it, with what its starter kept, or every test where the
starter cannot be named; sqlite3's own open of a database counts as an open."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from device_matrix.records import testmap
from tests.builders import git, git_project
from tests.conftest import Project
from tests.runs import outcomes_of

MINE = "suites/mine"
READER = "def read(path):\n    with open(path) as fh:\n        return fh.read()\n"
# a program of the project, which native code starts with no audit event
PROGRAM = "import sys\n\nfrom reader import read\n\nsys.exit(read(sys.argv[1]) != '1\\n')\n"
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
    p = multiprocessing.get_context("spawn").Process(target=_in_child, args=("spawn.txt",))
    p.start()
    p.join()
    assert p.exitcode == 0


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


def test_native():
    import ctypes

    program = " ".join([sys.executable, os.path.join(HERE, "program.py"), os.path.join(HERE, "data", "native.txt")])
    assert ctypes.CDLL(None).system(program.encode()) == 0


def test_other():
    assert True
"""
NAMES = ("fork", "spawn", "sub", "forked", "plain", "native")


def _recorded(tmp_path: Path, tests: str = TESTS) -> Project:
    files = {"reader.py": READER, "program.py": PROGRAM, "test_p.py": tests}
    p = git_project(tmp_path, {**files, **{f"data/{n}.txt": "1\n" for n in NAMES}})
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
    assert set(unseen) == {"test_spawn", "test_subprocess", "test_native"}
    assert unseen["test_subprocess"].startswith("it started `") and " -c import sys; " in unseen["test_subprocess"]
    assert unseen["test_spawn"].startswith("it started a process of multiprocessing's spawn (")
    # no audit event, no multiprocessing: its coverage data under the test's context tells it
    assert "ran Python the recording does not follow" in unseen["test_native"]
    lines = TESTS.splitlines()
    subprocess_at, spawn_at = lines.index("def test_subprocess():") + 1, lines.index("def test_spawn():") + 1
    # the code that started each: the test's own, unknown for native
    assert m.starters == {f"{MINE}/test_p.py:{subprocess_at}", f"{MINE}/test_p.py:{spawn_at}", ""}


def test_a_data_file_read_through_a_forked_copy_or_a_program_runs_its_test(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    for name in ("fork", "forked", "sub"):
        (p.root / MINE / "data" / f"{name}.txt").write_text("2\n")
    with contextlib.closing(sqlite3.connect(p.root / MINE / "data" / "t.db")) as db:
        db.execute("insert into t values (1)")
        db.commit()
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    outcomes = outcomes_of(p.record())
    # the native start's Python was started by code the recording cannot name: what it kept
    # of what it read cannot be followed, and every test runs
    assert outcomes == {
        "test_fork": "failed",
        "test_forked": "failed",
        "test_subprocess": "failed",
        "test_sqlite": "failed",
        "test_spawn": "passed",
        "test_plain": "passed",
        "test_native": "passed",
        "test_other": "passed",
    }, proc.stdout + proc.stderr
    assert "test_p.py::test_native started may have opened" in proc.stdout + proc.stderr


def test_where_each_starter_is_named_a_data_change_runs_the_readers_and_the_starters_alone(tmp_path: Path) -> None:
    p = _recorded(tmp_path, TESTS.replace("assert ctypes.CDLL(None).system(program.encode()) == 0", "assert program"))
    for name in ("spawn", "sub", "forked"):
        (p.root / MINE / "data" / f"{name}.txt").write_text("2\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    outcomes = outcomes_of(p.record())
    assert outcomes == {
        "test_spawn": "failed",  # a process of spawn, started by the test: named, unseen
        "test_subprocess": "failed",
        "test_forked": "failed",
        **dict.fromkeys(("test_fork", "test_sqlite", "test_plain", "test_native", "test_other"), "deselected"),
    }, proc.stdout + proc.stderr


POOLED = """
import multiprocessing
import os

import pytest

from reader import read

HERE = os.path.dirname(os.path.abspath(__file__))


def test_other():
    assert True


@pytest.fixture(scope="module")
def pool():
    with multiprocessing.get_context("METHOD").Pool(1) as workers:
        yield workers


def test_pool_a(pool):
    assert pool.apply(read, (os.path.join(HERE, "data", "a.txt"),)) == "1\\n"


def test_pool_b(pool):
    assert pool.apply(read, (os.path.join(HERE, "data", "b.txt"),)) == "1\\n"
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.parametrize("change", ["data", "code"])
def test_a_process_that_outlives_the_test_that_started_it_serves_the_tests_after_it(
    tmp_path: Path, method: str, change: str
) -> None:
    # a pool a fixture holds: its worker reads for test_pool_b, but started under test_pool_a
    suite = {"reader.py": READER, "test_pool.py": POOLED.replace("METHOD", method)}
    p = git_project(tmp_path, {**suite, "data/a.txt": "1\n", "data/b.txt": "1\n"})
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    if change == "data":
        (p.root / MINE / "data" / "b.txt").write_text("2\n")
    else:  # a change to the function the worker ran, which no line of the tests' own process ran
        (p.root / MINE / "reader.py").write_text(READER.replace("return fh.read()", "return fh.read() + '!'"))
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    outcomes = outcomes_of(p.record())
    assert outcomes["test_pool_b"] == "failed", proc.stdout + proc.stderr
    assert outcomes["test_pool_a"] == ("passed" if change == "data" else "failed"), proc.stdout + proc.stderr
    assert outcomes["test_other"] == "deselected", proc.stdout + proc.stderr


# a helper that starts a program once and leaves what it made outside the process (a server
# already running, a cache in /tmp): the test after it runs the helper, starts nothing
ONCE = """
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MADE = os.path.join(tempfile.gettempdir(), f"made-{os.getpid()}.txt")
COPY = "import shutil, sys; shutil.copy(sys.argv[1], sys.argv[2])"


def ensure():
    if not os.path.exists(MADE):
        subprocess.run([sys.executable, "-c", COPY, os.path.join(HERE, "data", "d.txt"), MADE], check=True)
    with open(MADE) as fh:
        return fh.read()


def test_a():
    assert ensure() == "1\\n"


def test_b():
    assert ensure() == "1\\n"


def test_other():
    assert True
"""


def test_a_test_that_ran_code_that_starts_a_program_runs_though_it_started_none(tmp_path: Path) -> None:
    p = git_project(tmp_path, {"test_once.py": ONCE, "data/d.txt": "1\n"})
    assert p.run("run", "--device", "fixture", "--record-map").returncode == 0
    m = testmap.read(p.results / "fixture" / testmap.FILE_NAME)
    assert {n.rsplit("::", 1)[-1] for n in m.unseen} == {"test_a", "test_b"}
    (p.root / MINE / "data" / "d.txt").write_text("2\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    outcomes = outcomes_of(p.record())
    assert outcomes == {"test_a": "failed", "test_b": "failed", "test_other": "deselected"}, proc.stdout + proc.stderr


# a plugin of the row's environment, outside the project, that keeps a process running beside
# every test (a display server, a database it serves): pytest's, not the tests'
PLUGIN = """
import subprocess
import sys


def pytest_configure(config):
    config.stash_server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])


def pytest_unconfigure(config):
    config.stash_server.kill()
    config.stash_server.wait()
"""
READS = """
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def test_a():
    assert open(os.path.join(HERE, "data", "a.txt")).read() == "1\\n"


def test_b():
    assert open(os.path.join(HERE, "data", "b.txt")).read() == "1\\n"
"""


def test_a_process_a_plugin_keeps_beside_every_test_makes_none_of_them_unseen(tmp_path: Path) -> None:
    p = git_project(tmp_path / "project", {"test_r.py": READS, "data/a.txt": "1\n", "data/b.txt": "1\n"})
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "server_plugin.py").write_text(PLUGIN)
    env = {"PYTHONPATH": str(tmp_path / "plugins"), "PYTEST_ADDOPTS": "-p server_plugin"}
    full = p.run("run", "--device", "fixture", "--record-map", env=env)
    assert full.returncode == 0, full.stdout + full.stderr
    assert testmap.read(p.results / "fixture" / testmap.FILE_NAME).unseen == {}
    (p.root / MINE / "data" / "b.txt").write_text("2\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed", env=env)
    assert outcomes_of(p.record()) == {"test_a": "deselected", "test_b": "failed"}, proc.stdout + proc.stderr


NESTED = """
import os

import lib


def test_other():
    assert True


def test_nested():
    pid = os.fork()
    if pid == 0:  # a copy that forks a copy of its own (a forking server in a forked pool worker)
        inner = os.fork()
        if inner == 0:
            os._exit(0 if lib.work() == 2 else 1)
        os._exit(os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1]))
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
"""


def test_a_copy_of_a_copy_measures_as_the_test_it_ran_under(tmp_path: Path) -> None:
    p = git_project(tmp_path, {"lib.py": "def work():\n    return 2\n", "test_nested.py": NESTED})
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    m = testmap.read(p.results / "fixture" / testmap.FILE_NAME)
    assert m.unseen == {}  # followed, not a process outside every test
    assert f"{MINE}/lib.py" in m.tests[f"{MINE}/test_nested.py::test_nested"]
    assert 2 not in m.imports[f"{MINE}/lib.py"]  # its body ran in the test, not at import
    (p.root / MINE / "lib.py").write_text("def work():\n    return 3\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    assert outcomes_of(p.record()) == {"test_other": "deselected", "test_nested": "failed"}, proc.stdout + proc.stderr
