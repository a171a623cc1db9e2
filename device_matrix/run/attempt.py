"""Launch and watch one pytest process: the journal, the output, the deadlines.

One attempt is one child. Its journal arrives through a FIFO in the attempt's folder
whose name the child removes once it has opened it; a reader thread feeds every line
to the attempt's :class:`~device_matrix.run.journal.Fold` and keeps a copy in
``journal.jsonl``, redacted event by event. The output goes through the redacting pump
into the row's log; the stacks faulthandler writes are redacted once the child is done.

Deadlines: whatever the child is doing (starting, importing a test module, running a
test, exiting after its session) may last ``test_timeout`` seconds; the row as a whole
``run_timeout``. When one passes, the fold is frozen first, so the test (or module)
that was running at that moment is the one recorded whatever the child does in the
moments after; then every thread's stack is asked for (SIGUSR1) and the child ended.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import secrets
import shlex
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from device_matrix import diagnostics
from device_matrix.diagnostics import outputlog
from device_matrix.executors.base import Child, Executor, LaunchSpec
from device_matrix.redact import Redactor, remember_values
from device_matrix.run.journal import Activity, Fold
from device_matrix.run.pump import BATCH_WAIT, SMALL_READ, OutputPump
from device_matrix.wire import ENV_ATTEMPT, OPT_ENV, attempt_args, write_select

Purpose = Literal["collect", "run", "resume", "rerun"]
HANG_DUMP_GRACE = 2.0  # seconds for faulthandler to write every thread's stack
PIPE_SIZE = 1 << 20  # the journal FIFO's buffer: a fast child never waits for the reader
# starting pytest (imports, plugins, conftest.py importing torch_xla), importing one test
# module and exiting may take longer on a busy host than a short test_timeout allows a
# test: these phases of the process itself are never given less than Limits.phase_min
# (the configuration's phase_timeout_min)
PROCESS_PHASES = frozenset({"startup", "collecting", "exit"})


class Interrupted(BaseException):
    """The runner got SIGINT, SIGTERM or SIGHUP (raised by the handler of ``cli run``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.attempt: AttemptResult | None = None


INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def interrupts_raise() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (once): what runs ends its
    children on the way out (``with`` a child, ``finally``) and writes what it knows."""
    fired: list[int] = []

    def handler(signum: int, frame: object) -> None:
        if fired:
            return  # already stopping: let the cleanup finish
        fired.append(signum)
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in INTERRUPT_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class Progress(Protocol):
    """Where an attempt reports what it sees while the child runs."""

    def journal_event(self, event: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class Overrun:
    """A deadline that passed: what was going on, and for how long."""

    activity: Activity | Literal["run"]
    name: str | None  # the test's nodeid, or the module being imported
    seconds: float


@dataclass
class AttemptResult:
    index: int
    purpose: Purpose
    returncode: int
    fold: Fold
    overrun: Overrun | None
    duration: float
    ended: float  # the runner's monotonic clock when the child was seen to end
    selected: int | None
    folder: Path
    fault: Path
    log_start: int
    log_end: int
    offsets: dict[int, int]
    started_at: float  # wall clock, for the age of core files
    command: str
    output_error: OSError | None = None
    cut: int = 0
    ended_by_runner: bool = False  # the runner ended it while it ran (a deadline, a broken journal)

    @property
    def signal(self) -> int | None:
        return diagnostics.signal_from_returncode(self.returncode)

    @property
    def abnormal(self) -> bool:
        """Not a process that ran its session to the end and exited by itself."""
        return (
            self.overrun is not None or self.fold.broken is not None or not self.fold.ended or self.signal is not None
        )


@dataclass(frozen=True)
class AttemptSpec:
    """One attempt: its place among the run's, why it runs, the tests it selects, and its
    child as the executor is given it (#41: one spec of a child, which the attempt completes
    with its journal, fault file, selection and token: :func:`_launch_spec`)."""

    index: int
    purpose: Purpose
    child: LaunchSpec  # python -m MODULE (pytest, or a script's launcher), the row's arguments, variables, folders
    select: Sequence[str] | None


@dataclass(frozen=True)
class Limits:
    test_timeout: float
    phase_min: float  # seconds at least for a phase of the process itself (PROCESS_PHASES)
    run_deadline: float  # monotonic
    poll: float = 0.05
    max_log_bytes: int | None = None


@contextlib.contextmanager
def _journal_fifo(path: Path) -> Iterator[tuple[int, int]]:
    """A FIFO at ``path``: (read end, a write end of our own that keeps it from EOF)."""
    path.unlink(missing_ok=True)
    os.mkfifo(path, 0o600)
    read_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    keep_fd = os.open(path, os.O_WRONLY)
    os.set_blocking(read_fd, True)
    with contextlib.suppress(OSError):
        fcntl.fcntl(read_fd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    try:
        yield read_fd, keep_fd
    finally:
        for fd in (read_fd, keep_fd):
            with contextlib.suppress(OSError):
                os.close(fd)
        path.unlink(missing_ok=True)


class _JournalReader:
    """Reads the FIFO until every writer is gone; feeds the fold; keeps a redacted copy.

    A child in an environment of its own (a container, another interpreter) names its own
    secret values in its first event (``session``): from then on every redaction of this
    process scrubs them (#22), and ``learned`` tells the output pump, which holds the
    child's output until then, that it may write.
    """

    def __init__(self, fd: int, fold: Fold, copy: Path, redactor: Redactor, learned: threading.Event) -> None:
        self.fd = fd
        self.fold = fold
        self.redactor = redactor
        self.learned = learned
        self.events: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self.error: OSError | None = None
        try:
            self._copy: Any = copy.open("w", encoding="utf-8")
        except OSError as exc:
            self.error, self._copy = exc, None
        self._thread = threading.Thread(target=self._run, name="device-matrix-journal", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        pending = b""
        try:
            while True:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    break
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()  # a torn last line (a death mid-write) is never fed
                for line in lines:
                    event = self.fold.feed(line)
                    if event is not None:
                        self._learn(event)
                        self.events.put(event)
                # one test for the whole read, not one per line: the copy's cost
                # stays off the child's per-test budget
                self._keep(b"\n".join(lines))
                if len(chunk) < SMALL_READ:
                    time.sleep(BATCH_WAIT)  # a trickle: see pump.SMALL_READ (the FIFO holds 1 MiB)
        except OSError:
            pass
        finally:
            self.learned.set()
            if self._copy is not None:
                with contextlib.suppress(OSError):
                    self._copy.close()

    def _learn(self, event: dict[str, Any]) -> None:
        if event["e"] == "session" and isinstance(event.get("secrets"), list):
            remember_values(event["secrets"])
        self.learned.set()  # the first event is the session's: nothing comes before it

    def _keep(self, lines: bytes) -> None:
        if self._copy is None or self.error is not None or not lines:
            return
        text = lines.decode("utf-8", "replace")
        events = text.split("\n")
        # as it came when every line is an event of ours (the child's writer starts each so)
        # and nothing in the read could match; else line by line, so the copy stays JSON
        ours = all(line.startswith('{"e":') and line.endswith("}") for line in events)
        if not ours or '"secrets"' in text or not self.redactor.clean_json(text):
            text = "\n".join(_copy_line(line, self.redactor) for line in events)
        try:
            self._copy.write(text + "\n")
            self._copy.flush()  # on disk at once: the copy names the running test even if the runner is killed (#23)
        except OSError as exc:
            self.error = exc

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _copy_line(line: str, redactor: Redactor) -> str:
    """One line of the journal's copy, redacted by value: JSON still (a line that is not
    JSON is kept as a JSON string); a child's own secret values are never copied."""
    try:
        event = json.loads(line)
    except ValueError:
        return json.dumps(redactor.text(line))
    if isinstance(event, dict):
        event.pop("secrets", None)
    return json.dumps(redactor.data(event), separators=(",", ":"))


def _redact_in_place(path: Path, redactor: Redactor) -> None:
    """A file the child wrote itself (faulthandler's stacks), redacted once it is done."""
    with contextlib.suppress(OSError):
        text = path.read_text("utf-8", "replace")
        clean = redactor.text(text)
        if clean != text:
            path.write_text(clean, "utf-8")


def run_attempt(
    executor: Executor,
    spec: AttemptSpec,
    *,
    folder: Path,
    log_path: Path,
    redactor: Redactor,
    limits: Limits,
    progress: Progress,
    tell_end: bool = True,
) -> AttemptResult:
    """Run one pytest child to its end (or its deadline) and say what happened; ``tell_end``:
    write how it ended into the log (else its caller does, with its crash: #31)."""
    folder.mkdir(parents=True, exist_ok=True)
    fifo, fault, select_file = folder / "journal.fifo", folder / "faulthandler.txt", folder / ".select"
    fault.write_bytes(b"")
    launch = _launch_spec(spec, fifo=fifo, fault=fault, select_file=select_file)
    command = shlex.join(executor.command_for(launch))
    fold = Fold()
    with log_path.open("ab") as log:
        log.write(redactor.text(outputlog.attempt_header(spec.index, spec.purpose, command)).encode())
    read_out, write_out = os.pipe()
    # a child in its own environment names its secrets first: its output waits for them
    learned = threading.Event()
    own_env = OPT_ENV in spec.child.pytest_args
    if not own_env:
        learned.set()
    pump = OutputPump(read_out, log_path, redactor, max_bytes=limits.max_log_bytes, hold=learned if own_env else None)
    started, started_wall = time.monotonic(), time.time()
    ended: float | None = None
    overrun: Overrun | None = None
    interrupted: Interrupted | None = None
    child: Child | None = None
    with _journal_fifo(fifo) as (read_fd, keep_fd):
        reader = _JournalReader(read_fd, fold, folder / "journal.jsonl", redactor, learned)
        try:
            with os.fdopen(write_out, "wb", buffering=0) as child_out:
                child = executor.launch(launch, child_out)
            pump.begin()
            with child:
                overrun = _watch(child, fold, reader, limits=limits, progress=progress, fault=fault)
                ended = time.monotonic()
        except Interrupted as exc:
            interrupted = exc
        finally:
            # every writer is gone (the child's group was ended): let the reader drain
            with contextlib.suppress(OSError):
                os.close(keep_fd)
            reader.join(5.0)
            _drain(reader, progress)
            pump.finish(2.0)
            select_file.unlink(missing_ok=True)
            _redact_in_place(fault, redactor)
    result = AttemptResult(
        index=spec.index,
        purpose=spec.purpose,
        returncode=child.wait() if child is not None else -1,
        fold=fold,
        overrun=overrun,
        duration=time.monotonic() - started,
        ended=time.monotonic() if ended is None else ended,
        selected=len(spec.select) if spec.select is not None else None,
        folder=folder,
        fault=fault,
        log_start=pump.start,
        log_end=pump.position(),
        offsets=dict(pump.offsets),
        started_at=started_wall,
        command=command,
        output_error=pump.error or reader.error,
        cut=pump.cut,
        ended_by_runner=child is not None and child.ended_alive,
    )
    if child is not None and (tell_end or interrupted is not None):
        outputlog.append_quietly(log_path, outputlog.attempt_end(result), redactor)
    if interrupted is not None:
        interrupted.attempt = result
        raise interrupted
    return result


def _launch_spec(spec: AttemptSpec, *, fifo: Path, fault: Path, select_file: Path) -> LaunchSpec:
    """The attempt's child: its spec, with the journal, the fault file, the selection and the token."""
    # the real nodeids, which may hold anything a parametrize id holds: the child removes
    # the file once read (and the runner after the attempt), so it never stays in results
    if spec.select is not None:
        write_select(select_file, spec.select)
    args = attempt_args(journal=fifo, faulthandler=fault, select=select_file if spec.select is not None else None)
    token = secrets.token_hex(8)
    child = spec.child
    return replace(child, pytest_args=[*args, *child.pytest_args], env={**child.env, ENV_ATTEMPT: token}, token=token)


def _drain(reader: _JournalReader, progress: Progress) -> None:
    while True:
        try:
            event = reader.events.get_nowait()
        except queue.Empty:
            return
        progress.journal_event(event)


def _watch(
    child: Child, fold: Fold, reader: _JournalReader, *, limits: Limits, progress: Progress, fault: Path
) -> Overrun | None:
    # a thread blocks in wait(): the end of the child is seen at once, not at the next poll
    exited = threading.Event()

    def reap() -> None:
        child.wait()
        exited.set()

    threading.Thread(target=reap, name="device-matrix-reap", daemon=True).start()
    while not exited.wait(limits.poll):
        _drain(reader, progress)
        activity, _, since = fold.activity()
        now = time.monotonic()
        limit = max(limits.test_timeout, limits.phase_min) if activity in PROCESS_PHASES else limits.test_timeout
        if now - since > limit:
            return _end_overrun(child, fold, fault, exited, run=None)
        if now > limits.run_deadline:
            return _end_overrun(child, fold, fault, exited, run="run")
        if fold.broken is not None:
            # nothing the child says can be believed any more: it has to end
            child.end()
            break
    _drain(reader, progress)
    return None


def _end_overrun(
    child: Child, fold: Fold, fault: Path, exited: threading.Event, *, run: Literal["run"] | None
) -> Overrun:
    kind, name, seconds = fold.freeze()  # from now on the child's events change nothing
    # every thread's Python stack (faulthandler on SIGUSR1), then the whole group
    size = _size(fault)
    child.send(signal.SIGUSR1)
    deadline = time.monotonic() + HANG_DUMP_GRACE
    while time.monotonic() < deadline and not exited.wait(0.05):
        grown = _size(fault)
        if grown > size:
            exited.wait(0.2)  # the rest of the dump: every thread
            break
    child.end()
    return Overrun(run or kind, name, seconds)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
