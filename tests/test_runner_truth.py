"""Integration: under ordinary faults the run record tells the truth (every test, every crash)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project, clean_env

pytestmark = pytest.mark.slow


def _outcomes(record: dict[str, Any]) -> dict[str, str]:
    return {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _cmdline(entry: Path) -> str:
    try:
        return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _run_until_the_hang(p: Project) -> tuple[subprocess.Popen[str], list[int]]:
    """`device-matrix run` over the hang suite, once test_c_dies runs; its pytest processes."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--device", "fixture"],
        cwd=p.root,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "test_b_before" in line:
            break
    time.sleep(0.5)
    children = [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and str(p.root) in _cmdline(entry) and "pytest" in _cmdline(entry)
    ]
    assert children
    return proc, children


def test_pytest_exit_with_returncode_0_is_not_green(project: Callable[..., Project]) -> None:
    p = project("early_exit")
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert record["status"] == "failed"
    outcomes = _outcomes(record)
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
    outcomes = _outcomes(record)
    assert set(outcomes) == {"test_a_before", "test_b_closes_output", "test_c_after"}
    assert outcomes["test_a_before"] == "passed"
    # the test that closed them cannot read as passed, and its neighbour still has an outcome
    assert outcomes["test_b_closes_output"] != "passed"
    assert outcomes["test_c_after"] in ("passed", "not_run")


@pytest.mark.parametrize("args", [["-n", "2"], ["-n2"], ["--numprocesses=2"], ["--dist", "load"]])
def test_xdist_is_refused_up_front(project: Callable[..., Project], args: list[str]) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", "--", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "pytest-xdist" in proc.stderr and "TIP" in proc.stderr
    # nothing ran: the record says the run was refused, and why
    record = p.record()
    assert record["status"] == "error" and record["tests"] == [] and record["attempts"] == []
    assert record["reason"].startswith("refused: ") and "pytest-xdist" in record["reason"]


def test_xdist_from_the_project_addopts_never_goes_green(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / "pytest.ini").write_text("[pytest]\naddopts = -n 2\n")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode != 0
    assert p.record()["status"] == "error"


@pytest.mark.parametrize("device", ["", " , "])
def test_an_empty_device_list_is_a_usage_error(project: Callable[..., Project], device: str) -> None:
    p = project("passing")
    proc = p.run("run", "--device", device)
    assert proc.returncode == 2
    assert "names no row" in proc.stderr and "fixture" in proc.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_an_interrupted_run_ends_its_child_and_says_so(project: Callable[..., Project], sig: int) -> None:
    p = project("hang", row="test_timeout = 600")
    # an earlier run's record must not survive as if it were this one's
    (p.results / "fixture").mkdir(parents=True)
    (p.results / "fixture" / "run.json").write_text('{"status": "passed"}')
    proc, children = _run_until_the_hang(p)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, out + err
    assert [pid for pid in children if _alive(pid)] == []
    record = p.record()
    assert record["status"] == "interrupted"
    outcomes = _outcomes(record)
    assert outcomes["test_a_before"] == "passed"
    assert outcomes["test_c_dies"] == "not_run"
    assert outcomes["test_e_after_fails"] == "not_run"
    assert "--resume" in err


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


def test_a_second_run_into_the_same_folder_is_refused(project: Callable[..., Project]) -> None:
    p = project("hang", row="test_timeout = 600")
    first = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--device", "fixture"],
        cwd=p.root,
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        lock = p.results / "fixture" / ".lock"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (lock.exists() and lock.read_text().strip()):
            time.sleep(0.1)
        second = p.run("run", "--device", "fixture")
        assert second.returncode == 5
        assert f"pid {first.pid}" in second.stderr
        assert "TIP" in second.stderr
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(60)
    assert p.record()["status"] == "interrupted"  # the first run's own record, untouched by the second


def test_a_test_finishing_in_the_grace_period_is_the_one_timed_out(project: Callable[..., Project]) -> None:
    p = project("late_finish", row="test_timeout = 4")
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    record = p.record()
    outcomes = _outcomes(record)
    assert outcomes["test_a_overruns"] == "timeout", proc.stdout
    assert outcomes["test_b_next"] == "passed"  # resumed, not blamed
    (crash,) = record["crashes"]
    assert crash["nodeid"].endswith("::test_a_overruns")
    assert crash["kind"] == "timeout"


