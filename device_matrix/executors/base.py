"""What the runner needs from a place to run a pytest child: one Protocol.

A child is a context manager: leaving the ``with`` block, by any path (a normal end, an
exception, an interrupt of the runner), ends its whole process group (SIGTERM, a grace
period, then SIGKILL) and then every process that still carries the attempt's token in
its environment, so a grandchild that ignores SIGTERM or left the group with setsid()
does not outlive the attempt.

A grandchild can also clear its environment (``env -i``) and leave the session: on Linux
the runner is a child subreaper (``PR_SET_CHILD_SUBREAPER``), so such an orphan is
reparented to the runner instead of init, and the end of the attempt kills and reaps
every child the runner adopted from it (see :func:`adopted_leftovers`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Literal, Protocol

from device_matrix.diagnostics.core import raise_core_limit
from device_matrix.wire import ENV_ATTEMPT

ExecutorName = Literal["local", "container"]
TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL
# the child's interpreter dumps a fatal signal's Python stack from its first instruction:
# pytest imports the conftest.py files of the folders it is given before any plugin is
# configured; the plugin moves the dumps into the attempt's file at configure
FAULTHANDLER_FROM_START = ("-X", "faulthandler")


@dataclass(frozen=True)
class LaunchSpec:
    """One child: the arguments of ``python -m MODULE``, its environment and folders."""

    pytest_args: Sequence[str]
    env: Mapping[str, str]  # the row's variables plus the runner's DEVICE_MATRIX_* ones
    workdir: Path  # the child's working directory: the project root, as under plain pytest
    project_root: Path
    core_limit: int | None  # bytes; None leaves the limit as it is
    token: str = ""  # DEVICE_MATRIX_ATTEMPT of this attempt's processes
    # what ``python -m`` runs: pytest, or the launcher of a test file run as a script
    module: str = "pytest"


class Child(Protocol):
    pid: int
    ended_alive: bool  # end() found it running: the runner, not the test, ended it

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send(self, sig: int) -> None:
        """Send ``sig`` to the test process only."""

    def end(self) -> int:
        """End the child, its group and every process of the attempt; its exit status."""

    def __enter__(self) -> Child: ...

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class Executor(Protocol):
    name: ExecutorName

    def launch(self, spec: LaunchSpec, output: BinaryIO) -> Child: ...

    def command_for(self, spec: LaunchSpec) -> list[str]:
        """The argv a user would paste to run ``spec`` by hand (for repro commands)."""

    def interpreter(self) -> str: ...


PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SWEEP_ROUNDS = 100  # rounds of 10 ms: an adopted orphan's own children are adopted in turn


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """``preexec_fn`` body (Linux): send this process ``sig`` when the process that started it dies.

    Without it a runner killed with SIGKILL leaves its pytest child running, and the row's
    lock free for another run beside it. A runner started by another (a shard's, a Ray
    task's) takes SIGTERM: it ends its own child and writes what it knows.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the runner's own handlers are all there is


def become_subreaper(on: bool = True) -> None:
    """Linux: orphans among this process's descendants are reparented to it, not to init.

    Process-wide: the runner runs one attempt at a time, and every sweep spares what is
    not born of the attempt (:func:`adopted_leftovers`). ``on=False`` undoes it, for a
    process whose orphans must escape it (a Ray worker: device_matrix.spread.ray_node).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: orphans go to init, and the token is all there is to find them


@dataclass(frozen=True)
class ProcStat:
    """What ``/proc/<pid>/stat`` says about a process that the sweep needs."""

    pid: int
    state: str  # Z: a zombie, waiting for its parent to reap it
    ppid: int
    session: int
    start: int  # clock ticks after boot


def proc_stat(pid: int, proc_root: Path = Path("/proc")) -> ProcStat | None:
    try:
        text = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name is in parentheses and may hold spaces or parentheses itself
    fields = text.rsplit(")", 1)[-1].split()
    try:
        return ProcStat(pid, fields[0], int(fields[1]), int(fields[3]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def adopted_leftovers(
    born_after: int, proc_root: Path = Path("/proc"), spare: frozenset[int] = frozenset()
) -> tuple[list[int], list[int]]:
    """What the attempt left with the runner: (processes to kill, adopted children to reap).

    An adopted child is a child of the runner that the runner did not start: its own
    children (gdb reading a core, the engine client, a tool the environment snapshot
    runs) stay in the runner's session, while everything the attempt started lives in
    the child's session or one it made with setsid(), and started after the child did.
    Its descendants are killed with it: one that respawns its children cannot outrun the
    sweep. ``spare``: children of ours still running (shards, ranks started side by side).
    """
    me, own_session = os.getpid(), os.getsid(0)
    try:
        entries = [int(e.name) for e in proc_root.iterdir() if e.name.isdigit()]
    except OSError:
        return [], []
    stats = [s for s in (proc_stat(pid, proc_root) for pid in entries) if s is not None]
    adopted = [
        s.pid
        for s in stats
        if s.ppid == me and s.session != own_session and s.start >= born_after and s.pid not in spare
    ]
    children: dict[int, list[int]] = {}
    for s in stats:
        if s.state != "Z":
            children.setdefault(s.ppid, []).append(s.pid)
    alive = {s.pid for s in stats if s.state != "Z"}
    doomed: list[int] = []
    todo = [pid for pid in adopted if pid in alive]
    while todo:
        pid = todo.pop()
        if pid not in doomed and pid != me:
            doomed.append(pid)
            todo.extend(children.get(pid, []))
    return doomed, adopted


def tagged_processes(token: str, proc_root: Path = Path("/proc")) -> list[int]:
    """Processes whose environment carries ``DEVICE_MATRIX_ATTEMPT=token``."""
    needle = f"{ENV_ATTEMPT}={token}".encode()
    found = []
    me = os.getpid()
    try:
        entries = list(proc_root.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


_LIVE: set[int] = set()  # children of this process started here and not yet reaped: never swept


class PopenChild:
    """A child in its own process group (session): signals reach it and its children."""

    # what the runner adopted from the attempt is ended too (see adopted_leftovers)
    sweeps_adopted = True

    def __init__(self, proc: subprocess.Popen[bytes], token: str, *, grace: float = TERM_GRACE) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.token = token
        self.grace = grace
        _LIVE.add(proc.pid)
        # whatever the attempt starts, starts after its first process
        stat = proc_stat(proc.pid)
        self.born = stat.start if stat is not None else 0
        self.ended_alive = False  # the runner ended it (a deadline, a broken journal, an interrupt)

    def __enter__(self) -> PopenChild:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.end()

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout)

    def send(self, sig: int) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def end(self) -> int:
        if self.proc.poll() is None:
            self.ended_alive = True
            self.kill_group(signal.SIGTERM)
            try:
                self.proc.wait(self.grace)
            except subprocess.TimeoutExpired:
                pass
        # whatever answered SIGTERM or not: nothing of the attempt is left running
        self.kill_group(signal.SIGKILL)
        code = self.proc.wait()  # after SIGKILL: reaped first, its orphans are the runner's to find
        _LIVE.discard(self.pid)
        self._sweep()
        return code

    def _sweep(self) -> None:
        tagged_rounds = 3  # a process may fork while it is being looked for
        for _ in range(SWEEP_ROUNDS):
            # no token (a plain run's child carries none): the adopted orphans only
            tagged = tagged_processes(self.token) if tagged_rounds > 0 and self.token else []
            tagged_rounds -= 1
            doomed, adopted = adopted_leftovers(self.born, spare=frozenset(_LIVE)) if self.sweeps_adopted else ([], [])
            if not tagged and not adopted:
                return
            for pid in [*tagged, *doomed]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            for pid in adopted:
                # only these pids: a blanket wait would take the exit status of the
                # runner's own children (the next attempt's child, gdb) from subprocess
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            time.sleep(0.01)


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    output: BinaryIO,
    token: str,
    grace: float = TERM_GRACE,
    death_signal: int | None = signal.SIGKILL,
    adopt: bool = True,
    core_limit: int | None = None,
    carry_token: bool = True,
    wrap: Callable[[subprocess.Popen[bytes]], PopenChild] | None = None,
) -> PopenChild:
    """A child process of our own (#23): the one place every child starts (#31).

    Its own session, stdin closed, its output to ``output`` (a file: a daemon that keeps
    it open holds nothing up), ``death_signal`` when this process dies (None: it outlives
    the runner, as an engine client does for its engine to end the container), and every
    process of it carrying ``token`` (unless ``carry_token`` is false: an engine client,
    whose engine's helpers outlive it by design). :meth:`PopenChild.end` stops it: SIGTERM
    to its group, ``grace`` seconds, SIGKILL, then the sweep of what it left (the token,
    adopted orphans). Its exit status is the one :meth:`PopenChild.poll` and ``end`` give:
    nothing else is asked of it. ``adopt``: this process becomes a subreaper, so the
    child's orphans come back to it and are swept too. ``core_limit``: its RLIMIT_CORE,
    bytes. ``wrap`` makes the child object of the process (an executor's own kind).
    """
    if adopt:
        become_subreaper()

    def _preexec() -> None:  # runs in the child only, before exec
        if core_limit is not None:
            raise_core_limit(core_limit)
        if death_signal is not None:
            die_with_parent(death_signal)

    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env={**env, ENV_ATTEMPT: token} if carry_token else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=output,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_preexec,  # noqa: PLW1509 - prctl and setrlimit only, no locks taken
    )
    return PopenChild(proc, token, grace=grace) if wrap is None else wrap(proc)
