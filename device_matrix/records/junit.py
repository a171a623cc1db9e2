"""JUnit XML from the run record: complete even when pytest itself died.

pytest's own ``--junitxml`` writes nothing when the process is killed; this file is
built from the journal-backed record, so a crashed test appears as an error with its
signal and fingerprint.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from device_matrix.records.atomic import write_text_atomic
from device_matrix.records.schema import RunRecord

_ILLEGAL = {c: None for c in range(32) if c not in (9, 10, 13)}


def _clean(text: str | None) -> str:
    return (text or "").translate(_ILLEGAL)


def junit_xml(record: RunRecord) -> str:
    s = record["summary"]
    suite = ET.Element(
        "testsuite",
        name=f"device-matrix.{record['row']}",
        tests=str(s["total"]),
        failures=str(s["failed"] + s["xpassed"]),
        errors=str(s["error"] + s["crashed"] + s["timeout"]),
        skipped=str(s["skipped"] + s["xfailed"] + s["not_run"]),
        time=f"{record['duration']:.3f}",
        timestamp=record["started_at"],
    )
    crashes = {c["id"]: c for c in record["crashes"]}
    for t in record["tests"]:
        classname, _, name = t["nodeid"].rpartition("::")
        case = ET.SubElement(
            suite,
            "testcase",
            classname=classname.replace("/", ".").removesuffix(".py") or t["nodeid"],
            name=name or t["nodeid"],
            time=f"{t['duration']:.3f}",
        )
        outcome = t["outcome"]
        message = _clean(t["message"])
        if outcome in ("failed", "xpassed"):
            ET.SubElement(case, "failure", message=message.splitlines()[0][:500] if message else outcome).text = message
        elif outcome == "error":
            ET.SubElement(case, "error", message=message.splitlines()[0][:500] if message else "error").text = message
        elif outcome in ("crashed", "timeout"):
            crash = crashes.get(t["crash"] or "")
            detail = message
            if crash is not None:
                d = crash["diagnosis"]
                detail = "\n\n".join(
                    x
                    for x in (
                        f"{outcome}: {d['signal_name'] or d['exit_code']} fingerprint {d['fingerprint']}",
                        d["python_stack"] or "",
                        d["native_stack"] or "",
                        "repro: " + crash["repro"],
                    )
                    if x
                )
            ET.SubElement(
                case,
                "error",
                type=outcome,
                message=message.splitlines()[0][:500] if message else outcome,
            ).text = _clean(detail)
        elif outcome in ("skipped", "xfailed", "not_run"):
            ET.SubElement(case, "skipped", type=outcome, message=message[:500])
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def write_junit(path: Path, record: RunRecord) -> None:
    write_text_atomic(path, junit_xml(record))
