"""#40: what the test map's recording counts as a file a test read (device_matrix/child/opens.py):
the paths an open names and where its links lead, the repository above the project, the
paths a test only asks about, and none of what the import system or pytest read for
themselves."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from device_matrix.child import opens


def _tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    top = tmp_path / "repo"
    root = top / "py"
    maps = root / ".device-matrix" / "map"
    for folder in (root / "data", root / ".ci", root / "__pycache__", root / "venv" / "site-packages", maps):
        folder.mkdir(parents=True)
    (root / "data" / "v1.json").write_text("{}")
    os.symlink("v1.json", root / "data" / "current.json")
    (top / "shared").mkdir()
    (top / "shared" / "limits.txt").write_text("10")
    return top, root, maps


def test_a_path_read_counts_as_named_and_where_its_link_leads(tmp_path: Path) -> None:
    top, root, maps = _tree(tmp_path)
    assert opens.read_paths(root / "data" / "current.json", root, maps, top) == [
        "data/current.json",
        "data/v1.json",
    ]
    assert opens.read_paths(str(root / "data" / "v1.json"), root, maps, top) == ["data/v1.json"]
    # a file not there yet is one a test asked about
    assert opens.read_paths(root / "data" / "v2.json", root, maps, top) == ["data/v2.json"]


def test_the_repository_above_the_project_counts_and_nothing_outside_it(tmp_path: Path) -> None:
    top, root, maps = _tree(tmp_path)
    assert opens.read_paths(top / "shared" / "limits.txt", root, maps, top) == ["../shared/limits.txt"]
    assert opens.read_paths(tmp_path / "elsewhere.txt", root, maps, top) == []
    # without a repository above it, the project's folder is all there is
    assert opens.read_paths(top / "shared" / "limits.txt", root, maps) == []
    assert opens.read_paths(root, root, maps, top) == []
    assert opens.read_paths(top, root, maps, top) == []


def test_a_descriptor_names_the_path_it_was_opened_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    top, root, maps = _tree(tmp_path)
    folder = os.open(root / "data", os.O_RDONLY)  # os.fwalk lists through one
    try:
        assert opens.read_paths(folder, root, maps, top) == ["data"]
    finally:
        os.close(folder)
    assert opens.read_paths(10_000, root, maps, top) == []  # none open by that number
    read, write = os.pipe()  # a pipe's end (``os.fdopen`` of a subprocess's): no file
    monkeypatch.chdir(root)  # a name Linux gives it (``pipe:[4121]``) is no path under the project
    try:
        assert opens.read_paths(read, root, maps, top) == []
    finally:
        os.close(read)
        os.close(write)


def test_a_hidden_folder_counts_and_bytecode_installed_packages_and_the_map_do_not(tmp_path: Path) -> None:
    top, root, maps = _tree(tmp_path)
    assert opens.read_paths(root / ".ci" / "matrix.txt", root, maps, top) == [".ci/matrix.txt"]
    assert opens.read_paths(root / "calc.py", root, maps, top) == ["calc.py"]
    for path in (root / "__pycache__" / "calc.pyc", root / "venv" / "site-packages" / "x.py", maps / "a.json"):
        assert opens.read_paths(path, root, maps, top) == [], path


def _call_as(filename: str, call: Callable[[], Any]) -> Any:
    """``call()`` from code whose frame names ``filename`` (the import system's, a project's)."""
    space: dict[str, Any] = {"call": call}
    exec(compile("result = call()", filename, "exec"), space)
    return space["result"]


def _check(test: Callable[[Path], bool], root: Path) -> Callable[[], bool]:
    def reader() -> bool:  # the recording's own frame: by_import looks above its caller
        return test(root)

    return reader


def test_the_import_system_nearer_than_the_project_is_its_own_read(tmp_path: Path) -> None:
    root = tmp_path / "p"
    module = str(root / "pkg" / "mod.py")
    importer = "<frozen importlib._bootstrap_external>"
    # an import the project's code asked for: the import system read the source
    assert _call_as(module, lambda: _call_as(importer, _check(opens.by_import, root))) is True
    # a module's own code, run by its import, reads a file: the project's
    assert _call_as(importer, lambda: _call_as(module, _check(opens.by_import, root))) is False
    assert _check(opens.by_import, root)() is False


def test_pytest_nearest_past_the_standard_library_asks_for_itself() -> None:
    def as_module(module: str, filename: str, call: Callable[[], bool]) -> bool:
        space: dict[str, Any] = {"__name__": module, "call": call}
        exec(compile("result = call()", filename, "exec"), space)
        return bool(space["result"])

    def asked() -> bool:  # the recording's own code, as this file is named to it
        return opens.by_pytest(__file__)

    stdlib = f"{opens._STDLIB}pathlib.py"
    # pytest asking where a test is (item.location), through pathlib
    assert as_module("_pytest.nodes", "/site/_pytest/nodes.py", lambda: as_module("pathlib", stdlib, asked)) is True
    assert as_module("pluggy._callers", "/site/pluggy/_callers.py", asked) is True
    # a plugin's fixture or hook, called by pytest: the plugin's read
    plugin = lambda: as_module("pytest_dotenv.plugin", "/site/pytest_dotenv/plugin.py", asked)  # noqa: E731
    assert as_module("_pytest.fixtures", "/site/_pytest/fixtures.py", plugin) is False
    assert opens.by_pytest() is False  # this test's own frame is nearest: no pytest's


def test_source_pytest_shows_in_a_report_is_no_test_s_read() -> None:
    # #40: a skip's or a failure's report reads, through linecache, the source of each frame
    # of its traceback (humanize: every test ran for a change to a module a skipped test's
    # traceback passed through); what it shows is code that ran, followed by its lines
    def as_module(module: str, filename: str, call: Callable[[], bool]) -> bool:
        space: dict[str, Any] = {"__name__": module, "call": call}
        exec(compile("result = call()", filename, "exec"), space)
        return bool(space["result"])

    def asked() -> bool:
        return opens.shown(__file__)

    linecache = f"{opens._STDLIB}linecache.py"
    inspect = f"{opens._STDLIB}inspect.py"
    read = lambda: as_module("linecache", linecache, asked)  # noqa: E731
    report = "/site/_pytest/_code/code.py"
    assert as_module("_pytest._code.code", report, lambda: as_module("inspect", inspect, read)) is True
    # the project's own code reading source (a test's inspect.getsource, logging a traceback)
    assert as_module("tests.test_x", "/p/tests/test_x.py", lambda: as_module("inspect", inspect, read)) is False
    # pytest reading without linecache (a collection, pytester's copy of an example)
    assert as_module("_pytest.pytester", "/site/_pytest/pytester.py", asked) is False
    assert opens.shown() is False


@pytest.fixture
def unwrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    """os's probes and what it says each supports, as they were after the test."""
    for name in opens.PROBES:
        monkeypatch.setattr(os, name, getattr(os, name))
    for name in ("supports_dir_fd", "supports_fd", "supports_follow_symlinks", "supports_effective_ids"):
        monkeypatch.setattr(os, name, set(getattr(os, name)))


