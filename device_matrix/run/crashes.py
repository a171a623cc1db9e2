"""Crash evidence: from an attempt to a CrashRecord (diagnosis, core file, repro command).

:func:`crash_record` and :func:`attempt_record` are the one constructors of a crash's and
an attempt's record (a run's, a gang's, a dead runner's post-mortem: #31);
:func:`abnormal_end` makes the record of an attempt that died or hung,
:func:`worker_crashes` finds the crashes of processes a failed test started,
:func:`rerun_record` says what a rerun of a crashed test showed. :class:`Repro` writes
the command that reruns a crash as the run ran it, and :class:`CoreReader` reads core
files with gdb off the critical path. :class:`Evidence` is what a crash leaves in the
run's state (its record, its test's outcome, output.log, the listener), given the few
values of the run it needs: :func:`record_crash`, :func:`record_plugin_crashes`,
:func:`record_worker_crashes`, :func:`record_forked_copies`.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import re
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, TypeAlias

from device_matrix import diagnostics
from device_matrix.child.journal import FORKED_AT_IMPORT, FORKED_COPY_NOTE
from device_matrix.config import Row, Script
from device_matrix.diagnostics import core as core_files
from device_matrix.diagnostics import fingerprint as fp
from device_matrix.diagnostics import outputlog
from device_matrix.diagnostics.parse import parse_pystack
from device_matrix.diagnostics.repro import container_repro_command, repro_command
from device_matrix.executors.base import LaunchSpec
from device_matrix.executors.container import ContainerExecutor
from device_matrix.records.outcomes import CRASHING_OUTCOMES, RAISED_OUTCOMES
from device_matrix.records.schema import (
    AttemptRecord,
    CrashDiagnosis,
    CrashPhase,
    CrashRecord,
    Outcome,
    PhaseFailure,
    RerunRecord,
    TestRecord,
)
from device_matrix.records.summary import crash_kind_label, failed_before_told
from device_matrix.redact import Redactor
from device_matrix.run.attempt import PROCESS_PHASES, AttemptResult, Purpose
from device_matrix.run.folder import RowFolder
from device_matrix.run.journal import TestState, final_outcome
from device_matrix.run.policy import CrashAt
from device_matrix.run.state import RunState
from device_matrix.skips.refs import normalize_issue
from device_matrix.wire import AS_SCRIPT_PYTEST_ARGS, ENV_DEVICE, FORKED_CORE_PREFIX, OPT_AS_SCRIPT, PLUGIN

CrashKind = Literal["crash", "timeout", "worker_crash"]

OUTPUT_TAIL = 2_000_000  # bytes of output a diagnosis reads: the end is where a crash speaks
SCAN_CHUNK = 8 << 20  # bytes of output read at a time when the whole of it is searched
_before, _, _after = FORKED_COPY_NOTE.partition("{nodeid}")
FORKED_COPY_RE = re.compile(re.escape(_before).encode() + rb"(.+?)" + re.escape(_after[:40]).encode())
# a core -> a folder holding the files it maps at their paths in the image, or why there is none
ImageFiles: TypeAlias = Callable[[Path], contextlib.AbstractContextManager[Path | str]]


def read_log(log: Path, start: int, end: int | None = None) -> str:
    """The log from ``start`` to ``end`` (its last OUTPUT_TAIL bytes)."""
    try:
        with log.open("rb") as fh:
            fh.seek(start)
            data = fh.read() if end is None else fh.read(max(0, end - start))
    except OSError:
        return ""
    return data[-OUTPUT_TAIL:].decode("utf-8", "replace")


def forked_copies(log: Path, start: int, end: int) -> list[str]:
    """The tests named by a forked copy of the test process as it was ended, in this output."""
    found: dict[str, None] = {}
    overlap = len(FORKED_COPY_NOTE) + 4096  # a note cut by a chunk's end is read whole next time
    try:
        with log.open("rb") as fh:
            pos = start
            while pos < end:
                fh.seek(pos)
                data = fh.read(min(SCAN_CHUNK, end - pos))
                if not data:
                    break
                for match in FORKED_COPY_RE.finditer(data):
                    found[match.group(1).decode("utf-8", "replace")] = None
                if pos + len(data) >= end:
                    break
                pos += max(1, len(data) - overlap)
    except OSError:
        return []
    return list(found)


def imported(named: str, collected: Sequence[str], redactor: Redactor) -> str | None:
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


def output_of(attempt: AttemptResult, log: Path, nodeid: str | None) -> str:
    """The output of ``nodeid`` in this attempt (from its start marker), or all of it."""
    state = attempt.fold.tests.get(nodeid) if nodeid else None
    start = attempt.log_start
    if state is not None and state.seq is not None:
        start = max(start, attempt.offsets.get(state.seq, start))
    return read_log(log, start, attempt.log_end)


class CoreReader:
    """gdb reads cores in the background while the run resumes; cores never stay."""

    def __init__(
        self,
        *,
        interpreter: str,
        redactor: Redactor,
        use_gdb: bool,
        keep: bool,
        image_files: ImageFiles | None = None,
    ) -> None:
        self.interpreter = interpreter
        self.redactor = redactor
        self.use_gdb = use_gdb
        self.keep = keep
        # a container's process: its executable and libraries are the image's, not the host's
        self.image_files = image_files
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="device-matrix-gdb")
        self._jobs: list[concurrent.futures.Future[None]] = []
        self._kept: list[tuple[CrashDiagnosis, Path, Path]] = []  # a kept core: as read, as written

    def attach(self, diagnosis: CrashDiagnosis | None, cores: list[Path]) -> None:
        """The first core goes with ``diagnosis``; any others (descendants') are removed.

        It is claimed at once (:func:`core.claim`), before the run resumes: the crash's rerun
        runs in the same folder, and the kernel replaces a core named ``core`` with the
        rerun's while gdb may still be about to read the first.
        """
        if not cores:
            if diagnosis is not None:
                diagnosis["gdb_frames_missing"] = no_core(diagnosis)
            return
        first, rest = cores[0], cores[1:]
        if not self.keep:
            for path in rest:
                with contextlib.suppress(OSError):
                    path.unlink()
        if diagnosis is None:
            if not self.keep:
                with contextlib.suppress(OSError):
                    first.unlink()
            return
        claimed = core_files.claim(first)
        if self.keep:
            self._kept.append((diagnosis, claimed, first))
        self._jobs.append(self._pool.submit(self._read, diagnosis, claimed, first))

    def _unread(self) -> str | None:
        """Why gdb is not run at all, or None."""
        if not self.use_gdb:
            return "gdb was not asked to read the core (--no-gdb)"
        if self.image_files is not None and shutil.which("gdb") is None:
            return "gdb is not installed where the runner runs"  # the image's files are not copied for nothing
        return None

    def _read(self, diagnosis: CrashDiagnosis, core: Path, name: Path) -> None:
        """gdb's view of ``core`` (claimed: written as ``name``) into ``diagnosis``."""
        read = functools.partial(
            diagnostics.read_core, diagnosis, core, executable=self.interpreter, redactor=self.redactor, keep=self.keep
        )
        unread = self._unread()
        if self.image_files is None or unread is not None:
            read(unread=unread)
        else:
            # gdb on the host's files under the image's names would print another program's stack
            with self.image_files(core) as sysroot:
                if isinstance(sysroot, str):
                    read(unread=f"the image's files could not be copied for gdb: {sysroot}")
                else:
                    read(sysroot=sysroot)
        if not self.keep:
            diagnosis["core_file"] = f"{name} (deleted after reading)"  # the name it was written with

    def close(self) -> None:
        for job in self._jobs:
            with contextlib.suppress(Exception):
                job.result()
        self._pool.shutdown()
        for diagnosis, claimed, name in self._kept:
            # the run's reruns are over: a kept core gets its name back unless a rerun's took it
            diagnosis["core_file"] = str(core_files.give_back(claimed, name))
        self._kept.clear()


NO_CORE = (
    "no core file was found: the process's RLIMIT_CORE was 0 (core_limit), or the host's "
    "/proc/sys/kernel/core_pattern sends cores elsewhere"
)
# the signals whose default action writes a core (signal(7)): any other end leaves none
DUMPS_CORE = frozenset(
    {"SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE", "SIGSEGV", "SIGXCPU", "SIGXFSZ", "SIGSYS"}
)


def no_core(diagnosis: CrashDiagnosis) -> str:
    """Why a crash has no core to read: how its process ended, else where cores go."""
    ended = diagnostics.signal_name(diagnostics.signal_from_returncode(diagnosis["exit_code"]))
    if ended is None and diagnosis["exit_code"] is not None:
        return "no core file: the process exited, it was not ended by a signal"
    if ended is not None and ended not in DUMPS_CORE:
        return f"no core file: the process was ended by {ended}, which writes none"
    return NO_CORE


def with_core_stack(
    diagnose_with: Callable[..., CrashDiagnosis], core: Path | None, redactor: Redactor
) -> CrashDiagnosis:
    """The diagnosis; where it holds no Python stack, made again with the one pystack reads
    from the crash's core (#39: a handler of the process, XLA's, took the signal before
    faulthandler could write it). Where none can be had, the record says why."""
    diagnosis = diagnose_with(core_stack=None)
    if diagnosis["python_stack"] is not None:
        return diagnosis
    if core is None:
        diagnosis["python_stack_missing"] = no_core(diagnosis)
        return diagnosis
    text, why = core_files.pystack_core(core)
    found = parse_pystack(text, core_files.crashed_thread(core)) if text else None
    if found is None:
        diagnosis["python_stack_missing"] = redactor.text(why or "pystack found no Python thread in the core")
        return diagnosis
    return diagnose_with(core_stack=found)


def own_core(cores: Sequence[Path], pid: int | None) -> Path | None:
    """The core of process ``pid`` among ``cores`` (newest first), never a descendant's: its
    stack is not the crash's; the newest when the process did not say its id."""
    if pid is None:
        return cores[0] if cores else None
    return next((core for core in cores if core_files.process_id(core) == pid), None)


def diagnose(
    attempt: AttemptResult, at: CrashAt, log: Path, redactor: Redactor, cores: Sequence[Path] = ()
) -> CrashDiagnosis:
    """The diagnosis of ``attempt``'s abnormal end ``at``; ``cores``: the cores it left, its own first."""
    try:
        fault_text = attempt.fault.read_text("utf-8", "replace")
    except OSError:
        fault_text = ""
    made = functools.partial(
        diagnostics.diagnose,
        returncode=attempt.returncode,
        fault_text=fault_text,
        output_text=output_of(attempt, log, at.nodeid if at.phase == "test" else None),
        redactor=redactor,
        timed_out=at.kind == "timeout",
    )
    # a process the runner ended (a deadline) leaves no core: its stacks were asked for
    diagnosis = with_core_stack(made, own_core(cores, attempt.fold.pid), redactor) if at.kind == "crash" else made()
    if attempt.fold.broken is not None and at.kind == "crash":
        if attempt.ended_by_runner:
            # the signal was the runner's own: no one else stopped it
            diagnosis["hint"] = f"device-matrix ended the process because its journal broke: {attempt.fold.broken}"
        else:
            note = f"the journal broke: {attempt.fold.broken}"
            diagnosis["hint"] = f"{diagnosis['hint']}; {note}" if diagnosis["hint"] else note
    return diagnosis


def crash_record(
    crash_id: str,
    *,
    kind: CrashKind,
    phase: CrashPhase,
    nodeid: str | None,
    when: str | None,
    attempt: int,
    diagnosis: CrashDiagnosis,
    repro: str,
    deadline: float | None = None,
) -> CrashRecord:
    """A new crash record: not classified, not rerun, linked to no issue yet.

    ``deadline`` (seconds) is kept for a timeout only: the deadline that passed.
    """
    return CrashRecord(
        id=crash_id,
        kind=kind,
        phase=phase,
        nodeid=nodeid,
        when=when,
        attempt=attempt,
        diagnosis=diagnosis,
        classification="unknown",
        reruns=[],
        repro=repro,
        issue=None,
        deadline=deadline if kind == "timeout" else None,
    )


def attempt_record(
    *,
    index: int,
    purpose: Purpose,
    returncode: int | None,
    duration: float,
    selected: int | None,
    finished: int,
    journal: str,
    log: str,
) -> AttemptRecord:
    """The one constructor of an attempt's record (a pytest process, a script's, a gang's
    rank): its signal is named from its return code (#31)."""
    return AttemptRecord(
        index=index,
        purpose=purpose,
        returncode=returncode,
        signal_name=diagnostics.signal_name(diagnostics.signal_from_returncode(returncode)),
        duration=round(duration, 3),
        selected=selected,
        finished=finished,
        journal=journal,
        log=log,
    )


def abnormal_end(
    crash_id: str,
    attempt: AttemptResult,
    at: CrashAt,
    diagnosis: CrashDiagnosis,
    repro: str,
    *,
    deadline: float | None,
) -> CrashRecord:
    """The record of an attempt that died or hung ``at`` a test, a module or a phase."""
    state = attempt.fold.tests.get(at.nodeid) if at.nodeid and at.phase == "test" else None
    when = None
    if state is not None:
        phases = [r.when for r in state.reports if r.sub is None]  # a subtest's report is inside the call
        when = "setup" if not phases else {"setup": "call", "call": "teardown"}.get(phases[-1], "teardown")
        if not phases and state.phase is not None:
            when = state.phase  # #29: a script's test journals its phase, its reports at its end
    crash = crash_record(
        crash_id,
        kind=at.kind,
        phase=at.phase,
        nodeid=at.nodeid,
        when=when,
        attempt=attempt.index,
        diagnosis=diagnosis,
        repro=repro,
        deadline=deadline,
    )
    failures = [
        PhaseFailure(
            when=r.when,
            sub=r.sub,
            outcome=r.outcome,
            cause=r.cause,
            message=r.longrepr,
            file=r.where[0] if r.where else None,
            line=r.where[1] if r.where else None,
        )
        for r in (state.reports if state is not None else [])
        if r.outcome in RAISED_OUTCOMES
    ]
    if failures:
        # every phase the journal saw is evidence: the test's own failure stays beside its crash
        crash["failed_before"] = failures
    return crash


def deadline_of(attempt: AttemptResult, *, test_timeout: float, run_timeout: float, phase_min: float) -> float | None:
    """The deadline that passed, as the headline says it: TIMEOUT after N s."""
    if attempt.overrun is None:
        return None
    if attempt.overrun.activity == "run":
        return run_timeout
    if attempt.overrun.activity in PROCESS_PHASES:
        return max(test_timeout, phase_min)
    return test_timeout


def worker_crashes(
    attempt: AttemptResult,
    results: Mapping[str, TestRecord],
    log: Path,
    redactor: Redactor,
    cores: Sequence[Path] = (),
) -> list[tuple[str, CrashDiagnosis, Path | None]]:
    """Failed tests whose output shows a process dying in native code: (nodeid, its
    diagnosis, the core read for its Python stack).

    The test's own process ended normally (``BrokenProcessPool``, a failed assert on a
    worker's exit code); the worker's signal line, native stack or fatal line is in the
    test's slice of the output, and gets the fingerprint the same crash gets anywhere.
    Where the worker printed no Python stack (a handler of its own took the signal, #39),
    it is read from a core another process than the attempt's left while the test ran.
    A worker that printed nothing at all (a subprocess without faulthandler) is known by
    its core alone: one another process wrote while the test ran gives its signal and stack.
    """
    found = []
    given: set[Path] = set()
    tests = attempt.fold.tests
    started = sorted((state.seq, n) for n, state in tests.items() if state.seq is not None)
    for k, (seq, nodeid) in enumerate(started):
        record = results.get(nodeid)
        begin = attempt.offsets.get(seq)
        if record is None or record["outcome"] not in RAISED_OUTCOMES or begin is None:
            continue
        end = attempt.offsets.get(started[k + 1][0], attempt.log_end) if k + 1 < len(started) else attempt.log_end
        text = read_log(log, begin, end)
        returncode = None
        if diagnostics.diagnose_output(text, redactor=redactor) is not None:
            until = tests[started[k + 1][1]].started_at if k + 1 < len(started) else None
            core = worker_core(cores, attempt.fold.pid, tests[nodeid].started_at, until)
        else:
            core = next(
                (c for c in others_cores(attempt, cores) if c not in given and test_of(attempt, c) == nodeid), None
            )
            if core is None:
                continue
            signum = core_files.signal_of(core)
            returncode = -signum if signum is not None else None
        if core is not None:
            given.add(core)
        made = functools.partial(
            diagnostics.diagnose, returncode=returncode, fault_text="", output_text=text, redactor=redactor
        )
        found.append((nodeid, with_core_stack(made, core, redactor), core))
    return found


CORE_CLOCK = 0.01  # seconds a core's time may lag the child's clock: the kernel's coarse clock, a tick (HZ >= 100)


def others_cores(attempt: AttemptResult, cores: Sequence[Path]) -> list[Path]:
    """The cores of processes other than the attempt's own (which its own crash's record takes);
    none when the attempt did not say its id."""
    pid = attempt.fold.pid
    return [] if pid is None else [core for core in cores if core_files.process_id(core) != pid]


def test_of(attempt: AttemptResult, core: Path) -> str | None:
    """The test that ran while ``core`` was written, by the times the journal gives its start
    and finish; None when no test ran then (an import, a fixture between tests, the exit)."""
    try:
        written = core.stat().st_mtime
    except OSError:
        return None
    ran = sorted(
        (state.started_at, n, state.finished_at)
        for n, state in attempt.fold.tests.items()
        if state.started_at is not None
    )
    return next((n for start, n, end in ran if start - CORE_CLOCK <= written and (end is None or written <= end)), None)


def worker_core(cores: Sequence[Path], pid: int | None, since: float | None, until: float | None) -> Path | None:
    """The newest of ``cores`` that a process other than ``pid`` left between ``since`` and
    ``until`` (wall clock, a second's slack; None: open)."""
    for core in cores:
        try:
            written = core.stat().st_mtime
        except OSError:
            continue
        if (since is not None and written < since - 1) or (until is not None and written > until + 1):
            continue
        if core_files.process_id(core) != pid:
            return core
    return None


@dataclass(frozen=True)
class PluginCrash:
    """A test's crash in a plugin's forked copy, as the runner reads it from the journal."""

    nodeid: str
    when: str
    diagnosis: CrashDiagnosis
    core: Path | None  # the copy's core, read for its Python stack
    said: str  # the plugin's own words ("running the test EXITED with status 3")


def plugin_crashes(attempt: AttemptResult, redactor: Redactor, cores: Sequence[Path] = ()) -> list[PluginCrash]:
    """Tests whose crash a plugin reported from the copy it forked (pytest-forked, #29),
    the diagnosis with the copy's signal, or the status it exited with, its stack and output.
    ``cores``: the attempt's core files; the copy's is the one its report names (#39), read
    for its Python stack where the copy wrote none: the plugin names only a core that says
    it is a copy's of its process, given to no earlier crash (``child/plugin.py``)."""
    found = []
    by_path = {str(core.resolve()): core for core in cores}
    for nodeid, state in attempt.fold.tests.items():
        for report in state.reports:
            if report.crash is None:
                continue
            signum, status = report.crash.get("signal"), report.crash.get("status")
            named = report.crash.get("core")
            # the copy's word names a file; only one of the cores found is read
            core = by_path.get(str(Path(named).resolve())) if isinstance(named, str) and named else None
            returncode = -signum if isinstance(signum, int) else status if isinstance(status, int) else None
            diagnosis = with_core_stack(
                functools.partial(
                    diagnostics.diagnose,
                    returncode=returncode,
                    fault_text=str(report.crash.get("fault") or ""),
                    output_text=str(report.crash.get("output") or ""),
                    redactor=redactor,
                ),
                core,
                redactor,
            )
            found.append(PluginCrash(nodeid, report.when, diagnosis, core, report.longrepr or ""))
    return found


def rerun_record(
    attempt: AttemptResult, nodeid: str, log: Path, redactor: Redactor, cores: Sequence[Path] = ()
) -> RerunRecord:
    """What a rerun of crashed test ``nodeid`` alone showed: its outcome, and a crash's
    fingerprint and its basis (``cores``: the rerun's core files, read as the original's were)."""
    state = attempt.fold.tests.get(nodeid)
    fingerprint = basis = None
    signal = diagnostics.signal_name(attempt.signal)
    if attempt.abnormal and state is not None and not state.finished:
        outcome: Outcome = "timeout" if attempt.overrun else "crashed"
        at = CrashAt("test", nodeid, "timeout" if attempt.overrun else "crash")
        diagnosis = diagnose(attempt, at, log, redactor, cores)
        # #29: the signal the process received, as the crash names it (not XLA's abort after it)
        fingerprint, basis = diagnosis["fingerprint"], diagnosis["fingerprint_basis"]
        signal = diagnosis["signal_name"] or signal
    elif state is not None and state.finished and any(r.crash is not None for r in state.reports):
        outcome = "crashed"  # in a plugin's forked copy (#29)
        diagnosis = next(c.diagnosis for c in plugin_crashes(attempt, redactor, cores) if c.nodeid == nodeid)
        fingerprint, basis, signal = diagnosis["fingerprint"], diagnosis["fingerprint_basis"], diagnosis["signal_name"]
    elif state is not None and state.finished:
        outcome = final_outcome(state)[0]
    else:
        outcome = "not_run"
    return RerunRecord(
        outcome=outcome,
        returncode=attempt.returncode,
        signal_name=signal,
        fingerprint=fingerprint,
        duration=round(attempt.duration, 3),
        fingerprint_basis=basis,
    )


def same_crash(crash: CrashRecord, rerun: RerunRecord) -> bool:
    """Whether a rerun crashed as ``crash`` did (#29): its signal, and its evidence judged on
    what both attempts could show (#39, :func:`fingerprint.same_crash`: a rerun that saw less,
    or more, is not another crash). A record written before reruns kept their basis: the
    fingerprint. A crash whose reruns end otherwise is not deterministic: the record keeps each view.
    """
    diagnosis = crash["diagnosis"]
    basis = rerun.get("fingerprint_basis")
    same = (
        fp.same_crash(diagnosis["fingerprint_basis"], basis)
        if basis is not None
        else rerun["fingerprint"] == diagnosis["fingerprint"]
    )
    return rerun["outcome"] in CRASHING_OUTCOMES and same and rerun["signal_name"] == diagnosis["signal_name"]


def cores_of(attempt: AttemptResult, project_root: Path, *, copies: bool = False) -> list[Path]:
    """The core files the attempt's processes left: in the project, its folder, any folder a
    test moved to. Those of a plugin's forked copies only with ``copies``: each is read
    with its test's crash (#39)."""
    folders = {project_root, attempt.folder, *(Path(p) for p in attempt.fold.cwds)}
    found = core_files.new_cores(folders, attempt.started_at)
    return found if copies else [core for core in found if not core.name.startswith(FORKED_CORE_PREFIX)]


@dataclass(frozen=True, kw_only=True)
class Repro:
    """The command that reruns a crash as the run ran it: its interpreter, folder and variables,
    or its container's own engine command (options, mounts, image: #21)."""

    row: Row
    project_root: Path
    python: str  # the interpreter the run used (--python, or the runner's own)
    launch: LaunchSpec  # the children's folders and core limit (a container's command mounts them)
    container: ContainerExecutor | None = None  # the row's container, its image checked
    pytest_args: Sequence[str] = ()  # the command line's, after the row's own

    @property
    def nox_session(self) -> str | None:
        """The row's nox session, offered as a second repro only where a noxfile has one (#24)."""
        try:
            noxfile = (self.project_root / "noxfile.py").read_text("utf-8", "replace")
        except OSError:
            return None
        return self.row.name if "device_matrix" in noxfile else None

    def _pytest_options(self) -> list[str]:
        """pytest's options as the run gave them: the same imports and collection (#24).

        The plugin by name where its options are given, and in a container (the image may
        lack device-matrix's entry point)."""
        as_script = [OPT_AS_SCRIPT, *AS_SCRIPT_PYTEST_ARGS] if self.row.as_script else []
        plugin = ["-p", PLUGIN] if as_script or self.container is not None else []
        return [*plugin, "-p", "no:cacheprovider", *as_script, *self.row.pytest_args, *self.pytest_args]

    def of_run(self, command: Sequence[str]) -> str:
        """The command that ran, from the project's folder (and the nox form where there is one)."""
        repro = f"cd {shlex.quote(str(self.project_root))} && {shlex.join(command)}"
        session = self.nox_session
        return f"{repro}\n# or: nox -s {session}" if session else repro

    def of(self, nodeid: str | None, targets: Sequence[str]) -> str:
        """pytest on ``nodeid`` (or, for a crash outside a test, on ``targets``), with the nox form."""
        env = dict(self.row.env)
        env.setdefault("PJRT_DEVICE", self.row.pjrt_device)
        env[ENV_DEVICE] = self.row.name
        tests = [nodeid] if nodeid else list(targets)
        if self.container is not None:
            # the run's own engine command, its options and mounts
            return container_repro_command(
                tests,
                launcher=self.container.repro_prefix(env, self.launch),
                pytest_args=self._pytest_options(),
                nox_session=self.nox_session,
            )
        return repro_command(
            tests,
            python=self.python,
            workdir=str(self.project_root),
            env=env,
            pytest_args=self._pytest_options(),
            nox_session=self.nox_session,
        )

    def of_script(self, script: Script, nodeid: str | None) -> str:
        """``python FILE ARGS [Class.test]``: the script as upstream runs it, with the row's variables."""
        row = self.row
        env = {**row.env, "PJRT_DEVICE": row.env.get("PJRT_DEVICE", row.pjrt_device), **script.env}
        if nodeid and script.variant:
            nodeid = nodeid.removesuffix(script.suffix)  # unittest names the test without it
        test = [".".join(nodeid.split("::")[1:])] if nodeid and "::" in nodeid else []
        script_argv = [script.file, *script.args, *test]
        if self.container is not None:
            return shlex.join([*self.container.repro_prefix(env, self.launch), *script_argv])
        assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()))
        command = " ".join(x for x in (assigns, shlex.join([self.python, *script_argv])) if x)
        return f"cd {shlex.quote(str(self.project_root))} && {command}"


