"""#40: the files a test opens, recorded with the map: a data file's change runs the tests
that opened it (or listed its folder), a file no test opened runs none, and configuration,
a file read outside every test or one that becomes code still runs every test."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.builders import recorded_git_project
from tests.conftest import Project
from tests.runs import outcomes_of

MINE = "suites/mine"
DATA = {
    "data/table.csv": "a,1\n",
    "cases/one.txt": "1\n",
    "CHANGES.md": "nothing yet\n",
    "native.c": "int f(void) { return 1; }\n",
    "test_table.py": (
        "import pathlib\n\nHERE = pathlib.Path(__file__).parent\n\n\n"
        "def test_table():\n    assert (HERE / 'data' / 'table.csv').read_text() == 'a,1\\n'\n"
    ),
    "test_cases.py": (
        "import pathlib\n\nHERE = pathlib.Path(__file__).parent\n\n\n"
        "def test_cases():\n    assert sorted(p.name for p in (HERE / 'cases').iterdir()) == ['one.txt']\n"
    ),
    "test_plain.py": "def test_plain():\n    assert True\n",
    "settings.json": "{}\n",
    "loader.py": "import pathlib\n\nSETTINGS = (pathlib.Path(__file__).parent / 'settings.json').read_text()\n",
    "test_settings.py": "import loader\n\n\ndef test_settings():\n    assert loader.SETTINGS == '{}\\n'\n",
}


def _select(p: Project) -> tuple[str, dict[str, Any]]:
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    return proc.stdout + proc.stderr, p.record()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One project with its map recorded, copied for each test (a full run takes seconds)."""
    p = recorded_git_project(tmp_path_factory.mktemp("opens"), DATA)
    return p.root


def _copy(recorded: Path, tmp_path: Path) -> Project:
    root = tmp_path / "p"
    shutil.copytree(recorded, root, symlinks=True)
    return Project(root)


def test_a_data_file_s_change_runs_the_tests_that_opened_it(recorded: Path, tmp_path: Path) -> None:
    p = _copy(recorded, tmp_path)
    (p.root / MINE / "data" / "table.csv").write_text("a,2\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == {
        "test_table": "failed",
        "test_cases": "deselected",
        "test_plain": "deselected",
        "test_settings": "deselected",
    }, out
    assert rec["test_selection"]["by_reason"] == {"opens": 1, "deselected": 3}


def test_a_file_added_to_a_folder_a_test_lists_runs_that_test(recorded: Path, tmp_path: Path) -> None:
    p = _copy(recorded, tmp_path)
    (p.root / MINE / "cases" / "two.txt").write_text("2\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == {
        "test_table": "deselected",
        "test_cases": "failed",
        "test_plain": "deselected",
        "test_settings": "deselected",
    }, out


def test_a_file_no_test_opened_runs_none(recorded: Path, tmp_path: Path) -> None:
    p = _copy(recorded, tmp_path)
    (p.root / MINE / "CHANGES.md").write_text("a release\n")
    out, rec = _select(p)
    assert set(outcomes_of(rec).values()) == {"deselected"}, out


@pytest.mark.parametrize("path", ["native.c", "pyproject.toml", "settings.json"])
def test_configuration_or_a_file_that_becomes_code_runs_every_test(recorded: Path, tmp_path: Path, path: str) -> None:
    p = _copy(recorded, tmp_path)
    target = p.root / (path if path == "pyproject.toml" else f"{MINE}/{path}")
    target.write_text(target.read_text() + "\n")
    out, rec = _select(p)
    assert rec["test_selection"]["full_reason"] is not None, out
