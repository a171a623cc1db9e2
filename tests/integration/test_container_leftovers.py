"""A container row's runner killed with SIGKILL leaves its container running; the next run
of the row in the same results folder finds it by its name and removes it, as the row's
lock finds a dead runner (#30 item 23). Against a real engine."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import engine_images
from tests.conftest import clean_env
from tests.integration.test_container_podman import containers_of, images, podman_project

__all__ = ["images"]  # a fixture, used by name

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("podman")]


def running(names: list[str]) -> list[str]:
    out = subprocess.run(
        ["podman", "ps", "--format", "{{.Names}}"], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    return [n for n in names if n in out]


def wait_for_the_hang(runner: subprocess.Popen[str]) -> None:
    """Until the row's test that hangs has started (the one before it is reported)."""
    assert runner.stdout is not None
    for line in runner.stdout:
        if "test_b_before" in line:
            return
    raise AssertionError(f"the run ended first (exit {runner.wait()}): {runner.stderr.read() if runner.stderr else ''}")


def test_the_next_run_removes_the_container_a_killed_runner_left(images: engine_images.Images, tmp_path: Path) -> None:
    assert containers_of("fixture") == []
    p = podman_project(tmp_path, ["hang"], images.pytest8, row="test_timeout = 600")
    runner = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--no-gdb", "--device", "fixture"],
        cwd=p.root,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_the_hang(runner)
        left = containers_of("fixture")
        assert left, "the row's container should be running"
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=60)
        assert running(left) == left  # the engine keeps it: nothing ended it
        again = p.run("run", "--device", "fixture", "--test", "suites/hang/test_hang.py::test_a_before")
        assert again.returncode == 0, again.stdout + again.stderr
        assert containers_of("fixture") == []
        assert any(name in again.stdout for name in left), again.stdout  # said what it removed
    finally:
        runner.kill()
        runner.wait()
        for name in containers_of("fixture"):
            subprocess.run(["podman", "rm", "-f", name], capture_output=True, check=False, timeout=60)


def test_a_run_in_another_results_folder_leaves_a_running_container_alone(
    images: engine_images.Images, tmp_path: Path
) -> None:
    assert containers_of("fixture") == []
    p = podman_project(tmp_path, ["hang"], images.pytest8, row="test_timeout = 600")
    runner = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--no-gdb", "--device", "fixture"],
        cwd=p.root,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_the_hang(runner)
        live = containers_of("fixture")
        assert live
        other = p.run(
            "run",
            "--device",
            "fixture",
            "--results",
            str(tmp_path / "elsewhere"),
            "--test",
            "suites/hang/test_hang.py::test_a_before",
        )
        assert other.returncode == 0, other.stdout + other.stderr
        assert running(live) == live  # another folder's run is not a leftover of this one
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.communicate(timeout=120)
        for name in containers_of("fixture"):
            subprocess.run(["podman", "rm", "-f", name], capture_output=True, check=False, timeout=60)
