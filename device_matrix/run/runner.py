"""Run one device row: a short list of steps.

1. take the row's results folder (a lock: one run at a time) and mark the run started;
2. run pytest in attempts until every collected test has an outcome, resuming after a
   death and collecting again without a module whose import kills the process (the
   policy decides, :mod:`device_matrix.run.policy`);
3. rerun each crashed test alone to call it deterministic or flaky;
4. reconcile: a collected test without an outcome is ``not_run`` with the reason, and
   the row is green only when every test ran and pytest agreed;
5. write ``run.json``, ``junit.xml`` and ``report.json``.

Whatever ends the run (an interrupt, an error), the child's processes are ended by the
attempt and a record says what is known: ``interrupted`` with the rest ``not_run``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
import shutil
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from device_matrix import diagnostics
from device_matrix.child.journal import FORKED_AT_IMPORT
from device_matrix.config import Config, Script
from device_matrix.diagnostics.repro import Container, repro_command
from device_matrix.errors import ConfigError, DeviceMatrixError, EnvironmentProblem, ResultsError, UsageProblem
from device_matrix.records import jsonreport
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.junit import write_junit
from device_matrix.records.schema import (
    AttemptRecord,
    Classification,
    CrashRecord,
    Outcome,
    RerunRecord,
    RowStatus,
    RunRecord,
    SpreadRef,
    load_run,
)
from device_matrix.records.summary import crash_kind_label, most_serious
from device_matrix.redact import Redactor, remember_secrets
from device_matrix.run import crashes
from device_matrix.run.attempt import (
    PHASE_MIN,
    PROCESS_PHASES,
    AttemptResult,
    AttemptSpec,
    Interrupted,
    Limits,
    Purpose,
    run_attempt,
)
from device_matrix.run.executors.base import Executor
from device_matrix.run.executors.container import CONTAINER_PYTHON, ContainerExecutor
from device_matrix.run.executors.local import LocalExecutor
from device_matrix.run.journal import final_outcome
from device_matrix.run.plan import RowPlan
from device_matrix.run.policy import CrashAt, Decision, Observation, decide
from device_matrix.run.state import RunState, now_iso
from device_matrix.wire import (
    ENV_DEVICE,
    ENV_DISABLE_LIST,
    ENV_MARKERS,
    ENV_SETTINGS,
    OPT_DEVICE,
    OPT_DISABLE_LIST,
    OPT_ENV,
    option,
)

SCRIPT_MODULE = "device_matrix.child.script"  # runs a test file as a script, journaled
DEFAULT_CORE_LIMIT = 4 << 30  # bytes; enough for a backtrace of a torch_xla process
DEFAULT_MAX_LOG = 512 << 20  # bytes of output.log; the rest is cut with a note
# pytest options that would move tests into processes the runner does not watch
XDIST_OPTIONS = ("-n", "--numprocesses", "--dist", "-d", "--tx", "--looponfail", "-f")
# options of pytest's cache, which the runner disables (-p no:cacheprovider): its own
# record, not a cache folder in the project, says what failed last time
CACHE_OPTIONS = ("--lf", "--last-failed", "--ff", "--failed-first", "--nf", "--new-first", "--sw", "--stepwise")
# options of the command line that select tests: a selection of nothing is a wrong command line
SELECTING_OPTIONS = ("-k", "-m", "--deselect")


def selecting_options(args: Sequence[str]) -> list[tuple[str, str]]:
    """pytest's own test selections among ``args``: (the option, as written with its value)."""
    found = []
    for k, arg in enumerate(args):
        name = arg.split("=", 1)[0]
        if name in SELECTING_OPTIONS:
            found.append((name, arg if "=" in arg else shlex.join(args[k : k + 2])))
        elif arg[:2] in SELECTING_OPTIONS and len(arg) > 2 and not arg.startswith("--"):
            found.append((arg[:2], arg))
    return found


NOT_FOUND_RE = re.compile(r"ERROR: not found: (\S+)")
PYTEST_EXIT_WORDS = {
    0: "no failure reported",  # not "all passed": pytest.exit(returncode=0) exits 0 too
    1: "tests failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests collected",
}


def worst(outcomes: Sequence[tuple[RowStatus, str | None]]) -> tuple[RowStatus, str | None]:
    """Several processes' (status, reason) as one: the most serious status, every reason once."""
    status = most_serious(o[0] for o in outcomes)
    reasons = "; ".join(dict.fromkeys(r for _, r in outcomes if r))
    return status, reasons or None


def isolation_groups(nodeids: Sequence[str], isolation: str) -> list[tuple[str, list[str]]]:
    """The tests of each process, in collection order: (the file to give pytest, nodeids)."""
    groups: dict[str, tuple[str, list[str]]] = {}
    for nodeid in nodeids:
        parts = nodeid.split("::")
        key = "::".join(parts[:2]) if isolation == "class" and len(parts) > 2 else parts[0]
        groups.setdefault(key, (parts[0], []))[1].append(nodeid)
    return list(groups.values())


class NothingSelected(UsageProblem):
    """The command line's selection (``-k``, ``-m``, ``--deselect``, ``--test``, a nodeid)
    selected no test; the row's record, which says so, goes with it."""

    def __init__(self, message: str, record: RunRecord) -> None:
        super().__init__(
            message,
            tip="List the row's tests with `python -m pytest --collect-only -q SUITE` and fix the selection.",
        )
        self.record = record