def test_nothing_of_an_attempt_outlives_it(project: Callable[..., Project], tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    p = project("grandchild")
    proc = p.run("run", "--device", "fixture", env={"GRANDCHILD_PIDS": str(pids)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    left = {f.name: int(f.read_text()) for f in pids.iterdir()}
    assert set(left) == {"stubborn", "detached"}
    assert [name for name, pid in left.items() if _alive(pid)] == []


def test_a_hang_at_exit_is_named_and_ended(project: Callable[..., Project]) -> None:
    p = project("atexit_hang", row="test_timeout = 3")
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1
    assert _outcomes(record) == {"test_a": "passed", "test_b": "passed"}
    (crash,) = record["crashes"]
    assert crash["phase"] == "exit" and crash["kind"] == "timeout"
    assert crash["deadline"] == 30  # a process phase gets at least 30 s, however short test_timeout
    assert "_hang" in (crash["diagnosis"]["python_stack"] or "")
    assert "at exit" in record["reason"]


def test_a_hang_while_importing_a_module_keeps_the_healthy_module(project: Callable[..., Project]) -> None:
    p = project("import_hang", row="test_timeout = 3")
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes["suites/import_hang/test_healthy.py::test_healthy_one"] == "passed"
    assert outcomes["suites/import_hang/test_healthy.py::test_healthy_two"] == "passed"
    assert outcomes["suites/import_hang/test_import_hang.py"] == "timeout"
    (crash,) = record["crashes"]
    assert crash["phase"] == "collection" and crash["kind"] == "timeout"
    assert crash["deadline"] == 30
    assert "test_import_hang.py" in (crash["diagnosis"]["python_stack"] or "")


def test_tests_run_from_the_project_root_and_leave_no_core(project: Callable[..., Project], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = project("cwd_abort")
    shutil_data = p.root / "suites" / "cwd_abort" / "data"
    (p.root / "data").mkdir()
    (p.root / "data" / "input.txt").write_text((shutil_data / "input.txt").read_text())
    proc = p.run("run", "--device", "fixture", "--no-gdb", "--reruns", "0", env={"CWD_ABORT_DIR": str(elsewhere)})
    record = p.record()
    outcomes = _outcomes(record)
    assert outcomes["test_a_reads_a_file_relative_to_the_root"] == "passed", proc.stdout
    assert outcomes["test_b_moves_away_and_aborts"] == "crashed"
    assert outcomes["test_c_after"] == "passed"
    assert "../" not in (p.results / "fixture" / "output.log").read_text()
    assert list(elsewhere.iterdir()) == []
    assert not list(p.root.glob("core*"))
    assert not list((p.results / "fixture").rglob("core*"))


def test_a_forged_journal_cannot_turn_an_abort_into_a_pass(project: Callable[..., Project]) -> None:
    p = project("forge")
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    outcomes = _outcomes(record)
    assert outcomes["test_a_before"] == "passed"
    assert outcomes["test_b_forges_and_aborts"] == "crashed"
    assert outcomes["test_c_after"] == "passed"
    (crash,) = record["crashes"]
    assert "journal broke" in (crash["diagnosis"]["hint"] or "")


def test_a_full_disk_is_an_environment_error_not_a_timeout(project: Callable[..., Project]) -> None:
    p = project("passing", row="test_timeout = 5")
    # the runner's files may not grow past a few kilobytes (writes fail with EFBIG)
    limit = "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (3000, 3000)); "
    limit += "sys.argv[0] = 'device-matrix'; runpy.run_module('device_matrix', run_name='__main__')"
    proc = subprocess.run(
        [sys.executable, "-c", limit, "--project", str(p.root), "run", "--device", "fixture", "--", "-v"],
        cwd=p.root,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "could not be written" in proc.stderr or "cannot write" in proc.stderr
    assert "TIMEOUT" not in proc.stdout
    assert "Traceback" not in proc.stderr


def test_a_crash_in_a_process_the_test_started_is_diagnosed(project: Callable[..., Project]) -> None:
    p = project("worker_crash")
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1
    outcomes = _outcomes(record)
    assert outcomes == {"test_a_fine": "passed", "test_b_worker_dies": "failed", "test_c_plain_failure": "failed"}
    (crash,) = record["crashes"]  # the plain failure is not a crash
    assert crash["kind"] == "worker_crash" and crash["nodeid"].endswith("::test_b_worker_dies")
    assert crash["diagnosis"]["signal_name"] == "SIGSEGV"
    assert record["status"] == "crashed"
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in record["tests"]}
    assert tests["test_b_worker_dies"]["crash"] == crash["id"]


CANARIES = {
    "CANARY_HF": "hf_" + "CanaryHuggingFaceToken" * 2,
    "CANARY_AWS": "AKIA" + "CANARYKEY0123456",
    "CANARY_URL": "https://canary-user:canary-pass-9x7@example.invalid/x",
    # an opaque value: caught only because its variable's name says token
    "CANARY_OPAQUE_TOKEN": "opaque-canary-value-31337",
}


def test_a_planted_secret_reaches_no_file_and_no_request(project: Callable[..., Project]) -> None:
    from tests.github_server import serve

    p = project("canary")
    with serve() as gh:
        (p.root / "pyproject.toml").write_text(
            (p.root / "pyproject.toml").read_text()
            + f"\n[tool.device-matrix.tracker]\nkind = 'github'\nrepository = '{gh.repo}'\n"
            f"api_url = '{gh.url}'\nwrite_interval = 0\n"
        )
        env = {**CANARIES, "GITHUB_TOKEN": gh.token}
        run = p.run("run", "--device", "fixture", "--reruns", "1", env=env)
        assert run.returncode == 1, run.stdout + run.stderr
        record = p.record()
        assert {t["outcome"] for t in record["tests"]} >= {"passed", "failed", "skipped", "xfailed", "crashed"}
        # a token in an identifier is a placeholder of its own value (#22)
        assert any("[id-[redacted:" in t["nodeid"] and t["nodeid"].endswith("]]") for t in record["tests"])
        assert "id-[redacted:" in run.stdout
        sync = p.run("issues", "sync", "--apply", env=env)
        assert sync.returncode == 0, sync.stdout + sync.stderr
        tri = p.run("triage", env=env)
        assert tri.returncode in (0, 1), tri.stdout + tri.stderr
        sent = [f"{r.method} {r.path} {r.headers} {r.body}" for r in gh.received]
    assert gh.received  # the sync did talk to the tracker
    secrets = [*list(CANARIES.values()), "canary-pass-9x7"]
    outputs = {"run stdout": run.stdout + run.stderr, "sync": sync.stdout + sync.stderr, "triage": tri.stdout}
    for name, text in outputs.items():
        assert [s for s in secrets if s in text] == [], name
    for request in sent:
        assert [s for s in secrets if s in request] == [], request[:200]
    leaked = []
    for f in p.root.rglob("*"):
        if f.is_file() and "suites" not in f.relative_to(p.root).parts:
            data = f.read_bytes()
            leaked += [f"{f}: {s[:12]}..." for s in secrets if s.encode() in data]
    assert leaked == []


def test_a_missing_interpreter_is_an_environment_error(project: Callable[..., Project]) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", "--python", "/nonexistent/python3")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "/nonexistent/python3" in proc.stderr and "TIP" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_malformed_disable_list_says_why_on_the_terminal(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / "device-matrix-disabled.toml").write_text("[[disable]]\ntest = 42\n")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "error"
    # the real message, not only in output.log
    assert "device-matrix-disabled.toml" in proc.stdout and "disable" in record["reason"]


def test_a_module_skipped_as_a_whole_is_in_the_record(project: Callable[..., Project]) -> None:
    p = project("module_skip")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes == {
        "suites/module_skip/test_module_skip.py": "skipped",
        "suites/module_skip/test_present.py::test_present": "passed",
    }
    (skipped,) = [t for t in record["tests"] if t["outcome"] == "skipped"]
    assert "a_package_that_is_not_installed" in skipped["message"]


def test_a_runner_killed_with_sigkill_takes_its_child_along(project: Callable[..., Project]) -> None:
    p = project("hang", row="test_timeout = 600")
    proc, children = _run_until_the_hang(p)
    proc.kill()
    proc.wait(30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and [pid for pid in children if _alive(pid)]:
        time.sleep(0.1)
    assert [pid for pid in children if _alive(pid)] == []
    # and the record says it was cut off, with the runner's pid
    record = p.record()
    assert record["status"] == "running" and record["runner_pid"] == proc.pid


@pytest.mark.parametrize("arg", ["--lf", "--ff", "--sw"])
def test_options_of_the_disabled_cache_are_refused_up_front(project: Callable[..., Project], arg: str) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", "--", arg)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cache" in proc.stderr and "TIP" in proc.stderr
