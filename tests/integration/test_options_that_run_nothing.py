"""pytest options that run no test, or stop for a debugger, are refused up front (#30 item 1, 14).

``--setup-plan`` and ``--setup-only`` report each test passed without calling it; ``--trace``
and ``--pdb`` stop for a debugger whose stdin the runner closes; ``--markers``, ``-h`` and
their kin print and exit. None is a run of the row: each is a usage error (exit 2) that says
what to run instead, never a green record nor a crash during collection.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.conftest import Project, clean_env
from tests.runs import write_suite

pytestmark = pytest.mark.slow

FAILING = {"test_a.py": "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert False\n"}


@pytest.mark.parametrize(
    "arg",
    [
        "--setup-plan",
        "--setup-only",
        "--trace",
        "--pdb",
        "--markers",
        "-h",
        "--help",
        "--version",
        "-V",
        "--fixtures",
        "--funcargs",
        "--fixtures-per-test",
        "--co",
        "--collect-only",
    ],
)
def test_an_option_that_runs_no_test_is_refused(project: Callable[..., Project], arg: str) -> None:
    p = project("passing")
    write_suite(p, "failing", FAILING)
    proc = p.run("run", "--device", "fixture", "--", arg)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert arg in proc.stderr and "TIP" in proc.stderr
    record = p.record()
    assert record["status"] == "error" and record["tests"] == [] and record["crashes"] == []
    assert record["reason"].startswith("refused") and arg in record["reason"]


def test_trace_with_stdin_from_dev_null_is_refused(project: Callable[..., Project]) -> None:
    p = project("passing")
    write_suite(p, "failing", FAILING)
    argv = [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--no-gdb", "--device", "fixture"]
    proc = subprocess.run(
        [*argv, "--", "--trace"],
        stdin=subprocess.DEVNULL,
        cwd=p.root,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert p.record()["status"] == "error" and p.record()["tests"] == []


def test_a_row_whose_own_pytest_args_run_no_test_is_refused(project: Callable[..., Project]) -> None:
    p = project("passing", row='pytest_args = ["--setup-only"]')
    write_suite(p, "failing", FAILING)
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--setup-only" in proc.stderr and "TIP" in proc.stderr
    assert p.record()["status"] == "error"


@pytest.mark.parametrize("where", ["environment", "row"])
def test_pytest_addopts_that_run_no_test_are_refused(project: Callable[..., Project], where: str) -> None:
    # a sibling: the same options in PYTEST_ADDOPTS, the runner's own or the row's env
    row = 'env = { PYTEST_ADDOPTS = "--setup-plan" }' if where == "row" else ""
    p = project("passing", row=row)
    write_suite(p, "failing", FAILING)
    env = {"PYTEST_ADDOPTS": "-p no:hypothesispytest --setup-plan"} if where == "environment" else None
    proc = p.run("run", "--device", "fixture", env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--setup-plan" in proc.stderr and "PYTEST_ADDOPTS" in proc.stderr
    assert p.record()["status"] == "error"