@pytest.mark.usefixtures("unwrapped")
def test_a_probe_of_a_path_is_told_once_and_os_works_as_before(tmp_path: Path) -> None:
    told: list[Any] = []

    def tell(path: Any) -> None:
        told.append(path)
        os.stat(tmp_path)  # what telling does is none of it

    opens.wrap_probes(tell)
    missing, there = tmp_path / "custom" / "greeting.txt", tmp_path / "there.txt"
    there.write_text("x")
    assert not missing.exists()
    assert there.is_file()
    assert os.access(there, os.R_OK)
    assert told == [missing, there, there]
    told.clear()
    folder = os.open(tmp_path, os.O_RDONLY)
    try:
        os.stat("there.txt", dir_fd=folder)  # relative to a descriptor
    finally:
        os.close(folder)
    assert told == []
    # shutil copies without following links only where os says stat supports it
    (tmp_path / "link").symlink_to(there)
    shutil.copy2(tmp_path / "link", tmp_path / "copy", follow_symlinks=False)
    assert (tmp_path / "copy").is_symlink()
    assert os.stat in os.supports_follow_symlinks
    assert os.stat.__name__ == "stat"


@pytest.mark.usefixtures("unwrapped")
def test_a_failure_to_tell_is_never_the_caller_s(tmp_path: Path) -> None:
    def tell(_path: Any) -> None:
        raise RuntimeError("the recording failed")

    opens.wrap_probes(tell)
    assert (tmp_path / "x").exists() is False


def test_a_listing_of_names_and_a_listing_of_entries_are_kept_apart() -> None:
    # os.listdir gives names; os.scandir entries with their type and stat(), which move with
    # an edit; the standard library's walkers hand their callers names alone
    assert opens.marked("data", "os.listdir") == "data/"
    assert opens.marked("data", "os.scandir") == "data//"
    assert opens.marked("data/x.txt", "open") == "data/x.txt"
    assert opens.marked("data/x.txt", opens.PROBE) == "data/x.txt"

    def walked() -> str:
        space: dict[str, Any] = {"call": lambda: opens.marked("data", "os.scandir", __file__)}
        exec(compile("result = call()", f"{opens._STDLIB}os.py", "exec"), space)
        return str(space["result"])

    assert walked() == "data/"


def test_an_edit_counts_for_a_listing_of_its_folder_s_entries_and_not_of_its_names() -> None:
    from device_matrix.selection import read_by

    # an edit (the file there before and now): only its own folder's entries see it
    assert not read_by("data/x.txt", {"data/"}, listed=False)
    assert read_by("data/x.txt", {"data//"}, listed=False)
    assert not read_by("data/sub/x.txt", {"data//"}, listed=False)
    # a file added or removed: any listing above it
    assert read_by("data/sub/x.txt", {"data//"}, listed=True)
    assert read_by("data/sub/x.txt", {"data/"}, listed=True)
    assert not read_by("other/x.txt", {"data/", "data//"}, listed=True)
    # a read through a changed link to a folder
    assert read_by("data", {"data/x.txt"}, listed=False)
    assert not read_by("x.txt", {"data//"}, listed=False)
