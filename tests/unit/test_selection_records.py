"""A test selection left out is ``deselected`` in every record, never ``passed`` (#34):
run.json, junit.xml, report.json, triage (Markdown, HTML, its rows), the history, the verdicts."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from device_matrix.records import jsonreport, outcomes
from device_matrix.records.junit import junit_xml
from device_matrix.records.schema import load_run
from device_matrix.records.summary import fold
from device_matrix.report import html, markdown, view
from device_matrix.report.history import History
from device_matrix.report.model import Triage, build
from device_matrix.report.verdicts import judge
from tests import records as R

WHY = "covers none of the 3 changed files"
SELECTION = {
    "mode": "changed",
    "full_reason": None,
    "map_commit": "a" * 40,
    "changed": ["src/a.py", "src/b.py", "src/c.py"],
    "ran": 212,
    "total": 1446,
    "by_reason": {"covers": 177, "recent": 31, "new": 4, "deselected": 1234},
}


def _record(outcome: str = "deselected", **kw: Any) -> dict[str, Any]:
    rec = R.record(
        "cpu",
        [R.test("t/test_a.py::test_ran"), R.test("t/test_b.py::test_left", outcome, message=WHY, duration=0.0)],
        **kw,
    )
    rec["test_selection"] = SELECTION
    return rec


def _triage(records: list[dict[str, Any]]) -> Triage:
    return build(records, [], {})  # type: ignore[arg-type]


def test_run_json_keeps_a_deselected_test_with_its_reason_and_the_row_stays_green(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_record()))
    rec = load_run(path)
    left = rec["tests"][1]
    assert (left["outcome"], left["message"]) == ("deselected", WHY)
    assert rec["summary"]["passed"] == 1 and rec["summary"].get("deselected") == 1
    assert rec["test_selection"] == SELECTION
    f = fold(rec)
    assert f.counts.bucket("passed") == 1 and f.counts.bucket("deselected") == 1 and f.counts.bad == 0
    assert f.label == "passed"
    assert f.counts.phrase() == "1 passed, 1 deselected"
    assert "deselected" not in outcomes.PASSING_OUTCOMES | outcomes.FAILING_OUTCOMES | outcomes.QUIET_OUTCOMES


def test_junit_xml_says_skipped_deselected_never_a_pass() -> None:
    root = ET.fromstring(junit_xml(_record()))  # type: ignore[arg-type]
    suite = root.find("testsuite")
    assert suite is not None and suite.get("skipped") == "1" and suite.get("tests") == "2"
    (case,) = [c for c in suite.iter("testcase") if c.get("name") == "test_left"]
    skipped = case.find("skipped")
    assert skipped is not None
    assert (skipped.get("type"), skipped.get("message")) == ("deselected", WHY)


def test_report_json_counts_it_deselected_with_its_reason() -> None:
    report = jsonreport.build(_record(), {}, {}, Path("/p"))  # type: ignore[arg-type]
    assert report["summary"] == {"passed": 1, "deselected": 1, "total": 2, "collected": 2}
    (left,) = [t for t in report["tests"] if t["nodeid"].endswith("test_left")]
    assert left["outcome"] == "deselected"
    assert left["device_matrix"] == {"outcome": "deselected", "crash": None, "message": WHY}


def test_triage_counts_it_deselected_and_says_how_much_ran_and_why() -> None:
    t = _triage([_record()])
    (row,) = t["rows"]
    assert row["counts"]["passed"] == 1 and row["counts"]["deselected"] == 1
    assert row["test_selection"] == SELECTION
    line = "ran 212 of 1,446 tests: 3 changed files; 31 recently failing; 4 new"
    assert view.selection_line(row) == line
    md = markdown.render(t)
    assert "| deselected |" in md.splitlines()[next(i for i, x in enumerate(md.splitlines()) if "| row |" in x)]
    assert f"**cpu**: {line}" in md
    page = html.render(t)
    assert line in page
    # the left-out test's cell says deselected and why, never passed
    assert f"<td class='o deselected' title='{WHY}'>deselected" in page and "<td class='o passed'>passed<" in page
    # the matrix's cell of the left-out test is deselected, not passed
    (left,) = [x for x in t["tests"] if x["nodeid"].endswith("test_left")]
    assert left["outcomes"] == {"cpu": "deselected"}


def test_a_full_run_says_why_every_test_ran() -> None:
    rec = _record("passed")
    rec["test_selection"] = {**SELECTION, "full_reason": "no test map for row 'cpu'", "ran": 2, "total": 2}
    rec["test_selection"]["by_reason"] = {"full": 2}
    (row,) = _triage([rec])["rows"]
    assert view.selection_line(row) == "ran 2 of 2 tests: every test, no test map for row 'cpu'"
    del rec["test_selection"]
    (row,) = _triage([rec])["rows"]
    assert view.selection_line(row) is None


def test_the_history_never_counts_it_and_keeps_it_as_left_out(tmp_path: Path) -> None:
    h = History.open(tmp_path / "h.sqlite")
    for i, outcome in enumerate(("failed", "deselected", "passed")):
        t = _triage([_record(outcome)])
        t["changes"] = h.compare(t)
        if outcome == "deselected":
            # left out is neither fixed, nor a new test, nor a test gone
            assert t["changes"]["fixed"] == [] and t["changes"]["appeared"] == []
            assert t["changes"]["disappeared"] == []
        h.record(t, f"run {i}")
    base = h.base("")
    text, _ = base.series[("cpu", "t/test_b.py::test_left")]
    assert text == "FDP"  # left out: a letter of its own, counted nowhere
    v = h.view(_triage([_record()]))
    assert [p["counts"]["deselected"] for p in v["trends"]["cpu"]] == [0, 0, 0]
    assert [p["counts"]["passed"] for p in v["trends"]["cpu"]] == [1, 1, 2]
    columns = [c[1] for c in h.db.execute("PRAGMA table_info(row_runs)")]
    assert "deselected" not in columns


def test_the_verdicts_say_not_run_on_this_pr() -> None:
    t = _triage([_record()])
    report = judge(t, None, base_ref="main", base_commit=None)
    assert report["line"] == "no failures: nothing to judge; 1 test not run on this PR (deselected)"
    assert report["not_run"] == [{"row": "cpu", "nodeid": "t/test_b.py::test_left", "reason": WHY}]


def test_a_test_run_again_after_a_deselected_run_is_compared_with_its_last_run_outcome(tmp_path: Path) -> None:
    # left out one run and run the next is neither a new test nor, while it passes, a change
    h = History.open(tmp_path / "h.sqlite")
    for i, outcome in enumerate(("passed", "deselected", "deselected")):
        t = _triage([_record(outcome)])
        t["changes"] = h.compare(t)
        h.record(t, f"run {i}")
    again = _triage([_record("passed")])
    assert ["t/test_b.py::test_left", "cpu"] not in h.compare(again)["appeared"]
    # and a failure now is a new failure of a test that passed when it last ran
    failing = _triage([_record("failed")])
    assert h.compare(failing)["new_failures"] == [["t/test_b.py::test_left", "cpu"]]
