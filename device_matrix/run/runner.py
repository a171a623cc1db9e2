"""Run one device row: plan, attempts, resume after crashes, reruns, the RunRecord.

The run is a short list of steps (nox's habit): plan the row, run pytest in attempts
until every collected test has a result, rerun each crashed test alone to call it
deterministic or flaky, then write ``results/<row>/``. A child is untrusted: its own
process group, a per-test and a per-run timeout, nothing assumed about its output, and
its journal read as it may have been left (half a line, no end record).
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from device_matrix import diagnostics
from device_matrix.config import Config, Row
from device_matrix.devices import detect
from device_matrix.diagnostics import core as core_files
from device_matrix.errors import ConfigError, EnvironmentProblem
from device_matrix.output import Output
from device_matrix.records import jsonreport
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.junit import write_junit
from device_matrix.records.schema import (
    FAILING_OUTCOMES,
    SCHEMA,
    SCHEMA_VERSION,
    AttemptRecord,
    Classification,
    CrashPhase,
    CrashRecord,
    Outcome,
    RerunRecord,
    RowStatus,
    RunRecord,
    SkipInfo,
    TestRecord,
)
from device_matrix.records.schema import (
    summarize as summarize_tests,
)
from device_matrix.redact import Redactor
from device_matrix.run.executors.base import Child, Executor, LaunchSpec, end_child
from device_matrix.run.executors.container import ContainerExecutor, check_engine, find_engine
from device_matrix.run.executors.local import LocalExecutor
from device_matrix.run.journal import JournalSummary, JournalTail, final_outcome, read_events, summarize
from device_matrix.run.pump import OutputPump

Mode = Literal["local", "container", "unavailable"]
PYTEST_NORMAL_EXITS = frozenset({0, 1, 5})  # ok, tests failed, nothing collected
HANG_DUMP_GRACE = 2.0  # seconds for faulthandler to write every thread's stack
DEFAULT_CORE_LIMIT = 4 << 30  # bytes; enough for a backtrace of a torch_xla process


@dataclass(frozen=True)
class RowPlan:
    row: Row
    mode: Mode
    reason: str
    engine: str | None = None


def plan_row(
    cfg: Config,
    row: Row,
    *,
    force: Literal["local", "container"] | None = None,
    environ: Mapping[str, str] | None = None,
) -> RowPlan:
    """Where this row runs here, or why it cannot."""
    env = os.environ if environ is None else environ
    presence = detect(row, env)
    if not presence.present:
        return RowPlan(row, "unavailable", presence.reason)
    in_image = env.get("DEVICE_MATRIX_IN_IMAGE")
    if in_image and in_image in (row.name, row.image):
        return RowPlan(row, "local", f"{presence.reason}; already in the row's image")
    want: str = force or row.run_in
    if want == "host":
        want = "local"
    if want == "local":
        return RowPlan(row, "local", presence.reason)
    engine = find_engine(cfg.container_engine, env)
    problem = "no docker or podman on PATH" if engine is None else check_engine(engine)
    if want == "container":
        if problem is not None:
            raise EnvironmentProblem(
                f"row {row.name!r} must run in its container, but {problem}",
                tip="Start the container engine, pick one with --engine, or run the row with --local.",
            )
        return RowPlan(row, "container", presence.reason, engine)
    # auto: the container when an engine answers, this host otherwise
    if problem is None and row.image:
        return RowPlan(row, "container", presence.reason, engine)
    why = "no image configured" if not row.image else problem
    return RowPlan(row, "local", f"{presence.reason}; on this host ({why})")


@dataclass
class RunOptions:
    suites: Sequence[str] | None = None
    tests: Sequence[str] = ()
    pytest_args: Sequence[str] = ()
    python: str | None = None
    test_timeout: float | None = None
    run_timeout: float | None = None
    crash_reruns: int | None = None
    max_restarts: int | None = None
    use_gdb: bool = True
    keep_cores: bool = False
    core_limit: int | None = DEFAULT_CORE_LIMIT
    poll_interval: float = 0.05
    run_url: str | None = None


@dataclass
class _Attempt:
    index: int
    purpose: Literal["run", "resume", "rerun"]
    returncode: int | None
    timed_out: Literal["test", "run"] | None
    summary: JournalSummary
    duration: float
    selected: int | None
    journal: Path
    fault: Path
    workdir: Path
    log_start: int
    pid: int | None
    offsets: dict[int, int]

    @property
    def abnormal(self) -> bool:
        if self.timed_out:
            return True
        if self.returncode is None or not self.summary.ended:
            return True
        return diagnostics.signal_from_returncode(self.returncode) is not None


@dataclass
class _State:
    results: dict[str, TestRecord] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    crashes: list[CrashRecord] = field(default_factory=list)
    attempts: list[AttemptRecord] = field(default_factory=list)
    environment: dict[str, object] = field(default_factory=dict)
    error: str | None = None
    # per-phase reports and locations, for the pytest-json-report layout only
    phases: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    locations: dict[str, tuple[str, int | None]] = field(default_factory=dict)


def _now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class RowRunner:
    """Runs one planned row and writes ``results/<row>/``."""

    def __init__(self, cfg: Config, plan: RowPlan, options: RunOptions, out: Output) -> None:
        self.cfg = cfg
        self.plan = plan
        self.row = plan.row
        self.options = options
        self.out = out
        self.dir = cfg.results_dir / self.row.name
        self.redactor = Redactor()
        self.state = _State()
        self.executor: Executor | None = None
        self.log_path = self.dir / "output.log"
        self.test_timeout = options.test_timeout or self.row.test_timeout
        self.run_timeout = options.run_timeout or self.row.run_timeout
        self.crash_reruns = cfg.crash_reruns if options.crash_reruns is None else options.crash_reruns
        self.max_restarts = cfg.max_restarts if options.max_restarts is None else options.max_restarts
        self._run_deadline = 0.0
        self._done = 0
        self._env_from_child = False
        self._local_env: dict[str, object] = {}
        self._ignored: list[str] = []  # modules whose import kills the process
        # gdb reads cores in the background while the run resumes
        self._background = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="device-matrix-gdb")
        self._core_jobs: list[concurrent.futures.Future[None]] = []

    # --- setup ------------------------------------------------------------------------

    def _targets(self) -> list[str]:
        if self.options.tests:
            return list(self.options.tests)
        suites = list(self.options.suites or self.row.suites)
        unknown = [s for s in suites if s not in self.row.suites] if self.options.suites else []
        if unknown:
            raise ConfigError(
                f"suite(s) {', '.join(unknown)} are not in row {self.row.name!r}",
                allowed=", ".join(self.row.suites) or "(none)",
                tip="Pick suites the row runs, or add them to its `suites` list.",
            )
        targets = []
        for suite in suites:
            path = self.cfg.suite_path(suite)
            if not path.exists():
                raise ConfigError(
                    f"suite {suite!r} of row {self.row.name!r}: {path} does not exist",
                    tip="Create the suite folder, fix suites_dir, or remove the suite from the row.",
                )
            targets.append(
                str(path.relative_to(self.cfg.project_root))
                if path.is_relative_to(self.cfg.project_root)
                else str(path)
            )
        if not targets:
            raise ConfigError(
                f"row {self.row.name!r} has no suites to run",
                tip="List suites in the row's `suites`, or pass --test.",
            )
        return targets

    def _executor(self) -> Executor:
        if self.plan.mode == "container":
            assert self.plan.engine is not None
            mounts = []
            root = self.cfg.project_root.resolve()
            results = self.cfg.results_dir.resolve()
            if not results.is_relative_to(root):
                mounts.append(results)
            return ContainerExecutor(
                self.plan.engine,
                self.row,
                env_allowlist=self.cfg.env_allowlist,
                extra_mounts=mounts,
            )
        return LocalExecutor(self.options.python)

    def _child_env(self) -> dict[str, str]:
        env = dict(self.row.env)
        env.setdefault("PJRT_DEVICE", self.row.pjrt_device)
        env["DEVICE_MATRIX_DEVICE"] = self.row.name
        env["DEVICE_MATRIX_SETTINGS"] = json.dumps(dict(self.row.settings), sort_keys=True)
        env["DEVICE_MATRIX_DISABLE_LIST"] = str(self.cfg.disable_list)
        env["PYTHONUNBUFFERED"] = "1"
        env["DEVICE_MATRIX_OUTPUT_MARKERS"] = "1"
        return env

    def _absolute(self, target: str) -> str:
        """The child runs in its own folder: anchor relative paths and nodeids at the root."""
        path, sep, rest = target.partition("::")
        if Path(path).is_absolute() or path.startswith("-"):
            return target
        return str(self.cfg.project_root / path) + sep + rest

    def _base_args(self, targets: Sequence[str]) -> list[str]:
        return [
            *(self._absolute(t) for t in targets),
            "--rootdir",
            str(self.cfg.project_root),
            "-p",
            "no:cacheprovider",
            "-p",
            "no:faulthandler",
            # Native code writes to fd 2: fd-level output must reach the run log, where a
            # crash's native stack and fatal lines can be read after the process died.
            # tee-sys also passes print() output through while keeping it for reports.
            "--capture=tee-sys",
            "-o",
            "console_output_style=classic",
            "--dm-device",
            self.row.name,
            "--dm-disable-list",
            str(self.cfg.disable_list),
            *self.row.pytest_args,
            *self.options.pytest_args,
            *(arg for path in self._ignored for arg in ("--ignore", path)),
        ]

    # --- one attempt ----------------------------------------------------------------

    def _attempt(
        self,
        purpose: Literal["run", "resume", "rerun"],
        targets: Sequence[str],
        select: Sequence[str] | None,
        on_event_total: list[int],
    ) -> _Attempt:
        assert self.executor is not None
        index = len(self.state.attempts) + 1
        adir = self.dir / "attempts" / f"{index:02d}"
        adir.mkdir(parents=True, exist_ok=True)
        journal = adir / "journal.jsonl"
        fault = adir / "faulthandler.txt"
        args = [
            *self._base_args(targets),
            "--dm-journal",
            str(journal),
            "--dm-faulthandler",
            str(fault),
        ]
        if self._env_from_child:
            args.append("--dm-env")
        if select is not None:
            select_file = adir / "select.txt"
            select_file.write_text("".join(n + "\n" for n in select), "utf-8")
            args += ["--dm-select", str(select_file)]
        spec = LaunchSpec(
            pytest_args=args,
            env=self._child_env(),
            workdir=adir,
            project_root=self.cfg.project_root,
            core_limit=self.options.core_limit,
        )
        with self.log_path.open("ab") as log:
            command = shlex.join(self.executor.command_for(spec))
            header = f"\n=== device-matrix {self.row.name} attempt {index} ({purpose}): {command}\n"
            log.write(self.redactor.text(header).encode())
        read_fd, write_fd = os.pipe()
        pump = OutputPump(read_fd, self.log_path, self.redactor)
        log_start = pump.start
        started = time.monotonic()
        try:
            with os.fdopen(write_fd, "wb", buffering=0) as child_out:
                child = self.executor.launch(spec, child_out)
        except BaseException:
            pump.finish(0.0)
            raise
        pump.begin()
        rc, timed_out = self._watch(child, journal, on_event_total)
        pump.finish()
        summary = summarize(list(read_events(journal)))
        return _Attempt(
            index=index,
            purpose=purpose,
            returncode=rc,
            timed_out=timed_out,
            summary=summary,
            duration=time.monotonic() - started,
            selected=len(select) if select is not None else None,
            journal=journal,
            fault=fault,
            workdir=adir,
            log_start=log_start,
            pid=summary.pid or child.pid,
            offsets=dict(pump.offsets),
        )

    def _watch(
        self, child: Child, journal: Path, totals: list[int]
    ) -> tuple[int | None, Literal["test", "run"] | None]:
        tail = JournalTail(journal)
        current: str | None = None
        since = 0.0
        # a thread blocks in wait(): the end of the child is seen at once, not at the
        # next poll (Popen.wait with a timeout sleeps in steps of up to 50 ms)
        exited = threading.Event()
        status: list[int] = []

        def reap() -> None:
            status.append(child.wait())
            exited.set()

        threading.Thread(target=reap, name="device-matrix-reap", daemon=True).start()
        try:
            while True:
                exited.wait(self.options.poll_interval)
                rc: int | None = status[0] if status else None
                for ev in tail.read_new():
                    kind = ev["e"]
                    if kind == "collected" and not totals:
                        totals.append(len(ev.get("nodeids", [])))
                    elif kind == "start":
                        current, since = str(ev.get("nodeid")), time.monotonic()
                        self.out.status(f"{self.row.name} {current}")
                    elif kind == "report":
                        self._progress_report(ev, totals)
                    elif kind == "finish":
                        current = None
                if rc is not None:
                    return rc, None
                now = time.monotonic()
                if current is not None and now - since > self.test_timeout:
                    return self._end_hung(child), "test"
                if now > self._run_deadline:
                    return self._end_hung(child), "run"
        finally:
            tail.close()

    def _progress_report(self, ev: Mapping[str, object], totals: list[int]) -> None:
        when, outcome = ev.get("when"), str(ev.get("outcome"))
        failed_phase = outcome == "failed" and when != "call"
        if when == "call" or failed_phase or (when == "setup" and outcome == "skipped"):
            shown = outcome
            if ev.get("wasxfail") is not None:
                shown = "xfailed" if outcome == "skipped" else "xpassed"
            elif failed_phase:
                shown = "error"
            self._done += 1
            self.out.test_result(
                self.row.name,
                str(ev.get("nodeid")),
                shown,
                duration=float(str(ev.get("duration", 0.0))),
                done=self._done,
                total=totals[0] if totals else None,
            )

    def _end_hung(self, child: Child) -> int:
        # every thread's Python stack first (faulthandler on SIGUSR1), then the group
        child.send(signal.SIGUSR1)
        try:
            return child.wait(HANG_DUMP_GRACE)
        except subprocess.TimeoutExpired:
            pass
        return end_child(child)

    # --- crash bookkeeping ------------------------------------------------------------

    def _read_output(self, start: int) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(start)
                data = fh.read()
        except OSError:
            return ""
        # keep the tail: the end of the output is where a crash speaks
        if len(data) > 2_000_000:
            data = data[-2_000_000:]
        return data.decode("utf-8", "replace")

    def _repro(self, nodeid: str | None) -> str:
        assert self.executor is not None
        env = dict(self.row.env)
        env.setdefault("PJRT_DEVICE", self.row.pjrt_device)
        env["DEVICE_MATRIX_DEVICE"] = self.row.name
        target = [nodeid] if nodeid else self._targets()
        if self.plan.mode == "container":
            spec = LaunchSpec(
                pytest_args=[*target, "-p", "no:cacheprovider"],
                env=env,
                workdir=self.cfg.project_root,
                project_root=self.cfg.project_root,
                core_limit=None,
            )
            direct = shlex.join(self.executor.command_for(spec))
        else:
            assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
            direct = f"{assigns} python -m pytest -p no:cacheprovider {shlex.join(target)}"
        nox = f"nox -s {self.row.name} -- " + (f"--test {shlex.quote(nodeid)}" if nodeid else "")
        return f"cd {shlex.quote(str(self.cfg.project_root))} && {direct}\n# or: {nox.strip()}"

    def _crash_from(self, attempt: _Attempt, nodeid: str | None, phase: CrashPhase) -> CrashRecord:
        state = attempt.summary.tests.get(nodeid) if nodeid else None
        seq = state.seq if state is not None else None
        start = attempt.offsets.get(seq, attempt.log_start) if seq is not None else attempt.log_start
        output = self._read_output(max(start, attempt.log_start))
        try:
            fault_text = attempt.fault.read_text("utf-8", "replace")
        except OSError:
            fault_text = ""
        assert self.executor is not None
        diag = diagnostics.diagnose(
            returncode=attempt.returncode,
            fault_text=fault_text,
            output_text=output,
            redactor=self.redactor,
            timed_out=attempt.timed_out is not None,
        )
        core = core_files.find_core(attempt.workdir, attempt.pid)
        if core is not None and self.plan.mode == "local":
            self._core_jobs.append(
                self._background.submit(
                    diagnostics.read_core,
                    diag,
                    core,
                    executable=self.executor.interpreter(),
                    redactor=self.redactor,
                    use_gdb=self.options.use_gdb,
                    keep=self.options.keep_cores,
                )
            )
        when = None
        if state is not None:
            phases = [r.when for r in state.reports]
            when = "setup" if not phases else {"setup": "call", "call": "teardown"}.get(phases[-1], "teardown")
        crash_id = f"{self.row.name}-{len(self.state.crashes) + 1}"
        return CrashRecord(
            id=crash_id,
            kind="timeout" if attempt.timed_out else "crash",
            phase=phase,
            nodeid=nodeid,
            when=when,
            attempt=attempt.index,
            diagnosis=diag,
            classification="unknown",
            reruns=[],
            repro=self._repro(nodeid),
            issue=None,
        )

    def _record_finished(self, attempt: _Attempt) -> None:
        for nodeid in attempt.summary.finished_ids():
            state = attempt.summary.tests[nodeid]
            outcome, message, skip = final_outcome(state)
            self.state.phases[nodeid] = [
                {"when": r.when, "outcome": r.outcome, "duration": r.duration, "longrepr": r.longrepr}
                for r in state.reports
            ]
            if state.location is not None:
                self.state.locations[nodeid] = state.location
            self._set_result(
                nodeid,
                outcome,
                duration=sum(r.duration for r in state.reports),
                message=message,
                skip=skip,
                attempt=attempt.index,
            )
        for module, text in attempt.summary.collect_errors:
            self._set_result(module or "<collection>", "error", duration=0.0, message=text, attempt=attempt.index)

    def _set_result(
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
        if nodeid not in self.state.results and nodeid not in self.state.order:
            self.state.order.append(nodeid)
        self.state.results[nodeid] = TestRecord(
            nodeid=nodeid,
            outcome=outcome,
            duration=round(duration, 6),
            message=self.redactor.text(message) if message else None,
            skip=_skip_info(skip),
            crash=crash,
            attempt=attempt,
        )

    # --- the run ----------------------------------------------------------------------

    def run(self) -> RunRecord:
        started_iso = _now_iso()
        t0 = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.plan.mode == "unavailable":
            return self._finish(started_iso, t0, "unavailable", self.plan.reason, [])
        targets = self._targets()
        self.executor = self._executor()
        self._env_from_child = self.plan.mode == "container" or self.options.python is not None
        env_thread = None
        if not self._env_from_child:
            # the child is this interpreter: take the snapshot here, on the other core,
            # while the tests run, instead of in the child's critical path
            env_thread = threading.Thread(target=self._snapshot_here, daemon=True)
            env_thread.start()
        shutil.rmtree(self.dir / "attempts", ignore_errors=True)
        self.log_path.write_bytes(b"")
        self._run_deadline = time.monotonic() + self.run_timeout
        with self.out.group(f"{self.row.name}: {self.plan.mode} ({self.plan.reason})"):
            status_reason = self._run_attempts(targets)
            self._rerun_crashes(targets)
        if env_thread is not None:
            env_thread.join()
        for job in self._core_jobs:
            job.result()
        self._background.shutdown()
        return self._finish(started_iso, t0, *status_reason, targets)

    def _snapshot_here(self) -> None:
        from device_matrix.diagnostics.environment import snapshot

        env = dict(os.environ)
        env.update(self._child_env())
        self._local_env = snapshot(env)

    def _run_attempts(self, targets: Sequence[str]) -> tuple[RowStatus, str | None]:
        collected: list[str] | None = None
        select: list[str] | None = None
        totals: list[int] = []
        restarts = 0
        purpose: Literal["run", "resume"] = "run"
        while True:
            attempt = self._attempt(purpose, targets, select, totals)
            self._note_attempt(attempt)
            if attempt.summary.env and not self.state.environment:
                self.state.environment = dict(attempt.summary.env)
            if collected is None and attempt.summary.collected is not None:
                collected = list(attempt.summary.collected)
                # report in collection order, whatever order results arrive in
                self.state.order = collected + [n for n in self.state.order if n not in set(collected)]
            self._record_finished(attempt)
            if not attempt.abnormal:
                if attempt.returncode not in PYTEST_NORMAL_EXITS and not attempt.summary.collect_errors:
                    reason = f"pytest exited {attempt.returncode} (usage or internal error): see {self.log_path}"
                    return "error", reason
                return self._status(), None
            running = attempt.summary.running
            sig = diagnostics.signal_from_returncode(attempt.returncode)
            if not attempt.summary.session_started and sig is None and not attempt.timed_out:
                tail = " | ".join(self._read_output(attempt.log_start).strip().splitlines()[-3:])
                return (
                    "error",
                    f"pytest could not start (exit {attempt.returncode}): {self.redactor.text(tail)}",
                )
            if attempt.timed_out == "run":
                if running:
                    crash = self._crash_from(attempt, running, "test")
                    self._add_crash(crash, running, attempt)
                self._mark_not_run(collected, "the run exceeded its run_timeout")
                return "crashed", f"run timeout of {self.run_timeout:.0f} s exceeded"
            if running is not None:
                crash = self._crash_from(attempt, running, "test")
                self._add_crash(crash, running, attempt)
            elif not attempt.summary.session_started:
                crash = self._crash_from(attempt, None, "startup")
                self._add_crash(crash, None, attempt)
                return "crashed", "the test process died before pytest started: see the crash"
            elif attempt.summary.collected is None:
                culprit = attempt.summary.collect_culprit
                crash = self._crash_from(attempt, culprit[0] if culprit else None, "collection")
                self._add_crash(crash, culprit[0] if culprit else None, attempt)
                if culprit is None or restarts >= self.max_restarts:
                    return "crashed", "the test process died while collecting tests"
                # leave the module that kills the process out, collect the rest again
                self._ignored.append(culprit[1])
                restarts += 1
                self.out.line(f"{self.row.name}: collecting again without {culprit[0]}")
                continue
            else:
                remaining = self._remaining(collected)
                if not remaining:
                    crash = self._crash_from(attempt, None, "exit")
                    self._add_crash(crash, None, attempt)
                    return "crashed", "the test process died at exit, after every test finished"
                crash = self._crash_from(attempt, None, "exit")
                self._add_crash(crash, None, attempt)
            remaining = self._remaining(collected)
            if not remaining:
                return self._status(), None
            if restarts >= self.max_restarts:
                self._mark_not_run(collected, f"not run: {restarts} restarts reached max_restarts")
                return "crashed", f"stopped after {restarts} restarts (max_restarts)"
            restarts += 1
            select = remaining
            purpose = "resume"
            self.out.line(f"{self.row.name}: resuming with {len(remaining)} test(s) not yet run")

    def _remaining(self, collected: list[str] | None) -> list[str]:
        if collected is None:
            return []
        return [n for n in collected if n not in self.state.results]

    def _mark_not_run(self, collected: list[str] | None, why: str) -> None:
        for nodeid in self._remaining(collected):
            self._set_result(nodeid, "not_run", duration=0.0, message=why, attempt=len(self.state.attempts))

    def _add_crash(self, crash: CrashRecord, nodeid: str | None, attempt: _Attempt) -> None:
        self.state.crashes.append(crash)
        d = crash["diagnosis"]
        what = d["signal_name"] or f"exit code {d['exit_code']}"
        if nodeid is not None:
            outcome: Outcome = "timeout" if crash["kind"] == "timeout" else "crashed"
            state = attempt.summary.tests.get(nodeid)
            duration = 0.0
            if state is not None and state.started_at:
                duration = (
                    max(0.0, time.time() - state.started_at)
                    if crash["kind"] == "timeout"
                    else sum(r.duration for r in state.reports)
                )
            self._set_result(
                nodeid,
                outcome,
                duration=duration,
                message=f"{outcome}: {what} ({d['hint'] or ''})",
                crash=crash["id"],
                attempt=attempt.index,
            )
            self.out.line(
                f"{self.row.name} {self.out.paint(outcome, outcome.upper())} {nodeid}: {what} "
                f"[fingerprint {d['fingerprint']}]"
            )
        else:
            self.out.line(f"{self.row.name} {self.out.paint('crashed', 'CRASHED')} during {crash['phase']}: {what}")

    def _note_attempt(self, attempt: _Attempt) -> None:
        sig = diagnostics.signal_from_returncode(attempt.returncode)
        self.state.attempts.append(
            AttemptRecord(
                index=attempt.index,
                purpose=attempt.purpose,
                returncode=attempt.returncode,
                signal_name=diagnostics.signal_name(sig),
                duration=round(attempt.duration, 3),
                selected=attempt.selected,
                finished=len(attempt.summary.finished_ids()),
                journal=str(attempt.journal.relative_to(self.dir)),
                log=str(self.log_path.relative_to(self.dir)),
            )
        )

    def _rerun_crashes(self, targets: Sequence[str]) -> None:
        if self.crash_reruns <= 0:
            return
        for crash in self.state.crashes:
            nodeid = crash["nodeid"]
            if crash["kind"] != "crash" or nodeid is None or crash["phase"] != "test":
                continue
            if time.monotonic() > self._run_deadline:
                break
            classification: Classification = "deterministic"
            for _ in range(self.crash_reruns):
                attempt = self._attempt("rerun", targets, [nodeid], [])
                self._note_attempt(attempt)
                rerun = self._rerun_record(attempt, nodeid)
                crash["reruns"].append(rerun)
                if rerun["outcome"] not in ("crashed", "timeout"):
                    classification = "flaky"
                    break
            crash["classification"] = classification
            self.out.line(f"{self.row.name}: {nodeid} crash is {classification} ({len(crash['reruns'])} rerun(s))")

    def _rerun_record(self, attempt: _Attempt, nodeid: str) -> RerunRecord:
        if not self.options.keep_cores:
            for core in attempt.workdir.glob("core*"):
                core.unlink(missing_ok=True)
        sig = diagnostics.signal_from_returncode(attempt.returncode)
        state = attempt.summary.tests.get(nodeid)
        fingerprint = None
        if attempt.abnormal and state is not None and not state.finished:
            outcome: Outcome = "timeout" if attempt.timed_out else "crashed"
            try:
                fault_text = attempt.fault.read_text("utf-8", "replace")
            except OSError:
                fault_text = ""
            fingerprint = diagnostics.diagnose(
                returncode=attempt.returncode,
                fault_text=fault_text,
                output_text=self._read_output(attempt.log_start),
                redactor=self.redactor,
                timed_out=attempt.timed_out is not None,
            )["fingerprint"]
        elif state is not None and state.finished:
            outcome = final_outcome(state)[0]
        else:
            outcome = "not_run"
        return RerunRecord(
            outcome=outcome,
            returncode=attempt.returncode,
            signal_name=diagnostics.signal_name(sig),
            fingerprint=fingerprint,
            duration=round(attempt.duration, 3),
        )

    def _status(self) -> RowStatus:
        outcomes = {t["outcome"] for t in self.state.results.values()}
        if self.state.crashes or outcomes & {"crashed", "timeout"}:
            return "crashed"
        if outcomes & FAILING_OUTCOMES:
            return "failed"
        return "passed"

    def _finish(
        self,
        started_iso: str,
        t0: float,
        status: RowStatus,
        reason: str | None,
        targets: Sequence[str],
    ) -> RunRecord:
        tests = [self.state.results[n] for n in self.state.order if n in self.state.results]
        if status in ("passed", "failed") and self.state.crashes:
            status = "crashed"
        env = dict(self.state.environment or self._local_env)
        env.setdefault("host_python", sys.version.split()[0])
        command = ["device-matrix", "run", "--device", self.row.name]
        record = RunRecord(
            schema=SCHEMA,
            version=SCHEMA_VERSION,
            row=self.row.name,
            pjrt_device=self.row.pjrt_device,
            status=status,
            reason=reason,
            mode="none" if self.plan.mode == "unavailable" else self.plan.mode,
            image=self.row.image or None,
            suites=list(self.options.suites or self.row.suites),
            started_at=started_iso,
            finished_at=_now_iso(),
            duration=round(time.monotonic() - t0, 3),
            command=command,
            repro=f"nox -s {self.row.name}",
            environment=env,
            tests=tests,
            crashes=self.state.crashes,
            attempts=self.state.attempts,
            summary=summarize_tests(tests),
            run_url=self.options.run_url,
        )
        self._write_outputs(record)
        return record

    def _write_outputs(self, record: RunRecord) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_junit(self.dir / "junit.xml", record)
        jsonreport.write(
            self.dir / "report.json",
            jsonreport.build(record, self.state.phases, self.state.locations, self.cfg.project_root),
        )
        write_json_atomic(self.dir / "run.json", record)


def _skip_info(skip: Mapping[str, object] | None) -> SkipInfo | None:
    if not skip:
        return None
    devices = skip.get("devices")
    line = skip.get("line")
    return SkipInfo(
        mode=str(skip.get("mode", "skip")),
        devices=[str(d) for d in devices] if isinstance(devices, list) else [],
        issue=str(skip["issue"]) if skip.get("issue") else None,
        reason=str(skip.get("reason") or ""),
        source=str(skip.get("source", "pytest")),
        expires=str(skip["expires"]) if skip.get("expires") else None,
        file=str(skip["file"]) if skip.get("file") else None,
        line=line if isinstance(line, int) else None,
    )
