"""#29 (7): ``run --test FILE::Class::test`` in a row that runs FILE as a script runs that
test through the script, as ``python FILE Class.test`` would, never through pytest."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow

SCRIPT = """import unittest

from script_helper import TWO  # a helper beside the script, imported by bare name


class TestPicked(unittest.TestCase):
    def test_a(self):
        self.assertEqual(TWO, 2)
        self.assertEqual(__name__, "__main__")

    def test_b(self):
        pass


if __name__ == "__main__":
    unittest.main()
"""


def test_a_test_named_in_a_scripts_only_row_runs_through_its_script(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / "scripts").mkdir()
    (p.root / "scripts" / "test_picked.py").write_text(SCRIPT)
    (p.root / "scripts" / "script_helper.py").write_text("TWO = 2\n")
    text = (p.root / "pyproject.toml").read_text().replace('suites = ["passing"]', "suites = []")
    (p.root / "pyproject.toml").write_text(
        text + '\n[[tool.device-matrix.devices.fixture.scripts]]\nfile = "scripts/test_picked.py"\n'
    )
    proc = p.run("run", "--device", "fixture", "--test", "scripts/test_picked.py::TestPicked::test_a")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert {t["nodeid"]: t["outcome"] for t in record["tests"]} == {
        "scripts/test_picked.py::TestPicked::test_a": "passed"
    }
