"""#30: pytest options that run no test (``--setup-plan``, ``--collect-only``, ...) given in
the project's own pytest configuration (``addopts`` of pyproject.toml's
[tool.pytest.ini_options], pytest.ini, tox.ini, setup.cfg) are refused before anything runs,
as on the command line: the error names the option and the file it comes from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.runs import write_suite

pytestmark = pytest.mark.slow

FAILING = {"test_a.py": "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert False\n"}


@pytest.mark.parametrize(
    ("where", "text"),
    [
        ("pyproject.toml", '\n[tool.pytest.ini_options]\naddopts = "-ra --setup-plan"\n'),
        ("pyproject.toml", '\n[tool.pytest.ini_options]\naddopts = ["-ra", "--collect-only"]\n'),
        ("pytest.ini", "[pytest]\naddopts = -ra --co\n"),
        ("setup.cfg", "[tool:pytest]\naddopts = --fixtures\n"),
    ],
    ids=["pyproject", "pyproject-list", "pytest.ini", "setup.cfg"],
)
def test_ini_addopts_that_run_no_test_are_refused(project: Callable[..., Project], where: str, text: str) -> None:
    p = project("passing")
    write_suite(p, "failing", FAILING)
    path = p.root / where
    path.write_text((path.read_text() if path.exists() else "") + text)
    option = next(o for o in ("--setup-plan", "--collect-only", "--co", "--fixtures") if o in text)
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert option in proc.stderr and where in proc.stderr and "addopts" in proc.stderr, proc.stderr
    assert "TIP" in proc.stderr
    record = p.record()
    assert record["status"] == "error" and record["tests"] == [] and record["crashes"] == []


def test_ini_addopts_that_run_tests_are_kept(project: Callable[..., Project]) -> None:
    p = project("passing")
    path = p.root / "pyproject.toml"
    path.write_text(path.read_text() + '\n[tool.pytest.ini_options]\naddopts = "-ra"\n')
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.record()["status"] == "passed"


def test_a_row_of_scripts_only_starts_no_pytest_and_is_not_refused(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_s.py").write_text(
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n'
    )
    (root / "pyproject.toml").write_text(
        '[tool.device-matrix.devices.cpu]\npjrt_device = "CPU"\nrun_in = "host"\npresence = ["always"]\n'
        '[[tool.device-matrix.devices.cpu.scripts]]\nfile = "test/test_s.py"\n'
        '\n[tool.pytest.ini_options]\naddopts = "--setup-plan"\n'
    )
    p = Project(root)
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [t["outcome"] for t in p.record("cpu")["tests"]] == ["passed"]
