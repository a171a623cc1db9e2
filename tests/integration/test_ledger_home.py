"""#42: the embedded ledger is the project's state, like the run history: one place per
project (``.device-matrix/ledger.sqlite``), whatever ``--results`` says.

It lived in the results folder: ``rm -rf results`` deleted every issue filed and every
disable; ``run --results recheck --rerun-disabled`` said "no disabled tests" while a
disable was open in ``results/ledger.sqlite``; ``issues sync recheck`` read another, empty
tracker. A ledger found where it used to be is moved once, and said so; one that cannot
be moved without losing either is refused, both kept.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK, EXIT_TRACKER
from device_matrix.issues.ledger import Ledger
from tests.integration.test_disable_runs import _project

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


def test_removing_the_results_folder_keeps_every_issue_and_disable(tmp_path: Path) -> None:
    p = _project(tmp_path)
    assert p.run("issues", "disable", TEST, "--device", "cuda").returncode == 0
    assert (p.root / HOME).is_file() and not (p.results / "ledger.sqlite").exists()
    shutil.rmtree(p.results, ignore_errors=True)
    listed = p.run("issues", "list")
    assert f"ledger:1  open    DISABLED {TEST}  [.device-matrix/ledger.sqlite]" in listed.stdout, listed.stdout
    assert p.run("run", "--device", "cuda").returncode == 0
    assert {t["nodeid"]: t["outcome"] for t in p.record("cuda")["tests"]}[TEST] == "skipped"


def test_another_results_folder_reads_the_same_tracker(tmp_path: Path) -> None:
    p = _project(tmp_path)
    assert p.run("issues", "disable", TEST, "--device", "cuda").returncode == 0
    recheck = p.run("run", "--results", "recheck", "--device", "cuda", "--rerun-disabled", "--times", "1")
    assert recheck.returncode == 0, recheck.stdout + recheck.stderr
    assert "no disabled tests" not in recheck.stdout
    assert "ledger:1 (suites/dis/test_dis.py::test_plain) on cuda: 1 of 1 run(s) passed" in recheck.stdout
    assert not (p.root / "recheck" / "ledger.sqlite").exists()
    # the sync of that folder reads the same tracker: the disable is there to report on
    synced = p.run("issues", "sync", "recheck")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "ledger:1: 1 of 1 passed: closes it" in synced.stdout, synced.stdout
    assert "ledger:1  closed" in p.run("issues", "list", "recheck").stdout


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


def test_a_disable_in_the_seed_file_applies_on_a_fresh_clone(tmp_path: Path) -> None:
    """The seed file is the ledger every clone has: its open DISABLED issue applies before
    any command has made the project's ledger (a CI job, a fresh clone)."""
    p = _project(tmp_path)
    (p.root / "device-matrix-issues.toml").write_text(
        f'[[issue]]\nid = 1\ntitle = "DISABLED {TEST}"\nbody = "devices: cuda"\n'
        f'\n[[issue]]\nid = 2\ntitle = "DISABLED suites/dis/test_dis.py::test_param"\nstate = "closed"\n'
    )
    assert p.run("run", "--device", "cuda").returncode == 0
    outcomes = {t["nodeid"]: t["outcome"] for t in p.record("cuda")["tests"]}
    assert outcomes[TEST] == "skipped"
    assert outcomes["suites/dis/test_dis.py::test_param[1]"] == "passed"  # closed in the seed


def test_an_old_ledger_replaces_a_project_ledger_that_holds_only_the_seed(tmp_path: Path) -> None:
    root = _project_root(tmp_path)
    (root / "device-matrix-issues.toml").write_text('[[issue]]\nid = 1\ntitle = "seeded"\n')
    Ledger(root / HOME, root / "device-matrix-issues.toml").close()  # made by a command: the seed alone
    Ledger(root / "results" / "ledger.sqlite", root / "device-matrix-issues.toml").create("filed here", "", [])
    assert main(["--project", str(root), "issues", "list"]) == EXIT_OK
    assert _titles(root / HOME) == ["seeded", "filed here"]
    assert not (root / "results" / "ledger.sqlite").exists()


# --- the state folder ignores itself, whatever makes it -----------------------------------


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


def test_the_reenable_check_makes_a_state_folder_that_ignores_itself(tmp_path: Path) -> None:
    p = _project(tmp_path)
    (p.root / "device-matrix-issues.toml").write_text(f'[[issue]]\nid = 1\ntitle = "DISABLED {TEST}"\n')
    proc = p.run("run", "--device", "cpu", "--rerun-disabled", "--times", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ledger:1 (suites/dis/test_dis.py::test_plain) on cpu: 1 of 1 run(s) passed" in proc.stdout
    assert (p.root / ".device-matrix" / ".gitignore").read_text() == "*\n"