# --- what a crash leaves in the run's state -------------------------------------------------


class CrashListener(Protocol):
    """What a crash tells the person watching the run (the run's listener has these)."""

    def crash(self, row: str, nodeid: str | None, *, outcome: str, phase: str, what: str, fingerprint: str) -> None: ...

    def note(self, row: str, text: str) -> None: ...


@dataclass(frozen=True)
class CrashOrigin:
    """What the process of a crash was given: for its reruns and its repro command."""

    targets: tuple[str, ...]
    script: Script | None = None


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """The few values of a run a crash's recorders need (#31: not the run itself, which
    builds this from its own, so that this module needs nothing of it)."""

    row: Row
    state: RunState
    folder: RowFolder
    redactor: Redactor
    repro: Repro
    listener: CrashListener
    origins: dict[str, CrashOrigin]  # crash id -> what its process was given (the run's own dict)
    reader: CoreReader | None
    project_root: Path
    phase_min: float  # the configuration's phase_timeout_min

    def next_id(self) -> str:
        return f"{self.row.name}-{len(self.state.crashes) + 1}"

    def tell(self, text: str) -> None:
        """The runner's own lines into output.log (diagnostics/outputlog.py): `diagnose` on the log
        alone names what the record has (#24)."""
        try:
            outputlog.append(self.folder.log, text, self.redactor)
        except OSError as exc:
            raise self.folder.unwritable(exc) from exc

    def cores(self, attempt: AttemptResult, *, copies: bool = False) -> list[Path]:
        """The core files ``attempt``'s processes left, newest first (see :func:`cores_of`)."""
        return cores_of(attempt, self.project_root, copies=copies)

    def attach_cores(self, diagnosis: CrashDiagnosis | None, attempt: AttemptResult) -> None:
        """The attempt's core goes with ``diagnosis``; None: every core it left is removed
        (a rerun's, its forked copies' too: their stacks were read)."""
        if self.reader is None:
            return
        cores = self.cores(attempt, copies=diagnosis is None)
        if diagnosis is not None:
            # the core the diagnosis was made from, never a descendant's: its stack is another process's
            own = own_core(cores, attempt.fold.pid)
            if own is None:
                self.reader.attach(None, cores)  # descendants' only: removed unread
            cores = [] if own is None else [own, *(c for c in cores if c != own)]
        self.reader.attach(diagnosis, cores)


