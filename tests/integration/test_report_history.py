"""The tests of this concept that start a process; the rest are in tests/unit/test_report_history.py (#41)."""

from __future__ import annotations

from pathlib import Path

from device_matrix.report import history as history_mod
from device_matrix.report.history import History


def test_the_history_folder_it_makes_in_a_project_is_ignored_by_git(tmp_path: Path) -> None:
    # a new user's `git status` after the first triage listed .device-matrix/ to be committed
    import subprocess

    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    History.open(project / history_mod.DEFAULT_PATH).close()
    assert (project / ".device-matrix" / ".gitignore").read_text() == "*\n"
    git_status = ["git", "status", "--porcelain", "--untracked-files=all"]
    status = subprocess.run(git_status, cwd=project, capture_output=True, text=True, check=True)
    assert status.stdout == ""
    # a folder the user made is theirs: nothing is written into it but the history
    mine = tmp_path / "mine"
    mine.mkdir()
    History.open(mine / "history.sqlite").close()
    assert not (mine / ".gitignore").exists()
