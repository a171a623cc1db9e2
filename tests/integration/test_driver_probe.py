"""The driver tools a run's environment snapshot asks (nvidia-smi, neuron-ls) are untrusted
children: a hanging one is ended with what it started, asked once, and output that is not
UTF-8 loses nothing of the snapshot (#30 items 11 and 22)."""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from device_matrix.diagnostics import environment
from tests.conftest import Project
from tests.runs import is_alive

HANGING = """#!/bin/sh
echo "$@" >> "{calls}"
sleep 300 &
echo $! >> "{children}"
wait
"""
NOT_UTF8 = """#!/bin/sh
printf 'Tesla \\377\\376V100, 550.54, 16384 MiB\\n'
"""


def fake_tool(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text(text)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return folder


def test_a_hanging_nvidia_smi_is_asked_once_and_ended_with_its_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, children = tmp_path / "calls", tmp_path / "children"
    bin_dir = fake_tool(tmp_path / "bin", "nvidia-smi", HANGING.format(calls=calls, children=children))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    t0 = time.monotonic()
    drivers = environment._drivers(timeout=2.0)
    took = time.monotonic() - t0
    # one query, its one timeout: the second query of the same tool is not made
    assert len(calls.read_text().splitlines()) == 1
    assert took < 4.0
    assert drivers["nvidia-smi"].startswith("failed: ") and "2 s" in drivers["nvidia-smi"]
    assert drivers["nvidia-smi-cuda"].startswith("failed: ")
    # what it started went with it
    pids = [int(p) for p in children.read_text().split()]
    deadline = time.monotonic() + 5
    while any(is_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if is_alive(p)]


def test_output_that_is_not_utf8_keeps_the_whole_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = fake_tool(tmp_path / "bin", "nvidia-smi", NOT_UTF8)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    snap = environment.snapshot()
    assert "V100, 550.54" in snap["drivers"]["nvidia-smi"] and "\ufffd" in snap["drivers"]["nvidia-smi"]
    assert snap["packages"]["pytest"] and snap["python"]
    assert environment.facets(snap)["driver"] == "550.54"


@pytest.mark.slow
def test_a_run_on_a_host_whose_nvidia_smi_is_not_utf8_keeps_its_environment(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project("passing")
    bin_dir = fake_tool(tmp_path / "bin", "nvidia-smi", NOT_UTF8)
    proc = p.run("run", "--device", "fixture", env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    env = p.record()["environment"]
    assert "V100" in env["drivers"]["nvidia-smi"] and env["packages"]["pytest"]


def test_a_hanging_presence_command_is_ended_with_its_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from device_matrix import devices
    from device_matrix.config import Row

    calls, children = tmp_path / "calls", tmp_path / "children"
    bin_dir = fake_tool(tmp_path / "bin", "nvidia-smi", HANGING.format(calls=calls, children=children))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(devices, "COMMAND_TIMEOUT", 1.0)
    row = Row(name="cuda", pjrt_device="CUDA", presence=("command:nvidia-smi -L",))
    found = devices.detect(row)
    assert not found.present and "did not answer in 1 s" in found.reason
    pids = [int(p) for p in children.read_text().split()]
    deadline = time.monotonic() + 5
    while any(is_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in pids if is_alive(p)]


COUNTING = """#!/bin/sh
echo "$@" >> "{calls}"
echo "Tesla V100, 550.54, 16384 MiB"
"""


@pytest.mark.slow
def test_a_child_in_its_own_environment_is_asked_for_its_snapshot_once_per_run(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    # --python: each child snapshots its own environment, nvidia-smi and all; the record keeps
    # the first, so the children after it are not asked (a crash, its resume, its rerun)
    p = project("segv")
    calls = tmp_path / "calls"
    bin_dir = fake_tool(tmp_path / "bin", "nvidia-smi", COUNTING.format(calls=calls))
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = p.run("run", "--device", "fixture", "--python", sys.executable, "--reruns", "1", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    assert len(record["attempts"]) >= 3  # the crash, the resume after it, its rerun
    assert "V100" in record["environment"]["drivers"]["nvidia-smi"]
    assert (
        len(calls.read_text().splitlines()) == len(environment.DRIVER_TOOLS) - 1
    )  # one snapshot: neuron-ls is not here
