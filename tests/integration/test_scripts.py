"""A row's scripts (upstream's files run as `python FILE ARGS`): never green without a test, counted in the progress."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project
from tests.runs import outcomes_of, write_suite

pytestmark = pytest.mark.slow


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
    assert outcomes_of(record)["scripts/test_nomain.py"] == "error"
    assert record["status"] == "failed"


SCRIPT = """import unittest


class T(unittest.TestCase):
    def test_one(self):
        pass


if __name__ == "__main__":
    unittest.main()
"""


def test_the_progress_total_counts_the_scripts(project: Callable[..., Project]) -> None:
    p = project("passing")
    write_suite(p, "one", {"test_one.py": "def test_only():\n    pass\n"})
    (p.root / "scripts").mkdir()
    (p.root / "scripts" / "test_script.py").write_text(SCRIPT)
    text = (p.root / "pyproject.toml").read_text()
    (p.root / "pyproject.toml").write_text(
        text + '\n[[tool.device-matrix.devices.fixture.scripts]]\nfile = "scripts/test_script.py"\n'
    )
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    counters = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("fixture [")]
    # the total is shown once every script's tests are known: never a total that grows (#24)
    assert counters == ["[1]", "[2/2]"]
