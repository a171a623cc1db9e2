"""Helpers shared by the benchmarks: throwaway projects, timing, peak memory."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "DEVICE_MATRIX_", "PYTEST_"))}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def timed(argv: Sequence[str], *, cwd: Path, env: dict[str, str], timeout: float = 3600) -> tuple[float, int, str]:
    """Wall seconds, exit code and output of one command."""
    start = time.perf_counter()
    proc = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return time.perf_counter() - start, proc.returncode, proc.stdout + proc.stderr


def run_command(python: str, project: Path, row: str, results: Path, *extra: str) -> list[str]:
    """The `device-matrix run` command line the benchmarks time."""
    return [
        python,
        "-m",
        "device_matrix",
        "--project",
        str(project),
        "run",
        "--device",
        row,
        "--results",
        str(results),
        *extra,
    ]


def median_of(samples: list[float]) -> float:
    return statistics.median(samples)


def child_peak_rss_mb() -> float:
    """Peak resident memory of the largest child waited for so far, in MB (Linux: KiB units)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def write_project(root: Path, suite_files: dict[str, str], *, row_extra: str = "") -> None:
    for rel, text in suite_files.items():
        path = root / "suites" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    suites = sorted({rel.split("/")[0] for rel in suite_files})
    listed = ", ".join(f'"{s}"' for s in suites)
    (root / "pyproject.toml").write_text(
        f"""[tool.device-matrix]
crash_reruns = 0

[tool.device-matrix.devices.bench]
pjrt_device = "CPU"
run_in = "host"
suites = [{listed}]
presence = ["always"]
{row_extra}
"""
    )


PY = sys.executable
