"""#30 (13): compare's plain run ends as the script ends, even when a daemon it started
holds its output, the daemon with it; and the plain run has the row's deadline."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.integration.test_compare import _compare, _project

pytestmark = pytest.mark.slow

DAEMON = """import subprocess
import sys
from pathlib import Path

# a daemon that inherits stdout and outlives the program, which exits 0 at once
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with Path(sys.argv[1]).open("a") as fh:
    fh.write(f"{child.pid}\\n")
"""

SLEEPER = "import time\n\ntime.sleep(400)\n"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for this purpose
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def test_a_program_that_leaves_a_daemon_passes_both_ways_and_the_daemon_is_ended(tmp_path: Path) -> None:
    pids = tmp_path / "pids.txt"
    scripts = (
        '[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/daemon.py"\n'
        f'kind = "program"\nargs = ["{pids}"]\n'
    )
    root = _project(tmp_path, scripts)
    (root / "test" / "daemon.py").write_text(DAEMON)
    started = time.monotonic()
    proc = _compare(root, "--all")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert time.monotonic() - started < 120
    data = json.loads((root / "results" / "compare" / "compare.json").read_text())
    assert data["mismatches"] == 0
    assert [t["plain"] for t in data["invocations"][0]["tests"]] == ["passed"]
    time.sleep(1)
    assert [pid for pid in map(int, pids.read_text().split()) if _alive(pid)] == []


def test_the_plain_run_of_a_program_has_the_rows_test_timeout(tmp_path: Path) -> None:
    scripts = '[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/sleeper.py"\nkind = "program"\n'
    root = _project(tmp_path, scripts)
    text = (root / "pyproject.toml").read_text().replace("test_timeout = 60", "test_timeout = 3")
    (root / "pyproject.toml").write_text(text)
    (root / "test" / "sleeper.py").write_text(SLEEPER)
    proc = _compare(root, "--all")
    data = json.loads((root / "results" / "compare" / "compare.json").read_text())
    (invocation,) = data["invocations"]
    assert invocation["plain_seconds"] < 60, proc.stdout
    assert [(t["device_matrix"], t["plain"]) for t in invocation["tests"]] == [("timeout", "timeout")], proc.stdout
    assert data["mismatches"] == 0
