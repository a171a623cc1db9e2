"""A forked copy of the test process that returns into pytest is ended, and the test or module that forked is named."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.runs import outcomes_of, write_suite

pytestmark = pytest.mark.slow


FORK = """
import os
from pathlib import Path


def _note(name):
    with Path(os.environ["RAN"]).open("a") as fh:
        fh.write(f"{name} {os.getpid()}\\n")


def test_a_before():
    _note("a")


def test_b_forks():
    pid = os.fork()
    if pid == 0:
        return  # no os._exit(): the copy goes on into pytest
    os.waitpid(pid, 0)


def test_c_after():
    _note("c")
"""


def test_a_forked_copy_that_returns_into_pytest_is_ended_and_named(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project("passing")
    write_suite(p, "fork", {"test_fork.py": FORK})
    ran = tmp_path / "ran.txt"
    proc = p.run("run", "--device", "fixture", "--reruns", "0", env={"RAN": str(ran)})
    record = p.record()
    assert record["crashes"] == [], proc.stdout
    assert outcomes_of(record) == {"test_a_before": "passed", "test_b_forks": "error", "test_c_after": "passed"}
    (forked,) = [t for t in record["tests"] if t["nodeid"].endswith("test_b_forks")]
    assert "os._exit" in forked["message"]
    # test_c ran once, in the real process only
    assert [line.split()[0] for line in ran.read_text().splitlines()] == ["a", "c"]
    assert len({line.split()[1] for line in ran.read_text().splitlines()}) == 1
    log = (p.results / "fixture" / "output.log").read_text()
    assert "suites/fork/test_fork.py::test_b_forks" in log and "forked" in log
    assert proc.returncode == 1


FORK_AT_IMPORT = """
import os

pid = os.fork()
if pid:
    os.waitpid(pid, 0)
# the copy goes on: under plain pytest it would collect and run the whole session again


def test_in_forking_module():
    pass
"""


def test_a_copy_forked_while_importing_a_module_names_the_module(project: Callable[..., Project]) -> None:
    p = project("passing")
    write_suite(p, "fork_import", {"test_forks.py": FORK_AT_IMPORT, "test_other.py": "def test_other():\n    pass\n"})
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    outcomes = {t["nodeid"]: t for t in record["tests"]}
    assert {n: t["outcome"] for n, t in outcomes.items()} == {
        "suites/fork_import/test_forks.py::test_in_forking_module": "passed",
        "suites/fork_import/test_other.py::test_other": "passed",
        "suites/fork_import/test_forks.py": "error",
    }
    assert "imported" in (outcomes["suites/fork_import/test_forks.py"]["message"] or "")
    assert record["status"] == "failed"
