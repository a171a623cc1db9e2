"""The one fold (records/summary.py): counts, labels and crash headlines, and every report renderer agrees."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from device_matrix.cli.triage import run_triage
from device_matrix.output import Output
from device_matrix.records.schema import OUTCOMES
from device_matrix.records.summary import (
    BUCKETS,
    Counts,
    count,
    crash_headline,
    crash_kind_label,
    failed_before,
    failed_before_told,
    fold,
    row_label,
    short_name,
)
from device_matrix.report import html, markdown
from device_matrix.report.model import build
from tests import records as R


def _mixed() -> dict[str, Any]:
    """The record issue 9 saw counted four ways: a pass, an xpass, an error, a timeout and a not_run."""
    timeout = R.crash("mixed", "s/t.py::test_hang", "tttt", signal="SIGTERM", kind="timeout")
    return R.record(
        "mixed",
        [
            R.test("s/t.py::test_ok"),
            R.test("s/t.py::test_xpass", "xpassed"),
            R.test("s/t.py::test_err", "error", message="fixture boom"),
            R.test("s/t.py::test_hang", "timeout", crash_id=timeout["id"], duration=301.7),
            R.test("s/t.py::test_later", "not_run", message="pytest ended early"),
        ],
        [timeout],
    )


def _xfail_only() -> dict[str, Any]:
    tests = [R.test(f"s/t.py::test_p{i}") for i in range(3)]
    tests += [R.test(f"s/t.py::test_x{i}", "xfailed") for i in range(6)]
    return R.record("cpu", tests)


def test_fold_counts_each_outcome_once_and_names_what_failed() -> None:
    f = fold(_mixed())  # type: ignore[arg-type]
    assert f.counts.buckets() == {
        "passed": 1,
        "failed": 2,
        "crashed": 0,
        "timeout": 1,
        "skipped": 0,
        "xfailed": 0,
        "not_run": 1,
        "deselected": 0,  # #34: a bucket of its own, never passed
    }
    assert f.counts.total == 5 == sum(f.counts.buckets().values())
    assert f.counts.phrase() == "1 passed, 2 failed (1 error, 1 xpassed), 1 timeout, 1 not run"
    assert f.label == "timed out"
    assert f.line() == "mixed: timed out: 1 passed, 2 failed (1 error, 1 xpassed), 1 timeout, 1 not run"


def test_xfailed_is_not_called_skipped() -> None:
    f = fold(_xfail_only())  # type: ignore[arg-type]
    assert f.counts.phrase() == "3 passed, 6 xfailed"
    assert f.counts.bucket("skipped") == 0
    assert f.label == "passed"


def test_timeout_headline_says_timeout_with_its_deadline_not_the_signal_sent() -> None:
    rec = _mixed()
    (crash,) = rec["crashes"]
    # an older record: the deadline is read from the timed-out test's wall time
    assert crash_headline(crash, rec["tests"]) == "TIMEOUT after 302 s in test_hang (deterministic)"
    # a record that carries its deadline says exactly that
    crash["deadline"] = 300.0
    assert crash_headline(crash, rec["tests"]) == "TIMEOUT after 300 s in test_hang (deterministic)"
    assert fold(rec).headlines == ("TIMEOUT after 300 s in test_hang (deterministic)",)  # type: ignore[arg-type]
    # nothing to go by: still TIMEOUT, never SIGTERM
    assert crash_headline(crash | {"deadline": None}, []) == "TIMEOUT in test_hang (deterministic)"  # type: ignore[arg-type]


def test_crash_headlines_for_signals_exit_codes_and_phases() -> None:
    seg = R.crash("cpu", "s/t.py::TestA::test_x[2-cpu]", "aaaa")
    assert crash_headline(seg) == "SIGSEGV in test_x[2-cpu] (deterministic)"  # type: ignore[arg-type]
    at_exit = R.crash("cpu", None, "bbbb", signal="SIGABRT")
    at_exit["classification"] = "flaky"
    assert crash_headline(at_exit) == "SIGABRT during exit (flaky)"  # type: ignore[arg-type]
    coded = R.crash("cpu", "s/t.py::test_y", "cccc")
    coded["diagnosis"]["signal_name"] = None
    coded["diagnosis"]["exit_code"] = 3
    assert crash_headline(coded) == "exit code 3 in test_y (deterministic)"  # type: ignore[arg-type]
    assert short_name("a/b.py::C::test_x[a::b]") == "test_x[a::b]"


def test_row_label_is_never_passed_when_a_test_did_not_pass() -> None:
    bad = count([R.test("a", "not_run")])  # type: ignore[list-item]
    assert row_label("passed", bad, []) == "failed"
    assert row_label("unavailable", count([]), []) == "unavailable"
    assert row_label("crashed", count([R.test("a", "crashed")]), []) == "crashed"  # type: ignore[list-item]
    assert count([]).phrase() == "no tests"


def _md_counts(md: str, row: str) -> list[int]:
    (line,) = [x for x in md.splitlines() if x.startswith(f"| {row} |")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    return [int(c) for c in cells[2 : 2 + len(BUCKETS)]]


def test_markdown_html_actions_and_json_agree_with_the_fold(tmp_path: Path) -> None:
    recs = [_mixed(), _xfail_only()]
    # a record whose own summary disagrees with its tests: the tests are counted, once
    recs[0]["summary"]["passed"] = 99
    results = tmp_path / "results"
    for rec in recs:
        (results / rec["row"]).mkdir(parents=True)
        (results / rec["row"] / "run.json").write_text(json.dumps(rec))
    stream = io.StringIO()
    out = Output(stream, environ={"GITHUB_ACTIONS": "true"})
    t = run_triage(results, tmp_path / "out", None, None, out)
    md = (tmp_path / "out" / "triage.md").read_text()
    page = (tmp_path / "out" / "triage.html").read_text()
    data = json.loads((tmp_path / "out" / "triage.json").read_text())
    actions = stream.getvalue()
    for rec in recs:
        f = fold(rec)  # type: ignore[arg-type]
        expected = [f.counts.bucket(b) for b in BUCKETS]
        assert _md_counts(md, rec["row"]) == expected
        assert f"**{rec['row']}** {f.label}: {f.counts.phrase()}" in md
        card = re.search(rf"<div class='card [^']*' data-row='{rec['row']}'>(.*?)</div>", page, re.S)
        assert card is not None
        assert f"<span class='label'>{f.label}</span>" in card.group(1)
        assert f"<span class='counts'>{f.counts.phrase()}</span>" in card.group(1)
        assert f"::group::{rec['row']}: {f.label}\n{f.counts.total} tests: {f.counts.phrase()}\n" in actions
        (row_view,) = [r for r in data["rows"] if r["row"] == rec["row"]]
        assert [row_view["counts"][b] for b in BUCKETS] == expected
        assert row_view["label"] == f.label and row_view["headlines"] == list(f.headlines)
        assert row_view["summary"] == {"total": f.counts.total, **{o: f.counts.outcome(o) for o in OUTCOMES}}
    # the hung test is a TIMEOUT with its deadline everywhere, never the SIGTERM we sent
    for text in (md, page, actions):
        assert "TIMEOUT after 302 s in test_hang" in text
        assert "SIGTERM" not in text
    assert "6 xfailed" in page and "6 skipped" not in page
    assert {r["row"]: r["phrase"] for r in t["rows"]}["cpu"] == "3 passed, 6 xfailed"


def test_renderers_take_labels_from_the_model_not_the_raw_status() -> None:
    t = build([_mixed()], [], {})  # type: ignore[list-item]
    (row,) = t["rows"]
    assert row["status"] == "crashed" and row["label"] == "timed out"
    assert "⏱️ **mixed** timed out" in markdown.render(t)
    assert "status-timed-out" in html.render(t)


def test_the_terminal_and_junit_agree_with_the_fold(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    from device_matrix.cli import print_summary
    from device_matrix.config import load
    from device_matrix.records.junit import junit_xml

    recs = [_mixed(), _xfail_only()]
    recs[0]["summary"]["passed"] = 99  # a lying summary is never what is shown
    stream = io.StringIO()
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\n")
    print_summary(Output(stream, environ={}, tty=False), recs, load(tmp_path))  # type: ignore[arg-type]
    terminal = stream.getvalue()
    for rec in recs:
        f = fold(rec)  # type: ignore[arg-type]
        (line,) = [x for x in terminal.splitlines() if x.startswith(f"{rec['row']} ")]
        cells = line.split()
        assert cells[1] == f.label.split()[0]
        numbers = [int(c) for c in cells[-1 - len(BUCKETS) : -1]]
        assert numbers == [f.counts.bucket(b) for b in BUCKETS]
        for headline in f.headlines:
            assert headline in terminal
        suite = ET.fromstring(junit_xml(rec)).find("testsuite")  # type: ignore[arg-type]
        assert suite is not None
        c = f.counts
        assert int(suite.get("tests", "-1")) == c.total
        assert int(suite.get("failures", "-1")) == c.outcome("failed") + c.outcome("xpassed")
        assert int(suite.get("errors", "-1")) == sum(c.outcome(o) for o in ("error", "crashed", "timeout", "not_run"))
        assert int(suite.get("skipped", "-1")) == c.outcome("skipped") + c.outcome("xfailed")
    assert "TIMEOUT after 302 s in test_hang" in terminal and "SIGTERM" not in terminal


def _tests(*outcomes: str) -> list[dict[str, Any]]:
    return [R.test(f"t.py::test_{i}", o) for i, o in enumerate(outcomes)]


def test_counts_by_outcome_and_by_bucket() -> None:
    c = count(_tests("passed", "passed", "error", "xpassed", "failed", "not_run", "xfailed"))
    assert c.by_outcome == {"passed": 2, "failed": 1, "error": 1, "xpassed": 1, "xfailed": 1, "not_run": 1}
    assert c.total == 7
    assert c.outcome("passed") == 2 and c.outcome("crashed") == 0
    assert c.bucket("failed") == 3 and c.bucket("passed") == 2 and c.bucket("crashed") == 0
    assert c.buckets() == {
        "passed": 2,
        "failed": 3,
        "crashed": 0,
        "timeout": 0,
        "skipped": 0,
        "xfailed": 1,
        "not_run": 1,
        "deselected": 0,  # #34: a bucket of its own, never passed
    }
    assert list(c.buckets()) == list(BUCKETS)
    assert c.bad == 4  # failed (with error and xpassed) and not run; xfailed is not bad


def test_an_outcome_from_a_newer_record_is_counted_not_dropped() -> None:
    c = count([R.test("t.py::a", "passed"), R.test("t.py::b", "mystery")])
    assert c.by_outcome == {"passed": 1, "mystery": 1}
    assert c.total == 2 and c.bucket("passed") == 1


def test_bad_counts_every_bucket_a_maintainer_must_look_at() -> None:
    c = Counts({"passed": 1, "failed": 1, "crashed": 2, "timeout": 4, "not_run": 8, "skipped": 16, "xfailed": 32})
    assert c.bad == 15


def test_the_phrase_names_every_nonzero_bucket_in_order() -> None:
    c = Counts({"not_run": 1, "error": 2, "passed": 3, "timeout": 1, "xpassed": 1, "crashed": 1, "skipped": 2})
    assert c.phrase() == "3 passed, 3 failed (2 error, 1 xpassed), 1 crashed, 1 timeout, 2 skipped, 1 not run"
    assert Counts({"failed": 2}).phrase() == "2 failed"
    assert Counts({"xpassed": 1}).phrase() == "1 failed (1 xpassed)"
    assert Counts({}).phrase() == "no tests"


@pytest.mark.parametrize(
    ("nodeid", "name"),
    [
        ("a/b.py::C::test_x[1]", "test_x[1]"),
        ("a/b.py::test_y[a::b-c[d]]", "test_y[a::b-c[d]]"),
        ("test_z", "test_z"),
        ("a.py::test_w", "test_w"),
    ],
)
def test_short_name(nodeid: str, name: str) -> None:
    assert short_name(nodeid) == name


def _timeout(**extra: Any) -> dict[str, Any]:
    c = R.crash("cpu", "s/t.py::test_hang", "f", signal="SIGTERM", kind="timeout")
    c.update(extra)
    return c


def test_a_timeout_is_headed_by_its_deadline() -> None:
    assert crash_headline(_timeout(deadline=300)) == "TIMEOUT after 300 s in test_hang (deterministic)"
    assert crash_headline(_timeout(deadline=2.6)) == "TIMEOUT after 3 s in test_hang (deterministic)"
    # not a deadline: a bool, zero, a negative number, text
    for bad in (True, 0, -5, "300"):
        assert crash_headline(_timeout(deadline=bad)) == "TIMEOUT in test_hang (deterministic)"


def test_an_older_timeout_takes_its_deadline_from_its_test() -> None:
    crash = _timeout()
    tests = [
        R.test("s/t.py::other", "timeout", crash_id="cpu-9", duration=50.0),
        R.test("s/t.py::zero", "timeout", crash_id=crash["id"], duration=0.0),
        R.test("s/t.py::test_hang", "timeout", crash_id=crash["id"], duration=301.7),
    ]
    assert crash_headline(crash, tests) == "TIMEOUT after 302 s in test_hang (deterministic)"
    assert crash_kind_label(crash, tests) == "TIMEOUT after 302 s"
    assert crash_headline(crash, tests[:2]) == "TIMEOUT in test_hang (deterministic)"


def test_a_crash_is_headed_by_its_signal_else_its_exit_code() -> None:
    c = R.crash("cpu", "s/t.py::test_x", "f")
    assert crash_headline(c) == "SIGSEGV in test_x (deterministic)"
    c["diagnosis"]["signal_name"] = None
    c["diagnosis"]["exit_code"] = 3
    c["classification"] = "flaky"
    assert crash_headline(c) == "exit code 3 in test_x (flaky)"
    c["diagnosis"]["exit_code"] = 0
    assert crash_kind_label(c) == "exit code 0"
    c["diagnosis"]["exit_code"] = None
    assert crash_headline(c) == "crash in test_x (flaky)"


def test_a_crash_outside_a_test_names_its_phase() -> None:
    c = R.crash("cpu", None, "f")
    assert crash_headline(c) == "SIGSEGV during exit (deterministic)"
    assert crash_kind_label(c) == "SIGSEGV"
    c["phase"] = "collection"
    assert crash_headline(c) == "SIGSEGV during collection (deterministic)"


@pytest.mark.parametrize(
    ("status", "outcomes", "kinds", "label"),
    [
        ("unavailable", ["crashed"], ["crash"], "unavailable"),
        ("error", [], [], "error"),
        ("interrupted", ["passed"], [], "interrupted"),
        ("running", ["failed"], [], "running"),
        ("crashed", ["timeout"], ["timeout", "timeout"], "timed out"),
        ("crashed", ["timeout", "crashed"], ["timeout", "crash"], "crashed"),
        ("passed", ["crashed"], [], "crashed"),
        ("crashed", ["passed"], [], "crashed"),
        ("failed", ["timeout", "failed"], [], "timed out"),
        ("passed", ["not_run"], [], "failed"),
        ("failed", ["passed"], [], "failed"),
        ("passed", ["passed", "skipped", "xfailed"], [], "passed"),
        ("passed", [], [], "passed"),
    ],
)
def test_row_label(status: str, outcomes: list[str], kinds: list[str], label: str) -> None:
    crashes = [R.crash("cpu", "t.py::x", "f", index=i, kind=k) for i, k in enumerate(kinds)]
    assert row_label(status, count(_tests(*outcomes)), crashes) == label


def test_the_fold_of_a_record() -> None:
    crash = R.crash("cpu", "s/t.py::test_x", "f")
    tests = [R.test("s/t.py::test_a"), R.test("s/t.py::test_x", "crashed", crash_id=crash["id"])]
    rec = R.record("cpu", tests, [crash])
    f = fold(rec)
    assert (f.row, f.status, f.label) == ("cpu", "crashed", "crashed")
    assert f.counts.by_outcome == {"passed": 1, "crashed": 1}
    assert f.headlines == ("SIGSEGV in test_x (deterministic)",)
    assert f.line() == "cpu: crashed: 1 passed, 1 crashed"


def test_a_one_second_deadline_is_a_deadline() -> None:
    assert crash_headline(_timeout(deadline=1)) == "TIMEOUT after 1 s in test_hang (deterministic)"
    crash = _timeout()
    tests = [R.test("s/t.py::test_hang", "timeout", crash_id=crash["id"], duration=1.0)]
    assert crash_headline(crash, tests) == "TIMEOUT after 1 s in test_hang (deterministic)"


def test_the_kind_label_of_a_test_whose_name_says_in() -> None:
    c = R.crash("cpu", "s/t.py::test_x[a in b]", "f")
    assert crash_headline(c) == "SIGSEGV in test_x[a in b] (deterministic)"
    assert crash_kind_label(c) == "SIGSEGV"


def test_the_fold_of_a_row_that_did_not_run_says_why() -> None:
    for status in ("unavailable", "error", "interrupted"):
        f = fold(R.record("tpu", [], status=status))
        assert (f.status, f.label, f.line()) == (status, status, f"tpu: {status}: no tests")


def _summary(tmp_path: Path, recs: list[dict[str, Any]]) -> str:
    from device_matrix.cli import print_summary
    from device_matrix.config import load

    stream = io.StringIO()
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\n")
    print_summary(Output(stream, environ={}, tty=False), recs, load(tmp_path))  # type: ignore[arg-type]
    return stream.getvalue()


def test_the_terminal_says_why_each_test_failed_and_where(tmp_path: Path) -> None:
    # `nox -s cpu` printed "FAILED tests/test_fail.py::test_width (0.01s)" and the table:
    # the assertion's message was in run.json and output.log only
    failed = R.test("tests/test_fail.py::test_width", "failed", message="def test_width():\n>  assert 8 == 16")
    cause = "AssertionError: the default width should be 16\nassert 8 == 16"
    failed.update(cause=cause, file="tests/test_fail.py", line=5)
    error = R.test("scripts/train.py", "error", message="Traceback ...\nModuleNotFoundError: No module named 'mypkg'\n")
    error.update(cause="ModuleNotFoundError: No module named 'mypkg'", file="scripts/train.py", line=7)
    old = R.test("tests/test_old.py::test_x", "failed", message="E   ValueError: from a record without causes")
    rec = R.record("cpu", [R.test("tests/test_ok.py::test_ok"), failed, error, old])
    lines = _summary(tmp_path, [rec]).splitlines()
    where = "tests/test_fail.py::test_width at tests/test_fail.py:5"
    assert f"  cpu: failed {where}: AssertionError: the default width should be 16" in lines
    assert "  cpu: error scripts/train.py at scripts/train.py:7: ModuleNotFoundError: No module named 'mypkg'" in lines
    assert "  cpu: failed tests/test_old.py::test_x: ValueError: from a record without causes" in lines
    assert not any("test_ok" in line for line in lines)


def test_the_terminal_lists_some_failures_and_says_how_many_more(tmp_path: Path) -> None:
    many = [R.test(f"t.py::test_{i:02}", "failed", message=f"E   AssertionError: number {i}") for i in range(25)]
    terminal = _summary(tmp_path, [R.record("cpu", many)])
    shown = [line for line in terminal.splitlines() if line.startswith("  cpu: failed t.py::test_")]
    assert len(shown) == 10 and "number 0" in shown[0]
    run_json = tmp_path / "results" / "cpu" / "run.json"
    assert f"  cpu: 15 more failure(s): {run_json}, or `device-matrix triage`" in terminal.splitlines()


def test_a_skip_nothing_links_sends_the_user_to_sync(tmp_path: Path) -> None:
    # where nothing links them (a GitHub tracker), the line says how
    rec = R.record("cpu", [R.test("t.py::test_a", "skipped", skip=R.skip_info(None))])
    assert "  cpu: 1 device skip(s) cite no issue: run `device-matrix issues sync`" in _summary(tmp_path, [rec])


def test_the_phases_that_failed_before_a_crash_are_told_each_in_a_line_then_its_traceback() -> None:
    # the test's own failure, kept beside the crash that ended its process
    c: Any = R.crash("cpu", "t.py::test_x", "1" * 16)
    assert failed_before(c) == [] and failed_before_told(c) == []  # a record written before they were kept
    c["failed_before"] = [
        {
            "when": "call",
            "sub": "case 2",
            "outcome": "failed",
            "cause": "AssertionError: the test's own failure\nassert 4 == 5",
            "message": "def test_x():\n>   assert 2 + 2 == 5",
            "file": "t.py",
            "line": 9,
        },
        {
            "when": "teardown",
            "sub": None,
            "outcome": "error",
            "cause": None,
            "message": None,
            "file": None,
            "line": None,
        },
    ]
    assert failed_before(c) == [
        "its call (subtest case 2) failed at t.py:9: AssertionError: the test's own failure",
        "its teardown error",
    ]
    assert failed_before_told(c) == [
        "before it ended, its call (subtest case 2) failed at t.py:9: AssertionError: the test's own failure\n"
        "def test_x():\n>   assert 2 + 2 == 5",
        "before it ended, its teardown error",
    ]
