"""#40: a change to pyproject.toml, setup.cfg or tox.ini runs every test only when it is in
what pytest, the row or the installed project reads; one in a linter's table runs none but
the tests that opened the file."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from device_matrix import selection
from device_matrix.cli import select as cli_select
from device_matrix.records.testmap import TestMap

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RULES = selection.Rules(max_age=timedelta(days=14), full=("pyproject.toml", "setup.cfg", "tox.ini"), ignore=())
PYPROJECT = """\
[build-system]
requires = ["flit_core<4"]
build-backend = "flit_core.buildapi"

[project]
name = "pkg"
description = "A package"
dependencies = ["attrs"]

[tool.pytest.ini_options]
addopts = "-ra"

[tool.device-matrix.devices.cpu]
pjrt_device = "CPU"

[tool.ruff]
line-length = 79

[tool.mypy]
strict = true
"""


def _swap(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("line-length = 79", "line-length = 100"),  # [tool.ruff]
        ("strict = true", "strict = false"),  # [tool.mypy]
        ("[tool.ruff]\n", "# the linter\n[tool.ruff]\n"),  # a comment
        ("[tool.mypy]", "[tool.black]\nline-length = 79\n\n[tool.mypy]"),  # a linter's table added
    ],
)
def test_a_pyproject_change_in_a_linter_s_table_alone_is_read_by_no_run(old: str, new: str) -> None:
    assert selection.unread_change("pyproject.toml", PYPROJECT, _swap(PYPROJECT, old, new))
    assert selection.unread_change("sub/pyproject.toml", PYPROJECT, _swap(PYPROJECT, old, new))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('addopts = "-ra"', 'addopts = "-ra -p no:randomly"'),  # pytest's table
        ('pjrt_device = "CPU"', 'pjrt_device = "TPU"'),  # the row's
        ('["attrs"]', '["attrs>=23"]'),  # the environment the tests run in
        ('description = "A package"', 'description = "Another"'),  # the installed metadata
        ("flit_core<4", "flit_core<5"),  # how the project is built and installed
        ("[tool.ruff]", "[dependency-groups]\ntest = ['pytest']\n\n[tool.ruff]"),
        ("[tool.ruff]", "[tool.setuptools]\npackages = ['pkg']\n\n[tool.ruff]"),
        ("[tool.ruff]", "[tool.coverage.run]\nomit = ['pkg/x.py']\n\n[tool.ruff]"),  # the map's recorder
        ("[tool.ruff]", "[tool.somethingelse]\nx = 1\n\n[tool.ruff]"),  # a table not known to be apart
        ("line-length = 79", "line-length = "),  # not TOML now: what reads it fails
    ],
)
def test_a_pyproject_change_anywhere_else_runs_every_test(old: str, new: str) -> None:
    assert not selection.unread_change("pyproject.toml", PYPROJECT, _swap(PYPROJECT, old, new))


def test_a_pyproject_added_or_removed_runs_every_test() -> None:
    # pytest's rootdir, and so every test's id, may move with the file
    assert not selection.unread_change("pyproject.toml", "", "[tool.ruff]\nline-length = 79\n")
    assert not selection.unread_change("pyproject.toml", "[tool.ruff]\nline-length = 79\n", "")
    assert not selection.unread_change("pyproject.toml", None, PYPROJECT)  # git could not show it
    assert not selection.unread_change("pyproject.toml", PYPROJECT, None)


@pytest.mark.parametrize(
    ("path", "text", "unread"),
    [
        ("tox.ini", "[tox]\nenv_list = py313\n\n[testenv]\ncommands = pytest\n\n[flake8]\nx = 1\n", True),
        ("setup.cfg", "[flake8]\nmax-line-length = 79\n", True),
        ("tox.ini", "[tox]\nenv_list = py313\n\n[pytest]\naddopts = -x\n", False),  # pytest's rootdir and options
        ("setup.cfg", "[tool:pytest]\naddopts = -x\n", False),
        ("tox.ini", "[coverage:run]\nbranch = true\n", False),  # what the map measures
        ("setup.cfg", "[metadata]\nname = pkg\n", False),  # the installed project
        ("tox.ini", "[flake8\n", False),  # not read as ini: what reads it fails
    ],
)
def test_an_ini_file_added_or_removed_is_read_by_its_sections(path: str, text: str, unread: bool) -> None:
    # pytest takes a tox.ini or setup.cfg for its configuration, and the rootdir, only
    # with its own section: one with tox's and linters' sections alone moves nothing (#40)
    assert selection.unread_change(path, "", text) is unread
    assert selection.unread_change(path, text, "") is unread
    assert not selection.unread_change(path, None, text)  # git could not show it


SETUP_CFG = """\
[metadata]
name = pkg

