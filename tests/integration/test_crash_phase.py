"""#29: a crash is recorded in the phase and at the line it crashed in."""

from __future__ import annotations

import html
from collections.abc import Callable

import pytest

from tests.conftest import Project
from tests.runs import write_suite

pytestmark = pytest.mark.slow

SCRIPT = """import os
import unittest


def abort_helper():
    os.abort()  # THE LINE


class TestCrash(unittest.TestCase):
    def setUp(self):
        self.ready = True

    def test_crashes_in_its_body(self):
        self.assertTrue(self.ready)
        abort_helper()


if __name__ == "__main__":
    unittest.main()
"""


def test_a_scripts_crash_in_the_test_body_is_the_calls_at_the_line_that_crashed(
    project: Callable[..., Project],
) -> None:
    p = project("passing", top="crash_reruns = 0")
    (p.root / "scripts").mkdir()
    (p.root / "scripts" / "test_crash.py").write_text(SCRIPT)
    text = (p.root / "pyproject.toml").read_text().replace("crash_reruns = 1\n", "")
    text = text.replace('suites = ["passing"]', "suites = []")
    (p.root / "pyproject.toml").write_text(
        text + '\n[[tool.device-matrix.devices.fixture.scripts]]\nfile = "scripts/test_crash.py"\n'
    )
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    (crash,) = record["crashes"]
    assert crash["nodeid"] == "scripts/test_crash.py::TestCrash::test_crashes_in_its_body", proc.stdout
    assert crash["when"] == "call"
    (test,) = [t for t in record["tests"] if t["nodeid"] == crash["nodeid"]]
    line = next(k for k, t in enumerate(SCRIPT.splitlines(), 1) if "THE LINE" in t)
    assert (test["file"], test["line"]) == ("scripts/test_crash.py", line)


TEARDOWN = """import os

import pytest


@pytest.fixture
def resource():
    yield
    os.abort()  # THE CRASH


def test_fails_then_its_teardown_crashes(resource):
    assert 2 + 2 == 5, "the test's own failure"  # THE FAILURE
"""


def test_a_teardown_crash_after_a_failed_call_keeps_the_failure_beside_the_crash(
    project: Callable[..., Project],
) -> None:
    p = project("passing")
    write_suite(p, "teardown", {"test_teardown.py": TEARDOWN})
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    (crash,) = record["crashes"]
    (test,) = record["tests"]
    assert (test["outcome"], crash["when"], crash["diagnosis"]["signal_name"]) == ("crashed", "teardown", "SIGABRT")
    lines = TEARDOWN.splitlines()
    crashed_at = next(k for k, t in enumerate(lines, 1) if "THE CRASH" in t)
    failed_at = next(k for k, t in enumerate(lines, 1) if "THE FAILURE" in t)
    assert (test["file"], test["line"]) == ("suites/teardown/test_teardown.py", crashed_at)
    (before,) = crash["failed_before"]
    assert (before["when"], before["outcome"], before["file"], before["line"]) == (
        "call",
        "failed",
        "suites/teardown/test_teardown.py",
        failed_at,
    ), before
    assert before["cause"] == "AssertionError: the test's own failure\nassert (2 + 2) == 5", before
    assert "assert 2 + 2 == 5" in before["message"], before
    said = f"its call failed at suites/teardown/test_teardown.py:{failed_at}: AssertionError: the test's own failure"
    assert said in test["message"] and test["message"].startswith("crashed: SIGABRT"), test["message"]
    for name in ("junit.xml", "output.log"):
        assert said in (p.results / "fixture" / name).read_text(), name
    assert said in proc.stdout, proc.stdout  # the terminal's summary, under the crash
    triage = p.run("triage", "--out", str(p.root / "triage"))
    assert triage.returncode == 0, triage.stdout + triage.stderr
    page = (p.root / "triage" / "triage.html").read_text()
    assert html.escape(said) in page
    assert said in (p.root / "triage" / "triage.md").read_text()
