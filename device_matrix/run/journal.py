"""The append-only journal a pytest child writes and the runner reads.

One JSON object per line, written with a single ``os.write`` on an ``O_APPEND``
descriptor, so a line is either whole or (at a crash mid-write) a torn last line the
reader drops. The nodeid of a test is written *before* the test runs: after any death
the runner knows who was running.

Events (key ``e``):

``session``     the child started (pid, device)
``collected``   the final selection, in run order
``collect_error`` a collection error (nodeid of the module, text)
``start``       a test is about to run (nodeid, skip metadata)
``report``      a phase report (when, outcome, duration, longrepr, skip metadata)
``finish``      a test's phases are all done
``end``         pytest finished its session (exitstatus)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from device_matrix.records.schema import Outcome


class JournalWriter:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, event: str, **fields: Any) -> None:
        record = {"e": event, **fields}
        data = (json.dumps(record, default=str, separators=(",", ":")) + "\n").encode()
        os.write(self._fd, data)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _parse(line: bytes) -> dict[str, Any] | None:
    """One journal line as an event; None for a torn, garbled or blank line."""
    if not line.strip():
        return None
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and isinstance(event.get("e"), str) else None


def read_events(path: Path) -> Iterator[dict[str, Any]]:
    """Yield every whole event of a journal; a torn or garbled line is skipped."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return
    for line in raw.splitlines():
        event = _parse(line)
        if event is not None:
            yield event


@dataclass
class PhaseReport:
    when: str
    outcome: str
    duration: float
    longrepr: str | None
    wasxfail: str | None
    skip: Mapping[str, Any] | None


@dataclass
class TestState:
    nodeid: str
    started_at: float | None = None
    seq: int | None = None
    location: tuple[str, int | None] | None = None
    finished: bool = False
    reports: list[PhaseReport] = field(default_factory=list)
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class JournalSummary:
    """What one child process left behind."""

    session_started: bool = False
    pid: int | None = None
    env: Mapping[str, Any] = field(default_factory=dict)
    collected: list[str] | None = None
    collect_errors: list[tuple[str, str]] = field(default_factory=list)
    tests: dict[str, TestState] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    ended: bool = False
    exitstatus: int | None = None
    collecting: dict[str, str] = field(default_factory=dict)  # module nodeid -> path, not yet done

    @property
    def running(self) -> str | None:
        """The test that started and did not finish (the one to blame for a death)."""
        for nodeid in reversed(self.order):
            state = self.tests[nodeid]
            if not state.finished:
                return nodeid
        return None

    @property
    def collect_culprit(self) -> tuple[str, str] | None:
        """The module being imported when collection died: (nodeid, path)."""
        if not self.collecting:
            return None
        nodeid = list(self.collecting)[-1]
        return nodeid, self.collecting[nodeid]

    def finished_ids(self) -> list[str]:
        return [n for n in self.order if self.tests[n].finished]


def summarize(events: Iterator[dict[str, Any]] | list[dict[str, Any]]) -> JournalSummary:
    summary = JournalSummary()
    for ev in events:
        kind = ev["e"]
        if kind == "session":
            summary.session_started = True
            summary.pid = ev.get("pid") if isinstance(ev.get("pid"), int) else None
            env = ev.get("env")
            summary.env = env if isinstance(env, dict) else {}
        elif kind == "collected":
            summary.collected = [str(x) for x in ev.get("nodeids", [])]
        elif kind == "collecting":
            summary.collecting[str(ev.get("nodeid", ""))] = str(ev.get("path", ""))
        elif kind == "collect_done":
            summary.collecting.pop(str(ev.get("nodeid", "")), None)
        elif kind == "collect_error":
            summary.collect_errors.append((str(ev.get("nodeid", "")), str(ev.get("longrepr", ""))))
            summary.collecting.pop(str(ev.get("nodeid", "")), None)
        elif kind == "start":
            nodeid = str(ev.get("nodeid"))
            state = summary.tests.get(nodeid)
            if state is None:
                state = TestState(nodeid)
                summary.tests[nodeid] = state
                summary.order.append(nodeid)
            state.started_at = float(ev.get("t", 0.0))
            state.meta = ev.get("meta") or {}
            seq = ev.get("seq")
            state.seq = seq if isinstance(seq, int) else None
            loc = ev.get("loc")
            if isinstance(loc, list) and len(loc) == 2:
                state.location = (str(loc[0]), loc[1] if isinstance(loc[1], int) else None)
        elif kind == "report":
            nodeid = str(ev.get("nodeid"))
            state = summary.tests.get(nodeid)
            if state is None:  # a report without a start: keep it anyway
                state = TestState(nodeid)
                summary.tests[nodeid] = state
                summary.order.append(nodeid)
            state.reports.append(
                PhaseReport(
                    when=str(ev.get("when")),
                    outcome=str(ev.get("outcome")),
                    duration=float(ev.get("duration", 0.0)),
                    longrepr=ev.get("longrepr"),
                    wasxfail=ev.get("wasxfail"),
                    skip=ev.get("skip"),
                )
            )
        elif kind == "finish":
            nodeid = str(ev.get("nodeid"))
            if nodeid in summary.tests:
                summary.tests[nodeid].finished = True
        elif kind == "end":
            summary.ended = True
            status = ev.get("exitstatus")
            summary.exitstatus = int(status) if isinstance(status, int) else None
    return summary


def final_outcome(state: TestState) -> tuple[Outcome, str | None, Mapping[str, Any] | None]:
    """Fold the phase reports of one finished test into one outcome, as pytest counts it.

    Returns ``(outcome, message, skip_metadata)``. Outcomes: passed, failed, error,
    skipped, xfailed, xpassed.
    """
    outcome: Outcome = "passed"
    message: str | None = None
    skip: Mapping[str, Any] | None = None
    for rep in state.reports:
        if rep.when == "call":
            if rep.wasxfail is not None:
                outcome = "xfailed" if rep.outcome == "skipped" else "xpassed"
                message = rep.wasxfail or message
                skip = rep.skip
            elif rep.outcome == "failed":
                outcome, message = "failed", rep.longrepr
            elif rep.outcome == "skipped":
                outcome, message, skip = "skipped", rep.longrepr, rep.skip
        elif rep.outcome == "failed":
            # a setup or teardown failure is an error whatever the call did
            outcome, message = "error", rep.longrepr
        elif rep.outcome == "skipped" and rep.when == "setup":
            if rep.wasxfail is not None:
                outcome, message = "xfailed", rep.wasxfail
            else:
                outcome, message = "skipped", rep.longrepr
            skip = rep.skip
    return outcome, message, skip


class JournalTail:
    """Read a growing journal incrementally (the runner polls it while the child runs)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: Any = None
        self._pending = b""

    def read_new(self) -> list[dict[str, Any]]:
        if self._fh is None:
            try:
                self._fh = self.path.open("rb")
            except FileNotFoundError:
                return []
        data = self._fh.read()
        if not data:
            return []
        chunks = (self._pending + data).split(b"\n")
        self._pending = chunks.pop()
        return [event for event in map(_parse, chunks) if event is not None]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
