"""Integration: faults an adversarial review found; each would have made the record lie."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow


def _outcomes(record: dict[str, Any]) -> dict[str, str]:
    return {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}


def test_resume_of_a_run_that_collected_nothing_runs_the_row(project: Callable[..., Project]) -> None:
    p = project("passing")
    assert p.run("run", "--device", "fixture").returncode == 0
    record = p.record()
    total = len(record["tests"])
    # cut off before collection finished (a SIGKILL, an import that took too long)
    record.update(status="interrupted", tests=[], attempts=[])
    (p.results / "fixture" / "run.json").write_text(json.dumps(record))
    proc = p.run("run", "--device", "fixture", "--resume")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    again = p.record()
    assert len(again["tests"]) == total and {t["outcome"] for t in again["tests"]} == {"passed"}


def test_resume_with_nothing_left_keeps_the_earlier_verdict(project: Callable[..., Project]) -> None:
    p = project("exit_status")
    first = p.run("run", "--device", "fixture")
    assert first.returncode == 1 and p.record()["status"] == "failed"
    again = p.run("run", "--device", "fixture", "--resume")
    assert again.returncode == 1, again.stdout
    assert p.record()["status"] == "failed"


def test_one_non_zero_pytest_exit_is_never_overwritten(project: Callable[..., Project]) -> None:
    p = project("exit_status", row='isolation = "file"')
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert set(_outcomes(record).values()) == {"passed"}
    assert record["status"] == "failed" and "pytest exited 2" in record["reason"]


def test_isolation_goes_on_past_a_module_that_crashes_on_import(project: Callable[..., Project]) -> None:
    p = project("iso_crash", row='isolation = "file"')
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes == {
        "suites/iso_crash/test_a.py::test_a": "passed",
        "suites/iso_crash/test_b_dies.py": "crashed",
        "suites/iso_crash/test_c.py::test_c": "passed",
    }


def test_no_empty_process_after_a_crash_in_the_last_test(project: Callable[..., Project]) -> None:
    p = project("segv")
    (p.root / "suites" / "segv" / "test_segv.py").write_text(
        "import ctypes\n\ndef test_a():\n    pass\n\ndef test_z_dies():\n    ctypes.string_at(0)\n"
    )
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1
    assert [a["purpose"] for a in p.record()["attempts"]] == ["run"]


def test_a_script_that_runs_no_test_is_not_green(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / "scripts").mkdir()
    (p.root / "scripts" / "test_nomain.py").write_text(
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_x(self):\n        self.fail('never run')\n"
    )
    text = (p.root / "pyproject.toml").read_text()
    (p.root / "pyproject.toml").write_text(
        text + '\n[[tool.device-matrix.devices.fixture.scripts]]\nfile = "scripts/test_nomain.py"\n'
    )
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    assert _outcomes(record)["scripts/test_nomain.py"] == "error"
    assert record["status"] == "failed"


def test_a_secret_in_the_rows_own_variables_is_redacted(project: Callable[..., Project]) -> None:
    secret = "Zq8hunter2hunter2xyz"
    p = project("abort", row=f'env = {{ SERVICE_AUTH = "{secret}" }}')
    (p.root / "suites" / "abort" / "test_print.py").write_text(
        "import os\n\ndef test_prints():\n    print(os.environ['SERVICE_AUTH'])\n    assert False\n"
    )
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1
    assert secret not in proc.stdout + proc.stderr
    leaked = [str(f) for f in p.results.rglob("*") if f.is_file() and secret.encode() in f.read_bytes()]
    assert leaked == []
