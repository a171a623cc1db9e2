"""An interrupted runner ends everything it started and writes what it knows; a killed one takes its child along."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Project, clean_env
from tests.runs import is_alive, outcomes_of

pytestmark = pytest.mark.slow


def _cmdline(entry: Path) -> str:
    try:
        return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _run_until_the_hang(p: Project) -> tuple[subprocess.Popen[str], list[int]]:
    """`device-matrix run` over the hang suite, once test_c_dies runs; its pytest processes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--device", "fixture"],
        cwd=p.root,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "test_b_before" in line:
            break
    time.sleep(0.5)
    children = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and str(p.root) in _cmdline(entry) and "pytest" in _cmdline(entry)
    ]
    assert children
    return proc, children


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_run_ends_its_child_and_says_so(project: Callable[..., Project], sig: int) -> None:
    p = project("hang", row="test_timeout = 600")
    # an earlier run's record must not survive as if it were this one's
    (p.results / "fixture").mkdir(parents=True)
    (p.results / "fixture" / "run.json").write_text('{"status": "passed"}')
    proc, children = _run_until_the_hang(p)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, out + err
    assert [pid for pid in children if is_alive(pid)] == []
    record = p.record()
    assert record["status"] == "interrupted"
    outcomes = outcomes_of(record)
    assert outcomes["test_a_before"] == "passed"
    assert outcomes["test_c_dies"] == "not_run"
    assert outcomes["test_e_after_fails"] == "not_run"
    assert "--resume" in err


def test_a_runner_killed_with_sigkill_takes_its_child_along(project: Callable[..., Project]) -> None:
    p = project("hang", row="test_timeout = 600")
    proc, children = _run_until_the_hang(p)
    proc.kill()
    proc.wait(30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and [pid for pid in children if is_alive(pid)]:
        time.sleep(0.1)
    assert [pid for pid in children if is_alive(pid)] == []
    # and the record says it was cut off, with the runner's pid
    record = p.record()
    assert record["status"] == "running" and record["runner_pid"] == proc.pid
