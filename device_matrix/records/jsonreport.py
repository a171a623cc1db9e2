"""A report in pytest-json-report's layout, built from the journal: complete after crashes.

The pytest-json-report plugin writes nothing for a process that dies. This file has the
same shape (created, duration, exitcode, root, environment, summary, tests with their
setup/call/teardown phases) and every test of the run, a crashed one as an ``error``
whose ``device_matrix`` entry says crashed or timeout, with its crash id.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.schema import RunRecord

JSON_REPORT_OUTCOME = {
    "passed": "passed",
    "failed": "failed",
    "error": "error",
    "skipped": "skipped",
    "xfailed": "xfailed",
    "xpassed": "xpassed",
    "crashed": "error",
    "timeout": "error",
    "not_run": "skipped",
}


def build(
    record: RunRecord,
    phases: Mapping[str, Sequence[Mapping[str, Any]]],
    locations: Mapping[str, tuple[str, int | None]],
    root: Path,
) -> dict[str, Any]:
    counts: dict[str, int] = {}
    tests = []
    for t in record["tests"]:
        outcome = JSON_REPORT_OUTCOME[t["outcome"]]
        counts[outcome] = counts.get(outcome, 0) + 1
        entry: dict[str, Any] = {
            "nodeid": t["nodeid"],
            "lineno": (locations.get(t["nodeid"]) or ("", None))[1],
            "outcome": outcome,
            "keywords": [part for part in t["nodeid"].replace("::", "/").split("/") if part],
        }
        for phase in phases.get(t["nodeid"], ()):
            body: dict[str, Any] = {"duration": phase["duration"], "outcome": phase["outcome"]}
            if phase.get("longrepr"):
                body["longrepr"] = phase["longrepr"]
            entry[str(phase["when"])] = body
        if t["outcome"] in ("crashed", "timeout", "not_run"):
            entry["device_matrix"] = {"outcome": t["outcome"], "crash": t["crash"], "message": t["message"]}
        tests.append(entry)
    started = dt.datetime.fromisoformat(record["started_at"]).timestamp()
    return {
        "created": started,
        "duration": record["duration"],
        "exitcode": 0 if record["status"] == "passed" else 1,
        "root": str(root),
        "environment": {
            "Python": record["environment"].get("python"),
            "Platform": record["environment"].get("platform"),
            "Packages": record["environment"].get("packages"),
        },
        "summary": {**counts, "total": len(tests), "collected": len(tests)},
        "tests": tests,
        "device_matrix": {"row": record["row"], "status": record["status"], "run": "run.json"},
    }


def write(path: Path, report: Mapping[str, Any]) -> None:
    write_json_atomic(path, report)