class RunListener(Protocol):
    """What a run tells the person watching it (the terminal implements it)."""

    def row_group(self, title: str) -> contextlib.AbstractContextManager[None]: ...

    def test_running(self, row: str, nodeid: str) -> None: ...

    def test_done(
        self, row: str, nodeid: str, outcome: str, *, duration: float, done: int, total: int | None
    ) -> None: ...

    def crash(self, row: str, nodeid: str | None, *, outcome: str, phase: str, what: str, fingerprint: str) -> None: ...

    def note(self, row: str, text: str) -> None: ...


@dataclass
class RunOptions:
    suites: Sequence[str] | None = None
    tests: Sequence[str] = ()
    pytest_args: Sequence[str] = ()
    python: str | None = None
    use_gdb: bool = True
    keep_cores: bool = False
    core_limit: int | None = DEFAULT_CORE_LIMIT
    poll_interval: float = 0.05
    run_url: str | None = None
    resume: bool = False
    max_log_bytes: int | None = DEFAULT_MAX_LOG
    # a shard (device_matrix.run.spread): only these tests, into results/<row>/<results_subdir>,
    # with its device slot's variables over the row's own
    select: Sequence[str] | None = None
    results_subdir: str | None = None
    slot_env: Mapping[str, str] = field(default_factory=dict)
    command: Sequence[str] = ()  # the record's `command` when not the whole row's (a shard's own)
    spread: SpreadRef | None = None  # a shard's record names its split and its index (#23)


def refuse_xdist(args: Sequence[str]) -> None:
    """pytest-xdist moves tests into workers the runner cannot watch: say so up front.

    Options of pytest's cache are refused too: the runner runs without it.
    """
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in CACHE_OPTIONS:
            raise UsageProblem(
                f"pytest argument {arg!r} needs pytest's cache, which device-matrix run does not use",
                tip="Remove it; to rerun what failed, pass its nodeids with --test (run.json lists them).",
            )
        if name in XDIST_OPTIONS or (arg.startswith("-n") and arg[2:].isalnum() and not arg.startswith("--")):
            raise UsageProblem(
                f"pytest argument {arg!r}: pytest-xdist cannot run under device-matrix run",
                tip="Remove -n/--dist: the runner isolates crashes itself. To spread a row, run rows in parallel.",
            )


