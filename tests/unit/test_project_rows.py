"""Rows on the project's own tests: a project without suites/ runs what plain pytest runs (#20).

The part of these tests that starts no process; the rest is in tests/integration/test_project_rows.py (#41)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Project

TEST_A = """
import os

def test_a():
    assert 1 + 1 == 2

def test_sees_only_the_device_it_was_given():
    # the packaged cpu row sets PJRT_DEVICE and nothing else of torch_xla's (#20)
    assert os.environ["PJRT_DEVICE"] == "CPU"
    assert "CPU_NUM_DEVICES" not in os.environ and "XLA_USE_BF16" not in os.environ
"""


def fresh_project(root: Path, *, testpaths: bool = True, tool: str = "") -> Project:
    """A maintainer's project: a package, tests/ that plain pytest finds, a file it must not run."""
    (root / "mypkg").mkdir()
    (root / "mypkg" / "__init__.py").write_text("VALUE = 2\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_a.py").write_text(TEST_A)
    (root / "tools").mkdir()
    # outside testpaths: plain pytest in this project never collects it
    (root / "tools" / "test_not_a_test.py").write_text("def test_outside_testpaths():\n    assert False\n")
    pytest_table = '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n' if testpaths else ""
    (root / "pyproject.toml").write_text(f'[project]\nname = "mypkg"\nversion = "1"\n\n{pytest_table}\n{tool}')
    return Project(root)


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["tests", "more"]\n'}, ("tests", "more")),
        ({"pyproject.toml": '[tool.pytest]\ntestpaths = ["t"]\n'}, ("t",)),  # pytest 9's own table
        ({"pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = "a b"\n'}, ("a", "b")),
        ({"pyproject.toml": "[project]\nname = 'x'\n"}, ()),
        ({"pytest.ini": "[pytest]\ntestpaths =\n    unit\n    integration\n"}, ("unit", "integration")),
        # pytest.ini is the configuration, first, even where pyproject.toml has a table
        ({"pytest.ini": "[pytest]\n", "pyproject.toml": '[tool.pytest.ini_options]\ntestpaths = ["x"]\n'}, ()),
        ({"tox.ini": "[tox]\n[pytest]\ntestpaths = t\n"}, ("t",)),
        ({"tox.ini": "[tox]\n", "setup.cfg": "[tool:pytest]\ntestpaths = s\n"}, ("s",)),
        ({}, ()),
    ],
)
def test_the_testpaths_pytest_reads(tmp_path: Path, files: dict[str, str], expected: tuple[str, ...]) -> None:
    from device_matrix.config import pytest_testpaths

    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert pytest_testpaths(tmp_path) == expected


def test_the_skip_scan_reads_the_projects_tests_not_its_venvs(tmp_path: Path) -> None:
    from device_matrix import config

    fresh_project(tmp_path, testpaths=False)
    (tmp_path / ".nox" / "cpu" / "lib").mkdir(parents=True)
    (tmp_path / "venv").mkdir()
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "conftest.py").write_text("")
    cfg = config.load(tmp_path)
    names = sorted(p.name for p in cfg.suite_folders())
    assert names == ["conftest.py", "mypkg", "tests", "tools"]
    (tmp_path / "pyproject.toml").write_text('[tool.pytest.ini_options]\ntestpaths = ["tests"]\n')
    assert [p.name for p in config.load(tmp_path).suite_folders()] == ["tests"]


SKIPPED_SCRIPT = """
import unittest


class TestScript(unittest.TestCase):
    @unittest.skip("broken on all devices, see ledger:1")
    def test_broken(self):
        pass


if __name__ == "__main__":
    unittest.main()
"""


@pytest.mark.parametrize("command", ["check", "list"])
def test_skips_read_every_place_a_row_runs_its_scripts_included(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # a row's scripts are where it runs too: `skips check` with no argument reads them (#41)
    from device_matrix.cli import main
    from device_matrix.errors import EXIT_OK, EXIT_TESTS_FAILED

    tool = '[[tool.device-matrix.devices.cpu.scripts]]\nfile = "scripts/test_script.py"\n'
    fresh_project(tmp_path, tool=tool)
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "test_script.py").write_text(SKIPPED_SCRIPT)
    code = main(["--project", str(tmp_path), "skips", command])
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "scripts/test_script.py:6" in text, text
    if command == "check":
        assert code == EXIT_TESTS_FAILED and "ledger:1" in text and "0 device skip(s)" not in text
    else:
        assert code == EXIT_OK
