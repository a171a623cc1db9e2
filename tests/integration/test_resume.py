"""--resume: what finished keeps its outcome, the rest runs, and an earlier verdict is not lost."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow


def test_resume_continues_an_interrupted_run(project: Callable[..., Project]) -> None:
    p = project("passing")
    assert p.run("run", "--device", "fixture").returncode == 0
    record = p.record()
    first = record["tests"][0]["nodeid"]
    # as an interrupted run leaves it: one outcome known, the rest not run
    for t in record["tests"][1:]:
        t["outcome"] = "not_run"
    record["status"] = "interrupted"
    (p.results / "fixture" / "run.json").write_text(json.dumps(record))
    proc = p.run("run", "--device", "fixture", "--resume")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    resumed = p.record()
    assert resumed["status"] == "passed"
    assert {t["outcome"] for t in resumed["tests"]} == {"passed"}
    assert [a["purpose"] for a in resumed["attempts"]] == ["run", "resume"]
    assert resumed["attempts"][1]["selected"] == len(record["tests"]) - 1
    assert resumed["tests"][0]["nodeid"] == first and resumed["tests"][0]["attempt"] == 1


def test_resume_of_a_run_that_collected_nothing_runs_the_row(project: Callable[..., Project]) -> None:
    p = project("passing")
    assert p.run("run", "--device", "fixture").returncode == 0
    record = p.record()
    total = len(record["tests"])
    # cut off before collection finished (a SIGKILL, an import that took too long)
    record.update(status="interrupted", tests=[], attempts=[])
    (p.results / "fixture" / "run.json").write_text(json.dumps(record))
    proc = p.run("run", "--device", "fixture", "--resume")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    again = p.record()
    assert len(again["tests"]) == total and {t["outcome"] for t in again["tests"]} == {"passed"}


def test_resume_with_nothing_left_keeps_the_earlier_verdict(project: Callable[..., Project]) -> None:
    p = project("exit_status")
    first = p.run("run", "--device", "fixture")
    assert first.returncode == 1 and p.record()["status"] == "failed"
    again = p.run("run", "--device", "fixture", "--resume")
    assert again.returncode == 1, again.stdout
    assert p.record()["status"] == "failed"


def test_no_empty_process_after_a_crash_in_the_last_test(project: Callable[..., Project]) -> None:
    p = project("segv")
    (p.root / "suites" / "segv" / "test_segv.py").write_text(
        "import ctypes\n\ndef test_a():\n    pass\n\ndef test_z_dies():\n    ctypes.string_at(0)\n"
    )
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1
    assert [a["purpose"] for a in p.record()["attempts"]] == ["run"]