class RowLock:
    """One run per results folder and row at a time; the second is told who holds it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / ".lock"
        self.fd = -1

    def take(self) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise EnvironmentProblem(
                f"results folder {self.folder}: {exc.strerror or exc}",
                tip="Make the results folder writable, or pick another one with --results.",
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise EnvironmentProblem(
                f"{self.folder} is in use by another device-matrix run (pid {holder})",
                tip="Wait for that run to end, or give this one another --results folder.",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.release()
        self.fd = fd

    def held(self) -> bool:
        """Whether the lock file is still the one this run holds (a test may delete it)."""
        return self.fd >= 0 and _identity(self.path) == _identity_fd(self.fd)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@contextlib.contextmanager
def row_lock(folder: Path) -> Iterator[RowLock]:
    lock = RowLock(folder)
    lock.take()
    try:
        yield lock
    finally:
        lock.release()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _identity_fd(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class RowRunner:
    """Runs one planned row and writes ``results/<row>/``."""

    def __init__(self, cfg: Config, plan: RowPlan, options: RunOptions, listener: RunListener) -> None:
        self.cfg = cfg
        self.plan = plan
        self.row = plan.row
        self.options = options
        self.listener = listener
        self.dir = cfg.results_dir / self.row.name
        if options.results_subdir:
            self.dir = self.dir / options.results_subdir
        self.log_path = self.dir / "output.log"
        # the row's and its scripts' variables hold secrets too (a token set in the config):
        # every redactor of this process scrubs them, the terminal's and the files' too
        for variables in (self.row.env, self.row.slot_env, *(script.env for script in self.row.scripts)):
            remember_secrets(variables)
        self.redactor = Redactor()
        self.state = RunState(self.redactor)
        # the child is another interpreter (a container, --python): it snapshots its own environment
        self._env_from_child = plan.mode == "container" or options.python is not None
        self._started_iso = now_iso()
        self._t0 = time.monotonic()
        self._ignored: list[str] = []  # modules whose import kills or hangs the process
        self._crash_targets: dict[str, list[str]] = {}  # crash id -> what its process was given
        self._crash_script: dict[str, Script] = {}  # crash id -> the script it crashed in
        self._previous_verdict: tuple[RowStatus, str | None] | None = None  # what --resume continues
        self.done = 0  # tests reported so far, for the progress counter
        self.total: int | None = None
        self.collected: set[str] = set()  # every nodeid a process of this run collected
        self._last_output = 0  # where the output of the last attempt begins in the log
        self._local_env: dict[str, Any] = {}
        self._lock: RowLock | None = None
        self._lost: list[str] = []  # evidence a test deleted while the run went on
        self._folders: dict[int, Path] = {}  # this run's attempt folders, by index

    # --- the steps ------------------------------------------------------------------

    def run(self) -> RunRecord:
        if self.plan.mode == "unavailable":
            with row_lock(self.dir):
                return self._write("unavailable", self.plan.reason)
        try:
            refuse_xdist([*self.row.pytest_args, *self.options.pytest_args])
            targets = self._targets()
            executor = self._executor()
        except DeviceMatrixError as exc:
            self._refused(exc)
            raise
        with row_lock(self.dir) as self._lock:
            previous = self._prepare()
            deadline = time.monotonic() + self.row.run_timeout
            env_thread = self._snapshot_environment()
            reader = crashes.CoreReader(
                interpreter=executor.interpreter(),
                redactor=self.redactor,
                use_gdb=self.options.use_gdb and self.plan.mode == "local",
                keep=self.options.keep_cores,
            )
            status: RowStatus
            try:
                with self.listener.row_group(f"{self.row.name}: {self.plan.mode} ({self.plan.reason})"):
                    status, reason = self._run_tests(executor, targets, reader, deadline, previous is not None)
                    status, reason = self._run_scripts(
                        executor, reader, deadline, previous is not None, status=status, reason=reason
                    )
                    self._rerun_crashes(executor, targets, reader, deadline)
            except Interrupted as exc:
                if exc.attempt is not None and exc.attempt.purpose == "rerun":
                    self._note_attempt(exc.attempt)  # the crash it reran keeps its outcome
                elif exc.attempt is not None:
                    self._note_attempt(exc.attempt)
                    self.state.record_finished(exc.attempt)
                    if exc.attempt.fold.running:
                        self.state.put(
                            exc.attempt.fold.running,
                            "not_run",
                            duration=0.0,
                            message=f"interrupted by {exc} while it ran",
                            attempt=exc.attempt.index,
                        )
                self.state.mark_not_run(f"not run: device-matrix was interrupted ({exc})")
                reader.close()
                self._write("interrupted", f"interrupted by {exc}; `device-matrix run --resume` continues")
                raise
            reader.close()
            if env_thread is not None:
                env_thread.join()
            nothing = self._nothing_selected()
            if nothing is not None:
                raise NothingSelected(nothing, self._write("error", nothing))
            status, reason = self._reconcile(status, reason)
            return self._write(status, reason)

    def _refused(self, exc: DeviceMatrixError) -> None:
        """A run refused before it started: its record says so, not the last run's.

        Nothing is written while another run holds the row: its record is the current one.
        """
        try:
            with row_lock(self.dir):
                for name in ("junit.xml", "report.json"):
                    (self.dir / name).unlink(missing_ok=True)
                self._write("error", f"refused: {exc.message} (exit {exc.exit_code})")
        except (DeviceMatrixError, OSError):
            pass  # the refusal itself is what the user is told

    def _nothing_selected(self) -> str | None:
        """Why the command line's selection ran nothing (None when it ran something)."""
        if self.state.expected or self.state.results:
            return None
        picked = [f"--test {t}" for t in self.options.tests]
        picked += [written for _, written in selecting_options(self.options.pytest_args)]
        chosen = " ".join(picked) or "the command line"
        root = f"{self.cfg.project_root}/"
        found = NOT_FOUND_RE.search(crashes.read_log(self.log_path, self._last_output))
        if self.state.pytest_exit == 4 and found is not None:
            return f"{chosen} selected no test: pytest found nothing at {found.group(1).replace(root, '')}"
        if self.state.pytest_exit == 5 and picked:
            return f"{chosen} selected no test of row {self.row.name!r} (pytest exited 5: nothing to run)"
        return None

    def _unwritable(self, exc: OSError) -> EnvironmentProblem:
        """The row's results folder refused a write (exit 5)."""
        return EnvironmentProblem(
            f"cannot write the results of row {self.row.name!r} in {self.dir}: {exc.strerror or exc}",
            tip="Free space or make the results folder writable, or pick another with --results.",
        )

    def _prepare(self) -> RunRecord | None:
        """Clear the last run's files (or keep them to resume); mark this run started."""
        previous = None
        if self.options.resume:
            try:
                previous = load_run(self.dir / "run.json")
            except ResultsError as exc:
                raise ResultsError(f"nothing to resume: {exc.message}", tip="Run the row without --resume.") from None
            if not previous["tests"]:
                # it never got as far as collecting: there is nothing to keep, run it all
                self.listener.note(self.row.name, "the last run collected no tests: running the row again")
                previous = None
        try:
            for name in ("junit.xml", "report.json"):
                (self.dir / name).unlink(missing_ok=True)
            if previous is None:
                shutil.rmtree(self.dir / "attempts", ignore_errors=True)
                self.log_path.write_bytes(b"")
            else:
                self._adopt(previous)
            self._write("running", "the run is in progress (or its runner was killed)", final=False)
        except OSError as exc:
            raise self._unwritable(exc) from exc
        return previous

    def _adopt(self, previous: RunRecord) -> None:
        """Resume: keep every outcome of the earlier run but its not_run tests, and its verdict."""
        self._previous_verdict = (previous["status"], previous["reason"])
        for test in previous["tests"]:
            self.state.expect([test["nodeid"]])
            if test["outcome"] != "not_run":
                self.state.results[test["nodeid"]] = test
        self.state.crashes.extend(previous["crashes"])
        self.state.attempts.extend(previous["attempts"])
        self.state.environment.update(previous.get("environment") or {})

    def _run_tests(
        self, executor: Executor, targets: Sequence[str], reader: crashes.CoreReader, deadline: float, resume: bool
    ) -> tuple[RowStatus, str | None]:
        """Every test of the row: in one process, or one per file or class (``isolation``)."""
        # a shard runs the tests it was given (options.select), and only those
        chosen = None if self.options.select is None else list(self.options.select)
        scope = None if chosen is None else set(chosen)
        if chosen is not None:
            self.state.expect(chosen)  # each needs an outcome, even if collection dies first
        if not targets:
            return self.state.status(), None  # a row of scripts only
        if resume:
            scripts = {script.file for script in self._scripts()}
            nodeids = [n for n in self.state.remaining() if n.split("::", 1)[0] not in scripts]
            if not nodeids:
                # the earlier verdict stands (a pytest exit it reported is not lost)
                status, reason = self._previous_verdict or (self.state.status(), None)
                if status in ("interrupted", "running"):
                    status = self.state.status()
                return status, reason or "nothing to resume: every test of the last run has an outcome"
        elif self.row.isolation == "row":
            return self._attempts(executor, targets, reader, deadline, select=chosen, purpose="run", scope=scope)
        else:
            # collect once (a module that crashes or hangs on import is handled as ever),
            # then give each file or class a process of its own
            # (a module whose import kills the process is left out and recorded; when
            # collection stops for good, every test is marked not_run and nothing is left)
            collected = self._attempts(
                executor, targets, reader, deadline, select=chosen, purpose="collect", scope=scope
            )
            nodeids = self.state.remaining(scope)
            if not nodeids:
                return collected
        if self.row.isolation == "row":
            return self._attempts(executor, targets, reader, deadline, select=nodeids, purpose="resume")
        outcomes: list[tuple[RowStatus, str | None]] = []
        for target, group in isolation_groups(nodeids, self.row.isolation):
            outcomes.append(
                self._attempts(executor, [target], reader, deadline, select=group, purpose="run", scope=set(group))
            )
        return worst(outcomes) if outcomes else (self.state.status(), None)

    def _scripts(self) -> tuple[Script, ...]:
        """The row's scripts, unless the command line picked suites or tests."""
        return () if self.options.tests or self.options.suites else self.row.scripts

    def _run_scripts(
        self,
        executor: Executor,
        reader: crashes.CoreReader,
        deadline: float,
        resume: bool,
        *,
        status: RowStatus,
        reason: str | None,
    ) -> tuple[RowStatus, str | None]:
        """Each script in a process of its own, after the suites: ``python FILE ARGS``."""
        outcomes = [(status, reason)]
        for script in self._scripts():
            select = None
            if resume:
                select = [n for n in self.state.remaining() if n.split("::", 1)[0] == script.file]
                if not select and any(n.split("::", 1)[0] == script.file for n in self.state.results):
                    continue  # every test of this script has its outcome
            outcomes.append(
                self._attempts(executor, [script.file], reader, deadline, select=select, purpose="run", script=script)
            )
            if not any(n == script.file or n.startswith(script.file + "::") for n in self.state.results):
                # no unittest ran in the script's own process: nothing was tested, never green
                self.state.put(
                    script.file,
                    "error",
                    duration=0.0,
                    message="the script ran no unittest test in its own process (unittest.main() never ran, "
                    "or ran in a subprocess)",
                    attempt=len(self.state.attempts),
                )
                outcomes.append(("failed", f"{script.file}: no test ran"))
        return worst(outcomes)

    def _attempts(
        self,
        executor: Executor,
        targets: Sequence[str],
        reader: crashes.CoreReader,
        deadline: float,
        *,
        select: list[str] | None,
        purpose: Purpose,
        scope: set[str] | None = None,
        script: Script | None = None,
    ) -> tuple[RowStatus, str | None]:
        """Attempts until every test in ``scope`` (all, when None) has an outcome."""
        restarts = 0
        while True:
            attempt = self._attempt(executor, purpose, targets, select, deadline, script=script)
            self.state.record_finished(attempt)
            self._worker_crashes(attempt, targets)
            self._forked_copies(attempt)
            # one non-zero pytest exit anywhere is never overwritten by a later 0; a
            # collection's own status counts only when it found nothing (5): then no
            # process runs after it to say so
            counts = purpose != "collect" or attempt.returncode == 5
            normal = attempt.fold.ended and not attempt.abnormal and counts
            if normal and self.state.pytest_exit in (None, 0):
                self.state.pytest_exit = attempt.returncode
            decision = decide(self._observe(attempt, restarts, scope))
            if decision.crash is not None:
                self._record_crash(attempt, decision.crash, reader, targets, script)
            elif attempt.fold.ended and attempt.fold.running:
                # pytest.exit() or a KeyboardInterrupt inside a test: the session ended with it
                self.state.put(
                    attempt.fold.running,
                    "error",
                    duration=0.0,
                    message=f"the session ended while this test ran (pytest exit status {attempt.returncode})",
                    attempt=attempt.index,
                )
            if decision.next == "done":
                return self.state.status(), decision.reason
            if decision.next == "stop":
                assert decision.status is not None
                self.state.mark_not_run(f"not run: {decision.reason}", scope)
                return decision.status, self._with_output(decision)
            restarts += 1
            remaining = self.state.remaining(scope)
            if decision.next == "collect_again":
                assert decision.reason is not None
                self._ignored.append(decision.reason)
                module = decision.crash.nodeid if decision.crash and decision.crash.nodeid else decision.reason
                self.listener.note(self.row.name, f"collecting again without {module}")
                select = remaining if scope is not None else None
                continue
            select, purpose = remaining, ("collect" if purpose == "collect" else "resume")
            self.listener.note(self.row.name, f"resuming with {len(select)} test(s) not yet run")

    def _with_output(self, decision: Decision) -> str | None:
        if decision.status != "error":
            return decision.reason
        return f"{decision.reason}: {self._output_tail()}"

    def _observe(self, attempt: AttemptResult, restarts: int, scope: set[str] | None) -> Observation:
        fold = attempt.fold
        culprit = fold.collect_culprit
        if culprit is not None and (Path(culprit[1]) / "conftest.py").is_file():
            # a directory dies while its conftest.py is imported: that file is named, and
            # the directory left out (its conftest.py would be imported again otherwise)
            nodeid = f"{culprit[0]}/conftest.py" if culprit[0] else "conftest.py"
            culprit = (nodeid, culprit[1])
        return Observation(
            abnormal=attempt.abnormal,
            signal=attempt.signal,
            returncode=attempt.returncode,
            overrun=attempt.overrun.activity if attempt.overrun else None,
            broken=fold.broken is not None,
            session_started=fold.session_started,
            collected=fold.collected is not None,
            ended=fold.ended,
            running=fold.running,
            collect_culprit=culprit,
            # the running test gets its outcome from this very decision
            remaining=len([n for n in self.state.remaining(scope) if n != fold.running]),
            restarts=restarts,
            max_restarts=self.cfg.max_restarts,
        )

    def _reconcile(self, status: RowStatus, reason: str | None) -> tuple[RowStatus, str | None]:
        """Every collected test ends with one outcome; green only when pytest agrees."""
        if self.state.remaining():
            self.state.mark_not_run(
                "not run: pytest ended the session before this test "
                f"(exit status {self.state.pytest_exit}: {PYTEST_EXIT_WORDS.get(self.state.pytest_exit or 0, '?')})"
            )
        computed = self.state.status()
        if status == "passed" and computed != "passed":
            status = computed
        if status == "passed" and self.state.pytest_exit not in (0, None):
            # pytest said otherwise: never green
            word = PYTEST_EXIT_WORDS.get(self.state.pytest_exit, "unknown")
            status = "error" if self.state.pytest_exit in (3, 4) else "failed"
            return status, f"pytest exited {self.state.pytest_exit} ({word}): {self._output_tail()}"
        not_run = sum(1 for t in self.state.results.values() if t["outcome"] == "not_run")
        if not_run and reason is None:
            reason = f"{not_run} collected test(s) did not run"
        if status in ("failed", "crashed") and self.state.pytest_exit in (3, 4):
            # said beside any other reason: tests not run because pytest broke are not the story
            word = PYTEST_EXIT_WORDS[self.state.pytest_exit]
            said = f"pytest exited {self.state.pytest_exit} ({word}): {self._output_tail()}"
            reason = f"{reason}; {said}" if reason else said
        return status, reason

    def _output_tail(self, lines: int = 3) -> str:
        """The last lines of the last attempt: where pytest says why it stopped."""
        tail = crashes.read_log(self.log_path, self._last_output).strip().splitlines()[-lines:]
        return " | ".join(tail) or f"see {self.log_path}"

    # --- one attempt ----------------------------------------------------------------

    def _attempt(
        self,
        executor: Executor,
        purpose: Purpose,
        targets: Sequence[str],
        select: Sequence[str] | None,
        deadline: float,
        *,
        script: Script | None = None,
    ) -> AttemptResult:
        index = len(self.state.attempts) + 1
        if script is None:
            args = [*self._args(targets), *(["--collect-only"] if purpose == "collect" else [])]
            spec = AttemptSpec(index=index, purpose=purpose, args=args, env=self._child_env(), select=select)
        else:
            spec = AttemptSpec(
                index=index,
                purpose=purpose,
                args=self._script_args(script),
                env={**self._child_env(), **script.env},
                select=select,
                module=SCRIPT_MODULE,
            )
        folder = self.dir / "attempts" / f"{index:02d}"
        limits = Limits(
            test_timeout=self.row.test_timeout,
            run_deadline=deadline,
            poll=self.options.poll_interval,
            core_limit=self.options.core_limit,
            max_log_bytes=self.options.max_log_bytes,
        )
        progress = _Progress(self, purpose)
        self._folders[index] = folder
        before = (_identity(self.dir), _identity(self.log_path))
        try:
            attempt = run_attempt(
                executor,
                spec,
                project_root=self.cfg.project_root,
                folder=folder,
                log_path=self.log_path,
                redactor=self.redactor,
                limits=limits,
                progress=progress,
            )
        except OSError as exc:
            raise self._unwritable(exc) from exc
        self._note_attempt(attempt)
        self._check_evidence(attempt, *before)
        self._last_output = attempt.log_start
        if attempt.output_error is not None:
            err = attempt.output_error
            raise EnvironmentProblem(
                f"the output of row {self.row.name!r} could not be written to {self.dir}: {err.strerror or err}",
                tip="Free space on the results folder's disk, or pick another with --results.",
            )
        if attempt.fold.env and not self.state.environment:
            self.state.environment = dict(attempt.fold.env)
        elif not self.state.environment and self._local_env:
            self.state.environment = dict(self._local_env)
        return attempt

    def _check_evidence(
        self, attempt: AttemptResult, folder: tuple[int, int] | None, log: tuple[int, int] | None
    ) -> None:
        """A test may delete the results folder: take the lock again, and say what was lost."""
        lost = []
        try:
            if folder is not None and _identity(self.dir) != folder:
                lost.append(f"the results folder {self.dir.name}/")
            if self._lock is not None and not self._lock.held():
                self._lock.take()  # before a second run can start beside this one
                lost.append("its lock (taken again)")
            if log is not None and _identity(self.log_path) != log:
                lost.append("output.log (the output until then)")
            for index, path in self._folders.items():
                name = f"attempts/{index:02d}"
                if not path.is_dir() and not any(name in note for note in self._lost):
                    lost.append(f"{name} (journal copy, faulthandler stacks)")
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._unwritable(exc) from exc
        if lost:
            note = f"deleted while attempt {attempt.index} ran: {', '.join(lost)}"
            self._lost.append(note)
            self.listener.note(self.row.name, f"evidence {note}")

    def _note_attempt(self, attempt: AttemptResult) -> None:
        if any(a["index"] == attempt.index for a in self.state.attempts):
            return
        self.state.attempts.append(
            AttemptRecord(
                index=attempt.index,
                purpose=attempt.purpose,
                returncode=attempt.returncode,
                signal_name=diagnostics.signal_name(attempt.signal),
                duration=round(attempt.duration, 3),
                selected=attempt.selected,
                finished=len(attempt.fold.finished_ids()),
                journal=str((attempt.folder / "journal.jsonl").relative_to(self.dir)),
                log=str(self.log_path.relative_to(self.dir)),
            )
        )

    def _record_crash(
        self,
        attempt: AttemptResult,
        at: CrashAt,
        reader: crashes.CoreReader,
        targets: Sequence[str],
        script: Script | None = None,
    ) -> None:
        diagnosis = crashes.diagnose(attempt, at, self.log_path, self.redactor)
        reader.attach(diagnosis, self._cores(attempt))
        nodeid = at.nodeid if at.phase == "test" else None
        crash = crashes.crash_record(
            f"{self.row.name}-{len(self.state.crashes) + 1}",
            attempt,
            at,
            diagnosis,
            self._repro(nodeid, targets) if script is None else self._script_repro(script, nodeid),
            deadline=self._deadline(attempt),
        )
        if script is not None:
            self._crash_script[crash["id"]] = script
        self.state.crashes.append(crash)
        self._crash_targets[crash["id"]] = list(targets)
        outcome: Outcome = "timeout" if at.kind == "timeout" else "crashed"
        what = crash_kind_label(crash)
        if at.nodeid is not None:
            state = attempt.fold.tests.get(at.nodeid)
            duration = attempt.overrun.seconds if attempt.overrun and at.kind == "timeout" else 0.0
            if state is not None and at.kind == "crash":
                duration = state.duration
            self.state.put(
                at.nodeid,
                outcome,
                duration=duration,
                message=f"{outcome}: {what} ({diagnosis['hint'] or ''})",
                crash=crash["id"],
                attempt=attempt.index,
            )
        self.listener.crash(
            self.row.name, at.nodeid, outcome=outcome, phase=at.phase, what=what, fingerprint=diagnosis["fingerprint"]
        )

    def _deadline(self, attempt: AttemptResult) -> float | None:
        """The deadline that passed, as the headline says it: TIMEOUT after N s."""
        if attempt.overrun is None:
            return None
        if attempt.overrun.activity == "run":
            return self.row.run_timeout
        if attempt.overrun.activity in PROCESS_PHASES:
            return max(self.row.test_timeout, PHASE_MIN)
        return self.row.test_timeout

    def _worker_crashes(self, attempt: AttemptResult, targets: Sequence[str]) -> None:
        """A failed test whose output shows a process dying in native code: a crash too.

        The test's own process ended normally (``BrokenProcessPool``, a failed assert on a
        worker's exit code); the worker's signal line, native stack or fatal line is in the
        test's slice of the output, and gets the fingerprint the same crash gets anywhere.
        """
        fold = attempt.fold
        started = sorted((state.seq, n) for n, state in fold.tests.items() if state.seq is not None)
        for k, (seq, nodeid) in enumerate(started):
            record = self.state.results.get(nodeid)
            begin = attempt.offsets.get(seq)
            if record is None or record["outcome"] not in ("failed", "error") or begin is None:
                continue
            end = attempt.offsets.get(started[k + 1][0], attempt.log_end) if k + 1 < len(started) else attempt.log_end
            diagnosis = diagnostics.diagnose_output(crashes.read_log(self.log_path, begin, end), redactor=self.redactor)
            if diagnosis is None:
                continue
            crash = CrashRecord(
                id=f"{self.row.name}-{len(self.state.crashes) + 1}",
                kind="worker_crash",
                phase="test",
                nodeid=nodeid,
                when=None,
                attempt=attempt.index,
                diagnosis=diagnosis,
                classification="unknown",
                reruns=[],
                repro=self._repro(nodeid, targets),
                issue=None,
            )
            self.state.crashes.append(crash)
            record["crash"] = crash["id"]
            what = diagnosis["signal_name"] or "a native crash"
            self.listener.crash(
                self.row.name,
                nodeid,
                outcome="worker_crash",
                phase="test",
                what=f"{what} in a process it started",
                fingerprint=diagnosis["fingerprint"],
            )

    def _forked_copies(self, attempt: AttemptResult) -> None:
        """A test whose forked copy returned into pytest (the child ended that copy): an error.

        Under plain pytest the copy would have run the rest of the session again; its
        outcome in the real process is kept in the message.
        """
        for named in crashes.forked_copies(self.log_path, attempt.log_start, attempt.log_end):
            module = _imported(named, attempt.fold.collected or [], self.redactor)
            if module is not None:
                # no test ran: the module whose import forked is the error, beside its tests
                message = (
                    "a process forked while this module was imported returned into pytest instead of ending "
                    "with os._exit(); device-matrix ended it before it collected and ran the session again"
                )
                self.state.put(module, "error", duration=0.0, message=message, attempt=attempt.index)
                self.listener.note(self.row.name, f"{module}: a forked copy of the test process returned into pytest")
                continue
            nodeid = next((n for n in self.state.results if self.redactor.text(n) == named), None)
            record = self.state.results.get(nodeid or "")
            if nodeid is None or record is None or record["attempt"] != attempt.index or record["crash"]:
                continue
            was = record["outcome"]
            message = (
                "a process this test forked returned into pytest instead of ending with os._exit(); "
                f"device-matrix ended it before it ran other tests (the test itself: {was})"
            )
            self.state.put(nodeid, "error", duration=record["duration"], message=message, attempt=attempt.index)
            self.listener.note(self.row.name, f"{named}: a forked copy of the test process returned into pytest")

    def _cores(self, attempt: AttemptResult) -> list[Path]:
        folders = {self.cfg.project_root, attempt.folder, *(Path(p) for p in attempt.fold.cwds)}
        return crashes.new_cores(folders, attempt.started_at)

    def _rerun_crashes(
        self, executor: Executor, targets: Sequence[str], reader: crashes.CoreReader, deadline: float
    ) -> None:
        if self.cfg.crash_reruns <= 0:
            return
        for crash in self.state.crashes:
            nodeid = crash["nodeid"]
            if crash["kind"] != "crash" or nodeid is None or crash["phase"] != "test" or crash["reruns"]:
                continue
            classification: Classification = "deterministic"
            for _ in range(self.cfg.crash_reruns):
                if time.monotonic() > deadline:
                    return
                # alone: its own file is the only module imported
                script = self._crash_script.get(crash["id"])
                attempt = self._attempt(
                    executor, "rerun", [nodeid.split("::", 1)[0]], [nodeid], deadline, script=script
                )
                rerun = self._rerun_record(attempt, nodeid)
                reader.attach(None, self._cores(attempt))
                crash["reruns"].append(rerun)
                if rerun["outcome"] not in ("crashed", "timeout"):
                    classification = "flaky"
                    break
            crash["classification"] = classification
            if classification == "flaky" and crash["id"] not in self._crash_script:
                # alone it passed: the repro runs it with the neighbours it crashed beside
                crash["repro"] = self._repro(None, self._crash_targets.get(crash["id"], targets))
            self.listener.note(self.row.name, f"{nodeid} crash is {classification} ({len(crash['reruns'])} rerun(s))")

    def _rerun_record(self, attempt: AttemptResult, nodeid: str) -> RerunRecord:
        state = attempt.fold.tests.get(nodeid)
        fingerprint = None
        if attempt.abnormal and state is not None and not state.finished:
            outcome: Outcome = "timeout" if attempt.overrun else "crashed"
            at = CrashAt("test", nodeid, "timeout" if attempt.overrun else "crash")
            fingerprint = crashes.diagnose(attempt, at, self.log_path, self.redactor)["fingerprint"]
        elif state is not None and state.finished:
            outcome = final_outcome(state)[0]
        else:
            outcome = "not_run"
        return RerunRecord(
            outcome=outcome,
            returncode=attempt.returncode,
            signal_name=diagnostics.signal_name(attempt.signal),
            fingerprint=fingerprint,
            duration=round(attempt.duration, 3),
        )

    # --- what the child gets --------------------------------------------------------

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
            root = self.cfg.project_root
            targets.append(str(path.relative_to(root)) if path.is_relative_to(root) else str(path))
        for script in self._scripts():
            if not (self.cfg.project_root / script.file).is_file():
                raise ConfigError(
                    f"script {script.file!r} of row {self.row.name!r} does not exist",
                    tip="Script files are relative to the project root; fix the path or remove the entry.",
                )
        if not targets and not self._scripts():
            raise ConfigError(
                f"row {self.row.name!r} has no suites to run",
                tip="List suites in the row's `suites` (or scripts in `scripts`), or pass --test.",
            )
        return targets

    def _executor(self) -> Executor:
        if self.plan.mode == "container":
            assert self.plan.engine is not None
            root = self.cfg.project_root.resolve()
            results = self.cfg.results_dir.resolve()
            return ContainerExecutor(
                self.plan.engine,
                self.row,
                env_allowlist=self.cfg.env_allowlist,
                extra_mounts=[] if results.is_relative_to(root) else [results],
            )
        if self.options.python is not None and shutil.which(self.options.python) is None:
            raise EnvironmentProblem(
                f"--python {self.options.python}: no such interpreter",
                tip="Pass the path of a Python that has pytest (and the row's packages), or leave it out.",
            )
        return LocalExecutor(self.options.python)

    def _child_env(self) -> dict[str, str]:
        env = dict(self.row.env)
        env.setdefault("PJRT_DEVICE", self.row.pjrt_device)
        env[ENV_DEVICE] = self.row.name
        env[ENV_SETTINGS] = json.dumps(dict(self.row.settings), sort_keys=True)
        env[ENV_DISABLE_LIST] = str(self.cfg.disable_list)
        env[ENV_MARKERS] = "1"
        env.update(self.options.slot_env)
        env["PYTHONUNBUFFERED"] = "1"
        # no colour codes in logs, records, junit or issue bodies
        env["PY_COLORS"] = "0"
        env["NO_COLOR"] = "1"
        return env

    def _args(self, targets: Sequence[str]) -> list[str]:
        return [
            *targets,
            "--rootdir",
            str(self.cfg.project_root),
            "-p",
            "no:cacheprovider",
            "-p",
            "no:faulthandler",
            # the runner watches one process; xdist workers it cannot (see refuse_xdist)
            "-p",
            "no:xdist",
            # Native code writes to fd 2: fd-level output must reach the run log, where a
            # crash's native stack and fatal lines can be read after the process died.
            # tee-sys also passes print() output through while keeping it for reports.
            "--capture=tee-sys",
            # a module that fails to import is recorded as an error; the others still run
            "--continue-on-collection-errors",
            "-o",
            "console_output_style=classic",
            option(OPT_DEVICE, self.row.name),
            option(OPT_DISABLE_LIST, str(self.cfg.disable_list)),
            *([OPT_ENV] if self._env_from_child else []),
            *self.row.pytest_args,
            *self.options.pytest_args,
            *(f"--ignore={path}" for path in self._ignored),
        ]

    def _repro(self, nodeid: str | None, targets: Sequence[str]) -> str:
        env: dict[str, str | None] = dict(self.row.env)
        env.setdefault("PJRT_DEVICE", self.row.pjrt_device)
        env[ENV_DEVICE] = self.row.name
        root = str(self.cfg.project_root)
        container = None
        python = self.options.python or sys.executable
        if self.plan.mode == "container":
            assert self.plan.engine is not None
            python = CONTAINER_PYTHON
            container = Container(Path(self.plan.engine).name, self.row.image, (f"{root}:{root}",))
            # allowlisted variables come from the host: named, never their values
            env.update(dict.fromkeys(self.cfg.env_allowlist))
        return repro_command(
            [nodeid] if nodeid else list(targets),
            python=python,
            workdir=root,
            env=env,
            container=container,
            nox_session=self.row.name,
        )

    def _script_args(self, script: Script) -> list[str]:
        env = [OPT_ENV] if self._env_from_child else []
        return [option(OPT_DEVICE, self.row.name), *env, script.file, *script.args]

    def _script_repro(self, script: Script, nodeid: str | None) -> str:
        """``python FILE ARGS [Class.test]``: the script as upstream runs it, with the row's variables."""
        env = {**self.row.env, "PJRT_DEVICE": self.row.env.get("PJRT_DEVICE", self.row.pjrt_device), **script.env}
        test = [".".join(nodeid.split("::")[1:])] if nodeid and "::" in nodeid else []
        python = CONTAINER_PYTHON if self.plan.mode == "container" else (self.options.python or sys.executable)
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
        command = " ".join(x for x in (assigns, shlex.join([python, script.file, *script.args, *test])) if x)
        return f"cd {shlex.quote(str(self.cfg.project_root))} && {command}"

    def _snapshot_environment(self) -> threading.Thread | None:
        if self._env_from_child:
            return None  # the child takes its own snapshot (--dm-env)

        def snap() -> None:
            from device_matrix.diagnostics.environment import snapshot

            env = dict(os.environ)
            env.update(self._child_env())
            self._local_env = snapshot(env)

        # the child is this interpreter: take the snapshot here, on the other core
        thread = threading.Thread(target=snap, daemon=True)
        thread.start()
        return thread

    # --- the record -----------------------------------------------------------------

    def _write(self, status: RowStatus, reason: str | None, *, final: bool = True) -> RunRecord:
        if self._lost:
            # the record stays truthful: what it cannot show any more is said
            lost = "evidence " + "; ".join(self._lost)
            reason = f"{reason}; {lost}" if reason else lost
        if not self.state.environment and self._local_env:
            self.state.environment = dict(self._local_env)
        record = self.state.to_record(
            row=self.row.name,
            pjrt_device=self.row.pjrt_device,
            status=status,
            reason=reason,
            mode=self.plan.mode,
            image=self.row.image or None,
            suites=list(self.options.suites or self.row.suites),
            started_at=self._started_iso,
            duration=time.monotonic() - self._t0,
            run_url=self.options.run_url,
            runner_pid=os.getpid(),
        )
        if self.options.command:
            record["command"] = list(self.options.command)
        if self.options.spread is not None:
            record["spread"] = SpreadRef(**self.options.spread)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            if final:
                write_junit(self.dir / "junit.xml", record, self.state.locations)
                jsonreport.write(
                    self.dir / "report.json",
                    jsonreport.build(record, self.state.phases, self.state.locations, self.cfg.project_root),
                )
            write_json_atomic(self.dir / "run.json", record)
        except OSError as exc:
            raise self._unwritable(exc) from exc
        return record


