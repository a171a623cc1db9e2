"""JUnit XML from the run record: complete even when pytest itself died.

pytest's own ``--junitxml`` writes nothing when the process is killed; this file is
built from the journal-backed record, so a crashed test appears as an error with its
signal and fingerprint.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from device_matrix.records.atomic import write_text_atomic
from device_matrix.records.outcomes import (
    CRASHING_OUTCOMES,
    DESELECTED_OUTCOMES,
    NOT_GREEN_STATUSES,
    REPORTED_FAILURES,
    SKIPPING_OUTCOMES,
)
from device_matrix.records.schema import CrashRecord, RunRecord
from device_matrix.records.summary import failed_before_told, fold
from device_matrix.redact import Redactor

_ILLEGAL = {c: None for c in range(32) if c not in (9, 10, 13)}


def _clean(text: str | None) -> str:
    return (text or "").translate(_ILLEGAL)


# #32: a failure's traceback is stored whole once, in run.json; junit.xml and report.json,
# which other tools read, hold its beginning (the test's own lines) and its end (the
# exception and where it was raised), so a row's records grow with what its failures say,
# not with copies of it
EXCERPT_HEAD = 1500
EXCERPT_TAIL = 4500


def traceback_excerpt(text: str) -> str:
    """``text`` whole where it is short, else its first and last lines around a line that
    says how much is cut and where the whole of it is."""
    if len(text) <= EXCERPT_HEAD + EXCERPT_TAIL:
        return text
    head_end = text.rfind("\n", 0, EXCERPT_HEAD)
    head_end = head_end if head_end > 0 else EXCERPT_HEAD
    tail_start = text.find("\n", len(text) - EXCERPT_TAIL) + 1 or len(text) - EXCERPT_TAIL
    cut = tail_start - head_end
    said = f"... [{cut} characters cut here: run.json holds the whole traceback] ..."
    return f"{text[:head_end]}\n{said}\n{text[tail_start:]}"


def exception_line(message: str) -> str:
    """The line of a test's report that says what was raised, as pytest's junitxml writes it
    in ``message`` ("TypeError: cannot unpack...", "AssertionError: 1 != 2"), not the
    report's first line ("self = <...>", "Traceback (most recent call last):", #24).

    pytest's report marks the exception's lines with ``E``: the first of the last such block.
    A Python traceback (a script's unittest report, ``--tb=native``) ends with it: the first
    line after the frames of its last traceback. Anything else: its first line.
    """
    lines = message.splitlines()
    marked = [k for k, line in enumerate(lines) if _E_LINE.match(line) and not (k and _E_LINE.match(lines[k - 1]))]
    if marked:
        return lines[marked[-1]][1:].strip()
    starts = [k for k, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:
        for line in lines[starts[-1] + 1 :]:
            if line.strip() and not line[0].isspace():
                return line.strip()
    return next((line.strip() for line in lines if line.strip()), "")


_E_LINE = re.compile(r"E(?: |$)")


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


def _attr(value: str) -> str:
    # as ElementTree escapes an attribute: a line break stays one through parsing
    return (
        value.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\r", "&#13;")
        .replace("\n", "&#10;")
        .replace("\t", "&#09;")
    )


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attributes(attrs: Mapping[str, str]) -> str:
    return "".join(f' {k}="{_attr(v)}"' for k, v in attrs.items())


def _element(tag: str, attrs: Mapping[str, str], text: str | None = None, inner: str = "") -> str:
    """One element as text, with ``text`` or the elements ``inner``: written directly, not
    through a tree of objects, which cost ten times as much for a row of thousands of tests."""
    head = f"<{tag}{_attributes(attrs)}"
    if text is None and not inner:
        return head + " />"
    return f"{head}>{inner if text is None else _text(text)}</{tag}>"


def junit_xml(record: RunRecord, locations: Mapping[str, tuple[str, int | None]] | None = None) -> str:
    """``locations``: nodeid -> (file, 1-based line) as the plugin journals them; written as
    pytest does (``line`` 0-based). Without one, ``file`` comes from the nodeid and no line."""
    c = fold(record).counts
    failures = c.outcome("failed") + c.outcome("xpassed")
    # a test that never ran is an error: a reader that shows skips as green must not
    errors = c.outcome("error") + c.outcome("crashed") + c.outcome("timeout") + c.outcome("not_run")
    # a row that is not green with no test to show it (a crash before the first test, a
    # collection that found nothing, a refused run) gets one error of its own
    row_error = record["status"] in NOT_GREEN_STATUSES and failures + errors == 0
    counts = {
        "tests": str(c.total + row_error),
        "failures": str(failures),
        "errors": str(errors + row_error),
        # #34: a test selection left out is a skip of its own type, never a pass
        "skipped": str(c.outcome("skipped") + c.outcome("xfailed") + c.outcome("deselected")),
        "time": f"{record['duration']:.3f}",
    }
    # a <testsuites> root, as pytest writes it: some readers only look under it
    root = f"<testsuites{_attributes({'name': 'device-matrix', **counts})}>"
    suite_attrs = {"name": f"device-matrix.{record['row']}", **counts, "timestamp": record["started_at"]}
    out = ["<?xml version='1.0' encoding='UTF-8'?>\n", root, f"<testsuite{_attributes(suite_attrs)}>"]
    crashes = {c["id"]: c for c in record["crashes"]}
    if row_error:
        reason = record["reason"] or record["status"]
        text = "\n\n".join([reason, *(_crash_detail(crash) for crash in record["crashes"])])
        error = _element("error", {"type": record["status"], "message": _clean(reason)[:500]}, _clean(text))
        row_case = {"classname": "device-matrix", "name": record["row"], "file": "", "time": "0.000"}
        out.append(_element("testcase", row_case, inner=error))
    for t in record["tests"]:
        classname, name = pytest_names(t["nodeid"])
        file, line = (locations or {}).get(t["nodeid"]) or (t["nodeid"].split("::", 1)[0], None)
        attrs = {"classname": classname, "name": name, "file": file}
        if line is not None:
            attrs["line"] = str(line - 1)
        attrs["time"] = f"{t['duration']:.3f}"
        outcome = t["outcome"]
        message = _clean(t["message"])
        # the message attribute is what a CI's test view lists: the exception, as pytest's
        # (#20); a report without its cause (a script's unittest report) gives its line (#24)
        cause = _clean(t.get("cause"))
        summary = cause.splitlines()[0] if cause else exception_line(message)
        head = summary[:500] if summary else outcome
        inner = ""
        if outcome == "error":
            inner = _element("error", {"message": head}, traceback_excerpt(message))
        elif outcome in REPORTED_FAILURES:  # an assert, or a strict xfail that passed
            inner = _element("failure", {"message": head}, traceback_excerpt(message))
        elif outcome in CRASHING_OUTCOMES:
            crash = crashes.get(t["crash"] or "")
            detail = message if crash is None else _crash_detail(crash, outcome)
            inner = _element("error", {"type": outcome, "message": head}, _clean(detail))
        elif outcome == "not_run":
            inner = _element("error", {"type": outcome, "message": head})
        elif outcome in SKIPPING_OUTCOMES or outcome in DESELECTED_OUTCOMES:
            inner = _element("skipped", {"type": outcome, "message": message[:500]})
        out.append(_element("testcase", attrs, inner=inner))
    out.append("</testsuite></testsuites>")
    return "".join(out)


def _crash_detail(crash: CrashRecord, outcome: str | None = None) -> str:
    d = crash["diagnosis"]
    head = f"{outcome or crash['kind']}: {d['signal_name'] or d['exit_code']} fingerprint {d['fingerprint']}"
    stacks = (d["python_stack"] or "", d["native_stack"] or "")
    # the test's own failures before the crash, each with its traceback
    parts = (head, *failed_before_told(crash), *stacks, "repro: " + crash["repro"])
    return "\n\n".join(x for x in parts if x)


def write_junit(
    path: Path,
    record: RunRecord,
    locations: Mapping[str, tuple[str, int | None]] | None = None,
    redactor: Redactor | None = None,
) -> None:
    """The XML built from the record's values redacted first (#22): names cut from a nodeid
    (classname, file) never hold half a secret, and no rule runs over the XML."""
    redactor = redactor or Redactor()
    write_text_atomic(path, junit_xml(redactor.data(record), redactor.data(locations)))
