"""#30 (21): diagnose reads a log as a stream, in bounded memory, whatever its size."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env

pytestmark = pytest.mark.slow

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"
SIZE = 3 << 30  # more than the memory the process may use
LIMIT = 1536 << 20


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def test_a_log_larger_than_memory_is_diagnosed_from_its_end(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    with log.open("wb") as fh:
        fh.truncate(SIZE)  # sparse: no disk used, read as zeros
        fh.seek(SIZE)
        fh.write(b"\n" + (RECORDED / "tsl_segfault.txt").read_bytes())
    proc = subprocess.run(
        [sys.executable, "-m", "device_matrix", "diagnose", str(log)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=300,
        check=False,
        preexec_fn=_limit_memory,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "signal: SIGSEGV" in proc.stdout, proc.stdout
