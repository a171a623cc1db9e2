"""What the runner needs from a place to run a pytest child: one Protocol."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, Protocol

ExecutorName = Literal["local", "container"]


@dataclass(frozen=True)
class LaunchSpec:
    """One pytest child: argv after the interpreter, its environment and folders."""

    pytest_args: Sequence[str]
    env: Mapping[str, str]  # the row's variables plus the runner's DEVICE_MATRIX_* ones
    workdir: Path  # the child's own working directory (cores land here)
    project_root: Path
    core_limit: int | None  # bytes; None leaves the limit as it is


class Child(Protocol):
    pid: int

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send(self, sig: int) -> None:
        """Send ``sig`` to the test process (and, for ends, its whole group)."""

    def kill_group(self, sig: int) -> None: ...


class Executor(Protocol):
    name: ExecutorName

    def launch(self, spec: LaunchSpec, output: BinaryIO) -> Child: ...

    def command_for(self, spec: LaunchSpec) -> list[str]:
        """The argv a user would paste to run ``spec`` by hand (for repro commands)."""

    def interpreter(self) -> str: ...


class PopenChild:
    """A child in its own process group (session): signals reach it and its children."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid

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


def end_child(child: Child, *, term_grace: float = 3.0) -> int:
    """SIGTERM the group, then SIGKILL it if it does not go; return the exit status."""
    child.kill_group(signal.SIGTERM)
    try:
        return child.wait(term_grace)
    except subprocess.TimeoutExpired:
        child.kill_group(signal.SIGKILL)
        return child.wait()
