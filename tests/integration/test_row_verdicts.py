"""A row that ended red without a failing test is judged, never "nothing to judge" (#30)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from device_matrix.errors import EXIT_OK, EXIT_TESTS_FAILED
from device_matrix.report.verdicts import VERDICTS
from tests.conftest import Project

EVERY_VERDICT = ",".join(VERDICTS)


def _verdicts(p: Project) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((p.results / "triage" / "triage.json").read_text())
    verdicts: dict[str, Any] = data["verdicts"]
    return verdicts


def _red_run(p: Project, status: int) -> None:
    proc = p.run("run", "--device", "fixture", env={"FIXTURE_SESSION_STATUS": str(status)})
    assert proc.returncode != EXIT_OK, proc.stdout + proc.stderr
    rec = p.record()
    assert {t["outcome"] for t in rec["tests"]} == {"passed"}  # every test passed; the session did not
    assert rec["status"] != "passed"


@pytest.mark.parametrize("status", [1, 2, 5, 3, 4])
def test_a_row_a_session_hook_turned_red_is_judged_and_gated(project: Callable[..., Project], status: int) -> None:
    # #30: a conftest setting session.exitstatus made the row red, yet triage said "no
    # failures: nothing to judge" and --fail-on naming every verdict exited 0
    p = project("session_status")
    _red_run(p, status)
    proc = p.run("triage", "--no-history", "--pr", "7", "--base", "main", "--fail-on", EVERY_VERDICT)
    assert proc.returncode == EXIT_TESTS_FAILED, proc.stdout + proc.stderr
    v = _verdicts(p)
    assert v["line"] != "no failures: nothing to judge"
    (item,) = v["items"]
    assert (item["row"], item["nodeid"]) == ("fixture", None)
    assert item["verdict"] == "unknown"
    assert f"pytest exited {status}" in item["evidence"]


@pytest.mark.parametrize("status", [3, 4])
def test_a_session_that_ran_every_test_is_no_infrastructure(project: Callable[..., Project], status: int) -> None:
    # #30: with exit status 3 or 4 the row was "infrastructure" (it "errored before its
    # tests", which ran and passed), so --fail-on new passed a change that broke the session
    p = project("session_status")
    history = p.root / "history.sqlite"
    assert p.run("run", "--device", "fixture").returncode == EXIT_OK
    assert p.run("triage", "--history", str(history), "--branch", "main").returncode == EXIT_OK
    _red_run(p, status)
    proc = p.run(
        "triage", "--history", str(history), "--history-read-only", "--pr", "7", "--base", "main", "--fail-on", "new"
    )
    assert proc.returncode == EXIT_TESTS_FAILED, proc.stdout + proc.stderr
    (item,) = _verdicts(p)["items"]
    assert item["verdict"] == "new", item
    assert "passed on main" in item["evidence"] and f"pytest exited {status}" in item["evidence"]


def test_a_row_red_on_the_base_the_same_way_is_broken_there(project: Callable[..., Project]) -> None:
    p = project("session_status")
    history = p.root / "history.sqlite"
    _red_run(p, 1)
    assert p.run("triage", "--history", str(history), "--branch", "main").returncode == EXIT_OK
    _red_run(p, 1)
    proc = p.run("triage", "--history", str(history), "--history-read-only", "--pr", "7", "--base", "main")
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
    (item,) = _verdicts(p)["items"]
    assert item["verdict"] == "broken-on-base", item
