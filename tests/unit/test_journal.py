"""The journal fold: every event checked; the first that does not fit ends belief."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from device_matrix.child.journal import JournalWriter
from device_matrix.run import journal
from device_matrix.run.journal import Fold, PhaseReport, final_outcome


def _line(n: int, e: str, **fields: Any) -> bytes:
    return json.dumps({"e": e, "n": n, **fields}).encode()


def _session(fold: Fold, nodeids: list[str]) -> int:
    fold.feed(_line(1, "session", pid=42, device="cpu", t=1.0, env=None))
    fold.feed(_line(2, "collected", nodeids=nodeids, t=1.0))
    return 3


def _run(fold: Fold, n: int, nodeid: str, outcome: str = "passed") -> int:
    fold.feed(_line(n, "start", nodeid=nodeid, t=1.0, meta={}, seq=n, loc=["t.py", 1]))
    for when in ("setup", "call", "teardown"):
        n += 1
        fold.feed(
            _line(
                n,
                "report",
                nodeid=nodeid,
                when=when,
                outcome=outcome if when == "call" else "passed",
                duration=0.1,
                longrepr=None,
                wasxfail=None,
                skip=None,
            )
        )
    fold.feed(_line(n + 1, "finish", nodeid=nodeid, t=2.0))
    return n + 2


def test_a_well_formed_journal_folds_to_outcomes() -> None:
    fold = Fold()
    n = _session(fold, ["t.py::a", "t.py::b"])
    n = _run(fold, n, "t.py::a")
    n = _run(fold, n, "t.py::b", "failed")
    fold.feed(_line(n, "end", exitstatus=1, t=3.0))
    assert fold.broken is None and fold.ended and fold.exitstatus == 1
    assert fold.finished_ids() == ["t.py::a", "t.py::b"]
    assert [final_outcome(fold.tests[x])[0] for x in fold.finished_ids()] == ["passed", "failed"]
    assert fold.activity()[0] == "exit"


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (b"not json", "not JSON"),
        (_line(3, "finish", nodeid="t.py::a", t=1.0), "not the running test"),  # a forged finish
        (_line(99, "start", nodeid="t.py::a", t=1.0, meta={}, seq=1, loc=["t.py", 1]), "numbered 99"),
        (_line(3, "start", nodeid="t.py::zzz", t=1.0, meta={}, seq=1, loc=["t.py", 1]), "not collected"),
        (_line(3, "start", nodeid=["t.py::a"], t=1.0, meta={}, seq=1, loc=["t.py", 1]), "field 'nodeid'"),
        (_line(3, "end", exitstatus="0", t=1.0), "field 'exitstatus'"),
        (_line(3, "end", exitstatus=True, t=1.0), "field 'exitstatus'"),
        (_line(3, "explode"), "unknown event kind"),
        (_line(3, "session", pid=1, device=None, t=1.0, env=None), "second session"),
        (b"[1, 2]", "not a JSON object"),
        (_line(3, "pass", when="call", duration=0.1), "not the running test"),  # no test started
        (_line(3, "pass", when="lunch", duration=0.1), "phase 'lunch'"),
        (_line(3, "pass", when="call", duration="0.1"), "field 'duration'"),
    ],
)
def test_the_first_bad_event_breaks_the_journal(bad: bytes, why: str) -> None:
    fold = Fold()
    n = _session(fold, ["t.py::a"])
    assert fold.feed(bad) is None
    assert fold.broken is not None and why in fold.broken
    # nothing after it is believed, however well formed
    _run(fold, n, "t.py::a")
    assert fold.finished_ids() == []


def test_a_report_for_another_test_breaks_the_journal() -> None:
    fold = Fold()
    n = _session(fold, ["t.py::a", "t.py::b"])
    fold.feed(_line(n, "start", nodeid="t.py::a", t=1.0, meta={}, seq=1, loc=["t.py", 1]))
    fold.feed(
        _line(
            n + 1,
            "report",
            nodeid="t.py::b",
            when="call",
            outcome="passed",
            duration=0.0,
            longrepr=None,
            wasxfail=None,
            skip=None,
        )
    )
    assert fold.broken is not None and "not the running test" in fold.broken
    assert fold.running == "t.py::a"


def test_a_frozen_fold_keeps_the_test_that_overran() -> None:
    fold = Fold()
    n = _session(fold, ["t.py::a", "t.py::b"])
    fold.feed(_line(n, "start", nodeid="t.py::a", t=1.0, meta={}, seq=1, loc=["t.py", 1]))
    kind, name, _ = fold.freeze()
    assert (kind, name) == ("test", "t.py::a")
    # the test finishes during the stack-dump grace period and the next one starts
    fold.feed(_line(n + 1, "finish", nodeid="t.py::a", t=2.0))
    fold.feed(_line(n + 2, "start", nodeid="t.py::b", t=2.0, meta={}, seq=2, loc=["t.py", 2]))
    assert fold.running == "t.py::a"
    assert fold.finished_ids() == []


def test_activity_follows_the_child() -> None:
    fold = Fold()
    assert fold.activity()[0] == "startup"
    fold.feed(_line(1, "session", pid=1, device=None, t=1.0, env=None))
    fold.feed(_line(2, "collecting", nodeid="m.py", path="/p/m.py"))
    assert fold.activity()[:2] == ("collecting", "m.py")
    assert fold.collect_culprit == ("m.py", "/p/m.py")
    fold.feed(_line(3, "collect_done", nodeid="m.py"))
    fold.feed(_line(4, "collected", nodeids=["m.py::t"], t=1.0))
    assert fold.activity()[0] == "between"
    assert fold.collect_culprit is None


def test_the_writers_short_passes_fold_as_reports_and_a_held_one_goes_with_the_next(tmp_path: Path) -> None:
    fifo = tmp_path / "journal.fifo"
    os.mkfifo(fifo)
    read_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    writer = JournalWriter(fifo)
    assert not fifo.exists()  # the name is gone once the writer holds it

    def pending() -> bytes:
        try:
            return os.read(read_fd, 65536)
        except BlockingIOError:
            return b""

    writer.write("session", pid=42, device="cpu", t=1.0, env=None)
    a, b = 't.py::a["\\\n\u00e9\u2603]', "t.py::b"  # quotes, escapes, non-ASCII survive the short forms
    writer.write("collected", nodeids=[a, b], t=1.0)
    lines = pending()
    for nodeid, teardown in ((a, "passed"), (b, "failed")):
        meta = {} if teardown == "passed" else {"device_skip": {"issue": "ledger:1"}}
        writer.start(nodeid, 1.5, meta, 1, ("t\u00e9.py", None if teardown == "passed" else 3))
        writer.passed("setup", 0.25)
        writer.passed("call", 1e-7)
        if teardown == "passed":
            writer.passed("teardown", 0.5, hold=True)
            held = pending()
            assert b"teardown" not in held  # held back until the finish
            lines += held
        else:
            writer.write(
                "report", nodeid=nodeid, when="teardown", outcome="failed", duration=0.5,
                longrepr="boom", wasxfail=None, skip=None,
            )  # fmt: skip
        writer.finish(nodeid, 2.0)
        lines += pending()
    writer.passed("teardown", 0.5, hold=True)  # kept back, then written when the journal closes
    writer.close()
    lines += pending()
    os.close(read_fd)

    fold = Fold()
    for line in lines.splitlines()[:-1]:
        assert fold.feed(line) is not None, fold.broken
    assert fold.finished_ids() == [a, b]
    assert fold.tests[a].location == ("t\u00e9.py", None) and fold.tests[b].location == ("t\u00e9.py", 3)
    assert fold.tests[b].meta == {"device_skip": {"issue": "ledger:1"}} and fold.tests[a].started_at == 1.5
    reports = fold.tests[a].reports
    assert [(r.when, r.outcome, r.duration) for r in reports] == [
        ("setup", "passed", 0.25),
        ("call", "passed", 0.0),
        ("teardown", "passed", 0.5),
    ]
    assert [final_outcome(fold.tests[x])[0] for x in fold.finished_ids()] == ["passed", "error"]
    # the last held pass came out at close: no test runs, so it breaks the journal
    assert json.loads(lines.splitlines()[-1])["e"] == "pass"
    assert fold.feed(lines.splitlines()[-1]) is None and "not the running test" in (fold.broken or "")


FORKED = """
import os, sys
from pathlib import Path
from device_matrix.child.journal import JournalWriter, end_forked_copies
writer = JournalWriter(Path(sys.argv[1]))
end_forked_copies(writer)
os.environ["PYTEST_CURRENT_TEST"] = "t.py::forks (call)"
writer.write("session", pid=os.getpid(), device=None, t=1.0, env=None)
pid = os.fork()
if pid == 0:
    writer.write("cwd", path="/")  # a directory change in the copy goes unjournaled, no more
    {call}
    os._exit(0)  # not reached: the event above ends the copy
