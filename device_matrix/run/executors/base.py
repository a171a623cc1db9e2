"""What the runner needs from a place to run a pytest child: one Protocol.

A child is a context manager: leaving the ``with`` block, by any path (a normal end, an
exception, an interrupt of the runner), ends its whole process group (SIGTERM, a grace
period, then SIGKILL) and then every process that still carries the attempt's token in
its environment, so a grandchild that ignores SIGTERM or left the group with setsid()
does not outlive the attempt.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Literal, Protocol

from device_matrix.wire import ENV_ATTEMPT

ExecutorName = Literal["local", "container"]
TERM_GRACE = 3.0  # seconds between SIGTERM and SIGKILL


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


def die_with_parent() -> None:
    """``preexec_fn`` body (Linux): SIGKILL this process when the process that started it dies.

    Without it a runner killed with SIGKILL leaves its pytest child running, and the row's
    lock free for another run beside it.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the runner's own handlers are all there is


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


class PopenChild:
    """A child in its own process group (session): signals reach it and its children."""

    def __init__(self, proc: subprocess.Popen[bytes], token: str) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.token = token

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
            self.kill_group(signal.SIGTERM)
            try:
                self.proc.wait(TERM_GRACE)
            except subprocess.TimeoutExpired:
                pass
        # whatever answered SIGTERM or not: nothing of the attempt is left running
        self.kill_group(signal.SIGKILL)
        self._sweep()
        return self.proc.wait()

    def _sweep(self) -> None:
        for _ in range(3):  # a process may fork while it is being looked for
            pids = tagged_processes(self.token)
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)
