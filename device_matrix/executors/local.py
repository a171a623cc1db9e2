"""Run the pytest child on this host, in the current (or a given) interpreter."""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

from device_matrix.errors import EnvironmentProblem
from device_matrix.executors.base import (
    FAULTHANDLER_FROM_START,
    ExecutorName,
    LaunchSpec,
    PopenChild,
    spawn,
)


def child_environment(spec: LaunchSpec, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(spec.env)
    # the plugin arms faulthandler itself, into the attempt's own file; not through the
    # environment, which every process a test starts would inherit
    env.pop("PYTHONFAULTHANDLER", None)
    return env


class LocalExecutor:
    name: ExecutorName = "local"

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable

    def interpreter(self) -> str:
        return self.python

    def argv(self, spec: LaunchSpec) -> list[str]:
        return [self.python, *FAULTHANDLER_FROM_START, "-m", spec.module, *spec.pytest_args]

    def launch(self, spec: LaunchSpec, output: BinaryIO) -> PopenChild:
        try:
            # an orphan of the attempt comes back to the runner, whatever it did to hide (not
            # for a container: its engine and init own what runs inside); a runner killed
            # with SIGKILL cannot end its child: the kernel does
            return spawn(
                self.argv(spec),
                env=child_environment(spec),
                cwd=spec.workdir,
                output=output,
                token=spec.token,
                core_limit=spec.core_limit,
                # the attempt's environment names its token already (or none: an image check)
                carry_token=False,
            )
        except OSError as exc:
            raise EnvironmentProblem(
                f"cannot start {self.python}: {exc.strerror or exc}",
                tip="Pass --python an interpreter that exists and has pytest, or leave it out.",
            ) from exc

    def command_for(self, spec: LaunchSpec) -> list[str]:
        return [self.python, *FAULTHANDLER_FROM_START, "-m", spec.module, *spec.pytest_args]
