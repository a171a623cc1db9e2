"""The run's tests, crashes and attempts, and the RunRecord made of them."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from device_matrix.diagnostics.parse import parse_faulthandler
from device_matrix.records.cause import cause_from_text, line_in_file
from device_matrix.records.outcomes import FAILING_OUTCOMES
from device_matrix.records.schema import (
    SCHEMA,
    SCHEMA_VERSION,
    AttemptRecord,
    CrashRecord,
    Outcome,
    RowStatus,
    RunRecord,
    SkipInfo,
    SourceInfo,
    TestRecord,
    summarize,
)
from device_matrix.records.summary import row_status
from device_matrix.redact import Redactor
from device_matrix.run.attempt import AttemptResult
from device_matrix.run.journal import Fold, failure_report, final_outcome


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class RunState:
    redactor: Redactor
    results: dict[str, TestRecord] = field(default_factory=dict)
    expected: list[str] = field(default_factory=list)  # every test pytest collected, in order
    _expected: set[str] = field(default_factory=set)  # the same, for membership
    _placeholders: int = 0  # expected nodeids known only as a record names them (see _adopt_raw)
    _known_as: dict[str, str] = field(default_factory=dict)  # a nodeid -> how a record named it
    crashes: list[CrashRecord] = field(default_factory=list)
    attempts: list[AttemptRecord] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    # per-phase reports and locations, for the pytest-json-report layout only
    phases: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    locations: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    pytest_exit: int | None = None  # the exit status of the last attempt that ended normally
    # #34: the tests selection leaves out, with the reason each is recorded deselected with
    deselect: Mapping[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # the record's: the run's own findings, no test's

    def expect(self, nodeids: list[str]) -> None:
        for nodeid in nodeids:
            if nodeid in self._expected:
                continue
            if self._placeholders and self._adopt_raw(nodeid):
                continue
            self._expected.add(nodeid)
            self.expected.append(nodeid)
            self._placeholders += "[redacted:" in nodeid

    def _adopt_raw(self, nodeid: str) -> bool:
        """A collected test that this run knew only as a record names it (a shard's plan,
        the record a resume continues: redacted, #22) takes that entry's place, outcome and
        all, under its own nodeid again: one test, and the next attempt can select it."""
        known = self.redactor.ident(nodeid)
        if known == nodeid or known not in self._expected:
            return False
        self.expected[self.expected.index(known)] = nodeid
        self._expected.discard(known)
        self._expected.add(nodeid)
        self._known_as[nodeid] = known
        self._placeholders -= 1
        if known in self.results:
            self.results[nodeid] = TestRecord(**{**self.results.pop(known), "nodeid": nodeid})
        return True

    def remaining(self, scope: set[str] | None = None) -> list[str]:
        """Collected tests without an outcome (of ``scope`` only, when given: a scope may
        name a test as a record does, see _adopt_raw)."""
        return [
            n
            for n in self.expected
            if n not in self.results and (scope is None or n in scope or self._known_as.get(n) in scope)
        ]

    def put(
        self,
        nodeid: str,
        outcome: Outcome,
        *,
        duration: float,
        message: str | None,
        attempt: int,
        skip: Mapping[str, object] | None = None,
        crash: str | None = None,
        cause: str | None = None,
        where: tuple[str, int | None] | None = None,
    ) -> None:
        self.expect([nodeid])
        record = TestRecord(
            nodeid=nodeid,
            outcome=outcome,
            duration=round(duration, 6),
            message=self.redactor.text(message) if message else None,
            skip=_skip_info(skip, self.redactor),
            crash=crash,
            attempt=attempt,
        )
        if cause:
            record["cause"] = self.redactor.text(cause)
        if where is not None:
            record["file"], record["line"] = where
        self.results[nodeid] = record

    def record_finished(self, attempt: AttemptResult) -> None:
        """Every test the attempt finished, and its collection errors."""
        fold = attempt.fold
        if fold.collected is not None:
            self.expect(fold.collected)
        for nodeid in fold.finished_ids():
            state = fold.tests[nodeid]
            outcome, message, skip = final_outcome(state)
            if state.reruns:
                # a plugin ran it again: a pass after reruns is a flaky test, and says so
                again = f"{outcome} after {state.reruns} rerun(s) of a plugin (pytest-rerunfailures)"
                message = f"{again}: {message}" if message else again
            outcome, message = _started_again(fold, nodeid, outcome, message)
            self.phases[nodeid] = [
                {"when": r.when, "outcome": r.outcome, "duration": r.duration, "longrepr": r.longrepr}
                for r in state.reports
                if r.sub is None
            ]
            cause, where = None, None
            failure = failure_report(state)
            if failure is not None:
                cause = failure.cause or cause_from_text(failure.longrepr)
                where = failure.where or self._place(nodeid, state.location, failure.longrepr)
            self.put(
                nodeid,
                outcome,
                duration=state.duration,
                message=message,
                skip=skip,
                attempt=attempt.index,
                cause=cause,
                where=where,
            )
        for nodeid, state in fold.tests.items():
            # every test that started, finished or not: a crash's test is found here too
            if state.location is not None:
                self.locations[nodeid] = state.location
        for module, text in fold.collect_errors:
            self.put(
                module or "<collection>",
                "error",
                duration=0.0,
                message=text,
                attempt=attempt.index,
                cause=cause_from_text(text),
                where=(module, line_in_file(text, module)) if module.endswith(".py") else None,
            )
        for nodeid in fold.deselected:
            # #34: never run, so never passed: the record says why it was left out
            reason = self.deselect.get(nodeid, "left out by test selection")
            self.put(nodeid, "deselected", duration=0.0, message=reason, attempt=attempt.index)
        for module, text in fold.collect_skips:
            # a whole module skipped is in the record, as pytest's own junit.xml has it
            skip = {"mode": "skip", "reason": text, "source": "pytest"}
            self.put(module, "skipped", duration=0.0, message=text, attempt=attempt.index, skip=skip)

    @staticmethod
    def _place(nodeid: str, location: tuple[str, int | None] | None, text: str | None) -> tuple[str, int | None]:
        """A failure's file and line read from its text: the test's file, at its deepest line
        in the traceback, else at the test's own line."""
        file, line = location or (nodeid.split("::", 1)[0], None)
        return file, line_in_file(text, file) or line

    def _located(self, test: TestRecord) -> TestRecord:
        """A failing test with its file and line: a crash's from its Python stack (#20)."""
        if test["outcome"] not in FAILING_OUTCOMES or test.get("file"):
            return test
        nodeid = test["nodeid"]
        file, line = self.locations.get(nodeid) or (nodeid.split("::", 1)[0], None)
        if not file.endswith(".py"):
            return test
        crash = next((c for c in self.crashes if c["id"] == test["crash"]), None) if test["crash"] else None
        stack = crash["diagnosis"]["python_stack"] if crash is not None else None
        return TestRecord(**{**test, "file": file, "line": _stack_line(stack, file) or line})

    def mark_not_run(self, why: str, scope: set[str] | None = None) -> None:
        attempt = len(self.attempts)
        for nodeid in self.remaining(scope):
            self.put(nodeid, "not_run", duration=0.0, message=why, attempt=attempt)

    def status(self) -> RowStatus:
        """What the tests and crashes so far show (the one rule: records/summary.py)."""
        return row_status([t["outcome"] for t in self.results.values()], self.crashes)

    def to_record(
        self,
        *,
        row: str,
        pjrt_device: str,
        status: RowStatus,
        reason: str | None,
        mode: str,
        image: str | None,
        suites: list[str],
        started_at: str,
        duration: float,
        run_url: str | None,
        runner_pid: int | None,
        source: SourceInfo | None = None,
        finished_at: str | None = None,  # None: now
    ) -> RunRecord:
        tests = [self._located(self.results[n]) for n in self.expected if n in self.results]
        env = dict(self.environment)
        env.setdefault("host_python", sys.version.split()[0])
        return RunRecord(
            schema=SCHEMA,
            version=SCHEMA_VERSION,
            row=row,
            pjrt_device=pjrt_device,
            status=status,
            reason=self.redactor.text(reason) if reason else None,
            mode="none" if mode == "unavailable" else mode,  # type: ignore[typeddict-item]
            image=image,
            suites=suites,
            started_at=started_at,
            finished_at=finished_at or now_iso(),
            duration=round(duration, 3),
            command=["device-matrix", "run", "--device", row],
            repro=f"nox -s {row}",
            environment=env,
            tests=tests,
            crashes=self.crashes,
            attempts=self.attempts,
            summary=summarize(tests),
            run_url=run_url,
            runner_pid=runner_pid,
            source=source,
        )


def _started_again(fold: Fold, nodeid: str, outcome: Outcome, message: str | None) -> tuple[Outcome, str | None]:
    """#41: a test pytest started a second time in its session (``--keep-duplicates`` is
    refused up front; a plugin that runs an item twice is not known before it does): the
    journal broke there and the runner ended the session, so that execution has no outcome.
    Never ``passed``: an ``error`` saying so, or the first execution's failure."""
    if fold.started_again != nodeid:
        return outcome, message
    said = (
        "started again in the same session (pytest's --keep-duplicates, or a plugin that runs a test twice): "
        f"the runner ended the session there, so that execution has no outcome; the first one {outcome}"
    )
    return (outcome if outcome in FAILING_OUTCOMES else "error"), (f"{said}: {message}" if message else said)


def _stack_line(stack: str | None, file: str) -> int | None:
    """The line of ``file`` nearest the top of a faulthandler stack (most recent call first)."""
    for dump in parse_faulthandler(stack or ""):
        for thread in dump.threads:
            for frame in thread.frames:
                path = frame.file.replace("\\", "/")
                if frame.line is not None and (path == file or path.endswith("/" + file)):
                    return frame.line
    return None


def _skip_info(skip: Mapping[str, object] | None, redactor: Redactor) -> SkipInfo | None:
    if not skip:
        return None
    devices = skip.get("devices")
    line = skip.get("line")
    info = SkipInfo(
        mode=str(skip.get("mode", "skip")),
        devices=[str(d) for d in devices] if isinstance(devices, list) else [],
        issue=str(skip["issue"]) if skip.get("issue") else None,
        reason=redactor.text(str(skip.get("reason") or "")),
        source=str(skip.get("source", "pytest")),
        expires=str(skip["expires"]) if skip.get("expires") else None,
        file=str(skip["file"]) if skip.get("file") else None,
        line=line if type(line) is int else None,
    )
    if skip.get("by_design"):
        info["by_design"] = True
    return info
