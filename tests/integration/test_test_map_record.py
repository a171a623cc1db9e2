"""#34: `run --record-map` (or `record_map = true`) writes results/<row>/test-map.json: per
test, the project files it ran (setup, call and teardown, its module's import, the Python
subprocesses and forked copies it started), never a virtualenv's or an installed package's;
a crash keeps the tests that finished; a row without coverage is told what to install."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from device_matrix.records import testmap
from tests.conftest import REPO, Project
from tests.runs import write_suite

LIB = {
    "__init__.py": "",
    "a.py": "def f():\n    return 1\n",
    "b.py": "def g():\n    return 2\n",
    "c.py": "def h():\n    return 3\n",
    "consts.py": "X = 1\n",
    "fix.py": "def up():\n    return 4\n\n\ndef down():\n    return 5\n",
}

CONFTEST = """
import pytest


@pytest.fixture
def fx():
    from mapped_lib import fix

    yield fix.up()
    fix.down()
"""

TESTS = """
import multiprocessing
import os
import subprocess
import sys

from mapped_lib import consts

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a():
    from mapped_lib import a

    assert a.f() == 1


def test_b():
    from mapped_lib import b

    assert b.g() == 2


def test_subprocess():
    subprocess.run([sys.executable, "-c", "from mapped_lib import c; c.h()"], check=True, cwd=ROOT)


def test_fixture(fx):
    assert fx == 4


def test_import_time():
    assert consts.X == 1


def test_virtualenv():
    sys.path.insert(0, os.path.join(ROOT, "venv", "lib"))
    sys.path.insert(0, os.path.join(ROOT, ".nox", "cpu", "lib"))
    import nox_module
    import venv_module

    assert venv_module.v() == 6 and nox_module.n() == 7


def _in_fork():
    from mapped_lib import b

    b.g()


def test_fork():
    p = multiprocessing.get_context("fork").Process(target=_in_fork)
    p.start()
    p.join()
    assert p.exitcode == 0
"""


def mapped_project(make: Callable[..., Project], tests: str = TESTS, **kwargs: str) -> Project:
    p = make("passing", **kwargs)
    write_suite(p, "mapped", {"conftest.py": CONFTEST, "test_m.py": tests})
    for name, text in LIB.items():
        (p.root / "mapped_lib").mkdir(exist_ok=True)
        (p.root / "mapped_lib" / name).write_text(text)
    # a virtualenv inside the project: its files are never the project's own
    (p.root / "venv" / "lib").mkdir(parents=True)
    (p.root / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (p.root / "venv" / "lib" / "venv_module.py").write_text("def v():\n    return 6\n")
    # nor a hidden folder's (.nox, .venv, .tox)
    (p.root / ".nox" / "cpu" / "lib").mkdir(parents=True)
    (p.root / ".nox" / "cpu" / "lib" / "nox_module.py").write_text("def n():\n    return 7\n")
    return p


def read_map(p: Project) -> testmap.TestMap:
    return testmap.read(p.results / "fixture" / testmap.FILE_NAME)


def files_of(m: testmap.TestMap, name: str) -> frozenset[str]:
    return m.tests[f"suites/mapped/test_m.py::{name}"]


def test_record_map_names_the_project_files_each_test_ran(project: Callable[..., Project]) -> None:
    p = mapped_project(project)
    commit = "c0ffee1" + "0" * 33  # #40: a map names a full object id
    result = p.run("run", "--device", "fixture", "--record-map", "--commit", commit)
    assert result.returncode == 0, result.stdout + result.stderr
    m = read_map(p)
    assert (m.row, m.commit) == ("fixture", commit)
    assert len(m.tests) == 7
    lib = {f for f in m.known() if f.startswith("mapped_lib/")}
    assert lib == {f"mapped_lib/{name}" for name in LIB}
    assert "mapped_lib/a.py" in files_of(m, "test_a")
    assert "mapped_lib/b.py" not in files_of(m, "test_a")
    assert "mapped_lib/b.py" in files_of(m, "test_b")
    # what a Python subprocess of the test ran is the test's
    assert "mapped_lib/c.py" in files_of(m, "test_subprocess")
    assert "mapped_lib/c.py" not in files_of(m, "test_a")
    # the fixture's setup and its teardown count for the test, the conftest.py too
    assert {"mapped_lib/fix.py", "suites/mapped/conftest.py"} <= files_of(m, "test_fixture")
    assert "mapped_lib/fix.py" not in files_of(m, "test_b")
    # #34: what ran at import is kept apart, line by line, never as the first importer's:
    # a constant read by a test is the import's, whichever test module imported it first
    assert m.imports["mapped_lib/consts.py"] == {1}
    assert "mapped_lib/consts.py" not in files_of(m, "test_import_time")
    assert 2 in m.imports["suites/mapped/test_m.py"]  # its first import
    assert "suites/mapped/test_m.py" in files_of(m, "test_a")
    # a forked copy's files are the test's
    assert "mapped_lib/b.py" in files_of(m, "test_fork")
    # a virtualenv inside the project is not the project's, nor a hidden folder
    assert not any(f.startswith(("venv/", ".nox/")) for f in m.files())
    assert all(not f.startswith("/") and "site-packages" not in f for f in m.files())
    # the parts the processes left (raw nodeids) are gone once the map is written
    assert not (p.results / "fixture" / "attempts" / "map").exists()


def test_the_configuration_key_records_the_map_and_a_run_without_it_leaves_none(
    project: Callable[..., Project],
) -> None:
    p = mapped_project(project, top="record_map = true")
    assert p.run("run", "--device", "fixture").returncode == 0
    assert "mapped_lib/a.py" in files_of(read_map(p), "test_a")
    (p.root / "pyproject.toml").write_text((p.root / "pyproject.toml").read_text().replace("record_map = true", ""))
    assert p.run("run", "--device", "fixture").returncode == 0
    # the last run's map does not stand for a run that recorded none
    assert not (p.results / "fixture" / testmap.FILE_NAME).exists()


CRASHING = """
import os
import signal


