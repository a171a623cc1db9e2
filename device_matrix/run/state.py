"""The run's tests, crashes and attempts, and the RunRecord made of them."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from device_matrix.records.schema import (
    SCHEMA,
    SCHEMA_VERSION,
    AttemptRecord,
    CrashRecord,
    Outcome,
    RowStatus,
    RunRecord,
    SkipInfo,
    TestRecord,
    summarize,
)
from device_matrix.records.summary import row_status
from device_matrix.redact import Redactor
from device_matrix.run.attempt import AttemptResult
from device_matrix.run.journal import final_outcome


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class RunState:
    redactor: Redactor
    results: dict[str, TestRecord] = field(default_factory=dict)
    expected: list[str] = field(default_factory=list)  # every test pytest collected, in order
    _expected: set[str] = field(default_factory=set)  # the same, for membership
    crashes: list[CrashRecord] = field(default_factory=list)
    attempts: list[AttemptRecord] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    # per-phase reports and locations, for the pytest-json-report layout only
    phases: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    locations: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    pytest_exit: int | None = None  # the exit status of the last attempt that ended normally

    def expect(self, nodeids: list[str]) -> None:
        for nodeid in nodeids:
            if nodeid not in self._expected:
                self._expected.add(nodeid)
                self.expected.append(nodeid)

    def remaining(self, scope: set[str] | None = None) -> list[str]:
        """Collected tests without an outcome (of ``scope`` only, when given)."""
        return [n for n in self.expected if n not in self.results and (scope is None or n in scope)]

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
    ) -> None:
        self.expect([nodeid])
        self.results[nodeid] = TestRecord(
            nodeid=nodeid,
            outcome=outcome,
            duration=round(duration, 6),
            message=self.redactor.text(message) if message else None,
            skip=_skip_info(skip, self.redactor),
            crash=crash,
            attempt=attempt,
        )

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
            self.phases[nodeid] = [
                {"when": r.when, "outcome": r.outcome, "duration": r.duration, "longrepr": r.longrepr}
                for r in state.reports
                if r.sub is None
            ]
            if state.location is not None:
                self.locations[nodeid] = state.location
            self.put(
                nodeid,
                outcome,
                duration=state.duration,
                message=message,
                skip=skip,
                attempt=attempt.index,
            )
        for module, text in fold.collect_errors:
            self.put(module or "<collection>", "error", duration=0.0, message=text, attempt=attempt.index)
        for module, text in fold.collect_skips:
            # a whole module skipped is in the record, as pytest's own junit.xml has it
            skip = {"mode": "skip", "reason": text, "source": "pytest"}
            self.put(module, "skipped", duration=0.0, message=text, attempt=attempt.index, skip=skip)

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
    ) -> RunRecord:
        tests = [self.results[n] for n in self.expected if n in self.results]
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
            finished_at=now_iso(),
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
        )


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
