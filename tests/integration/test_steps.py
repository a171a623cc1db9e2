"""The runner as steps, and the surface a driver of shards calls: open, prepare, collect, finish.

Each test drives the public functions of device_matrix.run.runner in a process of its
own (the runner adopts the orphans of its children: not the test worker's business).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import Project, clean_env
from tests.runs import write_suite

pytestmark = pytest.mark.slow

# argv: project root, then what to do after collecting: "nothing" or "first" (run the first test only)
DRIVER = """
import dataclasses, json, signal, sys
from pathlib import Path

from device_matrix import config
from device_matrix.output import Output
from device_matrix.run import runner
from device_matrix.run.attempt import Interrupted
from device_matrix.run.plan import plan_row


def interrupt(signum, frame):
    raise Interrupted(signum)


signal.signal(signal.SIGTERM, interrupt)
cfg = config.load(Path(sys.argv[1]))
plan = plan_row(cfg, cfg.row("fixture"))
options = runner.RunOptions()
seen = {}
with runner.opened(cfg, plan, options, Output(open("/dev/null", "w"))) as run:
    verdict = runner.prepare(run)
    seen["after_prepare"] = json.loads((run.setup.folder.path / "run.json").read_text())["status"]
    print("prepared", flush=True)
    found = runner.collect(run)
    seen["nodeids"], seen["problem"] = found.nodeids, found.problem
    if sys.argv[2] == "first":
        record = runner.finish(run, verdict, part=runner.Part(tuple(found.nodeids[:1])))
        seen["tests"] = [t["nodeid"] for t in record["tests"]]
        seen["status"] = record["status"]
        seen["selected"] = list(run.execution.part.select)
    seen["options_untouched"] = options == runner.RunOptions()
print(json.dumps(seen), flush=True)
"""


def _drive(p: Project, then: str = "nothing") -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(p.root), then],
        cwd=p.root,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return seen


def _earlier_green(p: Project) -> None:
    assert p.run("run", "--device", "fixture").returncode == 0, "the earlier run"
    assert p.record()["status"] == "passed"


def test_the_running_record_comes_before_collection_and_a_selection_runs_alone(
    project: Callable[..., Project],
) -> None:
    p = project("passing")
    _earlier_green(p)
    seen = _drive(p, "first")
    assert seen["after_prepare"] == "running"  # the earlier green record is gone before collecting
    nodeids = seen["nodeids"]
    assert len(nodeids) > 1 and seen["problem"] is None
    assert seen["tests"] == nodeids[:1] and seen["selected"] == nodeids[:1]
    assert seen["status"] == "passed"
    assert seen["options_untouched"]  # the selection went into a copy of the options
    record = p.record()
    assert [a["purpose"] for a in record["attempts"]] == ["run"]  # the collection is not an attempt of it


def test_collection_leaves_out_a_module_that_kills_the_process_on_import(project: Callable[..., Project]) -> None:
    p = project("iso_crash")
    seen = _drive(p)
    assert seen["nodeids"] == ["suites/iso_crash/test_a.py::test_a", "suites/iso_crash/test_c.py::test_c"]
    assert seen["problem"] is None


def test_collection_leaves_out_a_module_that_hangs_on_import(project: Callable[..., Project]) -> None:
    p = project("import_hang", row="test_timeout = 3", top="phase_timeout_min = 6")
    seen = _drive(p)
    assert seen["nodeids"] == [
        "suites/import_hang/test_healthy.py::test_healthy_one",
        "suites/import_hang/test_healthy.py::test_healthy_two",
    ]


def test_a_collection_that_finds_nothing_says_why(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / "suites" / "passing" / "conftest.py").write_text("import os\n\nos.abort()\n")
    seen = _drive(p)
    assert seen["nodeids"] is None
    assert seen["problem"].startswith("collection ended with exit status -6"), seen["problem"]
    # the child's last lines, not the dump and end line the runner writes after them (#20)
    assert "=== device-matrix" not in seen["problem"] and "Fatal Python error" not in seen["problem"]


def test_an_interrupt_while_collecting_replaces_the_earlier_record(project: Callable[..., Project]) -> None:
    p = project("passing")
    _earlier_green(p)
    write_suite(p, "slow_import", {"test_slow.py": "import time\n\ntime.sleep(60)\n\n\ndef test_x():\n    pass\n"})
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(p.root), "nothing"],
        cwd=p.root,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "prepared"
    time.sleep(1.0)  # into the collection's import of the slow module
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "Interrupted" in err
    record = p.record()
    assert record["status"] == "interrupted" and "--resume" in (record["reason"] or "")
    assert record["tests"] == [] and record["attempts"] == []
