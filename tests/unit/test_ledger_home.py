"""#42: the embedded ledger is the project's state: where it is kept, and how an old one moves there.

The part of these tests that starts no process; the rest is in tests/integration/test_ledger_home.py (#41)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK, EXIT_TRACKER
from device_matrix.issues.ledger import Ledger

TEST = "suites/dis/test_dis.py::test_plain"


HOME = Path(".device-matrix") / "ledger.sqlite"


def _titles(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [str(r[0]) for r in db.execute("SELECT title FROM issues ORDER BY id")]
    finally:
        db.close()


def _project_root(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n\n[tool.device-matrix]\n')
    return root


def test_a_ledger_in_the_results_folder_is_moved_once_and_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project_root(tmp_path)
    Ledger(root / "results" / "ledger.sqlite").create("filed before the move", "", [])
    assert main(["--project", str(root), "issues", "list"]) == EXIT_OK
    said = capsys.readouterr()
    assert "moved" in said.err + said.out and ".device-matrix/ledger.sqlite" in said.err + said.out
    assert "ledger:1  open    filed before the move  [.device-matrix/ledger.sqlite]" in said.out
    assert not (root / "results" / "ledger.sqlite").exists()
    assert _titles(root / HOME) == ["filed before the move"]
    assert main(["--project", str(root), "issues", "list"]) == EXIT_OK
    again = capsys.readouterr()
    assert "moved" not in again.out + again.err  # once


def test_a_ledger_in_the_folder_named_by_results_is_moved_too(tmp_path: Path) -> None:
    root = _project_root(tmp_path)
    Ledger(tmp_path / "elsewhere" / "ledger.sqlite").create("filed with --results elsewhere", "", [])
    assert main(["--project", str(root), "issues", "list", str(tmp_path / "elsewhere")]) == EXIT_OK
    assert _titles(root / HOME) == ["filed with --results elsewhere"]
    assert not (tmp_path / "elsewhere" / "ledger.sqlite").exists()


def test_two_ledgers_that_both_hold_issues_are_refused_and_both_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project_root(tmp_path)
    Ledger(root / HOME).create("filed in the project's ledger", "", [])
    Ledger(root / "results" / "ledger.sqlite").create("filed in the old one", "", [])
    before = {p: p.read_bytes() for p in (root / HOME, root / "results" / "ledger.sqlite")}
    for command in (["issues", "list"], ["issues", "disable", TEST], ["skips", "list"]):
        assert main(["--project", str(root), *command]) == EXIT_TRACKER, command
        err = capsys.readouterr().err
        assert "results/ledger.sqlite" in err and ".device-matrix/ledger.sqlite" in err and "TIP" in err
    assert {p: p.read_bytes() for p in before} == before


def test_a_leftover_copy_or_an_empty_old_ledger_is_removed(tmp_path: Path) -> None:
    root = _project_root(tmp_path)
    Ledger(root / HOME).create("filed", "", [])
    (root / "results").mkdir()
    shutil.copy(root / HOME, root / "results" / "ledger.sqlite")  # a move cut off before its end
    assert main(["--project", str(root), "issues", "list"]) == EXIT_OK
    assert not (root / "results" / "ledger.sqlite").exists() and _titles(root / HOME) == ["filed"]

    Ledger(root / "results" / "ledger.sqlite").close()  # a ledger with no issue at all
    assert main(["--project", str(root), "issues", "list"]) == EXIT_OK
    assert not (root / "results" / "ledger.sqlite").exists() and _titles(root / HOME) == ["filed"]


def test_a_ledger_moved_meanwhile_by_another_command_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two shards of one run start together: the second finds the old ledger gone."""
    from device_matrix import config
    from device_matrix.errors import TrackerError
    from device_matrix.issues import home

    root = _project_root(tmp_path)
    Ledger(root / "results" / "ledger.sqlite").create("filed before the move", "", [])
    cfg = config.load(root)
    real = home.adopt

    def raced(old: Path, new: Path) -> str | None:
        real(old, new)  # the other shard's move
        raise TrackerError(f"{old}: cannot move the issue ledger")

    monkeypatch.setattr(home, "adopt", raced)
    assert home.ledger_file(cfg) == root / HOME
    assert _titles(root / HOME) == ["filed before the move"]


def test_an_old_ledger_replaces_a_project_ledger_that_holds_only_the_seed(tmp_path: Path) -> None:
    root = _project_root(tmp_path)
    (root / "device-matrix-issues.toml").write_text('[[issue]]\nid = 1\ntitle = "seeded"\n')
    Ledger(root / HOME, root / "device-matrix-issues.toml").close()  # made by a command: the seed alone
    Ledger(root / "results" / "ledger.sqlite", root / "device-matrix-issues.toml").create("filed here", "", [])
    assert main(["--project", str(root), "issues", "list"]) == EXIT_OK
    assert _titles(root / HOME) == ["seeded", "filed here"]
    assert not (root / "results" / "ledger.sqlite").exists()


def test_the_cached_github_list_makes_a_state_folder_that_ignores_itself(tmp_path: Path) -> None:
    from device_matrix.issues.disables import read_disables
    from tests.builders import client
    from tests.github_server import serve

    with serve() as gh:
        gh.add_issue("DISABLED a.py::test_x", "devices: cuda", labels=())
        tracker = client(gh)
        read_disables(lambda: tracker, tmp_path / ".device-matrix")
    assert (tmp_path / ".device-matrix" / "disables.json").is_file()
    assert (tmp_path / ".device-matrix" / ".gitignore").read_text() == "*\n"