def record_crash(
    ev: Evidence, attempt: AttemptResult, at: CrashAt, targets: Sequence[str], script: Script | None
) -> CrashRecord:
    """The crash the policy found in ``attempt``: its record, its test's outcome, the listener told."""
    state, row = ev.state, ev.row
    diagnosis = diagnose(attempt, at, ev.folder.log, ev.redactor, ev.cores(attempt))
    ev.attach_cores(diagnosis, attempt)
    nodeid = at.nodeid if at.phase == "test" else None
    crash = abnormal_end(
        ev.next_id(),
        attempt,
        at,
        diagnosis,
        ev.repro.of(nodeid, targets) if script is None else ev.repro.of_script(script, nodeid),
        deadline=deadline_of(
            attempt, test_timeout=row.test_timeout, run_timeout=row.run_timeout, phase_min=ev.phase_min
        ),
    )
    ev.origins[crash["id"]] = CrashOrigin(tuple(targets), script)
    state.crashes.append(crash)
    outcome: Outcome = "timeout" if at.kind == "timeout" else "crashed"
    what = crash_kind_label(crash)
    if at.nodeid is not None:
        test = attempt.fold.tests.get(at.nodeid)
        duration = attempt.overrun.seconds if attempt.overrun and at.kind == "timeout" else 0.0
        if test is not None and at.kind == "crash":
            duration = test.lasted(attempt.ended)
        before = "".join(f"\n\n{told}" for told in failed_before_told(crash))  # the test's own failure
        state.put(
            at.nodeid,
            outcome,
            duration=duration,
            message=f"{outcome}: {what} ({diagnosis['hint'] or ''}){before}",
            skip=_declared(crash, test),
            crash=crash["id"],
            attempt=attempt.index,
        )
    ev.listener.crash(
        row.name, at.nodeid, outcome=outcome, phase=at.phase, what=what, fingerprint=diagnosis["fingerprint"]
    )
    return crash


