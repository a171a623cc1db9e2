"""The journal fold: every event checked; the first that does not fit ends belief."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from device_matrix.child.journal import FORKED_COPY_EXIT, FORKED_COPY_NOTE, JournalWriter
from device_matrix.run.journal import Fold, final_outcome


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


@pytest.mark.parametrize(
    "call",
    [
        'writer.start("t.py::b", 1.0, {}, 2, ("t.py", 1))',
        'writer.passed("teardown", 0.1, hold=True)',
        'writer.finish("t.py::forks", 2.0)',
        'writer.write("report", nodeid="t.py::forks", when="call", outcome="failed", duration=0.1, '
        "longrepr=None, wasxfail=None, skip=None)",
    ],
)
def test_a_forked_copy_is_ended_by_any_event_and_writes_none(tmp_path: Path, call: str) -> None:
    journal = tmp_path / "journal.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", FORKED.replace("{call}", call), str(journal)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(FORKED_COPY_EXIT)
    assert FORKED_COPY_NOTE.format(nodeid="t.py::forks") in proc.stderr
    # only the real process's events, numbered without a gap
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(e["e"], e["n"]) for e in events] == [("session", 1), ("pass", 2)]


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
