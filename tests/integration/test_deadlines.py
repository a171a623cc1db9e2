"""The tests of this concept that start a process; the rest are in tests/unit/test_deadlines.py (#41)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project
from tests.runs import outcomes_of
from tests.unit.test_deadlines import PHASE_MIN

pytestmark = pytest.mark.slow


def test_a_test_finishing_in_the_grace_period_is_the_one_timed_out(project: Callable[..., Project]) -> None:
    p = project("late_finish", row="test_timeout = 4")
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    record = p.record()
    outcomes = outcomes_of(record)
    assert outcomes["test_a_overruns"] == "timeout", proc.stdout
    assert outcomes["test_b_next"] == "passed"  # resumed, not blamed
    (crash,) = record["crashes"]
    assert crash["nodeid"].endswith("::test_a_overruns")
    assert crash["kind"] == "timeout"


def test_a_hang_at_exit_is_named_and_ended(project: Callable[..., Project]) -> None:
    p = project("atexit_hang", row="test_timeout = 3", top=PHASE_MIN)
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1
    assert outcomes_of(record) == {"test_a": "passed", "test_b": "passed"}
    (crash,) = record["crashes"]
    assert crash["phase"] == "exit" and crash["kind"] == "timeout"
    assert crash["deadline"] == 10  # the phase minimum, not the shorter test_timeout
    assert "_hang" in (crash["diagnosis"]["python_stack"] or "")
    assert "at exit" in record["reason"]


def test_a_hang_while_importing_a_module_keeps_the_healthy_module(project: Callable[..., Project]) -> None:
    p = project("import_hang", row="test_timeout = 3", top=PHASE_MIN)
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes["suites/import_hang/test_healthy.py::test_healthy_one"] == "passed"
    assert outcomes["suites/import_hang/test_healthy.py::test_healthy_two"] == "passed"
    assert outcomes["suites/import_hang/test_import_hang.py"] == "timeout"
    (crash,) = record["crashes"]
    assert crash["phase"] == "collection" and crash["kind"] == "timeout"
    assert crash["deadline"] == 10
    assert "test_import_hang.py" in (crash["diagnosis"]["python_stack"] or "")