def test_1():
    from mapped_lib import a

    a.f()


def test_2():
    from mapped_lib import b

    b.g()
    os.kill(os.getpid(), signal.SIGSEGV)


def test_3():
    from mapped_lib import c

    c.h()
"""


def test_a_crash_keeps_the_map_of_the_tests_that_finished_and_never_maps_the_crashed_test(
    project: Callable[..., Project],
) -> None:
    p = mapped_project(project, tests=CRASHING)
    result = p.run("run", "--device", "fixture", "--record-map")
    assert result.returncode != 0
    record = p.record()
    assert {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}["test_2"] == "crashed"
    m = read_map(p)
    # test_1 finished in the process that died: the next process folded what it left
    assert "mapped_lib/a.py" in files_of(m, "test_1")
    assert "mapped_lib/c.py" in files_of(m, "test_3")
    assert "suites/mapped/test_m.py::test_2" not in m.tests


LAST_CRASHES = """
import os
import signal


def test_1():
    from mapped_lib import a

    a.f()


def test_2():
    os.kill(os.getpid(), signal.SIGSEGV)
"""


def test_a_crash_with_no_process_after_it_writes_no_map_and_says_so(project: Callable[..., Project]) -> None:
    p = mapped_project(project, tests=LAST_CRASHES)
    result = p.run("run", "--device", "fixture", "--record-map", "--reruns", "0")
    assert result.returncode != 0
    assert not (p.results / "fixture" / testmap.FILE_NAME).exists()
    said = result.stdout + result.stderr
    assert "the test map leaves out the tests of 1 process(es) that died" in said
    assert "no test map" in said


def test_a_row_without_coverage_is_told_what_to_install_before_any_test_runs(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "coverage.py").write_text("raise ImportError('coverage is not installed here')\n")
    p = mapped_project(project)
    result = p.run("run", "--device", "fixture", "--record-map", env={"PYTHONPATH": f"{shadow}:{REPO}"})
    assert result.returncode == 5, result.stdout + result.stderr  # an environment problem
    assert "pip install 'coverage>=7.10'" in result.stderr
    record = p.record()
    # refused before the first test: the record says why, and no test ran
    assert record["status"] == "error" and "pip install 'coverage>=7.10'" in record["reason"]
    assert not any(t["outcome"] in ("passed", "failed") for t in record["tests"])
    assert not (p.results / "fixture" / testmap.FILE_NAME).exists()


def interrupted(p: Project) -> None:
    """The run's record as an interrupted run leaves it: test_a's outcome known, the rest not run."""
    record = p.record()
    for t in record["tests"]:
        if not t["nodeid"].endswith("::test_a"):
            t["outcome"] = "not_run"
    record["status"] = "interrupted"
    (p.results / "fixture" / "run.json").write_text(json.dumps(record))


def test_a_resumed_run_adds_its_tests_to_the_map_of_the_run_it_continues(project: Callable[..., Project]) -> None:
    p = mapped_project(project)
    assert p.run("run", "--device", "fixture", "--record-map").returncode == 0
    interrupted(p)
    result = p.run("run", "--device", "fixture", "--record-map", "--resume")
    assert result.returncode == 0, result.stdout + result.stderr
    assert p.record()["attempts"][-1]["selected"] == 6  # test_a did not run again
    m = read_map(p)
    assert len(m.tests) == 7
    assert "mapped_lib/a.py" in files_of(m, "test_a")  # from the map of the run it continued
    assert "mapped_lib/c.py" in files_of(m, "test_subprocess")
