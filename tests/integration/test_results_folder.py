"""The row's results folder: one run at a time, a full disk, a test that deletes it."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from device_matrix import config
from device_matrix.output import Output
from device_matrix.run import runner
from device_matrix.run.context import RunOptions
from device_matrix.run.plan import plan_row
from tests.conftest import Project, clean_env
from tests.runs import outcomes_of, plan_state, watch_plans, write_suite

pytestmark = pytest.mark.slow


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


DELETE = """
import os, shutil


def test_a_before():
    pass


def test_b_deletes():
    shutil.rmtree(os.environ["DELETE"])


def test_c_aborts():
    os.abort()


def test_d_after():
    pass
"""


@pytest.mark.parametrize("target", ["results/fixture", "results/fixture/attempts"])
def test_a_deleted_results_folder_still_gets_a_truthful_record(project: Callable[..., Project], target: str) -> None:
    p = project("passing")
    write_suite(p, "delete", {"test_delete.py": DELETE})
    proc = p.run("run", "--device", "fixture", "--reruns", "0", env={"DELETE": target})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    record = p.record()
    assert outcomes_of(record) == {
        "test_a_before": "passed",
        "test_b_deletes": "passed",
        "test_c_aborts": "crashed",
        "test_d_after": "passed",
    }
    reason = record["reason"] or ""
    assert "deleted while attempt 1 ran" in reason, reason
    assert "attempts/01" in reason
    # the lock is held again for the rest of the run, by this runner
    assert (p.results / "fixture" / ".lock").read_text().strip() == str(record["runner_pid"])
    assert (p.results / "fixture" / "junit.xml").is_file()


LOSES = """
import os, pathlib, shutil

FOLDER = pathlib.Path(os.environ["FOLDER"])


def test_a_removes_the_lock_and_the_log():
    (FOLDER / ".lock").unlink()
    (FOLDER / "output.log").unlink()


def test_b_aborts():
    os.abort()


def test_c_removes_the_first_attempt():
    shutil.rmtree(FOLDER / "attempts" / "01")
"""


def test_a_run_changes_nothing_of_its_plan_and_says_what_a_test_deleted(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    # #41: the lock, the attempts' folders and the evidence lost were kept on the plan's folder,
    # changed while the run went on: they are the run's state; the plan, every object it holds
    # to the bottom, is at the end of a real run what its maker made
    p = project("passing")
    write_suite(p, "loses", {"test_loses.py": LOSES})
    folder = p.results / "fixture"
    monkeypatch.setenv("FOLDER", str(folder))
    plans = watch_plans(monkeypatch)
    cfg = config.load(p.root)
    told = io.StringIO()
    record = runner.run_row(cfg, plan_row(cfg, cfg.row("fixture")), RunOptions(), Output(told))
    [(setup, born)] = plans
    assert plan_state(setup) == born
    assert outcomes_of(record) == {
        "test_a_removes_the_lock_and_the_log": "passed",
        "test_b_aborts": "crashed",
        "test_c_removes_the_first_attempt": "passed",
    }
    # what was lost reaches the record and the terminal as it did: the lock taken again
    first = "deleted while attempt 1 ran: its lock (taken again), output.log (the output until then)"
    later = "attempts/01 (journal copy, faulthandler stacks)"
    reason = record["reason"] or ""
    assert first in reason and later in reason and reason.index(first) < reason.index(later), reason
    assert f"evidence {first}" in told.getvalue() and later in told.getvalue()
    assert (folder / ".lock").read_text().strip() == str(os.getpid()) == str(record["runner_pid"])
