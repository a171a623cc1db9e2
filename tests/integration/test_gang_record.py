"""A gang's test is in every file of its row's record: run.json, junit.xml, report.json (#23).

A CI job that reads junit.xml or report.json (a test reporter, an annotation step) must see
the same failing gang that run.json holds, with the row's time covering the gang's.
"""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project, make_project

pytestmark = pytest.mark.slow


def _gang_project(root: Path, *args: str) -> Project:
    listed = ", ".join(f'"{a}"' for a in args)
    gang = f'{{ name = "g", module = "suites.gang.worker", world_size = 2, args = [{listed}] }}'
    p = make_project(root, ["gang"], row=f"gangs = [{gang}]")
    (p.root / "suites" / "__init__.py").touch()  # `-m suites.gang.worker` finds this package first
    return p


def _time(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp).timestamp()


def _check_files(folder: Path, record: dict[str, Any]) -> None:
    """junit.xml and report.json of ``folder`` say what ``record`` (its run.json) says."""
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes["gang::g"] == "crashed"
    suites = ET.parse(folder / "junit.xml").getroot()
    cases = {f"{c.get('classname')}::{c.get('name')}": c for c in suites.iter("testcase")}
    (gang,) = [c for key, c in cases.items() if "gang" in key and "test_gang_row" not in key]
    assert gang.find("failure") is not None or gang.find("error") is not None
    assert int(suites.get("tests", "0")) == len(outcomes)
    assert int(suites.get("failures", "0")) + int(suites.get("errors", "0")) >= 1
    report = json.loads((folder / "report.json").read_text())
    entries = {e["nodeid"]: e for e in report["tests"]}
    assert entries["gang::g"]["outcome"] == "error"  # a crash, as a crashed test's
    assert entries["gang::g"]["device_matrix"]["outcome"] == "crashed"
    assert report["exitcode"] == 1 and report["summary"]["total"] == len(outcomes)
    assert report["device_matrix"]["status"] == record["status"] == "crashed"


def test_a_whole_runs_junit_and_report_hold_its_gang_and_its_time_covers_it(tmp_path: Path) -> None:
    """Seen: junit.xml and report.json said 2 tests passed (exit 0) while run.json said crashed."""
    p = _gang_project(tmp_path / "p", "--iterations", "5", "--segv-rank", "1")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    _check_files(p.results / "fixture", record)
    gang = json.loads((p.results / "fixture/gangs/g/run.json").read_text())
    # the row ran until its gang ended: its end and duration are not those of its tests alone
    assert _time(record["finished_at"]) >= _time(gang["finished_at"])
    assert record["duration"] >= max(t["duration"] for t in record["tests"])


def test_a_shards_junit_and_report_hold_the_gang_it_keeps(tmp_path: Path) -> None:
    """A `--shard 1/2` job on CI uploads its own junit.xml: the gang shard 1 kept is in it."""
    p = _gang_project(tmp_path / "p", "--iterations", "5", "--segv-rank", "1")
    proc = p.run("run", "--device", "fixture", "--shard", "1/2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    folder = p.results / "fixture/shards/1"
    _check_files(folder, json.loads((folder / "run.json").read_text()))
