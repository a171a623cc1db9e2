"""The attempt policy and the journal fold at their edges: limits, hangs without a test, broken input."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest

from device_matrix.run import journal
from device_matrix.run.journal import Fold, PhaseReport, final_outcome
from device_matrix.run.policy import CrashAt, Decision, Observation, decide
from tests.test_policy import NORMAL  # one normal end, the policy table's own

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


# --- the journal fold -------------------------------------------------------------------


class Journal:
    """Feeds numbered events into a fold."""

    def __init__(self) -> None:
        self.fold = Fold()
        self.n = 0

    def __call__(self, e: str, **fields: Any) -> dict[str, Any] | None:
        self.n += 1
        return self.fold.feed(json.dumps({"e": e, "n": self.n, **fields}).encode())

    def session(self, *nodeids: str, env: dict[str, str] | None = None) -> None:
        self("session", pid=42, device="cpu", t=1.0, env=env)
        if nodeids:
            self("collected", nodeids=list(nodeids), t=1.0)

    def start(self, nodeid: str, loc: list[Any] | None = None) -> dict[str, Any] | None:
        return self("start", nodeid=nodeid, t=5.5, meta={"k": 1}, seq=7, loc=["t.py", 3] if loc is None else loc)

    def report(self, nodeid: str, when: str, outcome: str, **extra: Any) -> dict[str, Any] | None:
        fields = {"duration": 0.25, "longrepr": None, "wasxfail": None, "skip": None, **extra}
        return self("report", nodeid=nodeid, when=when, outcome=outcome, **fields)


def test_a_fed_event_is_returned_and_blank_lines_are_no_events() -> None:
    j = Journal()
    assert j.fold.feed(b"  \n") is None
    event = j("session", pid=42, device="cpu", t=1.0, env={"A": "1"})
    assert event == {"e": "session", "n": 1, "pid": 42, "device": "cpu", "t": 1.0, "env": {"A": "1"}}
    assert j.fold.pid == 42 and j.fold.env == {"A": "1"} and j.fold.session_started
    assert j.fold.broken is None


def test_a_session_without_env_has_an_empty_env() -> None:
    j = Journal()
    j.session()
    assert j.fold.env == {}


def test_an_event_before_the_session_breaks_the_journal() -> None:
    j = Journal()
    assert j("collected", nodeids=["t.py::a"], t=1.0) is None
    assert j.fold.broken == "event 'collected' before the session started"


def test_a_started_test_keeps_what_its_start_said() -> None:
    j = Journal()
    j.session("t.py::a", "t.py::b", "t.py::c", "t.py::d")
    assert j.start("t.py::a") is not None
    state = j.fold.tests["t.py::a"]
    assert (state.started_at, state.seq, state.meta, state.location) == (5.5, 7, {"k": 1}, ("t.py", 3))
    assert j.fold.running == "t.py::a" and j.fold.order == ["t.py::a"]
    j("finish", nodeid="t.py::a", t=6.0)
    assert j.fold.running is None and j.fold.tests["t.py::a"].finished
    j.start("t.py::b", loc=["t.py", None])  # no line number
    assert j.fold.tests["t.py::b"].location == ("t.py", None)
    j("finish", nodeid="t.py::b", t=6.0)
    j.start("t.py::c", loc=["t.py", True])  # a bool is not a line number
    assert j.fold.tests["t.py::c"].location == ("t.py", None)
    j("finish", nodeid="t.py::c", t=6.0)
    j.start("t.py::d", loc=["t.py"])  # not (path, line): no location
    assert j.fold.tests["t.py::d"].location is None
    assert j.fold.broken is None and j.fold.finished_ids() == ["t.py::a", "t.py::b", "t.py::c"]


def test_reports_are_kept_as_sent() -> None:
    j = Journal()
    j.session("t.py::a")
    j.start("t.py::a")
    j.report("t.py::a", "call", "skipped", longrepr="why", wasxfail="reason", skip={"issue": "#1"})
    assert j.fold.tests["t.py::a"].reports == [PhaseReport("call", "skipped", 0.25, "why", "reason", {"issue": "#1"})]


def test_a_start_while_another_test_runs_breaks_the_journal() -> None:
    j = Journal()
    j.session("t.py::a", "t.py::b")
    j.start("t.py::a")
    assert j.start("t.py::b") is None
    assert j.fold.broken == "a start for 't.py::b' while 't.py::a' runs"
    assert j.fold.running == "t.py::a" and "t.py::b" not in j.fold.tests


def test_a_second_start_of_a_test_breaks_the_journal() -> None:
    j = Journal()
    j.session("t.py::a")
    j.start("t.py::a")
    j("finish", nodeid="t.py::a", t=2.0)
    assert j.start("t.py::a") is None
    assert j.fold.broken == "a second start for 't.py::a'"


def test_a_start_before_collection_breaks_the_journal() -> None:
    j = Journal()
    j.session()
    assert j.start("t.py::a") is None
    assert j.fold.broken == "a start for 't.py::a', which was not collected"


def test_a_second_collected_event_breaks_the_journal() -> None:
    j = Journal()
    j.session("t.py::a")
    assert j("collected", nodeids=["t.py::b"], t=1.0) is None
    assert j.fold.broken == "a second collected event" and j.fold.collected == ["t.py::a"]


def test_collection_errors_and_modules_being_imported() -> None:
    j = Journal()
    j.session()
    j("collecting", nodeid="a.py", path="/p/a.py")
    j("collecting", nodeid="b.py", path="/p/b.py")
    assert j.fold.collect_culprit == ("b.py", "/p/b.py")
    assert j.fold.activity()[:2] == ("collecting", "b.py")
    j("collect_error", nodeid="b.py", longrepr=None)
    assert j.fold.collect_errors == [("b.py", "")]
    assert j.fold.collect_culprit == ("a.py", "/p/a.py")
    j("collect_error", nodeid="a.py", longrepr="ImportError")
    assert j.fold.collect_errors == [("b.py", ""), ("a.py", "ImportError")]
    assert j.fold.collect_culprit is None
    assert j.fold.activity()[:2] == ("collecting", None)
    j("collecting", nodeid="c.py", path="/p/c.py")
    j("collected", nodeids=[], t=1.0)
    assert j.fold.collecting == {} and j.fold.collect_culprit is None
    assert j.fold.broken is None


def test_after_the_end_only_directory_changes_are_believed() -> None:
    j = Journal()
    j.session("t.py::a")
    j("cwd", path="/tmp/x")
    j("end", exitstatus=0, t=2.0)
    assert j.fold.ended and j.fold.exitstatus == 0
    assert j("cwd", path="/tmp/y") is not None  # an atexit handler may still chdir
    assert j.fold.cwds == ["/tmp/x", "/tmp/y"] and j.fold.broken is None
    assert j.start("t.py::a") is None
    assert j.fold.broken == "event 'start' after the session ended"


def test_nothing_is_believed_once_broken_or_frozen() -> None:
    j = Journal()
    j.session("t.py::a")
    j.fold.freeze()
    assert j.start("t.py::a") is None and j.fold.broken is None and j.fold.running is None
    k = Journal()
    k.session("t.py::a")
    k.fold.feed(b"garbage")
    k.n -= 1  # the broken line took no number
    assert k.start("t.py::a") is None and k.fold.running is None


def test_activity_time_moves_only_when_the_activity_changes() -> None:
    j = Journal()
    j.session("t.py::a")
    _, _, since = j.fold.activity()
    j("cwd", path="/x")  # still between tests
    assert j.fold.activity() == ("between", None, since)
    j.start("t.py::a")
    kind, name, started = j.fold.activity()
    assert (kind, name) == ("test", "t.py::a") and started >= since
    kind, name, elapsed = j.fold.freeze()
    assert (kind, name) == ("test", "t.py::a") and 0 <= elapsed < 60


def _outcome(*reports: tuple[str, str, str | None, str | None]) -> tuple[Any, ...]:
    state = journal.TestState("t.py::a")
    state.reports = [
        PhaseReport(when, outcome, 0.0, longrepr, wasxfail, {"when": when})
        for when, outcome, longrepr, wasxfail in reports
    ]
    return final_outcome(state)


def test_final_outcome_table() -> None:
    ok = ("setup", "passed", None, None)
    td = ("teardown", "passed", None, None)
    assert _outcome(ok, ("call", "passed", None, None), td) == ("passed", None, None)
    assert _outcome(ok, ("call", "failed", "E", None), td) == ("failed", "E", None)
    assert _outcome(ok, ("call", "skipped", "S", None), td) == ("skipped", "S", {"when": "call"})
    assert _outcome(ok, ("call", "skipped", "S", "why"), td) == ("xfailed", "why", {"when": "call"})
    assert _outcome(ok, ("call", "passed", None, "why"), td) == ("xpassed", "why", {"when": "call"})
    # an xfail without a reason keeps no message
    assert _outcome(ok, ("call", "skipped", "S", ""), td) == ("xfailed", None, {"when": "call"})
    # a teardown failure is an error whatever the call did
    assert _outcome(ok, ("call", "passed", None, None), ("teardown", "failed", "T", None)) == ("error", "T", None)
    assert _outcome(("setup", "failed", "F", None)) == ("error", "F", None)
    assert _outcome(("setup", "skipped", "S", None)) == ("skipped", "S", {"when": "setup"})
    assert _outcome(("setup", "skipped", "S", "why")) == ("xfailed", "why", {"when": "setup"})
    # a skip reported at teardown changes nothing
    assert _outcome(ok, ("call", "passed", None, None), ("teardown", "skipped", "S", None)) == ("passed", None, None)


def test_a_new_fold_knows_nothing_yet() -> None:
    before = time.monotonic()
    fold = Fold()
    assert fold.session_started is False and fold.ended is False and fold.frozen is False
    assert fold.pid is None and fold.exitstatus is None and fold.env == {}
    kind, name, since = fold.activity()
    assert (kind, name) == ("startup", None) and before <= since <= time.monotonic()


def test_why_a_journal_broke_is_said_exactly() -> None:
    j = Journal()
    j.fold.feed(b"{not json")
    assert j.fold.broken == "a line that is not JSON"
    k = Journal()
    k.session()
    k("session", pid=1, device=None, t=1.0, env=None)
    assert k.fold.broken == "a second session event"


def test_a_module_done_collecting_is_no_longer_the_culprit() -> None:
    j = Journal()
    j.session()
    j("collecting", nodeid="a.py", path="/p/a.py")
    j("collecting", nodeid="b.py", path="/p/b.py")
    j("collect_done", nodeid="b.py")
    assert j.fold.collect_culprit == ("a.py", "/p/a.py")
    # done or failed for a module never announced: nothing to forget, nothing broken
    assert j("collect_done", nodeid="zzz.py") is not None
    assert j("collect_error", nodeid="yyy.py", longrepr="E") is not None
    assert j.fold.broken is None and j.fold.collect_culprit == ("a.py", "/p/a.py")


def test_a_started_test_is_named() -> None:
    j = Journal()
    j.session("t.py::a")
    j.start("t.py::a")
    assert j.fold.tests["t.py::a"].nodeid == "t.py::a"
