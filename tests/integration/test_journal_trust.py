"""A journal a test can write to is not evidence: a forged one changes no outcome, a broken one ends its child."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project
from tests.runs import outcomes_of, write_suite

pytestmark = pytest.mark.slow


def test_a_forged_journal_cannot_turn_an_abort_into_a_pass(project: Callable[..., Project]) -> None:
    p = project("forge")
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    outcomes = outcomes_of(record)
    assert outcomes["test_a_before"] == "passed"
    assert outcomes["test_b_forges_and_aborts"] == "crashed"
    assert outcomes["test_c_after"] == "passed"
    (crash,) = record["crashes"]
    assert "journal broke" in (crash["diagnosis"]["hint"] or "")


BREAK = """
import os, time


def test_a_before():
    pass


def test_b_breaks_the_journal_and_waits():
    for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
        if fd >= 1000:
            try:
                os.write(fd, b"not json\\n")
            except OSError:
                pass
    time.sleep(60)


def test_c_after():
    pass
"""


def test_a_child_ended_for_its_broken_journal_is_not_blamed_on_someone_else(project: Callable[..., Project]) -> None:
    p = project("passing")
    write_suite(p, "broken", {"test_broken.py": BREAK})
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = record["crashes"]
    assert crash["nodeid"].endswith("::test_b_breaks_the_journal_and_waits")
    hint = crash["diagnosis"]["hint"] or ""
    assert "device-matrix ended" in hint and "journal broke" in hint, hint
    assert "from outside" not in hint
    assert outcomes_of(record)["test_c_after"] == "passed"
