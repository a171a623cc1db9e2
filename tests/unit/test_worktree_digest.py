"""The digest of a run's code that --resume compares (device_matrix/run/worktree.py, #41):
device-matrix's own folders left out, git asked for the commit once."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_matrix.config import Config, load
from device_matrix.issues import disables
from device_matrix.issues.home import ledger_file
from device_matrix.report.history import DEFAULT_PATH
from device_matrix.run import worktree

Calls = list[tuple[str, ...]]


def _cfg(root: Path, results: str | None = None) -> Config:
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "a.py").write_text("A = 1\n")
    (root / "pyproject.toml").write_text("[tool.device-matrix]\n")
    return load(root, results_dir=results, environ={})


def _fake_git(monkeypatch: pytest.MonkeyPatch, top: Path | None, untracked: str = "src/new.py\0") -> Calls:
    """git as worktree sees it: in a repository at ``top`` (None: none), what it was asked kept."""
    calls: Calls = []

    def git(cwd: Path | None, *args: str) -> tuple[str | None, str]:
        calls.append(args)
        if top is None:
            return None, "fatal: not a git repository"
        answers = {"rev-parse": "f00d\n" if args[1] == "HEAD" else f"{top}\n", "diff": "", "ls-files": untracked}
        return answers[args[0]], ""

    monkeypatch.setattr(worktree, "git", git)
    return calls


def _specs(calls: Calls, command: str) -> tuple[str, ...]:
    (args,) = (a for a in calls if a[0] == command)
    return args[args.index("--") :]


def test_every_place_device_matrix_writes_in_a_project_is_in_one_of_its_own_folders(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    assert cfg.own_folders == (cfg.results_dir, cfg.state_dir)
    written = [
        cfg.results_dir / "cpu" / "run.json",
        cfg.project_root / DEFAULT_PATH,  # the history
        ledger_file(cfg),
        cfg.state_dir / disables.CACHE_FILE,  # the disables read
        cfg.state_dir / "reruns",  # the re-enable check's runs
    ]
    for path in written:
        assert any(f in path.parents for f in cfg.own_folders), path


def test_git_leaves_the_results_and_state_folders_out_and_is_not_asked_the_commit_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _cfg(tmp_path)
    calls = _fake_git(monkeypatch, tmp_path)
    first = worktree.digest(cfg.project_root, cfg.own_folders, head="c0ffee")
    assert ("rev-parse", "HEAD") not in calls  # the run's source asked git already
    specs = ("--", ".", ":(exclude,literal)results", ":(exclude,literal).device-matrix")
    assert _specs(calls, "diff") == specs and _specs(calls, "ls-files") == specs
    assert [a[:2] for a in calls if a[0] == "diff"] == [("diff", "c0ffee")]  # against that commit
    assert first is not None and first != worktree.digest(cfg.project_root, cfg.own_folders, head="beef")
    calls.clear()
    assert worktree.digest(cfg.project_root, cfg.own_folders) is not None
    assert calls.count(("rev-parse", "HEAD")) == 1  # asked where the run's source did not


def test_a_folder_that_holds_the_project_or_is_elsewhere_is_not_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "p"
    calls = _fake_git(monkeypatch, root)
    worktree.digest(root, [root, tmp_path, tmp_path / "elsewhere", root / "out"], head="c0ffee")
    assert _specs(calls, "ls-files") == ("--", ".", ":(exclude,literal)out")


def test_outside_git_the_results_folder_is_left_out_unless_it_holds_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_git(monkeypatch, None)
    cfg = _cfg(tmp_path, results="out")
    before = worktree.digest(cfg.project_root, cfg.own_folders)
    (tmp_path / "out" / "cpu").mkdir(parents=True)
    (tmp_path / "out" / "cpu" / "run.json").write_text("{}")
    assert worktree.digest(cfg.project_root, cfg.own_folders) == before
    # `--results .`: the rows' folders are in the project's root, and so is its code
    cfg = _cfg(tmp_path, results=".")
    before = worktree.digest(cfg.project_root, cfg.own_folders)
    (tmp_path / "src" / "a.py").write_text("A = 2\n")
    assert worktree.digest(cfg.project_root, cfg.own_folders) != before