def _declared(crash: CrashRecord, test: TestState | None) -> Mapping[str, object] | None:
    """#41: the device xfail the crashed test declares on this row (its ``xfail_device``
    marker, or the disable list's xfail, as its process read it): the test's record keeps it,
    and its crash cites its issue, an expected crash linked as a skip's issue is."""
    meta = test.meta.get("device_skip") if test is not None else None
    if not isinstance(meta, Mapping) or meta.get("mode") != "xfail":
        return None
    crash["issue"] = normalize_issue(str(meta.get("issue") or ""))
    return meta


def record_plugin_crashes(ev: Evidence, attempt: AttemptResult, targets: Sequence[str]) -> None:
    """#29: a test that crashed in a plugin's forked copy (pytest-forked): the test's crash,
    with its signal, while its pytest process went on."""
    state = ev.state
    for found in plugin_crashes(attempt, ev.redactor, ev.cores(attempt, copies=True)):
        nodeid, diagnosis = found.nodeid, found.diagnosis
        if ev.reader is not None:
            # gdb's view of the copy, then the core goes; none: the record says why
            ev.reader.attach(diagnosis, [found.core] if found.core is not None else [])
        crash = crash_record(
            ev.next_id(),
            kind="crash",
            phase="test",
            nodeid=nodeid,
            when=found.when,
            attempt=attempt.index,
            diagnosis=diagnosis,
            repro=ev.repro.of(nodeid, targets),
        )
        ev.origins[crash["id"]] = CrashOrigin(tuple(targets), None)
        state.crashes.append(crash)
        ev.tell(outputlog.crash_line(crash))  # its process went on: a line of its own
        what = crash_kind_label(crash)
        hint = f" ({diagnosis['hint']})" if diagnosis["hint"] else ""
        record = state.results.get(nodeid)
        state.put(
            nodeid,
            "crashed",
            duration=record["duration"] if record else 0.0,
            message=f"crashed: {what}{hint}: {found.said}",  # the plugin's words: how the copy ended
            skip=_declared(crash, attempt.fold.tests.get(nodeid)),
            crash=crash["id"],
            attempt=attempt.index,
        )
        ev.listener.crash(
            ev.row.name, nodeid, outcome="crashed", phase="test", what=what, fingerprint=diagnosis["fingerprint"]
        )


