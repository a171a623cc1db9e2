"""The row is green only when every collected test has an outcome and pytest agreed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.runs import outcomes_of, write_suite
from tests.userproject import user_project

pytestmark = pytest.mark.slow


def test_pytest_exit_with_returncode_0_is_not_green(project: Callable[..., Project]) -> None:
    p = project("early_exit")
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert record["status"] == "failed"
    outcomes = outcomes_of(record)
    assert outcomes["test_a_before"] == "passed"
    assert outcomes["test_b_exits"] == "error"  # the session ended inside it
    assert outcomes["test_c_after"] == "not_run"
    assert record["summary"]["total"] == 3
    assert "did not run" in (record["reason"] or "") or "not run" in (record["reason"] or "")
    # pytest exited 0, yet not everything passed: its exit status is not read as "all passed"
    (after,) = [t for t in record["tests"] if t["nodeid"].endswith("test_c_after")]
    assert "exit status 0" in after["message"] and "all passed" not in after["message"], after["message"]


def test_closed_stdout_and_stderr_lose_no_test(project: Callable[..., Project]) -> None:
    p = project("closed_fds")
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert record["status"] != "passed"
    outcomes = outcomes_of(record)
    assert set(outcomes) == {"test_a_before", "test_b_closes_output", "test_c_after"}
    assert outcomes["test_a_before"] == "passed"
    # the test that closed them cannot read as passed, and its neighbour still has an outcome
    assert outcomes["test_b_closes_output"] != "passed"
    assert outcomes["test_c_after"] in ("passed", "not_run")


def test_one_non_zero_pytest_exit_is_never_overwritten(project: Callable[..., Project]) -> None:
    p = project("exit_status", row='isolation = "file"')
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert set(outcomes_of(record).values()) == {"passed"}
    assert record["status"] == "failed" and "pytest exited 2" in record["reason"]


RAISING_HOOK = """
def pytest_runtest_logreport(report):
    if report.nodeid.endswith("test_b_hook_raises") and report.when == "call":
        raise RuntimeError("a plugin's own bug")
"""


def test_an_internal_error_of_pytest_is_the_rows_reason(project: Callable[..., Project]) -> None:
    p = project("passing")
    tests = (
        "def test_a_before():\n    pass\n\n\ndef test_b_hook_raises():\n    pass\n\n\ndef test_c_after():\n    pass\n"
    )
    write_suite(p, "hook", {"conftest.py": RAISING_HOOK, "test_hook.py": tests})
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    outcomes = {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}
    assert outcomes == {"test_a_before": "passed", "test_b_hook_raises": "error", "test_c_after": "not_run"}
    reason = record["reason"] or ""
    assert "pytest exited 3 (internal error)" in reason and "a plugin's own bug" in reason, reason
    assert "=== device-matrix" not in reason  # pytest's last words, not the log's attempt lines


def test_a_usage_error_is_the_rows_reason_in_pytests_words(tmp_path: Path) -> None:
    # after output.log gained each attempt's end line, the reason read
    # "...: tests/nope.py |  | === device-matrix attempt 1 exited with 4"
    p = user_project(tmp_path, {"tests/test_a.py": "def test_a():\n    pass\n"})
    p.run("run", "--device", "cpu", "--test", "tests/nope.py")
    reason = p.record("cpu")["reason"] or ""
    assert reason.startswith("pytest exited 4 (usage error): ") and "not found: tests/nope.py" in reason, reason
    assert "=== device-matrix" not in reason
