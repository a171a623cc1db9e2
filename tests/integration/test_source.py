"""Where a run's code came from (#25): Actions variables and payloads, git, flags; and records
that know it (older ones without it still load)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from device_matrix.errors import UsageProblem
from device_matrix.records.schema import load_run
from device_matrix.records.source import base_lane, detect, lane, override
from tests.unit.test_source import ACTIONS, _env


def test_a_pull_request_reads_its_number_base_and_head_from_the_payload(tmp_path: Path) -> None:
    payload = {
        "pull_request": {
            "number": 17,
            "head": {"sha": "2" * 40, "ref": "fast-optimizer"},
            "base": {"sha": "3" * 40, "ref": "main"},
        }
    }
    src = detect(
        _env(
            tmp_path,
            payload,
            GITHUB_EVENT_NAME="pull_request",
            GITHUB_REF="refs/pull/17/merge",
            GITHUB_HEAD_REF="fast-optimizer",
            GITHUB_BASE_REF="main",
            GITHUB_REF_NAME="17/merge",
        ),
        cwd=tmp_path,  # not a git checkout: the merge-base is the payload's base
    )
    assert src["event"] == "pull_request" and src["pull_request"] == 17
    assert src["ref"] == "fast-optimizer" and src["base_ref"] == "main"
    assert src["head_commit"] == "2" * 40 and src["base_commit"] == "3" * 40
    assert lane(src) == "pr:17" and base_lane(src) == "branch:main"


def test_a_pull_request_without_a_payload_takes_its_number_from_the_ref(tmp_path: Path) -> None:
    env = {
        **ACTIONS,
        "GITHUB_EVENT_NAME": "pull_request_target",
        "GITHUB_REF": "refs/pull/9/merge",
        "GITHUB_EVENT_PATH": str(tmp_path / "absent.json"),
        "GITHUB_BASE_REF": "main",
    }
    src = detect(env, cwd=tmp_path)
    assert src["pull_request"] == 9 and src["event"] == "pull_request" and src["event_name"] == "pull_request_target"
    assert base_lane(src) == "branch:main"


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def test_from_git_with_a_base_and_its_merge_base(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "one")
    fork = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "-b", "feature")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "two")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-q", "--allow-empty", "-m", "three")
    _git(repo, "checkout", "-q", "feature")
    src = detect({}, cwd=repo)
    assert src["origin"] == "git" and src["ref"] == "feature" and src["commit"] == _git(repo, "rev-parse", "HEAD")
    assert src["event"] == "local" and lane(src) == "branch:feature"
    based = override(src, base="main", cwd=repo)
    assert based["base_ref"] == "main" and based["base_commit"] == fork and base_lane(based) == "branch:main"
    pr = override(based, pull_request=3, cwd=repo)
    assert lane(pr) == "pr:3" and pr["event"] == "pull_request"


def test_outside_git_and_actions_nothing_is_known(tmp_path: Path) -> None:
    src = detect({}, cwd=tmp_path)
    assert src["origin"] == "none" and src["commit"] is None and lane(src) == ""


@pytest.mark.parametrize(
    ("field", "value"),
    [("commit", "not-a-sha"), ("branch", "has space"), ("branch", "a..b"), ("base", "-rf"), ("pull_request", 0)],
)
def test_a_bad_flag_is_a_usage_error_with_a_tip(tmp_path: Path, field: str, value: Any) -> None:
    with pytest.raises(UsageProblem) as info:
        override(detect({}, cwd=tmp_path), cwd=tmp_path, **{field: value})
    assert info.value.tip


def test_run_writes_its_source_into_run_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from device_matrix.cli import main

    (tmp_path / "suites" / "mine").mkdir(parents=True)
    (tmp_path / "suites" / "mine" / "test_x.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "pyproject.toml").write_text(
        "[tool.device-matrix]\ncrash_reruns = 0\n[tool.device-matrix.devices.cpu]\nsuites = ['mine']\nrun_in = 'host'\n"
    )
    for name in [*ACTIONS, "GITHUB_EVENT_NAME", "GITHUB_EVENT_PATH", "GITHUB_REF_NAME", "GITHUB_STEP_SUMMARY"]:
        monkeypatch.delenv(name, raising=False)
    code = main(
        [
            "--project",
            str(tmp_path),
            "run",
            "--device",
            "cpu",
            "--branch",
            "feature",
            "--pr",
            "12",
            "--base",
            "main",
            "--commit",
            "abcdef1",
        ]
    )
    assert code == 0
    src = load_run(tmp_path / "results" / "cpu" / "run.json")["source"]
    assert src is not None
    assert (src["ref"], src["pull_request"], src["base_ref"], src["commit"]) == ("feature", 12, "main", "abcdef1")
