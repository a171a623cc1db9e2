"""The tests of this concept that start a process; the rest are in tests/unit/test_failure_causes.py (#41)."""

from __future__ import annotations

import json
import re
from typing import Any
from xml.etree import ElementTree

import pytest

from device_matrix.records.schema import load_run
from tests.conftest import Project
from tests.unit.test_failure_causes import CONFTEST, CRASH, UNIT, XLA, _errors
from tests.userproject import user_project


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, Any, str, str]:
    root = tmp_path_factory.mktemp("maintainer")
    p = user_project(
        root,
        {
            "tests/test_xla.py": XLA,
            "tests/conftest.py": CONFTEST,
            "tests/test_crash.py": CRASH,
            "scripts/test_unit.py": UNIT,
        },
        # the run files its crash (#24: only when asked), so the summary names the issue
        top="[tool.device-matrix.tracker]\nfile_on_run = true",
        row='[[tool.device-matrix.devices.cpu.scripts]]\nfile = "scripts/test_unit.py"',
    )
    summary = root / "step-summary.md"
    proc = p.run(
        "run",
        "--device",
        "cpu",
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return p, proc, summary.read_text() if summary.exists() else "", proc.stdout


def _tests(p: Project) -> dict[str, dict[str, Any]]:
    return {t["nodeid"]: t for t in p.record("cpu")["tests"]}


def test_the_record_carries_each_failures_cause_and_place(ran: tuple[Project, Any, str, str]) -> None:
    p, *_ = ran
    tests = _tests(p)
    add = tests["tests/test_xla.py::test_xla_device_add"]
    assert add["outcome"] == "failed"
    assert add["cause"] == "RuntimeError: No PjRtPlugin registered for: CUDA"
    assert (add["file"], add["line"]) == ("tests/test_xla.py", 3)
    loss = tests["tests/test_xla.py::test_loss_diverged"]
    assert loss["cause"].splitlines() == ["AssertionError: loss diverged", "assert 2.5 < 1.0"]
    assert (loss["file"], loss["line"]) == ("tests/test_xla.py", 14)
    fixture = tests["tests/test_xla.py::test_broken_fixture"]
    assert fixture["outcome"] == "error"
    assert fixture["cause"] == "OSError: no device handle"
    assert (fixture["file"], fixture["line"]) == ("tests/conftest.py", 6)
    # a unittest file run as a script: the cause and place read from its traceback
    unit = tests["scripts/test_unit.py::TestUnit::test_equal"]
    assert unit["cause"] == "AssertionError: 1 != 2 : one is not two"
    assert (unit["file"], unit["line"]) == ("scripts/test_unit.py", 6)
    # a crash: the line of the test that was running when the process died
    crash = tests["tests/test_crash.py::test_segfault"]
    assert crash["outcome"] == "crashed"
    assert (crash["file"], crash["line"]) == ("tests/test_crash.py", 6)
    # passing tests carry none of it
    assert "cause" not in tests["tests/test_xla.py::test_ok"]
    load_run(p.results / "cpu" / "run.json")
    # junit.xml's failure message and report.json's crash say the same
    junit = ElementTree.parse(p.results / "cpu" / "junit.xml")
    case = next(c for c in junit.iter("testcase") if c.get("name") == "test_xla_device_add")
    assert case.find("failure").get("message") == "RuntimeError: No PjRtPlugin registered for: CUDA"  # type: ignore[union-attr]
    report = json.loads((p.results / "cpu" / "report.json").read_text())
    entry = next(e for e in report["tests"] if e["nodeid"].endswith("test_xla_device_add"))
    assert entry["call"]["crash"] == {
        "path": "tests/test_xla.py",
        "lineno": 3,
        "message": "RuntimeError: No PjRtPlugin registered for: CUDA",
    }


def test_the_row_job_writes_its_own_step_summary(ran: tuple[Project, Any, str, str]) -> None:
    _, _, summary, _ = ran
    assert "cpu" in summary and "crashed" in summary
    assert "`RuntimeError: No PjRtPlugin registered for: CUDA`" in summary
    assert "tests/test_xla.py:3" in summary
    assert "`AssertionError: loss diverged`" in summary
    assert "SIGSEGV in test_segfault" in summary and "at `tests/test_crash.py:6`" in summary
    # the crash was linked to the ledger before the summary was written
    assert "ledger:1 (open)" in summary


def test_the_row_job_annotates_with_file_and_line(ran: tuple[Project, Any, str, str]) -> None:
    _, _, _, stdout = ran
    errors = _errors(stdout)
    at = {(p.get("file"), p.get("line")): (p["title"], message) for p, message in errors}
    assert at["tests/test_xla.py", "3"] == (
        "cpu%3A failed tests/test_xla.py%3A%3Atest_xla_device_add",
        "RuntimeError: No PjRtPlugin registered for: CUDA",
    )
    assert at["tests/test_xla.py", "14"][1] == "AssertionError: loss diverged%0Aassert 2.5 < 1.0"
    assert at["tests/conftest.py", "6"][1] == "OSError: no device handle"
    assert at["scripts/test_unit.py", "6"][1] == "AssertionError: 1 != 2 : one is not two"
    title, message = at["tests/test_crash.py", "6"]
    assert title == "cpu%3A crash SIGSEGV" and "tests/test_crash.py::test_segfault" in message
    assert len(errors) == 5, errors


def test_triage_says_why_in_md_html_and_json(ran: tuple[Project, Any, str, str]) -> None:
    p, *_ = ran
    proc = p.run("triage", "--no-history", env={"GITHUB_ACTIONS": "true"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = p.results / "triage"
    md = (out / "triage.md").read_text()
    line = next(x for x in md.splitlines() if "test_xla_device_add" in x and x.startswith("- "))
    assert "tests/test_xla.py:3" in line and "`RuntimeError: No PjRtPlugin registered for: CUDA`" in line
    assert "def test_xla_device_add" not in md
    page = (out / "triage.html").read_text()
    failures = re.search(r"<section id='failures'>.*?</section>", page, re.S)
    assert failures is not None
    assert "RuntimeError: No PjRtPlugin registered for: CUDA" in failures.group(0)
    assert "tests/test_xla.py:3" in failures.group(0)
    assert "AssertionError: loss diverged\nassert 2.5 &lt; 1.0" in failures.group(0)
    cell = re.search(r"<tr data-id='tests/test_xla.py::test_xla_device_add'.*?</tr>", page, re.S)
    assert cell is not None and "No PjRtPlugin registered for: CUDA" in cell.group(0)
    cell = re.search(r"<tr data-id='tests/test_crash.py::test_segfault'.*?</tr>", page, re.S)
    assert cell is not None and "SIGSEGV in test_segfault" in cell.group(0)
    data = json.loads((out / "triage.json").read_text())
    (f,) = [x for x in data["failures"] if x["nodeid"].endswith("test_xla_device_add")]
    assert f["cause"] == "RuntimeError: No PjRtPlugin registered for: CUDA"
    assert (f["file"], f["line"]) == ("tests/test_xla.py", 3)
    assert (
        {"title": "cpu%3A failed tests/test_xla.py%3A%3Atest_xla_device_add", "file": "tests/test_xla.py", "line": "3"},
        "RuntimeError: No PjRtPlugin registered for: CUDA",
    ) in _errors(proc.stdout), proc.stdout
