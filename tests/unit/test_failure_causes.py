"""The cause of every failure in every report, and each row job's own summary (#20).

One maintainer's project, run once as a row job in GitHub Actions would run it: its
record carries each failure's exception line and where in the test's file it happened;
the row's step summary and annotations say so; triage says so in md, html and json.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from device_matrix.output import Output
from device_matrix.records.cause import cause_from_text
from device_matrix.report import html, markdown
from device_matrix.report.actions import annotate, workspace_path
from device_matrix.report.model import build
from tests import records as rec

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


def _errors(stdout: str) -> list[tuple[dict[str, str], str]]:
    """The ``::error`` annotations in a log: their properties (still encoded) and message."""
    found = []
    for line in stdout.splitlines():
        if line.startswith("::error "):
            head, _, message = line[len("::error ") :].partition("::")
            found.append((dict(p.split("=", 1) for p in head.split(",")), message))
    return found


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