def record_worker_crashes(ev: Evidence, attempt: AttemptResult, targets: Sequence[str]) -> None:
    """A failed test whose output or a core shows a process dying in native code: a crash too.
    The cores of other processes that no crash took are never left where they were written
    (:func:`record_stray_cores`)."""
    state = ev.state
    cores = ev.cores(attempt)
    found = worker_crashes(attempt, state.results, ev.folder.log, ev.redactor, cores)
    taken = {core for *_, core in found}
    record_stray_cores(ev, attempt, [core for core in others_cores(attempt, cores) if core not in taken])
    for nodeid, diagnosis, core in found:
        if ev.reader is not None and core is not None:
            ev.reader.attach(diagnosis, [core])  # gdb's view of the worker, then the core goes
        crash = crash_record(
            ev.next_id(),
            kind="worker_crash",
            phase="test",
            nodeid=nodeid,
            when=None,
            attempt=attempt.index,
            diagnosis=diagnosis,
            repro=ev.repro.of(nodeid, targets),
        )
        state.crashes.append(crash)
        state.results[nodeid]["crash"] = crash["id"]
        what = diagnosis["signal_name"] or "a native crash"
        ev.listener.crash(
            ev.row.name,
            nodeid,
            outcome="worker_crash",
            phase="test",
            what=f"{what} in a process it started",
            fingerprint=diagnosis["fingerprint"],
        )


