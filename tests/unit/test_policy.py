"""The attempt policy as a table: what happened -> the crash to record and the next step."""

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
SEGV_IN_TEST = replace(NORMAL, abnormal=True, signal=11, returncode=-11, ended=False, running="t.py::c", remaining=2)

TABLE: list[tuple[str, Observation, Decision]] = [
    ("a normal end", NORMAL, Decision(None, "done")),
    (
        "a normal end with tests left (pytest -x, pytest.exit): reconciled later, not resumed",
        replace(NORMAL, remaining=3, returncode=1),
        Decision(None, "done"),
    ),
    ("a signal in a test, tests left", SEGV_IN_TEST, Decision(CrashAt("test", "t.py::c", "crash"), "resume")),
    (
        # #41: it died in the test, not after it (the crash record's phase says so too)
        "a signal in the last test",
        replace(SEGV_IN_TEST, remaining=0),
        Decision(CrashAt("test", "t.py::c", "crash"), "done", reason="the test process died during its last test"),
    ),
    (
        "the last test past its deadline: a hang in it, not after it (#41)",
        replace(SEGV_IN_TEST, signal=9, overrun="test", remaining=0),
        Decision(CrashAt("test", "t.py::c", "timeout"), "done", reason="the test process hung during its last test"),
    ),
    (
        "a hang between tests after the last one: hung, not died (#41)",
        replace(SEGV_IN_TEST, signal=9, overrun="between", running=None, remaining=0),
        Decision(CrashAt("session", None, "timeout"), "done", reason="the test process hung after its last test"),
    ),
    (
        "restarts used up",
        replace(SEGV_IN_TEST, restarts=3),
        Decision(CrashAt("test", "t.py::c", "crash"), "stop", "crashed", "stopped after 3 restarts (max_restarts)"),
    ),
    (
        "a test past its deadline",
        replace(SEGV_IN_TEST, signal=9, overrun="test"),
        Decision(CrashAt("test", "t.py::c", "timeout"), "resume"),
    ),
    (
        "the row past its run_timeout",
        replace(SEGV_IN_TEST, signal=9, overrun="run"),
        Decision(CrashAt("test", "t.py::c", "timeout"), "stop", "crashed", "the row exceeded its run_timeout"),
    ),
    (
        "a broken journal blames the test that was running",
        replace(SEGV_IN_TEST, signal=None, returncode=1, broken=True),
        Decision(CrashAt("test", "t.py::c", "crash"), "resume"),
    ),
    (
        "pytest could not start (no session, a plain exit code)",
        replace(NORMAL, abnormal=True, returncode=4, session_started=False, collected=False, ended=False),
        Decision(None, "stop", "error", "pytest could not start (exit 4)"),
    ),
    (
        "a signal before pytest started",
        replace(NORMAL, abnormal=True, signal=6, returncode=-6, session_started=False, collected=False, ended=False),
        Decision(CrashAt("startup", None, "crash"), "stop", "crashed", "the test process died before pytest started"),
    ),
    (
        "a hang before pytest started",
        replace(
            NORMAL, abnormal=True, signal=9, overrun="startup", session_started=False, collected=False, ended=False
        ),
        Decision(CrashAt("startup", None, "timeout"), "stop", "crashed", "the test process hung while starting"),
    ),
    (
        "a crash importing a module: collect again without it",
        replace(NORMAL, abnormal=True, signal=11, collected=False, ended=False, collect_culprit=("m.py", "/p/m.py")),
        Decision(CrashAt("collection", "m.py", "crash"), "collect_again", reason="/p/m.py"),
    ),
    (
        "a hang importing a module: collect again without it",
        replace(
            NORMAL,
            abnormal=True,
            signal=9,
            overrun="collecting",
            collected=False,
            ended=False,
            collect_culprit=("m.py", "/p/m.py"),
        ),
        Decision(CrashAt("collection", "m.py", "timeout"), "collect_again", reason="/p/m.py"),
    ),
    (
        "a crash while collecting, no module to blame",
        replace(NORMAL, abnormal=True, signal=11, collected=False, ended=False),
        Decision(
            CrashAt("collection", None, "crash"), "stop", "crashed", "the test process died while collecting tests"
        ),
    ),
    (
        "a crash at exit after the session ended",
        replace(NORMAL, abnormal=True, signal=6, returncode=-6),
        Decision(
            CrashAt("exit", None, "crash"), "done", reason="the test process died at exit, after its session ended"
        ),
    ),
    (
        "a hang at exit",
        replace(NORMAL, abnormal=True, signal=9, overrun="exit"),
        Decision(
            CrashAt("exit", None, "timeout"), "done", reason="the test process hung at exit, after its session ended"
        ),
    ),
    (
        "a death between tests, tests left",
        replace(NORMAL, abnormal=True, signal=9, ended=False, remaining=2),
        Decision(CrashAt("session", None, "crash"), "resume"),
    ),
]


@pytest.mark.parametrize(("case", "observation", "decision"), TABLE, ids=[row[0] for row in TABLE])
def test_policy(case: str, observation: Observation, decision: Decision) -> None:
    assert decide(observation) == decision


NOT_STARTED = replace(NORMAL, abnormal=True, session_started=False, collected=False, ended=False)


COLLECTING = replace(NORMAL, abnormal=True, signal=11, returncode=-11, collected=False, ended=False)


BETWEEN = replace(NORMAL, abnormal=True, signal=9, returncode=-9, ended=False, remaining=2)


EDGES: list[tuple[str, Observation, Decision]] = [
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


@pytest.mark.parametrize(("case", "observation", "decision"), EDGES, ids=[row[0] for row in EDGES])
def test_policy_edges(case: str, observation: Observation, decision: Decision) -> None:
    assert decide(observation) == decision
