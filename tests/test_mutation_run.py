"""The attempt policy and the journal fold at their edges: limits, hangs without a test, broken input."""

from __future__ import annotations

from dataclasses import replace

import pytest

from device_matrix.run.policy import CrashAt, Decision, Observation, decide

NORMAL = Observation(
    abnormal=False,
    signal=None,
    returncode=0,
    overrun=None,
    broken=False,
    session_started=True,
    collected=True,
    ended=True,
    running=None,
    collect_culprit=None,
    remaining=0,
    restarts=0,
    max_restarts=3,
)
NOT_STARTED = replace(NORMAL, abnormal=True, session_started=False, collected=False, ended=False)
COLLECTING = replace(NORMAL, abnormal=True, signal=11, returncode=-11, collected=False, ended=False)
BETWEEN = replace(NORMAL, abnormal=True, signal=9, returncode=-9, ended=False, remaining=2)

TABLE: list[tuple[str, Observation, Decision]] = [
    (
        "the row past its run_timeout between tests: nothing to blame",
        replace(BETWEEN, overrun="run"),
        Decision(None, "stop", "crashed", "the row exceeded its run_timeout"),
    ),
    (
        "a journal broken before the session: a crash at startup, not a plain exit",
        replace(NOT_STARTED, returncode=1, broken=True),
        Decision(CrashAt("startup", None, "crash"), "stop", "crashed", "the test process died before pytest started"),
    ),
    (
        "a crash importing a module with one restart left: collect again",
        replace(COLLECTING, collect_culprit=("m.py", "/p/m.py"), restarts=2),
        Decision(CrashAt("collection", "m.py", "crash"), "collect_again", reason="/p/m.py"),
    ),
    (
        "a crash importing a module with the restarts used up: stop",
        replace(COLLECTING, collect_culprit=("m.py", "/p/m.py"), restarts=3),
        Decision(
            CrashAt("collection", "m.py", "crash"), "stop", "crashed", "the test process died while collecting tests"
        ),
    ),
    (
        "a hang while collecting, no module to blame",
        replace(COLLECTING, signal=9, overrun="collecting"),
        Decision(
            CrashAt("collection", None, "timeout"), "stop", "crashed", "the test process hung while collecting tests"
        ),
    ),
    (
        "a hang between tests, tests left: a session timeout, resumed",
        replace(BETWEEN, overrun="between"),
        Decision(CrashAt("session", None, "timeout"), "resume"),
    ),
    (
        "a death between tests after the last one",
        replace(BETWEEN, remaining=0),
        Decision(CrashAt("session", None, "crash"), "done", reason="the test process died after its last test"),
    ),
    (
        "a death between tests with one restart left: resumed",
        replace(BETWEEN, restarts=2),
        Decision(CrashAt("session", None, "crash"), "resume"),
    ),
    (
        "a death between tests with the restarts used up: stop",
        replace(BETWEEN, restarts=3),
        Decision(CrashAt("session", None, "crash"), "stop", "crashed", "stopped after 3 restarts (max_restarts)"),
    ),
    (
        "a crash in a test after its session ended: still the test's",
        replace(NORMAL, abnormal=True, signal=6, running="t.py::x"),
        Decision(
            CrashAt("test", "t.py::x", "crash"), "done", reason="the test process died at exit, after its session ended"
        ),
    ),
]


@pytest.mark.parametrize(("case", "observation", "decision"), TABLE, ids=[row[0] for row in TABLE])
def test_policy_edges(case: str, observation: Observation, decision: Decision) -> None:
    assert decide(observation) == decision