def record_stray_cores(ev: Evidence, attempt: AttemptResult, cores: Sequence[Path]) -> None:
    """Cores of processes the attempt's tests started that no crash took: each is told (the
    record's ``warnings`` and the terminal: its process, its parent, its signal, the test that
    ran then or that none did) and removed. None is kept: a core holds its process's memory,
    its environment's secrets with it, which no redaction reaches. One written while a test
    ran that has no outcome yet (its process died under it) goes with that test's crash."""
    if ev.reader is None:
        return
    for core in cores:
        nodeid = test_of(attempt, core)
        record = ev.state.results.get(nodeid) if nodeid is not None else None
        if nodeid is not None and record is None:
            continue
        pid, parent, signal = core_files.process_id(core), core_files.parent_id(core), core_files.signal_of(core)
        ended = f"a process (pid {pid}, parent {parent}) ended by {diagnostics.signal_name(signal) or 'a signal'}"
        ev.reader.attach(None, [core])
        # the crash is told, never lost: the test expected it, or no test ran
        when = f"while {nodeid} ran ({record['outcome']})" if record is not None else "while no test ran"
        text = ev.redactor.text(f"{ended} {when} (attempt {attempt.index}); its core is removed")
        ev.state.warnings.append(text)
        ev.listener.note(ev.row.name, f"warning: {text}")


