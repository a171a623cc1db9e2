"""The one fold of journal events: what a pytest child did, live and after it died.

The child writes events (see :mod:`device_matrix.wire`) into a FIFO; a reader thread of
the runner feeds each line to :meth:`Fold.feed`. The watcher asks the same object what
is running now (for deadlines and progress), and once the child is gone the runner
reads the outcome of every test from it. Nothing else interprets events.

Every event is checked (kind, numbering, field types, and the order pytest keeps: a
report or finish only for the test that started). The first that fails marks the
journal broken; what came before stays, nothing after it is believed.

Each attempt keeps a copy of its events (``attempts/NN/journal.jsonl``). Once the run's
record holds a report's text, the copy no longer does (:func:`thin_copies`, #32): each
test's traceback is stored once.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from device_matrix import wire
from device_matrix.records.atomic import write_text_atomic
from device_matrix.records.schema import Outcome, RunRecord

Activity = Literal["startup", "collecting", "test", "between", "exit"]


@dataclass
class PhaseReport:
    when: str
    outcome: str
    duration: float
    longrepr: str | None
    wasxfail: str | None
    skip: Mapping[str, Any] | None
    sub: str | None = None  # a failed subtest's description; None for the test's own phase
    cause: str | None = None  # of a failure: the exception line(s), when the child said (#20)
    where: tuple[str, int] | None = None  # of a failure: file and line, when the child said
    crash: Mapping[str, Any] | None = None  # the test's crash in a plugin's forked copy (#29)


@dataclass
class TestState:
    nodeid: str
    started_at: float | None = None
    seq: int | None = None
    location: tuple[str, int | None] | None = None
    finished: bool = False
    reports: list[PhaseReport] = field(default_factory=list)
    meta: Mapping[str, Any] = field(default_factory=dict)
    reruns: int = 0  # executions before this one that a plugin ran again (outcome "rerun")
    phase: str | None = None  # the phase it said it entered, before its reports (#29)
    began: float | None = None  # the runner's monotonic clock when it read the start (#42)
    finished_at: float | None = None  # wall clock, as the child journaled its finish

    @property
    def duration(self) -> float:
        """Its phases' seconds (a subtest's are inside its test's call)."""
        return sum(r.duration for r in self.reports if r.sub is None)

    def lasted(self, end: float) -> float:
        """Its seconds until ``end`` (the runner's monotonic clock), for a test whose process
        died under it: its phases never reported the time it ran (#42)."""
        return max(self.duration, end - self.began) if self.began is not None else self.duration


