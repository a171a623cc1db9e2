"""JUnit XML from the run record: complete even when pytest itself died.

pytest's own ``--junitxml`` writes nothing when the process is killed; this file is
built from the journal-backed record, so a crashed test appears as an error with its
signal and fingerprint.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path

from device_matrix.records.atomic import write_text_atomic
from device_matrix.records.schema import CrashRecord, RunRecord
from device_matrix.records.summary import fold

NOT_GREEN = ("failed", "crashed", "error", "interrupted")
_ILLEGAL = {c: None for c in range(32) if c not in (9, 10, 13)}


def _clean(text: str | None) -> str:
    return (text or "").translate(_ILLEGAL)


def pytest_names(nodeid: str) -> tuple[str, str]:
    """(classname, name) as pytest's junitxml writes them.

    ``suites/x/test_m.py::TestUnit::test_a[1]`` -> (``suites.x.test_m.TestUnit``, ``test_a[1]``);
    a module-level function's classname is the dotted module path.
    """
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    if len(names) == 1:  # a collection error: pytest leaves the classname empty
        return "", names[0]
    return ".".join(names[:-1]), names[-1]


def junit_xml(record: RunRecord, locations: Mapping[str, tuple[str, int | None]] | None = None) -> str:
    """``locations``: nodeid -> (file, 1-based line) as the plugin journals them; written as
    pytest does (``line`` 0-based). Without one, ``file`` comes from the nodeid and no line."""
    c = fold(record).counts
    failures = c.outcome("failed") + c.outcome("xpassed")
    # a test that never ran is an error: a reader that shows skips as green must not
    errors = c.outcome("error") + c.outcome("crashed") + c.outcome("timeout") + c.outcome("not_run")
    # a row that is not green with no test to show it (a crash before the first test, a
    # collection that found nothing, a refused run) gets one error of its own
    row_error = record["status"] in NOT_GREEN and failures + errors == 0
    counts = {
        "tests": str(c.total + row_error),
        "failures": str(failures),
        "errors": str(errors + row_error),
        "skipped": str(c.outcome("skipped") + c.outcome("xfailed")),
        "time": f"{record['duration']:.3f}",
    }
    # a <testsuites> root, as pytest writes it: some readers only look under it
    root = ET.Element("testsuites", {"name": "device-matrix", **counts})
    suite = ET.SubElement(root, "testsuite", {"name": f"device-matrix.{record['row']}", **counts})
    suite.set("timestamp", record["started_at"])
    crashes = {c["id"]: c for c in record["crashes"]}
    if row_error:
        case = ET.SubElement(suite, "testcase", classname="device-matrix", name=record["row"], file="", time="0.000")
        reason = record["reason"] or record["status"]
        text = "\n\n".join([reason, *(_crash_detail(crash) for crash in record["crashes"])])
        ET.SubElement(case, "error", type=record["status"], message=_clean(reason)[:500]).text = _clean(text)
    for t in record["tests"]:
        classname, name = pytest_names(t["nodeid"])
        file, line = (locations or {}).get(t["nodeid"]) or (t["nodeid"].split("::", 1)[0], None)
        case = ET.SubElement(suite, "testcase", classname=classname, name=name, file=file)
        if line is not None:
            case.set("line", str(line - 1))
        case.set("time", f"{t['duration']:.3f}")
        outcome = t["outcome"]
        message = _clean(t["message"])
        if outcome in ("failed", "xpassed"):
            ET.SubElement(case, "failure", message=message.splitlines()[0][:500] if message else outcome).text = message
        elif outcome == "error":
            ET.SubElement(case, "error", message=message.splitlines()[0][:500] if message else "error").text = message
        elif outcome in ("crashed", "timeout"):
            crash = crashes.get(t["crash"] or "")
            detail = message if crash is None else _crash_detail(crash, outcome)
            ET.SubElement(
                case,
                "error",
                type=outcome,
                message=message.splitlines()[0][:500] if message else outcome,
            ).text = _clean(detail)
        elif outcome == "not_run":
            ET.SubElement(case, "error", type=outcome, message=message.splitlines()[0][:500] if message else outcome)
        elif outcome in ("skipped", "xfailed"):
            ET.SubElement(case, "skipped", type=outcome, message=message[:500])
    return ET.tostring(root, encoding="unicode", xml_declaration=True)


def _crash_detail(crash: CrashRecord, outcome: str | None = None) -> str:
    d = crash["diagnosis"]
    head = f"{outcome or crash['kind']}: {d['signal_name'] or d['exit_code']} fingerprint {d['fingerprint']}"
    parts = (head, d["python_stack"] or "", d["native_stack"] or "", "repro: " + crash["repro"])
    return "\n\n".join(x for x in parts if x)


def write_junit(path: Path, record: RunRecord, locations: Mapping[str, tuple[str, int | None]] | None = None) -> None:
    write_text_atomic(path, junit_xml(record, locations))
