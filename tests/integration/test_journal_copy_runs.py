"""A real run's journal copies hold no second copy of its failures' tracebacks (#32), and a
run interrupted with failures recorded resumes with every traceback in run.json, once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from device_matrix.run.journal import STORED_IN
from tests.conftest import Project, clean_env, make_project

pytestmark = pytest.mark.slow

FAILING = """
import time

def test_first():
    raise AssertionError("\\n".join(f"line {i:05d} of what the first failure says" for i in range(400)))

def test_second():
    raise AssertionError("\\n".join(f"line {i:05d} of what the second failure says" for i in range(400)))

def test_slow():
    time.sleep({sleep})
"""


def _project(root: Path, sleep: float = 0) -> Project:
    root.mkdir(parents=True, exist_ok=True)
    p = make_project(root, [])
    folder = root / "suites" / "talk"
    folder.mkdir(parents=True)
    (folder / "test_talk.py").write_text(FAILING.replace("{sleep}", str(sleep)))
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace("suites = []", 'suites = ["talk"]'))
    return p


def _journals(p: Project) -> str:
    return "".join(path.read_text() for path in sorted((p.results / "fixture" / "attempts").glob("*/journal.jsonl")))


def test_a_runs_journal_copy_holds_no_second_copy_of_its_failures(tmp_path: Path) -> None:
    p = _project(tmp_path)
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    tests = {t["nodeid"].rsplit("::", 1)[1]: t for t in p.record()["tests"]}
    for name in ("first", "second"):
        assert f"line 00399 of what the {name} failure says" in tests[f"test_{name}"]["message"]
    journal = _journals(p)
    assert "of what the first failure says" not in journal and "of what the second failure says" not in journal
    assert journal.count(f'"stored":"{STORED_IN}"') == 2


def test_an_interrupted_run_resumes_and_its_failures_stay_in_one_file(tmp_path: Path) -> None:
    p = _project(tmp_path, sleep=60)
    command = [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--no-gdb"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    runner = subprocess.Popen([*command, "--device", "fixture"], cwd=p.root, env=clean_env(), **quiet)
    try:
        deadline = time.monotonic() + 120
        # the two failures are journaled, the slow test is running: the runner is told to stop
        while time.monotonic() < deadline and '"nodeid":"suites/talk/test_talk.py::test_slow"' not in _journals_of(p):
            time.sleep(0.2)
        os.kill(runner.pid, signal.SIGTERM)
        runner.wait(60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    record = p.record()
    assert record["status"] == "interrupted", record["reason"]
    assert "of what the first failure says" not in _journals(p)
    (p.root / "suites" / "talk" / "test_talk.py").write_text(FAILING.replace("{sleep}", "0"))
    proc = p.run("run", "--device", "fixture", "--resume")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    resumed = {t["nodeid"].rsplit("::", 1)[1]: t for t in p.record()["tests"]}
    assert [resumed[n]["outcome"] for n in ("test_first", "test_second", "test_slow")] == ["failed", "failed", "passed"]
    assert "line 00399 of what the first failure says" in resumed["test_first"]["message"]
    assert resumed["test_first"]["attempt"] == 1  # kept from the interrupted run, not run again
    assert "of what the first failure says" not in _journals(p)


def _journals_of(p: Project) -> str:
    try:
        return _journals(p)
    except OSError:
        return ""