class Fold:
    """The state of one child process, built event by event (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._n = 0
        self.session_started = False
        self.pid: int | None = None
        self.env: Mapping[str, Any] = {}
        self.collected: list[str] | None = None
        self.deselected: list[str] = []  # #34: collected, then left out by --dm-deselect
        self._collected_set: frozenset[str] = frozenset()
        self.collect_errors: list[tuple[str, str]] = []
        self.collect_skips: list[tuple[str, str]] = []  # modules skipped as a whole
        self.collecting: dict[str, str] = {}  # module nodeid -> path, not yet done
        self.tests: dict[str, TestState] = {}
        self.order: list[str] = []
        self.running: str | None = None  # the test that started and did not finish
        self.ended = False
        self.exitstatus: int | None = None
        self.cwds: list[str] = []  # directories the process changed into
        self.broken: str | None = None  # why the journal stopped being believed
        # #41: the finished test pytest started a second time, unasked by a rerun plugin
        # (--keep-duplicates, a plugin that runs an item twice): the journal broke there
        self.started_again: str | None = None
        self.frozen = False  # a deadline passed: later events describe nothing we record
        self._since = time.monotonic()
        self._activity: tuple[Activity, str | None] = ("startup", None)

    # --- feeding ----------------------------------------------------------------------

    def feed(self, line: bytes) -> dict[str, Any] | None:
        """Check and apply one journal line; the event, or None when it was not applied."""
        if not line.strip():
            return None
        with self._lock:
            if self.broken is not None or self.frozen:
                return None
            try:
                event = json.loads(line)
            except ValueError:
                event = None
                problem: str | None = "a line that is not JSON"
            else:
                problem = wire.check_event(event, self._n + 1)
            if problem is None:
                if event["e"] == "pass":
                    # the short form of a passed phase: from here on, an ordinary report
                    event = _as_report(event, self.running)
                problem = self._apply(event)
            if problem is not None:
                self.broken = problem
                return None
            self._n += 1
            self._touch()
            return event  # type: ignore[no-any-return]

    def append(self, kind: str, **fields: Any) -> dict[str, Any] | None:
        """An event the runner adds once the child is gone (a program's end, see
        :mod:`device_matrix.run.programs`): numbered next and checked as the child's are."""
        with self._lock:
            number = self._n + 1
        return self.feed(json.dumps({"e": kind, "n": number, **fields}).encode())

    def freeze(self) -> tuple[Activity, str | None, float]:
        """Stop believing events (a deadline passed); what was going on, and for how long."""
        with self._lock:
            self.frozen = True
            kind, name = self._activity
            return kind, name, time.monotonic() - self._since

    def activity(self) -> tuple[Activity, str | None, float]:
        """What the child is doing now, and since when (monotonic seconds)."""
        with self._lock:
            kind, name = self._activity
            return kind, name, self._since

    def _touch(self) -> None:
        # only after an applied event, and the first one starts the session: never "startup"
        now: tuple[Activity, str | None]
        if self.ended:
            now = ("exit", None)
        elif self.running is not None:
            now = ("test", self.running)
        elif self.collected is None and self.collecting:
            now = ("collecting", next(reversed(self.collecting)))
        elif self.collected is None:
            now = ("collecting", None)
        else:
            now = ("between", None)
        if now != self._activity:
            self._activity = now
            self._since = time.monotonic()

    def _apply(self, ev: dict[str, Any]) -> str | None:
        kind = ev["e"]
        if kind != "session" and not self.session_started:
            return f"event {kind!r} before the session started"
        if kind == "session":
            if self.session_started:
                return "a second session event"
            self.session_started = True
            self.pid = ev["pid"]
            self.env = ev.get("env") or {}
        elif self.ended and kind != "cwd":
            return f"event {kind!r} after the session ended"
        elif kind == "collecting":
            self.collecting[ev["nodeid"]] = ev["path"]
        elif kind == "collect_done":
            self.collecting.pop(ev["nodeid"], None)
        elif kind == "collect_error":
            self.collect_errors.append((ev["nodeid"], ev.get("longrepr") or ""))
            self.collecting.pop(ev["nodeid"], None)
        elif kind == "collect_skip":
            self.collect_skips.append((ev["nodeid"], ev.get("longrepr") or ""))
            self.collecting.pop(ev["nodeid"], None)
        elif kind == "collected":
            if self.collected is not None:
                return "a second collected event"
            self.collected = list(ev["nodeids"])
            self._collected_set = frozenset(self.collected)
            self.collecting.clear()
        elif kind == "deselected":
            self.deselected.extend(ev["nodeids"])
        elif kind == "start":
            return self._start(ev)
        elif kind == "report":
            if ev["nodeid"] != self.running:
                return f"a report for {ev['nodeid']!r}, which is not the running test"
            meta = ev.get("skip")
            self.tests[ev["nodeid"]].reports.append(
                PhaseReport(
                    when=ev["when"],
                    outcome=ev["outcome"],
                    duration=float(ev["duration"]),
                    longrepr=ev.get("longrepr"),
                    wasxfail=ev.get("wasxfail"),
                    skip=meta,
                    sub=ev.get("sub"),
                    cause=ev.get("cause"),
                    where=(ev["where"][0], ev["where"][1]) if ev.get("where") else None,
                    crash=ev.get("crash"),
                )
            )
        elif kind == "phase":
            if ev["nodeid"] != self.running:
                return f"a phase for {ev['nodeid']!r}, which is not the running test"
            self.tests[ev["nodeid"]].phase = ev["when"]
        elif kind == "finish":
            if ev["nodeid"] != self.running:
                return f"a finish for {ev['nodeid']!r}, which is not the running test"
            self.tests[ev["nodeid"]].finished = True
            self.tests[ev["nodeid"]].finished_at = float(ev["t"])
            self.running = None
        elif kind == "cwd":
            self.cwds.append(ev["path"])
        elif kind == "end":
            self.ended = True
            self.exitstatus = ev["exitstatus"]
        return None

    def _start(self, ev: dict[str, Any]) -> str | None:
        nodeid = ev["nodeid"]
        if self.collected is None or nodeid not in self._collected_set:
            return f"a start for {nodeid!r}, which was not collected"
        if self.running is not None:
            return f"a start for {nodeid!r} while {self.running!r} runs"
        reruns = 0
        if nodeid in self.tests:
            earlier = self.tests[nodeid]
            if not (earlier.finished and any(r.outcome == "rerun" for r in earlier.reports)):
                self.started_again = nodeid
                return f"a second start for {nodeid!r}"
            # the execution before was reported "rerun": this one decides the outcome
            reruns = earlier.reruns + 1
            self.order.remove(nodeid)
        loc = ev["loc"]
        state = TestState(
            nodeid,
            started_at=float(ev["t"]),
            seq=ev["seq"],
            meta=ev["meta"],
            location=(str(loc[0]), loc[1] if type(loc[1]) is int else None) if len(loc) == 2 else None,
            reruns=reruns,
            began=time.monotonic(),
        )
        self.tests[nodeid] = state
        self.order.append(nodeid)
        self.running = nodeid
        return None

    # --- reading ----------------------------------------------------------------------

    @property
    def collect_culprit(self) -> tuple[str, str] | None:
        """The module being imported when the process died: (nodeid, path)."""
        if self.collected is not None or not self.collecting:
            return None
        nodeid = next(reversed(self.collecting))
        return nodeid, self.collecting[nodeid]

    def finished_ids(self) -> list[str]:
        return [n for n in self.order if self.tests[n].finished]


