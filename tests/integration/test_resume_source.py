"""--resume keeps outcomes only from a run of the same code: commit and working tree (#41)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.builders import git, git_project
from tests.conftest import Project

pytestmark = pytest.mark.slow

LONG = {
    "test_long.py": "def test_l1():\n    assert True\n\n\ndef test_l2():\n    pass\n\n\ndef test_l3():\n    pass\n",
}
FILE = "suites/mine/test_long.py"


def _interrupted_after_l1(p: Project) -> None:
    """A full run, then its record as an interrupt after test_l1 leaves it."""
    first = p.run("run", "--device", "fixture", "--test", FILE)
    assert first.returncode == 0, first.stdout + first.stderr
    record = p.record()
    for t in record["tests"]:
        if not t["nodeid"].endswith("test_l1"):
            t["outcome"] = "not_run"
    record["status"] = "interrupted"
    (p.results / "fixture" / "run.json").write_text(json.dumps(record))


def _break_l1(p: Project) -> None:
    path = p.root / FILE
    path.write_text(path.read_text().replace("assert True", "assert False"))


def _outcomes(p: Project) -> dict[str, str]:
    return {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in p.record()["tests"]}


@pytest.mark.parametrize("commit", [True, False], ids=["new-commit", "edited-tree"])
def test_resume_of_other_code_runs_the_row_whole(tmp_path: Path, commit: bool) -> None:
    p = git_project(tmp_path, LONG)
    _interrupted_after_l1(p)
    _break_l1(p)
    if commit:
        git(p.root, "commit", "-qam", "l1 fails")
    proc = p.run("run", "--device", "fixture", "--test", FILE, "--resume")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _outcomes(p) == {"test_l1": "failed", "test_l2": "passed", "test_l3": "passed"}
    record = p.record()
    what = "commit" if commit else "working tree"
    assert record["resume"].startswith("ran the row whole: the code changed"), record["resume"]
    assert f"its {what} differs" in record["resume"]
    assert f"its {what} differs" in proc.stdout + proc.stderr
    assert [a["purpose"] for a in record["attempts"]] == ["run"]
    if commit:
        assert record["source"]["commit"] == git(p.root, "rev-parse", "HEAD")


def test_resume_of_the_same_code_continues(tmp_path: Path) -> None:
    p = git_project(tmp_path, LONG)
    _interrupted_after_l1(p)
    (p.root / "notes.txt").write_text("ignored by nothing: an untracked file is code too\n")
    proc = p.run("run", "--device", "fixture", "--test", FILE, "--resume")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.record()["resume"].startswith("ran the row whole"), "an untracked file changed the tree"
    _interrupted_after_l1(p)
    proc = p.run("run", "--device", "fixture", "--test", FILE, "--resume")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert record["resume"].startswith("continued the run started at"), record["resume"]
    assert [a["purpose"] for a in record["attempts"]] == ["run", "resume"]


def test_resume_outside_git_compares_the_project_files(tmp_path: Path) -> None:
    p = git_project(tmp_path, LONG)
    shutil.rmtree(p.root / ".git")  # the files stay, git is gone
    _interrupted_after_l1(p)
    assert p.record()["source"]["commit"] is None
    _break_l1(p)
    proc = p.run("run", "--device", "fixture", "--test", FILE, "--resume")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert _outcomes(p)["test_l1"] == "failed"
    assert "its files differ" in p.record()["resume"]


def test_resume_after_device_matrix_wrote_its_state_continues(tmp_path: Path) -> None:
    """device-matrix's own folders are not the project's code, whether git ignores them or
    not: a state folder that was there before device-matrix first wrote into it has none of
    its own ignore file, and a project may have committed its history by mistake (#41)."""
    p = git_project(tmp_path, LONG)
    (p.root / ".gitignore").write_text("__pycache__/\n")  # neither the results nor the state folder
    state = p.root / ".device-matrix"
    state.mkdir()
    (state / "history.sqlite").write_bytes(b"a history, committed\n")
    git(p.root, "add", "-A")
    git(p.root, "commit", "-qm", "the state folder is the project's")
    _interrupted_after_l1(p)
    assert not (state / ".gitignore").exists()  # there before device-matrix: left as it was
    (state / "history.sqlite").write_bytes(b"a history, written by triage\n")
    (state / "ledger.sqlite").write_bytes(b"a ledger, written by issues sync\n")
    assert "?? .device-matrix/ledger.sqlite" in git(p.root, "status", "--porcelain", "-uall")
    proc = p.run("run", "--device", "fixture", "--test", FILE, "--resume")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert record["resume"].startswith("continued the run started at"), record["resume"]
    assert [a["purpose"] for a in record["attempts"]] == ["run", "resume"]
    # the project's own files still count, next to them
    _interrupted_after_l1(p)
    _break_l1(p)
    proc = p.run("run", "--device", "fixture", "--test", FILE, "--resume")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "its working tree differs" in p.record()["resume"]
