"""The cause of every failure in every report, and each row job's own summary (#20).

One maintainer's project, run once as a row job in GitHub Actions would run it: its
record carries each failure's exception line and where in the test's file it happened;
the row's step summary and annotations say so; triage says so in md, html and json.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from device_matrix.output import Output
from device_matrix.records.cause import cause_from_text
from device_matrix.records.schema import load_run
from device_matrix.report import html, markdown
from device_matrix.report.actions import annotate, workspace_path
from device_matrix.report.model import build
from tests import records as rec
from tests.conftest import Project
from tests.userproject import user_project

XLA = """\
def helper(values):
    if not values:
        raise RuntimeError("No PjRtPlugin registered for: CUDA")
    return sum(values)


def test_xla_device_add():
    total = helper([])
    assert total == 3


def test_loss_diverged():
    loss = 2.5
    assert loss < 1.0, "loss diverged"


def test_ok():
    assert 1 + 1 == 2


def test_broken_fixture(device_handle):
    pass
"""

CONFTEST = """\
import pytest


@pytest.fixture
def device_handle():
    raise OSError("no device handle")
"""

CRASH = """\
import ctypes


def test_segfault():
    before = 1
    ctypes.string_at(0)
"""

UNIT = """\
import unittest


class TestUnit(unittest.TestCase):
    def test_equal(self):
        self.assertEqual(1, 2, "one is not two")


if __name__ == "__main__":
    unittest.main()
"""


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


def _errors(stdout: str) -> list[tuple[dict[str, str], str]]:
    """The ``::error`` annotations in a log: their properties (still encoded) and message."""
    found = []
    for line in stdout.splitlines():
        if line.startswith("::error "):
            head, _, message = line[len("::error ") :].partition("::")
            found.append((dict(p.split("=", 1) for p in head.split(",")), message))
    return found


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


def test_a_record_written_before_causes_still_says_why() -> None:
    longrepr = (
        "def test_x():\n>       assert f() == 3\nE       AssertionError: wrong sum\nE       assert 2 == 3\n\n"
        "t.py:2: AssertionError"
    )
    record = rec.record("cpu", [rec.test("t.py::test_x", "failed", message=longrepr)])
    t = build([record], [], {})  # type: ignore[list-item]
    (f,) = t["failures"]
    assert f["cause"] == "AssertionError: wrong sum\nassert 2 == 3"
    assert f["message"] == "AssertionError: wrong sum"
    assert "`AssertionError: wrong sum`" in markdown.render(t)
    assert "AssertionError: wrong sum" in html.render(t)


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("    def test():\n>       x()\nE   ValueError: bad\n\nt.py:3: ValueError", "ValueError: bad"),
        (
            "Traceback (most recent call last):\n  File \"/p/t.py\", line 5, in test_a\n    self.fail('no')\n"
            "AssertionError: no\n",
            "AssertionError: no",
        ),
        (
            "Traceback (most recent call last):\n  File \"a.py\", line 1, in f\n    g()\nKeyError: 'k'\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            "Traceback (most recent call last):\n  File \"a.py\", line 3, in f\n    raise RuntimeError('x')\n"
            "RuntimeError: x\n",
            "RuntimeError: x",
        ),
        ("[XPASS(strict)] rounding differs", "[XPASS(strict)] rounding differs"),
        ("", None),
    ],
)
def test_cause_from_text(text: str, cause: str | None) -> None:
    assert cause_from_text(text) == cause


def test_annotations_escape_what_a_test_names() -> None:
    """A cause or nodeid that holds a workflow command stays the data of one annotation."""
    failed = rec.test("t.py::test_x[a,b]", "failed", message="E   ValueError: x")
    failed.update(cause="ValueError: x\n::error::forged", file="t.py", line=4)
    t = build([rec.record("cpu", [failed])], [], {})  # type: ignore[list-item]
    stream = io.StringIO()
    annotate(t, Output(stream, environ={"GITHUB_ACTIONS": "true"}))
    (line,) = stream.getvalue().splitlines()
    assert _errors(line) == [
        (
            {"title": "cpu%3A failed t.py%3A%3Atest_x[a%2Cb]", "file": "t.py", "line": "4"},
            "ValueError: x%0A::error::forged",
        )
    ]


def test_an_unexpected_pass_says_so() -> None:
    xpassed = rec.test("t.py::test_x", "xpassed", message="[device-matrix] xfail on cpu: rounding (#4)")
    ((f,),) = [build([rec.record("cpu", [xpassed])], [], {})["failures"]]  # type: ignore[list-item]
    assert f["cause"] == "XPASS: [device-matrix] xfail on cpu: rounding (#4)"


def test_step_summary_of_nothing_failing() -> None:
    text = markdown.render_rows(build([rec.record("cpu", [rec.test("t.py::test_x")])], [], {}))  # type: ignore[list-item]
    assert "passed" in text and "Failures" not in text


def test_annotations_place_a_project_in_a_subfolder_of_the_checkout(tmp_path: Path) -> None:
    project = tmp_path / "python"
    project.mkdir()
    assert workspace_path(project, {"GITHUB_WORKSPACE": str(tmp_path)}) == "python"
    assert workspace_path(project, {"GITHUB_WORKSPACE": str(project)}) == ""
    assert workspace_path(project, {"GITHUB_WORKSPACE": str(tmp_path / "elsewhere")}) == ""
    assert workspace_path(project, {}) == ""
    failed = rec.test("t.py::test_x", "failed", message="E   ValueError: x")
    failed.update(cause="ValueError: x", file="tests/t.py", line=4)
    stream = io.StringIO()
    annotate(
        build([rec.record("cpu", [failed])], [], {}), Output(stream, environ={"GITHUB_ACTIONS": "true"}), base="python"
    )  # type: ignore[list-item]
    ((props, _),) = _errors(stream.getvalue())
    assert props["file"] == "python/tests/t.py" and props["line"] == "4"
