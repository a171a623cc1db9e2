"""Run the pytest child on this host, in the current (or a given) interpreter."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import BinaryIO

from device_matrix.diagnostics.core import raise_core_limit
from device_matrix.run.executors.base import ExecutorName, LaunchSpec, PopenChild


def child_environment(spec: LaunchSpec, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update(spec.env)
    # The child runs in its own folder; keep the project importable as `python -m pytest`
    # from the root would have it.
    paths = [str(spec.project_root)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # the plugin arms faulthandler itself, into the attempt's own file
    env.pop("PYTHONFAULTHANDLER", None)
    return env


class LocalExecutor:
    name: ExecutorName = "local"

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable

    def interpreter(self) -> str:
        return self.python

    def argv(self, spec: LaunchSpec) -> list[str]:
        return [self.python, "-m", "pytest", *spec.pytest_args]

    def launch(self, spec: LaunchSpec, output: BinaryIO) -> PopenChild:
        spec.workdir.mkdir(parents=True, exist_ok=True)
        limit = spec.core_limit

        def _preexec() -> None:  # runs in the child only, before exec
            if limit is not None:
                raise_core_limit(limit)

        proc = subprocess.Popen(
            self.argv(spec),
            cwd=spec.workdir,
            env=child_environment(spec),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_preexec,  # noqa: PLW1509 - single-threaded runner; sets RLIMIT_CORE for the child only
        )
        return PopenChild(proc)

    def command_for(self, spec: LaunchSpec) -> list[str]:
        return ["python", "-m", "pytest", *spec.pytest_args]


def shell_join(argv: list[str]) -> str:
    return shlex.join(argv)


def relative_to_root(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)
