"""A failure's traceback is stored once in a row's records (#32): run.json holds it whole,
junit.xml and report.json its beginning and end with where the rest is, and output.log
does not print it again in pytest's failures section. The records grow with what the
failures say, not with copies of it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import junitparser
import pytest

from tests.conftest import Project, make_project

pytestmark = pytest.mark.slow

RECORDS = ("run.json", "report.json", "junit.xml", "output.log")
LINES = 2000  # each line ~50 characters: ~100 kB of what the failure says

FAILING = """
def test_says_a_lot():
    print("what the test printed")
    raise AssertionError("\\n".join(f"line {{i:05d}} of what this failure says, in full" for i in range({lines})))
"""


def _run(root: Path, lines: int) -> Project:
    root.mkdir(parents=True, exist_ok=True)
    p = make_project(root, [])
    folder = root / "suites" / "talk"
    folder.mkdir(parents=True)
    (folder / "test_talk.py").write_text(FAILING.format(lines=lines))
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace("suites = []", 'suites = ["talk"]'))
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return p


def _sizes(p: Project) -> dict[str, int]:
    return {name: (p.results / "fixture" / name).stat().st_size for name in RECORDS}


def test_a_long_traceback_grows_the_records_by_one_copy_of_it(tmp_path: Path) -> None:
    short, long = _run(tmp_path / "short", 1), _run(tmp_path / "long", LINES)
    said = sum(len(f"E       line {i:05d} of what this failure says, in full\n") for i in range(LINES))
    before, after = _sizes(short), _sizes(long)
    growth = {name: after[name] - before[name] for name in RECORDS}
    # one copy in run.json, the excerpts of junit.xml and report.json, nothing in the log
    assert sum(growth.values()) < 1.3 * said, (said, growth)
    assert growth["output.log"] < 0.05 * said, growth

    # nothing is lost: run.json holds the whole traceback, its first line and its last
    (test,) = long.record()["tests"]
    assert "line 00000 of what" in test["message"] and f"line {LINES - 1:05d} of what" in test["message"]
    # the test's own output is in the log, once
    log = (long.results / "fixture" / "output.log").read_text()
    assert log.count("what the test printed") == 1, log[-3000:]


def test_junit_and_report_json_keep_the_ends_of_a_long_traceback_valid_for_their_readers(tmp_path: Path) -> None:
    p = _run(tmp_path, LINES)
    folder = p.results / "fixture"
    xml = junitparser.JUnitXml.fromfile(str(folder / "junit.xml"))
    (case,) = [c for suite in xml for c in suite]
    (failure,) = case.result
    assert isinstance(failure, junitparser.Failure)
    body = ET.parse(folder / "junit.xml").getroot().find(".//failure")
    assert body is not None and body.text is not None
    # the test's source line that raised, and the exception's last words, with where the rest is
    assert "def test_says_a_lot" in body.text and f"line {LINES - 1:05d} of what" in body.text
    assert "run.json" in body.text
    assert failure.message is not None and "AssertionError" in failure.message

    report = json.loads((folder / "report.json").read_text())
    (entry,) = report["tests"]
    longrepr = entry["call"]["longrepr"]
    assert entry["call"]["outcome"] == "failed" and isinstance(longrepr, str)
    assert "def test_says_a_lot" in longrepr and f"line {LINES - 1:05d} of what" in longrepr
    assert "run.json" in longrepr
