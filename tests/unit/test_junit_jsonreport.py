"""junit.xml and report.json against what pytest --junitxml and pytest-json-report write
for the same tests."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import junitparser
import pytest

from device_matrix.records import jsonreport
from device_matrix.records.junit import exception_line, junit_xml, pytest_names
from tests import records

MIXED = textwrap.dedent(
    """\
    import unittest

    import pytest


    def test_function():
        pass


    @pytest.mark.parametrize("n", [1, 2])
    def test_param(n):
        assert n == 1


    class TestPlain:
        def test_method(self):
            pass

        @pytest.mark.skip(reason="not here")
        def test_skipped(self):
            pass


    class TestUnit(unittest.TestCase):
        def test_unit(self):
            self.assertTrue(True)

        @pytest.mark.xfail(reason="known")
        def test_xfail(self):
            raise ValueError("boom")
    """
)


PYTEST = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "suites"]
JUNIT_XUNIT1 = ["--junitxml=junit.xml", "-o", "junit_family=xunit1"]


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """pytest's own junit.xml (xunit1: with file and line) and pytest-json-report's file."""
    root = tmp_path_factory.mktemp("real")
    (root / "suites" / "x").mkdir(parents=True)
    (root / "suites" / "x" / "test_mixed.py").write_text(MIXED)
    subprocess.run(
        [*PYTEST, *JUNIT_XUNIT1, "--json-report", "--json-report-file=report.json"],
        cwd=root,
        capture_output=True,
        check=False,
    )
    report = json.loads((root / "report.json").read_text())
    return {"junit": junitparser.JUnitXml.fromfile(str(root / "junit.xml")), "report": report}


def test_junit_without_locations_still_names_the_file() -> None:
    xml = junit_xml(records.record("cpu", [records.test("suites/x/test_m.py::TestU::test_a")]))  # type: ignore[arg-type]
    assert 'file="suites/x/test_m.py"' in xml and "line=" not in xml
    assert pytest_names("suites/x/test_m.py") == ("", "suites.x.test_m")  # a collection error
    assert pytest_names("a/test_m.py::test_b[x::y]") == ("a.test_m", "test_b[x::y]")


def test_report_json_takes_the_childs_collectors_and_reports_collection_errors() -> None:
    given: list[jsonreport.Collector] = [
        {"nodeid": "", "outcome": "passed", "result": [{"nodeid": "s", "type": "Dir"}]},
    ]
    record = records.record("cpu", [records.test("s/test_b.py", "error", message="ImportError: x")])
    report = jsonreport.build(record, {}, {}, Path("/p"), given)  # type: ignore[arg-type]
    assert report["collectors"] == given
    derived = jsonreport.build(record, {}, {}, Path("/p"))  # type: ignore[arg-type]
    failed = [c for c in derived["collectors"] if c["outcome"] == "failed"]
    assert failed == [{"nodeid": "s/test_b.py", "outcome": "failed", "result": [], "longrepr": "ImportError: x"}]
    assert derived["tests"] == [] and derived["summary"]["collected"] == 0


def test_junit_text_survives_a_parser_whatever_the_test_said() -> None:
    tricky = "a & b < c > d \"quoted\" 'single'\n\tindented\r\nend ]]> \x01 gone"
    nodeids = [f"suites/x/test_m.py::test_{k}[{tricky[:12]}]" for k in range(6)]
    outcomes = ["failed", "error", "skipped", "xfailed", "not_run", "passed"]
    rec = records.record(
        "cpu",
        [records.test(n, o, message=tricky if o != "passed" else None) for n, o in zip(nodeids, outcomes, strict=True)],
    )
    root = ET.fromstring(junit_xml(rec).encode())  # type: ignore[arg-type]
    cases = {c.get("name"): c for c in root.iter("testcase")}
    kept = tricky.replace("\x01", "")  # a control character XML cannot carry is dropped
    for nodeid, outcome in zip(nodeids, outcomes, strict=True):
        case = cases[pytest_names(nodeid)[1]]
        assert case.get("classname") == "suites.x.test_m"
        children = list(case)
        if outcome == "passed":
            assert children == []
            continue
        (child,) = children
        assert child.tag == {"failed": "failure", "skipped": "skipped", "xfailed": "skipped"}.get(outcome, "error")
        # attributes keep their line breaks through the parser (ElementTree's own escapes)
        expected = kept[:500] if outcome in ("skipped", "xfailed") else kept.splitlines()[0]
        assert child.get("message") == expected, outcome
        if outcome in ("failed", "error"):
            assert child.text == kept.replace("\r\n", "\n")  # a parser normalises line ends in text
    assert root.get("tests") == "6" and root.find("testsuite") is not None


@pytest.mark.parametrize(
    ("message", "line"),
    [
        # pytest's long report: the first of the last block of E lines
        (
            "self = <t.T testMethod=test_x>\n\n    def test_x(self):\n>       a, b = False\n"
            "E       TypeError: cannot unpack non-iterable bool object\n\nt.py:3: TypeError",
            "TypeError: cannot unpack non-iterable bool object",
        ),
        (
            "    def test_y():\n>       assert 1 == 2\nE       assert 1 == 2\nE        +  where 1 = f()\n\n"
            "t.py:9: AssertionError",
            "assert 1 == 2",
        ),
        (
            "E   ValueError: first\n\nThe above exception was the direct cause of the following exception:\n\n"
            ">   raise RuntimeError('second')\nE   RuntimeError: second\n\nt.py:4: RuntimeError",
            "RuntimeError: second",
        ),
        # a Python traceback (a script's unittest report): the line after its last frames
        (
            'Traceback (most recent call last):\n  File "t.py", line 3, in test_x\n    a, b = False\n'
            "    ^^^^\nTypeError: cannot unpack non-iterable bool object\n",
            "TypeError: cannot unpack non-iterable bool object",
        ),
        (
            'test_s (t.T.test_s) (k=1)\nTraceback (most recent call last):\n  File "t.py", line 5, in test_s\n'
            "    self.assertNotEqual(k, 1)\nAssertionError: 1 == 1\n",
            "AssertionError: 1 == 1",
        ),
        ("Unexpected success", "Unexpected success"),
    ],
)
def test_junit_messages_are_the_exception_line(message: str, line: str) -> None:
    assert exception_line(message) == line
