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
    # pyproject.toml: a change to a table pytest reads (one to a linter's alone runs none:
    # tests/integration/test_selection_config.py)
    target.write_text(
        target.read_text()
        + ("\n[tool.pytest.ini_options]\nxfail_strict = true\n" if path == "pyproject.toml" else "\n")
    )
    out, rec = _select(p)
    assert rec["test_selection"]["full_reason"] is not None, out


# a data file read once by code that keeps what it made: a session-scoped fixture, an
# lru_cache loader; the second test of each gets the value without opening the file
KEPT = {
    "data/table.csv": "a,1\n",
    "data/settings.txt": "on\n",
    "tabled/conftest.py": (
        "import pathlib\n\nimport pytest\n\n\n@pytest.fixture(scope='session')\ndef table():\n"
        "    return (pathlib.Path(__file__).parent.parent / 'data' / 'table.csv').read_text().split(',')\n"
    ),
    "tabled/test_t1.py": "def test_t1(table):\n    assert table[0] == 'a'\n",
    "tabled/test_t2.py": "def test_t2(table):\n    assert table[1] == '1\\n'\n",
    "mypkg/__init__.py": "",
    "mypkg/settings.py": (
        "import functools\nimport pathlib\n\n\n@functools.lru_cache\ndef load():\n"
        "    return (pathlib.Path(__file__).parent.parent / 'data' / 'settings.txt').read_text()\n"
    ),
    "test_s1.py": "from mypkg.settings import load\n\n\ndef test_s1():\n    assert load().strip()\n",
    "test_s2.py": "from mypkg.settings import load\n\n\ndef test_s2():\n    assert load() == 'on\\n'\n",
    # the cache applied by a call, at import
    "data/units.txt": "k=1000\n",
    "mypkg/units.py": (
        "import functools\nimport pathlib\n\n\ndef _read():\n"
        "    return (pathlib.Path(__file__).parent.parent / 'data' / 'units.txt').read_text()\n\n\n"
        "read = functools.lru_cache(maxsize=None)(_read)\n"
    ),
    "test_u1.py": "from mypkg.units import read\n\n\ndef test_u1():\n    assert read().strip()\n",
    "test_u2.py": "from mypkg.units import read\n\n\ndef test_u2():\n    assert read() == 'k=1000\\n'\n",
    "test_plain.py": "def test_plain():\n    assert True\n",
}


@pytest.fixture(scope="module")
def recorded_kept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recorded_git_project(tmp_path_factory.mktemp("kept"), KEPT).root


@pytest.mark.parametrize(
    ("path", "new", "failing"),
    [
        ("data/table.csv", "a,2\n", "test_t2"),
        ("data/settings.txt", "off\n", "test_s2"),
        ("data/units.txt", "k=1024\n", "test_u2"),
    ],
    ids=["session-fixture", "lru-cache", "lru-cache-applied-by-a-call"],
)
def test_a_data_file_s_change_runs_every_test_that_gets_what_its_opener_kept(
    recorded_kept: Path, tmp_path: Path, path: str, new: str, failing: str
) -> None:
    p = _copy(recorded_kept, tmp_path)
    (p.root / MINE / path).write_text(new)
    out, rec = _select(p)
    outcomes = outcomes_of(rec)
    assert outcomes[failing] == "failed", out
    assert outcomes["test_plain"] == "deselected", out
    assert rec["status"] == "failed", out
    # the first test opened the file; the second got what the opener kept of it
    assert rec["test_selection"]["by_reason"] == {"opens": 1, "reads": 1, "deselected": 5}, out


# #40: a package that lists its own folder at import (humanize lists its locale folder): a
# listing sees names, not contents
LISTED = {
    "lister/__init__.py": (
        "import os\nimport pathlib\n\nHERE = pathlib.Path(__file__).parent\n"
        "LANGS = sorted(os.listdir(HERE / 'locale'))\n\n\n"
        "def catalogue(lang):\n    return (HERE / 'locale' / lang).read_text()\n"
    ),
    "lister/locale/ru.po": "msgstr privet\n",
    "lister/locale/de.po": "msgstr hallo\n",
    "test_ru.py": (
        "from lister import catalogue\n\n\ndef test_ru():\n    assert catalogue('ru.po') == 'msgstr privet\\n'\n"
    ),
    "test_langs.py": "from lister import LANGS\n\n\ndef test_langs():\n    assert LANGS == ['de.po', 'ru.po']\n",
    "test_plain.py": "def test_plain():\n    assert True\n",
}


@pytest.fixture(scope="module")
def recorded_listed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return recorded_git_project(tmp_path_factory.mktemp("listed"), LISTED).root


def test_a_content_change_in_a_folder_listed_at_import_runs_only_the_tests_that_opened_it(
    recorded_listed: Path, tmp_path: Path
) -> None:
    p = _copy(recorded_listed, tmp_path)
    (p.root / MINE / "lister" / "locale" / "ru.po").write_text("msgstr zdravstvuy\n")
    out, rec = _select(p)
    assert rec["test_selection"]["full_reason"] is None, out
    assert outcomes_of(rec) == {"test_ru": "failed", "test_langs": "deselected", "test_plain": "deselected"}, out


@pytest.mark.parametrize("change", ["added", "removed", "renamed"])
def test_a_file_added_to_or_removed_from_a_folder_listed_at_import_runs_every_test(
    recorded_listed: Path, tmp_path: Path, change: str
) -> None:
    p = _copy(recorded_listed, tmp_path)
    locale = p.root / MINE / "lister" / "locale"
    if change == "added":
        (locale / "fr.po").write_text("msgstr salut\n")
    elif change == "removed":
        (locale / "de.po").unlink()
    else:
        (locale / "de.po").rename(locale / "de_DE.po")
    out, rec = _select(p)
    assert rec["test_selection"]["full_reason"] is not None, out
    assert outcomes_of(rec)["test_langs"] == "failed", out
