"""Shared fixtures of the device suites.

The device comes from the row (``PJRT_DEVICE``); per-device settings (tolerances,
feature flags) come from the matrix through ``DEVICE_MATRIX_SETTINGS``. Tests never
branch on the device name.

Tests that need SPMD (``xr.use_spmd()`` is global and cannot be undone in a process) or
several processes run their work in child interpreters through :func:`run_worker`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

SUITES = Path(__file__).resolve().parent
ROOT = SUITES.parent
WORKER_TIMEOUT = 600


def settings() -> dict[str, Any]:
    raw = os.environ.get("DEVICE_MATRIX_SETTINGS")
    if not raw:
        return {}
    data = json.loads(raw)
    return data if isinstance(data, dict) else {}


@pytest.fixture(scope="session")
def matrix_settings() -> dict[str, Any]:
    return settings()


@pytest.fixture(scope="session")
def xla() -> Iterator[Any]:
    """torch_xla imported once per process, with its device."""
    torch_xla = pytest.importorskip("torch_xla")
    yield torch_xla


@pytest.fixture(scope="session")
def device(xla: Any) -> Any:
    return xla.device()


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("PJRT_DEVICE", "CPU")
    if extra:
        env.update(extra)
    return env


def run_worker(
    module: str,
    args: Sequence[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = WORKER_TIMEOUT,
) -> dict[str, Any]:
    """Run ``python -m module args`` and return the JSON object it prints last.

    A worker that dies or prints no JSON fails the test with its output attached.
    """
    proc = subprocess.run(
        [sys.executable, "-m", module, *args],
        env=child_env(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    return worker_result(proc.returncode, proc.stdout, proc.stderr, module)


def worker_result(returncode: int, stdout: str, stderr: str, what: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if returncode != 0 or not lines:
        tail = "\n".join((stdout + "\n" + stderr).strip().splitlines()[-60:])
        pytest.fail(f"{what} exited {returncode}\n{tail}", pytrace=False)
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def launch_concurrently(
    commands: Mapping[str, tuple[Sequence[str], Mapping[str, str]]], timeout: float = WORKER_TIMEOUT
) -> dict[str, subprocess.CompletedProcess[str]]:
    """Start every command at once and wait for all: the A/B configurations run side by side."""
    procs = {
        name: subprocess.Popen(
            [sys.executable, *argv],
            env=child_env(env),
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for name, (argv, env) in commands.items()
    }
    done: dict[str, subprocess.CompletedProcess[str]] = {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=timeout)
            done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done
