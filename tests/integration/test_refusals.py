"""What cannot run is refused before anything runs (its exit code, an ERROR and a TIP), and the record says so."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("args", [["-n", "2"], ["-n2"], ["--numprocesses=2"], ["--dist", "load"]])
def test_xdist_is_refused_up_front(project: Callable[..., Project], args: list[str]) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", "--", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pytest-xdist" in proc.stderr and "TIP" in proc.stderr
    # nothing ran: the record says the run was refused, and why
    record = p.record()
    assert record["status"] == "error" and record["tests"] == [] and record["attempts"] == []
    assert record["reason"].startswith("refused: ") and "pytest-xdist" in record["reason"]


def test_xdist_from_the_project_addopts_never_goes_green(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / "pytest.ini").write_text("[pytest]\naddopts = -n 2\n")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode != 0
    assert p.record()["status"] == "error"


@pytest.mark.parametrize("arg", ["--lf", "--ff", "--sw"])
def test_options_of_the_disabled_cache_are_refused_up_front(project: Callable[..., Project], arg: str) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", "--", arg)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cache" in proc.stderr and "TIP" in proc.stderr


@pytest.mark.parametrize("device", ["", " , "])
def test_an_empty_device_list_is_a_usage_error(project: Callable[..., Project], device: str) -> None:
    p = project("passing")
    proc = p.run("run", "--device", device)
    assert proc.returncode == 2
    assert "names no row" in proc.stderr and "fixture" in proc.stderr


def test_a_missing_interpreter_is_an_environment_error(project: Callable[..., Project]) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", "--python", "/nonexistent/python3")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "/nonexistent/python3" in proc.stderr and "TIP" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_malformed_disable_list_says_why_on_the_terminal(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / "device-matrix-disabled.toml").write_text("[[disable]]\ntest = 42\n")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "error"
    # the real message, not only in output.log
    assert "device-matrix-disabled.toml" in proc.stdout and "disable" in record["reason"]


@pytest.mark.parametrize(
    ("args", "code"),
    [(["--", "-n", "2"], 2), (["--python", "/nonexistent/python3"], 5), (["--suite", "nope"], 3)],
)
def test_a_refused_run_replaces_the_record_with_its_refusal(
    project: Callable[..., Project], args: list[str], code: int
) -> None:
    p = project("passing")
    assert p.run("run", "--device", "fixture").returncode == 0
    earlier = p.record()["runner_pid"]
    proc = p.run("run", "--device", "fixture", *args)
    assert proc.returncode == code, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "error" and record["tests"] == []
    assert record["reason"].startswith("refused") and f"exit {code}" in record["reason"]
    assert record["runner_pid"] != earlier  # this run's record, not the one before
    junit = ET.parse(p.results / "fixture" / "junit.xml").getroot()
    assert [e.get("message") for e in junit.iter("error")] == [record["reason"]]