def record_forked_copies(ev: Evidence, attempt: AttemptResult) -> None:
    """A test whose forked copy returned into the test runner (the child ended that copy): an error.

    Under plain pytest the copy would have run the rest of the session again; its
    outcome in the real process is kept in the message.
    """
    state, redactor, row = ev.state, ev.redactor, ev.row.name
    for named in forked_copies(ev.folder.log, attempt.log_start, attempt.log_end):
        module = imported(named, attempt.fold.collected or [], redactor)
        if module is not None:
            # no test ran: the module whose import forked is the error, beside its tests
            message = (
                "a process forked while this module was imported returned into the test runner instead of ending "
                "with os._exit(); device-matrix ended it before it collected and ran the session again"
            )
            state.put(module, "error", duration=0.0, message=message, attempt=attempt.index)
            ev.listener.note(row, f"{module}: a forked copy of the test process returned into the test runner")
            continue
        nodeid = next((n for n in state.results if redactor.text(n) == named), None)
        record = state.results.get(nodeid or "")
        if nodeid is None or record is None or record["attempt"] != attempt.index or record["crash"]:
            continue
        was = record["outcome"]
        message = (
            "a process this test forked returned into the test runner instead of ending with os._exit(); "
            f"device-matrix ended it before it ran other tests (the test itself: {was})"
        )
        state.put(nodeid, "error", duration=record["duration"], message=message, attempt=attempt.index)
        ev.listener.note(row, f"{named}: a forked copy of the test process returned into the test runner")
