"""A report in pytest-json-report's layout, built from the journal: complete after crashes.

The pytest-json-report plugin writes nothing for a process that dies. This file has the
same shape (created, duration, exitcode, root, environment, summary, collectors, tests
with their setup/call/teardown phases, ``lineno`` 0-based as pytest's locations are) and
every test of the run, a crashed one as an ``error`` whose ``device_matrix`` entry says
crashed or timeout, with its crash id.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.junit import traceback_excerpt
from device_matrix.records.outcomes import (
    CRASHING_OUTCOMES,
    DESELECTED_OUTCOMES,
    OUTCOMES,
    RAISED_OUTCOMES,
    UNFINISHED_OUTCOMES,
)
from device_matrix.records.schema import RunRecord, TestRecord

# pytest-json-report's outcome of each of ours: it has no word for a test that died or never ran
JSON_REPORT_OUTCOME: Mapping[str, str] = {
    **{o: o for o in OUTCOMES},
    **dict.fromkeys(CRASHING_OUTCOMES, "error"),
    "not_run": "skipped",
}


class _Item(TypedDict):
    nodeid: str
    type: str  # the node's class name: Module, Class, Function, UnitTestCase, TestCaseFunction, Dir...


class CollectedItem(_Item, total=False):
    lineno: int  # 0-based, items with a location only


class _Report(TypedDict):
    nodeid: str
    outcome: str  # passed | failed
    result: list[CollectedItem]


class Collector(_Report, total=False):
    """One ``pytest_collectreport``, as pytest-json-report writes it."""

    longrepr: str


def _lineno(locations: Mapping[str, tuple[str, int | None]], nodeid: str) -> int | None:
    """The journal's 1-based line as pytest's 0-based ``location[1]``."""
    line = (locations.get(nodeid) or ("", None))[1]
    return None if line is None else line - 1


def derive_collectors(record: RunRecord, locations: Mapping[str, tuple[str, int | None]]) -> list[Collector]:
    """Collectors rebuilt from the recorded nodeids when the child's reports are not at hand.

    The tree and order are pytest's (the session first, then each node after its
    children); a node's type is read from its nodeid (``Dir``, ``Module``, ``Class``,
    ``Function``), so unittest's ``UnitTestCase``/``TestCaseFunction`` read as
    ``Class``/``Function``. A module that failed to collect is a failed collector.
    """
    children: dict[str, dict[str, None]] = {}  # ordered sets: a membership test per add
    failed: dict[str, str] = {}

    def add(parent: str, child: str) -> None:
        children.setdefault(parent, {})[child] = None

    for t in record["tests"]:
        nodeid = t["nodeid"]
        path, _, rest = nodeid.partition("::")
        if not rest and t["outcome"] == "error":
            failed[path] = t["message"] or ""
        parts = path.split("/")
        for i in range(len(parts)):
            add("/".join(parts[:i]), "/".join(parts[: i + 1]))
        names = rest.partition("[")[0].split("::") if rest else []
        for i in range(len(names) - 1):
            add(f"{path}::{'::'.join(names[:i])}" if i else path, f"{path}::{'::'.join(names[: i + 1])}")
        if rest:
            parent = f"{path}::{'::'.join(names[:-1])}" if len(names) > 1 else path
            add(parent, nodeid)

    def kind(nodeid: str) -> str:
        if "::" not in nodeid:
            return "Module" if nodeid.endswith(".py") else "Dir"
        return "Class" if nodeid in children else "Function"

    def item(nodeid: str) -> CollectedItem:
        entry = CollectedItem(nodeid=nodeid, type=kind(nodeid))
        line = _lineno(locations, nodeid)
        if line is not None and entry["type"] == "Function":
            entry["lineno"] = line
        return entry

    out: list[Collector] = [Collector(nodeid="", outcome="passed", result=[item(c) for c in children.get("", [])])]

    def visit(nodeid: str) -> None:
        for child in children.get(nodeid, []):
            if child in children or child in failed:
                visit(child)
        if nodeid in failed:
            out.append(Collector(nodeid=nodeid, outcome="failed", result=[], longrepr=failed[nodeid]))
        else:
            out.append(Collector(nodeid=nodeid, outcome="passed", result=[item(c) for c in children.get(nodeid, [])]))

    for top in children.get("", []):
        visit(top)
    return out


def build(
    record: RunRecord,
    phases: Mapping[str, Sequence[Mapping[str, Any]]],
    locations: Mapping[str, tuple[str, int | None]],
    root: Path,
    collectors: Sequence[Collector] | None = None,
) -> dict[str, Any]:
    """``locations``: nodeid -> (file, 1-based line) as journaled; ``collectors``: the child's
    collect reports in pytest-json-report's shape, else rebuilt by :func:`derive_collectors`."""
    counts: dict[str, int] = {}
    tests = []
    collected = 0
    for t in record["tests"]:
        if "::" not in t["nodeid"] and t["outcome"] == "error":
            continue  # a collection error is a failed collector, not a test
        collected += 1
        outcome = JSON_REPORT_OUTCOME[t["outcome"]]
        counts[outcome] = counts.get(outcome, 0) + 1
        entry: dict[str, Any] = {
            "nodeid": t["nodeid"],
            "lineno": _lineno(locations, t["nodeid"]),
            "outcome": outcome,
            "keywords": [part for part in t["nodeid"].replace("::", "/").split("/") if part],
        }
        crash = {"path": t.get("file"), "lineno": t.get("line"), "message": t.get("cause")}
        failed_in = _phase_of_cause(phases.get(t["nodeid"], ()), t.get("cause"))
        for phase in phases.get(t["nodeid"], ()):
            # a phase's outcome in pytest's words: a unittest error's call "failed" (the test is the error, #24)
            said = "failed" if phase["outcome"] == "error" else phase["outcome"]
            body: dict[str, Any] = {"duration": phase["duration"], "outcome": said}
            if phase is failed_in:
                # as pytest-json-report's: the exception and where, of the phase that failed
                # with it (#20); a call that failed before its teardown did is not given the
                # teardown's exception
                body["crash"] = crash
            if phase.get("longrepr"):
                body["longrepr"] = traceback_excerpt(str(phase["longrepr"]))  # #32: whole in run.json
            entry[str(phase["when"])] = body
        if t["outcome"] in CRASHING_OUTCOMES and not any("crash" in entry.get(w, {}) for w in WHEN):
            # the process died in the test: no phase report came, but the record knows where
            # (its Python stack) and how; a reader of pytest-json-report's layout looks in call
            entry["call"] = {
                **entry.get("call", {}),
                "duration": t["duration"],
                "outcome": "failed",
                "crash": {"path": t.get("file"), "lineno": t.get("line"), "message": t["message"]},
                "longrepr": _death(record, t),
            }
        # #34: a deselected test (pytest-json-report's summary word too) says why it was left out
        if t["outcome"] in UNFINISHED_OUTCOMES or t["outcome"] in DESELECTED_OUTCOMES:
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
        "summary": {**counts, "total": len(tests), "collected": collected},
        "collectors": list(collectors) if collectors is not None else derive_collectors(record, locations),
        "tests": tests,
        "device_matrix": {"row": record["row"], "status": record["status"], "run": "run.json"},
    }


WHEN = ("setup", "call", "teardown")  # the phases of a test in pytest-json-report's layout


def _death(record: RunRecord, test: TestRecord) -> str:
    """A dead test's report: how it ended and the Python stack its crash recorded."""
    crash = next((c for c in record["crashes"] if c["id"] == test["crash"]), None)
    stack = crash["diagnosis"]["python_stack"] if crash else None
    return "\n".join(part for part in (test["message"], stack) if part)


def _phase_of_cause(phases: Sequence[Mapping[str, Any]], cause: str | None) -> Mapping[str, Any] | None:
    """The failed phase the record's cause came from: the one whose report shows its first
    line (a call and its teardown can both fail), else the first that failed."""
    failed = [p for p in phases if p["outcome"] in RAISED_OUTCOMES]
    if not cause or not failed:
        return None
    first = cause.splitlines()[0]
    return next((p for p in failed if first in str(p.get("longrepr") or "")), failed[0])


def write(path: Path, report: Mapping[str, Any]) -> None:
    write_json_atomic(path, report)
