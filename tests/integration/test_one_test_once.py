"""One test runs once however it is named, and the progress counts right (#20).

A duplicate is the same file reached twice with the same invocation: a ``scripts`` entry
and a suite folder that holds its file, a ``--test`` nodeid and its file, a file named
twice, a folder and a file inside it. Two ``scripts`` entries for one file with other
arguments or variables are two invocations, and both run.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.userproject import user_project

UNIT = """\
import os
import sys
import unittest

MARKS = os.environ.get("MARKS")


class TestUnit(unittest.TestCase):
    def test_a(self):
        if MARKS:
            with open(os.path.join(MARKS, "ran-" + "-".join(sys.argv[1:]) + "-" + str(os.getpid())), "w"):
                pass

    def test_b(self):
        self.assertEqual(1, 1)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
"""

MORE = """\
def test_one():
    pass


def test_two():
    pass
"""


def _project(tmp_path: Path, scripts: str = "", suites: str = '["tests"]') -> Project:
    return user_project(tmp_path, {"tests/test_unit.py": UNIT, "tests/test_more.py": MORE}, row=scripts, suites=suites)


def _progress(stdout: str) -> list[tuple[int, int | None]]:
    # "[3]": the total is not known yet (a script's tests are not collected yet, #24)
    return [(int(a), int(b) if b else None) for a, b in re.findall(r"^cpu \[(\d+)(?:/(\d+))?\] ", stdout, re.M)]


def _once(p: Project, proc_stdout: str, expected: set[str]) -> None:
    tests = [t["nodeid"] for t in p.record("cpu")["tests"]]
    assert Counter(tests) == Counter(expected), tests
    progress = _progress(proc_stdout)
    assert len(progress) == len(expected), proc_stdout
    assert progress[-1] == (len(expected), len(expected)), proc_stdout
    assert all(total is None or done <= total for done, total in progress), proc_stdout


ALL = {
    "tests/test_unit.py::TestUnit::test_a",
    "tests/test_unit.py::TestUnit::test_b",
    "tests/test_more.py::test_one",
    "tests/test_more.py::test_two",
}

SCRIPT = '[[tool.device-matrix.devices.cpu.scripts]]\nfile = "tests/test_unit.py"\n'


def test_a_script_inside_a_suite_runs_once(tmp_path: Path) -> None:
    p = _project(tmp_path, SCRIPT)
    marks = tmp_path / "marks"
    marks.mkdir()
    proc = p.run("run", "--device", "cpu", env={"MARKS": str(marks)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _once(p, proc.stdout, ALL)
    assert len(list(marks.iterdir())) == 1  # the file ran once: as its script, as upstream runs it
    purposes = [a["purpose"] for a in p.record("cpu")["attempts"]]
    assert purposes == ["run", "run"], purposes  # the suite's pytest, then the script


def test_a_script_that_is_a_suite_too_runs_once(tmp_path: Path) -> None:
    p = _project(tmp_path, SCRIPT, suites='["tests/test_unit.py", "tests/test_more.py"]')
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _once(p, proc.stdout, ALL)
    only = _project(tmp_path / "only", SCRIPT, suites='["tests/test_unit.py"]')
    proc = only.run("run", "--device", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _once(only, proc.stdout, {n for n in ALL if "test_unit" in n})
    assert [a["purpose"] for a in only.record("cpu")["attempts"]] == ["run"]  # the script alone


def test_the_same_script_twice_runs_once(tmp_path: Path) -> None:
    p = _project(tmp_path, SCRIPT + SCRIPT)
    marks = tmp_path / "marks"
    marks.mkdir()
    proc = p.run("run", "--device", "cpu", env={"MARKS": str(marks)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _once(p, proc.stdout, ALL)
    assert len(list(marks.iterdir())) == 1


def test_one_file_as_two_invocations_runs_twice(tmp_path: Path) -> None:
    """Other arguments are another invocation: not a duplicate, both run."""
    p = _project(tmp_path, SCRIPT + SCRIPT.replace("\n", '\nargs = ["--flag"]\n', 1))
    marks = tmp_path / "marks"
    marks.mkdir()
    proc = p.run("run", "--device", "cpu", env={"MARKS": str(marks)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = sorted(m.name.rsplit("-", 1)[0] for m in marks.iterdir())
    assert names == ["ran-", "ran---flag"], names


@pytest.mark.parametrize(
    "tests",
    [
        ["tests/test_more.py", "tests/test_more.py"],
        ["tests/test_more.py::test_one", "tests/test_more.py"],
        ["tests/test_more.py", "tests/test_more.py::test_one"],
        ["tests", "tests/test_more.py"],
        ["tests/test_more.py", "./tests/"],
        ["tests/test_more.py::test_one", "tests/test_more.py::test_one"],
    ],
)
def test_a_test_named_twice_runs_once(tmp_path: Path, tests: list[str]) -> None:
    p = _project(tmp_path)
    proc = p.run("run", "--device", "cpu", *(x for t in tests for x in ("--test", t)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    wanted = ALL if any(t.rstrip("/") in ("tests", "./tests") for t in tests) else set()
    if not wanted:
        wanted = {"tests/test_more.py::test_one", "tests/test_more.py::test_two"}
        if all("::" in t for t in tests):
            wanted = {"tests/test_more.py::test_one"}
    _once(p, proc.stdout, wanted)


def test_a_nodeid_and_its_suite(tmp_path: Path) -> None:
    p = _project(tmp_path)
    proc = p.run("run", "--device", "cpu", "--suite", "tests", "--test", "tests/test_more.py::test_one")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _once(p, proc.stdout, {"tests/test_more.py::test_one"})