_, status = os.waitpid(pid, 0)
writer.passed("call", 0.5)  # the real process writes on
print(os.waitstatus_to_exitcode(status))
"""


def test_a_rerun_starts_the_test_again_and_nothing_else_does() -> None:
    fold = Fold()
    n = _session(fold, ["t.py::a", "t.py::b"])
    n = _run(fold, n, "t.py::a", "rerun")  # a plugin runs it again (pytest-rerunfailures)
    n = _run(fold, n, "t.py::a", "passed")
    assert fold.broken is None and fold.finished_ids() == ["t.py::a"]
    assert fold.tests["t.py::a"].reruns == 1 and final_outcome(fold.tests["t.py::a"])[0] == "passed"
    n = _run(fold, n, "t.py::b", "failed")
    _run(fold, n, "t.py::b", "passed")  # no rerun reported: a second start is a forgery
    assert fold.broken == "a second start for 't.py::b'"
    assert final_outcome(fold.tests["t.py::b"])[0] == "failed"


def test_a_rerun_with_no_execution_after_it_is_the_failure() -> None:
    fold = Fold()
    n = _session(fold, ["t.py::a"])
    _run(fold, n, "t.py::a", "rerun")
    assert final_outcome(fold.tests["t.py::a"])[0] == "failed"


def test_a_failed_subtest_fails_its_test_and_adds_no_time() -> None:
    fold = Fold()
    n = _session(fold, ["t.py::a"])
    fold.feed(_line(n, "start", nodeid="t.py::a", t=1.0, meta={}, seq=1, loc=["t.py", 1]))
    fold.feed(_line(n + 1, "pass", when="setup", duration=0.5))
    sub = {"when": "call", "duration": 1.0, "wasxfail": None, "skip": None}
    fold.feed(_line(n + 2, "report", nodeid="t.py::a", outcome="failed", longrepr="E 1 != 2", sub="(i=1)", **sub))
    fold.feed(_line(n + 3, "pass", when="call", duration=2.0))  # unittest's own report: passed
    assert fold.broken is None
    state = fold.tests["t.py::a"]
    assert final_outcome(state)[:2] == ("failed", "subtest (i=1): E 1 != 2")
    assert state.duration == 2.5


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
    assert j.fold.tests["t.py::a"].finished_at == 6.0  # the child's clock: a core written after it is no test's
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


# --- the cause and place of a failure (#20), modules skipped whole, the short pass form ------


def test_a_failures_cause_and_place_are_kept_as_sent() -> None:
    j = Journal()
    j.session("t.py::a")
    j.start("t.py::a")
    j.report("t.py::a", "setup", "passed")
    cause = "AssertionError: 1 == 2"
    j.report("t.py::a", "call", "failed", longrepr="E assert 1 == 2", cause=cause, where=["t.py", 12])
    reports = j.fold.tests["t.py::a"].reports
    assert reports[0].cause is None and reports[0].where is None
    assert (reports[1].cause, reports[1].where) == (cause, ("t.py", 12))
    assert j.fold.broken is None


def _test_with(*reports: tuple[str, str, str | None, str | None]) -> journal.TestState:
    """A finished test of these (when, outcome, longrepr, sub) reports."""
    j = Journal()
    j.session("t.py::a")
    j.start("t.py::a")
    for when, outcome, longrepr, sub in reports:
        extra = {"sub": sub} if sub is not None else {}
        j.report("t.py::a", when, outcome, longrepr=longrepr, **extra)
    j("finish", nodeid="t.py::a", t=6.0)
    assert j.fold.broken is None
    return j.fold.tests["t.py::a"]


def test_the_failure_report_is_the_one_its_message_came_from() -> None:
    failed = _test_with(("setup", "passed", None, None), ("call", "failed", "E call", None))
    assert journal.failure_report(failed) is failed.reports[1]
    setup = _test_with(("setup", "failed", "E setup", None), ("teardown", "passed", None, None))
    assert final_outcome(setup)[:2] == ("error", "E setup") and journal.failure_report(setup) is setup.reports[0]
    # a setup that asked for a rerun and got none: an error too, its report the one
    rerun = _test_with(("setup", "rerun", "E flaky setup", None))
    assert final_outcome(rerun)[:2] == ("error", "E flaky setup") and journal.failure_report(rerun) is rerun.reports[0]
    for passing in (
        _test_with(("call", "passed", None, None)),
        _test_with(("setup", "skipped", "why", None)),
        _test_with(("call", "skipped", "why", None)),
    ):
        assert journal.failure_report(passing) is None


def test_the_first_failed_subtest_is_the_message_whatever_fails_after_it() -> None:
    state = _test_with(
        ("call", "failed", None, "(i=1)"),
        ("call", "failed", "E second", "(i=2)"),
        ("call", "failed", "E the call", None),
    )
    assert final_outcome(state)[:2] == ("failed", "subtest (i=1): ")
    assert journal.failure_report(state) is state.reports[0]
    # a teardown that fails after a failed subtest makes it an error, as pytest counts it
    torn = _test_with(("call", "failed", "E 1", "(i=1)"), ("teardown", "failed", "E teardown", None))
    assert final_outcome(torn)[:2] == ("error", "E teardown") and journal.failure_report(torn) is torn.reports[1]


def test_a_module_skipped_whole_is_kept_and_no_longer_collecting() -> None:
    j = Journal()
    j.session()
    j("collecting", nodeid="a.py", path="/p/a.py")
    j("collecting", nodeid="b.py", path="/p/b.py")
    j("collect_skip", nodeid="b.py", longrepr="Skipped: no GPU")
    assert j.fold.collect_skips == [("b.py", "Skipped: no GPU")]
    assert j.fold.collect_culprit == ("a.py", "/p/a.py")
    j("collect_skip", nodeid="a.py", longrepr=None)
    assert j.fold.collect_skips == [("b.py", "Skipped: no GPU"), ("a.py", "")]
    assert j.fold.collect_culprit is None and j.fold.collecting == {}
    assert j("collect_skip", nodeid="never.py", longrepr="x") is not None  # never announced: nothing to forget
    assert j.fold.broken is None and j.fold.collect_errors == []


def test_a_pass_event_is_the_report_it_stands_for() -> None:
    j = Journal()
    j.session("t.py::a")
    j.start("t.py::a")
    event = j("pass", when="setup", duration=0.5)
    assert event == {
        "e": "report",
        "n": 4,
        "nodeid": "t.py::a",
        "when": "setup",
        "outcome": "passed",
        "duration": 0.5,
        "longrepr": None,
        "wasxfail": None,
        "skip": None,
    }
    j("finish", nodeid="t.py::a", t=6.0)
    # with no test running it names none, and is refused as a report for no test
    assert j("pass", when="call", duration=0.1) is None
    assert j.fold.broken == "a report for '', which is not the running test"
