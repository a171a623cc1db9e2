"""The command line: rows, plan, list, doctor, exit codes, unavailable rows."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from device_matrix.errors import (
    EXIT_CONFIG,
    EXIT_ENVIRONMENT,
    EXIT_UNAVAILABLE,
)
from tests.conftest import Project

ABSENT = """
[tool.device-matrix.devices.tpu]
presence = ["env:FIXTURE_TPU_PRESENT", "glob:/nonexistent/accel*"]
suites = ["passing"]
"""


def test_unavailable_row_is_recorded_not_raised(project: Callable[..., Project]) -> None:
    p = project("passing", extra_rows=ABSENT)
    proc = p.run("run", "--device", "tpu")
    assert proc.returncode == EXIT_UNAVAILABLE, proc.stdout + proc.stderr
    rec = p.record("tpu")
    assert rec["status"] == "unavailable"
    assert "TPU device not found" in rec["reason"] and "/nonexistent/accel*" in rec["reason"]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert p.run("run", "--device", "tpu", "--require-device").returncode == EXIT_ENVIRONMENT


def test_rows_run_in_order_and_the_worst_exit_wins(project: Callable[..., Project]) -> None:
    p = project("passing", extra_rows=ABSENT)
    proc = p.run("run", "--device", "tpu,fixture")
    assert proc.returncode == EXIT_UNAVAILABLE
    assert proc.stdout.index("tpu: UNAVAILABLE") < proc.stdout.index("== fixture")
    assert p.record("fixture")["status"] == "passed"
    table = proc.stdout[proc.stdout.index("row ") :]
    assert "fixture    passed" in table and "tpu        unavailable" in table


def test_unknown_device_and_suite_are_config_errors(project: Callable[..., Project]) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "gpu")
    assert proc.returncode == EXIT_CONFIG
    assert "unknown device row 'gpu'" in proc.stderr and "fixture" in proc.stderr
    proc = p.run("run", "--device", "fixture", "--suite", "nope")
    assert proc.returncode == EXIT_CONFIG and "not in row" in proc.stderr


LOST = """
[tool.device-matrix.devices.lost]
pjrt_device = "CPU"
presence = ["never"]
suites = ["gone"]
"""


def test_list_plan_doctor(project: Callable[..., Project]) -> None:
    p = project("passing", extra_rows=ABSENT + LOST)
    rows = {r["row"]: r for r in json.loads(p.run("list", "--json").stdout)}
    assert rows["fixture"]["present"] is True and rows["tpu"]["present"] is False
    assert rows["cuda"]["image"].startswith("us-central1-docker.pkg.dev")
    text = p.run("list").stdout
    assert "configuration:" in text and "absent" in text
    plans = json.loads(p.run("plan", "--json").stdout)
    assert {x["row"]: x["mode"] for x in plans}["tpu"] == "unavailable"
    doctor = p.run("doctor")
    assert doctor.returncode == EXIT_UNAVAILABLE
    assert "DEVICE_MATRIX_TPU_PRESENT=1" in doctor.stdout or "tpu" in doctor.stdout
    assert "suites missing: gone" in doctor.stdout


def test_pytest_args_and_single_test(project: Callable[..., Project]) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", "--", "-k", "test_quick[3] or test_quick[4]")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.record()["summary"]["passed"] == 2
    proc = p.run("run", "--device", "fixture", "--test", "suites/passing/test_passing.py::test_quick[7]")
    assert proc.returncode == 0
    assert [t["nodeid"] for t in p.record()["tests"]] == ["suites/passing/test_passing.py::test_quick[7]"]


def test_bad_pytest_args_are_an_error_not_a_crash(project: Callable[..., Project]) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", "--", "--no-such-option")
    assert proc.returncode == EXIT_ENVIRONMENT
    rec = p.record()
    assert rec["status"] == "error" and "could not start" in rec["reason"]
    assert rec["crashes"] == []


@pytest.mark.parametrize("cmd", [["--version"], ["run", "--help"], ["triage", "--help"], ["issues", "sync", "--help"]])
def test_help_and_version(project: Callable[..., Project], cmd: list[str]) -> None:
    assert project("passing").run(*cmd).returncode == 0