def _imported(named: str, collected: Sequence[str], redactor: Redactor) -> str | None:
    """The module or directory a forked copy's note names as imported when it forked."""
    before, _, after = FORKED_AT_IMPORT.partition("{nodeid}")
    if not (named.startswith(before) and named.endswith(after)):
        return None
    name = named[len(before) : len(named) - len(after)]
    for nodeid in collected:
        path = nodeid.split("::", 1)[0]
        for candidate in (path, *(str(parent) for parent in Path(path).parents if str(parent) != ".")):
            if redactor.text(candidate) == name:
                return candidate
    return None


class _Progress:
    """Journal events to the listener: progress lines and the running test."""

    def __init__(self, runner: RowRunner, purpose: Purpose) -> None:
        self.runner = runner
        self.quiet = purpose == "rerun"

    def journal_event(self, event: dict[str, Any]) -> None:
        r = self.runner
        kind = event["e"]
        if self.quiet:
            return
        if kind == "collected":
            # every process's tests once: a resume collects some again, a script its own
            r.collected.update(event["nodeids"])
            r.total = len(r.collected)
        elif kind == "start":
            r.listener.test_running(r.row.name, event["nodeid"])
        elif kind == "report":
            when, outcome = event["when"], event["outcome"]
            if outcome == "rerun" or event.get("sub") is not None:
                return  # the test runs again, or a subtest: the test's own report is the one counted
            failed_phase = outcome == "failed" and when != "call"
            if when == "call" or failed_phase or (when == "setup" and outcome == "skipped"):
                shown = outcome
                if event.get("wasxfail") is not None:
                    shown = "xfailed" if outcome == "skipped" else "xpassed"
                elif failed_phase:
                    shown = "error"
                r.done += 1
                r.listener.test_done(
                    r.row.name,
                    r.redactor.text(event["nodeid"]),
                    shown,
                    duration=float(event["duration"]),
                    done=r.done,
                    total=r.total,
                )