[options]
install_requires = attrs

[tool:pytest]
addopts = -ra

[flake8]
max-line-length = 79

[mypy-pkg.vendored.*]
ignore_errors = True
"""


@pytest.mark.parametrize(
    ("old", "new", "unread"),
    [
        ("max-line-length = 79", "max-line-length = 100", True),
        ("ignore_errors = True", "ignore_errors = False", True),
        ("[flake8]", "# lint\n[flake8]", True),
        ("addopts = -ra", "addopts = -ra -x", False),
        ("install_requires = attrs", "install_requires = attrs>=23", False),
        ("name = pkg", "name = pkg2", False),
        ("[flake8]", "[coverage:run]\nomit = pkg/x.py\n\n[flake8]", False),
        ("[flake8]", "[flake8]\n[flake8]", False),  # a duplicate section: not read as it was
    ],
)
def test_a_setup_cfg_change_outside_tool_pytest_and_the_install_is_read_by_no_run(
    old: str, new: str, unread: bool
) -> None:
    assert selection.unread_change("setup.cfg", SETUP_CFG, _swap(SETUP_CFG, old, new)) is unread


TOX_INI = (
    "[tox]\nenvlist = py311\n\n[testenv]\ndeps = pytest\n\n[pytest]\naddopts = -ra\n\n[flake8]\nmax-line-length = 79\n"
)


@pytest.mark.parametrize(
    ("old", "new", "unread"),
    [
        ("max-line-length = 79", "max-line-length = 100", True),
        ("addopts = -ra", "addopts = -rA", False),
        # tox's own sections: a row runs pytest in its own environment, never tox's (#40)
        ("deps = pytest", "deps = pytest\n    attrs", True),
        ("envlist = py311", "envlist = py312", True),
        ("[flake8]", "[testenv:lint]\ncommands = ruff check\n\n[flake8]", True),
        ("[flake8]", "[coverage:run]\nbranch = true\n\n[flake8]", False),  # coverage measures the map
    ],
)
def test_a_tox_ini_change_outside_the_sections_pytest_and_coverage_read_is_read_by_no_run(
    old: str, new: str, unread: bool
) -> None:
    assert selection.unread_change("tox.ini", TOX_INI, _swap(TOX_INI, old, new)) is unread


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        ("setup.cfg", "[tox:tox]\nenvlist = py311\n", "[tox:tox]\nenvlist = py312\n"),
        ("setup.cfg", "[testenv]\ndeps = pytest\n", "[testenv]\ndeps = attrs\n"),
        ("pyproject.toml", '[tool.tox]\nenv_list = ["3.13"]\n', '[tool.tox]\nenv_list = ["3.14"]\n'),
    ],
)
def test_tox_s_tables_are_read_by_no_row(path: str, old: str, new: str) -> None:
    # a row installs its own packages and runs pytest with its own arguments: tox's
    # environments are tox's alone (#40)
    assert selection.unread_change(path, old, new)


@pytest.mark.parametrize("path", ["pytest.ini", "requirements.txt", "setup.py", "conftest.py", "noxfile.py"])
def test_other_configuration_is_never_narrowed(path: str) -> None:
    assert not selection.unread_change(path, "[flake8]\nx = 1\n", "[flake8]\nx = 2\n")


MAP = TestMap(
    row="cpu",
    commit="a" * 40,
    created="2026-11-30T12:00:00+00:00",
    tests={
        "tests/test_a.py::test_a": frozenset({"pkg/a.py", "tests/test_a.py"}),
        "tests/test_meta.py::test_lint_config": frozenset({"tests/test_meta.py"}),
    },
    reads={"tests/test_meta.py::test_lint_config": frozenset({"pyproject.toml"})},
    openers={"pyproject.toml": frozenset({"tests/test_meta.py:3"})},
)


def _plan(m: TestMap, changed: list[str], unread: list[str]) -> selection.Plan:
    return selection.plan(m, changed, row="cpu", rules=RULES, now=NOW, unread=unread)


def test_an_unread_configuration_change_runs_only_the_tests_that_opened_the_file() -> None:
    p = _plan(MAP, ["pyproject.toml"], ["pyproject.toml"])
    assert p.full_reason is None
    assert p.decide("tests/test_meta.py::test_lint_config") == selection.Decision(
        True, "it opened pyproject.toml", "opens"
    )
    assert p.decide("tests/test_a.py::test_a") == selection.Decision(
        False, "covers none of the 1 changed file", "deselected"
    )
    # the same change, not found unread: every test
    assert _plan(MAP, ["pyproject.toml"], []).full_reason == "pyproject.toml changes, which the test map cannot follow"


def test_an_unread_configuration_change_runs_every_test_where_its_readers_are_not_known() -> None:
    before = TestMap(MAP.row, MAP.commit, MAP.created, MAP.tests)  # a map of before the files opened were kept
    assert _plan(before, ["pyproject.toml"], ["pyproject.toml"]).full_reason is not None
    at_import = TestMap(
        MAP.row, MAP.commit, MAP.created, MAP.tests, reads={}, read_at_import=frozenset({"pyproject.toml"})
    )
    assert _plan(at_import, ["pyproject.toml"], ["pyproject.toml"]).full_reason is not None


def test_a_tool_a_test_of_the_map_runs_is_not_apart() -> None:
    # pytest-mypy's and pytest-flake8's items: the tool's table decides those tests' outcome
    old, new = _swap(PYPROJECT, "strict = true", "strict = false"), PYPROJECT
    assert not selection.unread_change("pyproject.toml", old, new, ["pkg/a.py::mypy", "tests/test_a.py::test_a"])
    assert not selection.unread_change("pyproject.toml", old, new, ["::mypy-status"])
    assert selection.unread_change("pyproject.toml", old, new, ["pkg/a.py::ruff"])
    cfg = _swap(SETUP_CFG, "max-line-length = 79", "max-line-length = 100")
    assert not selection.unread_change("setup.cfg", SETUP_CFG, cfg, ["pkg/a.py::flake-8::FLAKE8"])


def test_a_configuration_git_cannot_list_at_the_map_s_commit_is_not_taken_for_one_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git failing to list tox.ini at the map's commit says nothing of whether it was there
    # (it may have held a [pytest] section since removed): not an added file, every test runs
    (tmp_path / "tox.ini").write_text("[flake8]\nmax-line-length = 79\n")
    monkeypatch.setattr(cli_select, "git", lambda _root, *_args: (None, "fatal: bad object"))
    assert cli_select.unread_changes(tmp_path, MAP, ["tox.ini"]) == []
    monkeypatch.setattr(cli_select, "git", lambda _root, *args: ("", "") if args[0] == "ls-tree" else (None, "?"))
    assert cli_select.unread_changes(tmp_path, MAP, ["tox.ini"]) == ["tox.ini"]  # listed as absent: added
