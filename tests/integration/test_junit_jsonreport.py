"""The tests of this concept that start a process; the rest are in tests/unit/test_junit_jsonreport.py (#41)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import junitparser

from device_matrix.records import jsonreport
from device_matrix.records.junit import junit_xml
from tests import records
from tests.unit.test_junit_jsonreport import real

__all__ = ["real"]  # fixtures, used by name


def _ours(real: dict[str, Any]) -> tuple[dict[str, Any], dict[str, tuple[str, int | None]]]:
    """A run record of the same tests, and locations as the plugin journals them (1-based)."""
    outcome = {"passed": "passed", "failed": "failed", "skipped": "skipped", "xfailed": "xfailed"}
    tests = [records.test(t["nodeid"], outcome[t["outcome"]]) for t in real["report"]["tests"]]
    locations = {t["nodeid"]: (t["nodeid"].split("::")[0], t["lineno"] + 1) for t in real["report"]["tests"]}
    return records.record("cpu", tests), locations


def _cases(xml: junitparser.JUnitXml) -> dict[tuple[str, str], junitparser.TestCase]:
    return {(c.classname, c.name): c for suite in xml for c in suite}


def test_junit_root_classnames_file_and_line_are_pytests(real: dict[str, Any], tmp_path: Path) -> None:
    record, locations = _ours(real)
    path = tmp_path / "junit.xml"
    path.write_text(junit_xml(record, locations))  # type: ignore[arg-type]
    ours = junitparser.JUnitXml.fromfile(str(path))
    assert isinstance(ours, junitparser.JUnitXml)  # a <testsuites> root, read as such
    theirs = _cases(real["junit"])
    mine = _cases(ours)
    assert set(mine) == set(theirs)
    assert ("suites.x.test_mixed.TestUnit", "test_unit") in mine
    assert ("suites.x.test_mixed", "test_param[2]") in mine
    for key, case in theirs.items():
        for attr in ("file", "line"):
            assert mine[key]._elem.get(attr) == case._elem.get(attr), (key, attr)
    assert ours.tests == real["junit"].tests
    assert ours.failures == real["junit"].failures


def test_report_json_is_pytest_json_reports_layout(real: dict[str, Any]) -> None:
    record, locations = _ours(real)
    ours = jsonreport.build(record, {}, locations, Path("/p"))  # type: ignore[arg-type]
    theirs = real["report"]
    assert set(theirs) <= set(ours)
    assert {t["nodeid"]: t["lineno"] for t in ours["tests"]} == {t["nodeid"]: t["lineno"] for t in theirs["tests"]}
    assert ours["summary"] == theirs["summary"] | {"collected": len(theirs["tests"])}

    def normal(collectors: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # the nodeid alone cannot tell unittest's node types from pytest's
        kinds = {"UnitTestCase": "Class", "TestCaseFunction": "Function"}
        return [
            {**c, "result": [{**r, "type": kinds.get(r["type"], r["type"])} for r in c["result"]]} for c in collectors
        ]

    assert normal(ours["collectors"]) == normal(theirs["collectors"])


def test_a_test_that_fails_in_call_and_teardown_has_both_in_every_file(tmp_path: Path) -> None:
    # an assertion fails, then the fixture's teardown raises: pytest reports the test twice
    # (FAILED and ERROR); the record, junit.xml and report.json all say it failed
    from tests.userproject import user_project

    p = user_project(
        tmp_path,
        {
            "tests/test_td.py": """\
                import pytest

                @pytest.fixture
                def broken():
                    yield
                    raise RuntimeError("teardown broke")

                def test_both(broken):
                    assert 0, "call broke"

                def test_ok():
                    pass
                """
        },
    )
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record("cpu")
    assert record["status"] == "failed"
    # a teardown's failure is an error whatever the call did: the record names the teardown's
    both = next(t for t in record["tests"] if t["nodeid"].endswith("test_both"))
    assert (both["outcome"], both["cause"]) == ("error", "RuntimeError: teardown broke")
    report = json.loads((p.results / "cpu" / "report.json").read_text())
    entry = next(t for t in report["tests"] if t["nodeid"].endswith("test_both"))
    assert entry["call"]["outcome"] == "failed" and "call broke" in entry["call"]["longrepr"]
    assert "crash" not in entry["call"]  # the teardown's exception is not the call's
    assert entry["teardown"]["outcome"] == "failed"
    assert entry["teardown"]["crash"]["message"] == "RuntimeError: teardown broke"
    assert report["summary"] == {"error": 1, "passed": 1, "total": 2, "collected": 2}
    cases = {c.get("name"): [e.tag for e in c] for c in ET.parse(p.results / "cpu" / "junit.xml").iter("testcase")}
    assert cases == {"test_both": ["error"], "test_ok": []}


def test_a_crashed_test_says_where_and_how_in_report_json(tmp_path: Path) -> None:
    # report.json had `error` and a device_matrix field for a test that segfaulted: no call,
    # no crash place, no stack, although run.json knew the file and the line
    from tests.userproject import user_project

    crashing = "import ctypes\n\n\ndef test_ok():\n    pass\n\n\ndef test_segfault():\n    ctypes.string_at(0)\n"
    p = user_project(tmp_path, {"tests/test_crash.py": crashing})
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (dead,) = [t for t in p.record("cpu")["tests"] if t["outcome"] == "crashed"]
    report = json.loads((p.results / "cpu" / "report.json").read_text())
    entry = next(t for t in report["tests"] if t["nodeid"] == dead["nodeid"])
    assert entry["outcome"] == "error"
    call = entry["call"]
    assert call["outcome"] == "failed"
    assert call["crash"] == {"path": "tests/test_crash.py", "lineno": 9, "message": dead["message"]}
    assert call["longrepr"].startswith(dead["message"])
    assert 'test_crash.py", line 9 in test_segfault' in call["longrepr"]  # the Python stack
    assert entry["device_matrix"]["outcome"] == "crashed"
    (ok,) = [t for t in report["tests"] if t["nodeid"].endswith("test_ok")]
    assert "crash" not in ok["call"]
