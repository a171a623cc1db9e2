"""Integration: fixture suites that die in every way; nothing is lost, the culprit is named."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.runs import outcomes_of, write_suite

pytestmark = pytest.mark.slow


def _by_name(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["nodeid"].rsplit("::", 1)[-1]: t for t in record["tests"]}


def _assert_neighbours_kept(record: dict[str, Any]) -> None:
    tests = _by_name(record)
    assert tests["test_a_before"]["outcome"] == "passed"
    assert tests["test_b_before"]["outcome"] == "passed"
    assert tests["test_d_after"]["outcome"] == "passed"
    assert tests["test_e_after_fails"]["outcome"] == "failed"
    assert "an ordinary failure after the crash" in tests["test_e_after_fails"]["message"]
    assert record["summary"]["total"] == 5


@pytest.mark.parametrize(
    ("suite", "signal_name", "python_stack"),
    [
        ("segv", "SIGSEGV", True),
        ("abort", "SIGABRT", True),
        ("sigbus", "SIGBUS", True),
        ("sigfpe", "SIGFPE", True),
        ("sigill", "SIGILL", True),
        ("sigkill", "SIGKILL", False),
    ],
)
def test_signal_crash_is_named_and_the_run_completes(
    project: Callable[..., Project], suite: str, signal_name: str, python_stack: bool
) -> None:
    p = project(suite)
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "crashed"
    _assert_neighbours_kept(record)
    dying = _by_name(record)["test_c_dies"]
    assert dying["outcome"] == "crashed"
    (crash,) = record["crashes"]
    assert crash["nodeid"].endswith("::test_c_dies")
    assert crash["phase"] == "test" and crash["when"] == "call"
    d = crash["diagnosis"]
    assert d["signal_name"] == signal_name
    assert dying["crash"] == crash["id"]
    if python_stack:
        assert "in test_c_dies" in d["python_stack"]
    else:
        assert d["python_stack"] is None
        assert "OOM" in d["hint"]
    assert crash["classification"] == "deterministic"
    assert len(crash["reruns"]) == 1 and crash["reruns"][0]["outcome"] == "crashed"
    assert crash["reruns"][0]["fingerprint"] == d["fingerprint"]
    assert f"test_{suite}.py::test_c_dies" in crash["repro"]
    # the terminal summary names it too
    assert "test_c_dies" in proc.stdout and signal_name in proc.stdout
    # resumed, not rerun from scratch: the tests before the crash ran once
    assert [a["purpose"] for a in record["attempts"]] == ["run", "resume", "rerun"]
    assert record["attempts"][1]["selected"] == 2


@pytest.mark.parametrize(
    ("suite", "when", "code"),
    [("exit_setup", "setup", 3), ("exit_call", "call", 0), ("exit_teardown", "teardown", 7)],
)
def test_os_exit_is_a_crash_with_its_exit_code(
    project: Callable[..., Project], suite: str, when: str, code: int
) -> None:
    p = project(suite)
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    _assert_neighbours_kept(record)
    (crash,) = record["crashes"]
    assert crash["when"] == when
    assert crash["diagnosis"]["signal_name"] is None
    assert crash["diagnosis"]["exit_code"] == code
    assert _by_name(record)["test_c_dies"]["outcome"] == "crashed"


def test_hang_is_ended_with_every_thread_stack(project: Callable[..., Project]) -> None:
    p = project("hang")
    proc = p.run("run", "--device", "fixture", "--test-timeout", "3")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    _assert_neighbours_kept(record)
    (crash,) = record["crashes"]
    assert crash["kind"] == "timeout"
    assert _by_name(record)["test_c_dies"]["outcome"] == "timeout"
    stack = crash["diagnosis"]["python_stack"]
    assert "in test_c_dies" in stack
    assert crash["reruns"] == []  # hangs are not rerun: each costs a whole timeout
    assert _by_name(record)["test_c_dies"]["duration"] >= 3


def test_crash_during_collection_blames_the_module_and_runs_the_rest(project: Callable[..., Project]) -> None:
    p = project("collect_crash")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    (crash,) = record["crashes"]
    assert crash["phase"] == "collection"
    assert crash["nodeid"] == "suites/collect_crash/test_collect_crash.py"  # a module, not a test
    assert crash["diagnosis"]["signal_name"] == "SIGSEGV"
    assert "test_collect_crash.py" in crash["diagnosis"]["python_stack"]
    assert crash["reruns"] == []
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes == {
        "suites/collect_crash/test_collect_crash.py": "crashed",
        "suites/collect_crash/test_fine.py::test_fine": "passed",
    }
    assert "collecting again without suites/collect_crash/test_collect_crash.py" in proc.stdout


def test_crash_at_exit_after_every_test_passed(project: Callable[..., Project]) -> None:
    p = project("exit_crash")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1
    record = p.record()
    assert [t["outcome"] for t in record["tests"]] == ["passed", "passed"]
    (crash,) = record["crashes"]
    assert crash["phase"] == "exit" and crash["nodeid"] is None
    assert crash["diagnosis"]["signal_name"] == "SIGABRT"
    assert "at exit" in record["reason"]


def test_flaky_crash_is_classified_flaky(project: Callable[..., Project], tmp_path: Any) -> None:
    p = project("skips_flaky")
    marker = tmp_path / "flaky-marker"
    proc = p.run("run", "--device", "fixture", "--reruns", "2", env={"FLAKY_MARKER": str(marker)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    (crash,) = record["crashes"]
    assert crash["nodeid"].endswith("test_flaky_crash")
    assert crash["classification"] == "flaky"
    assert [r["outcome"] for r in crash["reruns"]] == ["passed"]


def test_restart_cap_records_the_rest_as_not_run(project: Callable[..., Project]) -> None:
    p = project("segv")
    proc = p.run("run", "--device", "fixture", "--max-restarts", "0", "--reruns", "0")
    assert proc.returncode == 1
    record = p.record()
    tests = _by_name(record)
    assert tests["test_d_after"]["outcome"] == "not_run"
    assert "max_restarts" in record["reason"]


def test_junit_and_log_survive_the_crash(project: Callable[..., Project]) -> None:
    p = project("segv")
    p.run("run", "--device", "fixture", "--reruns", "0")
    junit = (p.results / "fixture" / "junit.xml").read_text()
    assert 'name="test_c_dies"' in junit and "SIGSEGV" in junit
    assert 'tests="5"' in junit
    log = (p.results / "fixture" / "output.log").read_text()
    assert "attempt 2 (resume)" in log
    report = json.loads((p.results / "fixture" / "report.json").read_text())
    assert report["summary"]["total"] == 5 and report["summary"]["passed"] == 3
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in report["tests"]}
    assert tests["test_c_dies"]["outcome"] == "error"
    assert tests["test_c_dies"]["device_matrix"]["outcome"] == "crashed"
    assert tests["test_a_before"]["call"]["outcome"] == "passed"
    assert tests["test_a_before"]["lineno"] > 0


def test_a_crash_in_a_process_the_test_started_is_diagnosed(project: Callable[..., Project]) -> None:
    p = project("worker_crash")
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1
    outcomes = outcomes_of(record)
    assert outcomes == {"test_a_fine": "passed", "test_b_worker_dies": "failed", "test_c_plain_failure": "failed"}
    (crash,) = record["crashes"]  # the plain failure is not a crash
    assert crash["kind"] == "worker_crash" and crash["nodeid"].endswith("::test_b_worker_dies")
    assert crash["diagnosis"]["signal_name"] == "SIGSEGV"
    assert record["status"] == "crashed"
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in record["tests"]}
    assert tests["test_b_worker_dies"]["crash"] == crash["id"]


def test_gdb_reads_the_core_of_a_real_crash_and_the_core_is_removed(project: Callable[..., Project]) -> None:
    # the other tests run without gdb (it takes a second or more a core): this one reads one
    p = project("segv")
    proc = p.run("run", "--device", "fixture", "--reruns", "0", gdb=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = p.record()["crashes"]
    d = crash["diagnosis"]
    try:
        pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    except OSError:
        pattern = "|"
    if pattern.startswith("|") or "/" in pattern:
        # the host sends cores elsewhere (systemd-coredump, apport): none reaches the project
        assert d["core_file"] is None and d["gdb_backtrace"] is None
    elif shutil.which("gdb") is None:
        assert d["core_file"] is not None and d["core_file"].endswith("(deleted after reading)")
        assert d["gdb_backtrace"] is None and d["gdb_frames"] == []
    else:
        assert d["core_file"] is not None and d["core_file"].endswith("(deleted after reading)")
        assert "Program terminated with signal SIGSEGV" in (d["gdb_backtrace"] or ""), d["gdb_backtrace"]
        assert d["gdb_frames"] and len(d["gdb_frames"]) <= 10
        assert d.get("gdb_frames_missing") is None  # the host's files are the ones the process ran
    assert not list(p.root.glob("core*")) and not list(p.results.rglob("core*"))


@pytest.mark.parametrize("when", ["call", "setup"])
def test_a_crashed_test_lasts_as_long_as_it_ran_until_the_crash(project: Callable[..., Project], when: str) -> None:
    # its phases never reported: the runner's own clock, from the test's start to the
    # process's end, is its duration (a spread's split weighs the test by it), not 0
    p = project("passing")
    body = "time.sleep(1.5)\n    ctypes.string_at(0)\n"
    write_suite(
        p,
        "slow_crash",
        {
            "test_slow_crash.py": "import ctypes\nimport time\n\nimport pytest\n\n\n"
            f"@pytest.fixture\ndef dies():\n    {body if when == 'setup' else 'pass'}\n\n\n"
            f"def test_dies(dies):\n    {body if when == 'call' else 'pass'}\n\n\n"
            "def test_after():\n    pass\n"
        },
    )
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    tests = _by_name(record)
    assert tests["test_dies"]["outcome"] == "crashed" and record["crashes"][0]["when"] == when
    assert tests["test_after"]["outcome"] == "passed"
    (process,) = [a for a in record["attempts"] if a["index"] == tests["test_dies"]["attempt"]]
    assert 1.5 <= tests["test_dies"]["duration"] <= process["duration"]
