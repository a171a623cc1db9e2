"""#29: a crash is recorded in the phase and at the line it crashed in."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project

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