def _as_report(event: dict[str, Any], running: str | None) -> dict[str, Any]:
    """A ``pass`` event as the ``report`` it stands for (of the test running now)."""
    return {
        "e": "report",
        "n": event["n"],
        # no test running: "" was never started, so the report is refused as it should be
        "nodeid": running if running is not None else "",
        "when": event["when"],
        "outcome": "passed",
        "duration": event["duration"],
        "longrepr": None,
        "wasxfail": None,
        "skip": None,
    }


def final_outcome(state: TestState) -> tuple[Outcome, str | None, Mapping[str, Any] | None]:
    """Fold the phase reports of one finished test into one outcome, as pytest counts it.

    Returns ``(outcome, message, skip_metadata)``. Outcomes: passed, failed, error,
    skipped, xfailed, xpassed.
    """
    outcome, message, skip, _ = _fold_reports(state)
    return outcome, message, skip


def failure_report(state: TestState) -> PhaseReport | None:
    """The phase report whose text is the message of a failed or errored test (#20)."""
    outcome, _, _, source = _fold_reports(state)
    return source if outcome in ("failed", "error") else None


def _fold_reports(state: TestState) -> tuple[Outcome, str | None, Mapping[str, Any] | None, PhaseReport | None]:
    """:func:`final_outcome`, and the report its message came from."""
    outcome: Outcome = "passed"
    message: str | None = None
    skip: Mapping[str, Any] | None = None
    source: PhaseReport | None = None
    for rep in state.reports:
        if rep.sub is not None:
            # a failed subtest fails its test, whatever the test's own call report says
            if outcome != "failed":
                outcome, message, source = "failed", f"subtest {rep.sub}: {rep.longrepr or ''}", rep
            continue
        if rep.when == "call":
            if rep.wasxfail is not None:
                outcome = "xfailed" if rep.outcome == "skipped" else "xpassed"
                message = rep.wasxfail or message
                skip = rep.skip
            elif rep.outcome in ("failed", "rerun", "error"):
                # "rerun" without the execution after it: the failure is what is known; a
                # failed subtest's message stays (the test's own says only that one failed)
                if outcome not in ("failed", "error"):
                    outcome, message, source = ("error" if rep.outcome == "error" else "failed"), rep.longrepr, rep
            elif rep.outcome == "skipped":
                outcome, message, skip = "skipped", rep.longrepr, rep.skip
        elif rep.outcome in ("failed", "rerun"):
            # a setup or teardown failure is an error whatever the call did
            outcome, message, source = "error", rep.longrepr, rep
        elif rep.outcome == "skipped" and rep.when == "setup":
            if rep.wasxfail is not None:
                outcome, message = "xfailed", rep.wasxfail
            else:
                outcome, message = "skipped", rep.longrepr
            skip = rep.skip
    return outcome, message, skip, source


# --- the copy, once the record holds its texts (#32) -------------------------------------

STORED_IN = "run.json"  # what a thinned report says in place of its text
_REPORT_WITH_TEXT = (b'{"e":"report"', b'"longrepr":"')


def thin_copies(attempts: Path, record: RunRecord) -> None:
    """Each journal copy under ``attempts`` without the report texts ``record`` holds: a
    report whose text is in its test's message (verbatim: the copy and the record are
    redacted alike) keeps ``"longrepr": null`` and ``"stored": "run.json"``, and its cause
    too where the record's is the same. Every other line stays as it was: a text the record
    does not hold (a run killed before its record, a rerun's earlier failure) stays in the
    copy. A copy that cannot be read or written is left as it is: it only holds a second copy."""
    held = {t["nodeid"]: (t["message"], t.get("cause")) for t in record["tests"] if t["message"]}
    if not held:
        return
    for path in sorted(attempts.glob("*/journal.jsonl")):
        with contextlib.suppress(OSError):
            text = _thinned(path.read_bytes(), held)
            if text is not None:
                write_text_atomic(path, text)


def _thinned(data: bytes, held: Mapping[str, tuple[str, str | None]]) -> str | None:
    """The copy's text without the report texts ``held`` (nodeid -> the record's message
    and cause) holds; None: nothing to take out."""
    lines = data.split(b"\n")
    changed = False
    for i, line in enumerate(lines):
        if not line.startswith(_REPORT_WITH_TEXT[0]) or _REPORT_WITH_TEXT[1] not in line:
            continue  # the fast path: most lines are no failure's report
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a torn last line stays as the reader left it
        text, (message, cause) = event.get("longrepr"), held.get(event.get("nodeid"), ("", None))
        if isinstance(text, str) and text and text in message:
            event["longrepr"], event["stored"] = None, STORED_IN
            if event.get("cause") is not None and event["cause"] == cause:
                event["cause"] = None
            lines[i] = json.dumps(event, separators=(",", ":")).encode()
            changed = True
    return b"\n".join(lines).decode("utf-8", "replace") if changed else None
