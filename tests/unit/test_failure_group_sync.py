"""The decisions of an issue sync for failure groups (#32), pinned exactly: the key, what is
a failure finding, which runs may file, comment on or reopen its issue, and what its issue
says. The command line and a GitHub-compatible server: tests/unit/test_failure_group_issues.py.
"""

from __future__ import annotations

from typing import Any

from device_matrix.findings import failure_key
from device_matrix.issues.base import FINGERPRINT_MARKER, Issue
from device_matrix.issues.sync import FAILURE_TESTS_LISTED, FAILURE_TEXT_KEPT, collect, sync
from device_matrix.redact import Redactor
from tests import records as R
from tests.unit.test_sync import FakeTracker


def _signature(t: Any, tests: Any = ()) -> str:
    """A stand-in for report/groups.py's rule: the cause as it is."""
    return str(t.get("cause") or "(no message)")


def _failing(nodeid: str, cause: str = "OSError: hub", outcome: str = "failed", message: str = "E   tb") -> Any:
    t = R.test(nodeid, outcome, message=message)
    t["cause"], t["file"], t["line"] = cause, "t.py", 3
    return t


def _record(row: str, tests: list[Any], *, run: str = "run-1", pr: int | None = None, event: str = "push") -> Any:
    rec = R.record(row, tests, started=run)
    rec["source"] = {"event": "pull_request" if pr else event, "pull_request": pr}
    return rec


def _sync(records: list[Any], tracker: FakeTracker, **kw: Any) -> Any:
    kw.setdefault("apply", True)
    return sync(records, tracker, labels=["dm"], redactor=Redactor({}), signature=_signature, **kw)  # type: ignore[arg-type]


def _findings(records: list[Any], **kw: Any) -> Any:
    findings, _ = collect(records, _signature, **kw)
    return findings


# --- the key ------------------------------------------------------------------------------


def test_a_failure_group_is_known_by_a_hash_of_its_signature_and_the_key_never_changes() -> None:
    # the keys of issues already filed: sha256(signature), 16 hex digits
    assert failure_key("OSError: hub @ t.py:3") == "failure-ade27e6109c62ed8"
    assert failure_key("") == "failure-e3b0c44298fc1c14"
    assert len(failure_key("x")) == len("failure-") + 16


# --- what is a finding --------------------------------------------------------------------


def test_one_finding_per_signature_across_rows_with_its_tests_rows_and_runs() -> None:
    recs = [
        _record(
            "cpu", [_failing("t.py::a"), _failing("t.py::b"), _failing("t.py::c", cause="Other"), R.test("t.py::d")]
        ),
        _record("tpu", [_failing("t.py::a")]),
    ]
    hub, other = _findings(recs)
    assert (hub.fingerprint, hub.kind, hub.what, hub.title) == (
        failure_key("OSError: hub"),
        "failure",
        "failure",
        "Failing: OSError: hub",
    )
    assert hub.nodeids == ["t.py::a", "t.py::b", "t.py::a"] and hub.rows == ["cpu", "tpu"]
    assert hub.failed == [("cpu", "t.py::a"), ("cpu", "t.py::b"), ("tpu", "t.py::a")]
    assert hub.runs == [("cpu", "run-1"), ("tpu", "run-1")]  # each row's run once
    assert hub.signature == "OSError: hub" and not hub.link_only and hub.sections == []  # written by sync
    assert hub.first["nodeid"] == "t.py::a"
    assert other.nodeids == ["t.py::c"]


def test_errors_and_xpasses_are_failures_crashes_skips_and_passes_are_not() -> None:
    tests = [
        R.test("t.py::first"),  # a pass before them ends nothing
        _failing("t.py::e", outcome="error"),
        _failing("t.py::x", outcome="xpassed"),
        _failing("t.py::c", outcome="crashed"),
        _failing("t.py::t", outcome="timeout"),
        _failing("t.py::s", outcome="skipped"),
        _failing("t.py::p", outcome="passed"),
        _failing("t.py::n", outcome="not_run"),
    ]
    (f,) = _findings([_record("cpu", tests)])
    assert f.nodeids == ["t.py::e", "t.py::x"]


def test_without_a_signature_failures_are_no_findings() -> None:
    findings, _ = collect([_record("cpu", [_failing("t.py::a")])])
    assert findings == []


def test_crashes_and_skips_come_before_the_failure_groups() -> None:
    crash = R.crash("cpu", "t.py::c", "abcd")
    rec = _record("cpu", [_failing("t.py::a"), R.test("t.py::c", "crashed", crash_id=crash["id"])])
    rec["crashes"] = [crash]
    assert [f.kind for f in _findings([rec, _record("tpu", [_failing("t.py::b", cause="x")])])] == [
        "crash",
        "failure",
        "failure",
    ]


def test_a_pull_requests_failures_are_linked_only_and_name_no_run() -> None:
    (f,) = _findings([_record("cpu", [_failing("t.py::a")], pr=7)])
    assert f.link_only and f.runs == [] and f.rows == ["cpu"] and f.nodeids == ["t.py::a"]
    # a run with a pull request's number but another event is a pull request's too
    (g,) = _findings([_record("cpu", [_failing("t.py::a")], pr=7, event="push")])
    assert g.link_only
    rec = _record("cpu", [_failing("t.py::a")])
    rec["source"]["pull_request"] = 7
    (h,) = _findings([rec])
    assert h.link_only
    # and one whose event is a pull request's, its number unknown
    rec = _record("cpu", [_failing("t.py::a")], event="pull_request")
    (i,) = _findings([rec])
    assert i.link_only


def test_a_group_seen_on_a_push_too_may_be_filed_and_names_only_the_pushs_run() -> None:
    recs = [_record("cpu", [_failing("t.py::a")], pr=7, run="pr"), _record("tpu", [_failing("t.py::a")], run="main")]
    (f,) = _findings(recs)
    assert not f.link_only and f.runs == [("tpu", "main")] and f.rows == ["cpu", "tpu"]
    (g,) = _findings(list(reversed(recs)))
    assert not g.link_only and g.runs == [("tpu", "main")]


def test_a_run_without_a_source_files() -> None:
    rec = R.record("cpu", [_failing("t.py::a")])
    (f,) = _findings([rec])
    assert not f.link_only and f.runs == [("cpu", rec["started_at"])]


def test_file_failures_false_links_only() -> None:
    (f,) = _findings([_record("cpu", [_failing("t.py::a")])], file_failures=False)
    assert f.link_only and f.runs == []


# --- what the sync does -------------------------------------------------------------------


def test_a_group_is_filed_once_and_its_body_ends_with_its_key() -> None:
    t = FakeTracker()
    recs = [_record("cpu", [_failing("t.py::a"), _failing("t.py::b")])]
    report = _sync(recs, t)
    key = failure_key("OSError: hub")
    assert report.filed == [(key, "fake:1")] and t.issues[0].body.endswith(FINGERPRINT_MARKER.format(key))
    again = _sync(recs, t)
    assert again.filed == [] and again.linked == [(key, "fake:1")] and t.notes == {} and t.creates == 1


def test_a_group_filed_before_numbers_were_kept_is_linked_never_filed_again() -> None:
    # #42: the signature of an exit status (or an HTTP status, an errno) keeps its number
    # now; the group's issue was filed under the signature with every number masked, and a
    # sync after the upgrade filed the same group a second time
    t = FakeTracker()
    old = _record("cpu", [_failing("t.py::a", cause="CalledProcessError: returned non-zero exit status N")])
    assert _sync([old], t).filed == [(failure_key("CalledProcessError: returned non-zero exit status N"), "fake:1")]
    now = _record("cpu", [_failing("t.py::a", cause="CalledProcessError: returned non-zero exit status 137")])
    report = _sync([now], t)
    assert report.filed == [] and t.creates == 1
    assert report.linked == [(failure_key("CalledProcessError: returned non-zero exit status 137"), "fake:1")]
    # a group that is new today is filed under today's key, and found by it afterwards
    other = _record("cpu", [_failing("t.py::b", cause="CalledProcessError: returned non-zero exit status 1")])
    assert [fp for fp, _ in _sync([other], t, apply=False).would_file] == []  # exit status N's issue: its twin
    assert _sync([now], t, apply=False).would_file == []


def test_a_pull_requests_group_without_an_issue_files_nothing_and_is_not_to_file() -> None:
    t = FakeTracker()
    report = _sync([_record("cpu", [_failing("t.py::a")], pr=7)], t)
    assert report.filed == report.linked == report.would_file == [] and t.creates == 0
    dry = _sync([_record("cpu", [_failing("t.py::a")], pr=7)], t, apply=False)
    assert dry.would_file == []
    push = _sync([_record("cpu", [_failing("t.py::a")])], t, apply=False)
    assert push.would_file == [(failure_key("OSError: hub"), "Failing: OSError: hub")]


def test_a_pull_requests_group_links_the_issue_without_a_comment() -> None:
    t = FakeTracker()
    _sync([_record("cpu", [_failing("t.py::a")], run="main")], t)
    report = _sync([_record("cpu", [_failing("t.py::a")], run="pr", pr=7)], t)
    assert report.linked == [(failure_key("OSError: hub"), "fake:1")] and report.commented == [] and t.notes == {}
    assert report.issues["fake:1"]["state"] == "open"


def test_a_new_run_of_a_filed_group_is_commented_once() -> None:
    t = FakeTracker()
    _sync([_record("cpu", [_failing("t.py::a")], run="run-1")], t)
    report = _sync([_record("cpu", [_failing("t.py::a")], run="run-2")], t)
    assert report.commented == [("fake:1", "cpu")]
    assert t.notes["fake:1"][0].startswith("Seen again in the run of run-2 on cpu.")
    assert _sync([_record("cpu", [_failing("t.py::a")], run="run-2")], t).commented == []


def test_a_closed_groups_issue_is_reopened_by_a_new_run_never_by_a_pull_request() -> None:
    t = FakeTracker()
    _sync([_record("cpu", [_failing("t.py::a")], run="run-1")], t)
    t.issues[0].state = "closed"
    pr = _sync([_record("cpu", [_failing("t.py::a")], run="pr", pr=7)], t)
    assert pr.reopened == [] and t.issues[0].state == "closed" and pr.issues["fake:1"]["state"] == "closed"
    report = _sync([_record("cpu", [_failing("t.py::a")], run="run-2")], t)
    assert report.reopened == ["fake:1"] and report.back == {"fake:1": "failure"} and t.issues[0].state == "open"
    assert "  reopened fake:1: its failure is back" in report.lines()
    assert t.notes["fake:1"][0].startswith("Reopened: seen again in the run of run-2 on cpu.")


def test_on_recurrence_new_files_a_new_issue_for_a_group_but_not_for_a_pull_request() -> None:
    t = FakeTracker()
    _sync([_record("cpu", [_failing("t.py::a")], run="run-1")], t)
    t.issues[0].state = "closed"
    assert _sync([_record("cpu", [_failing("t.py::a")], run="pr", pr=7)], t, on_recurrence="new").filed == []
    report = _sync([_record("cpu", [_failing("t.py::a")], run="run-2")], t, on_recurrence="new")
    assert report.filed == [(failure_key("OSError: hub"), "fake:2")]
    assert "fake:1 (closed) had the same fingerprint." in t.issues[1].body


def test_a_crash_reopened_is_still_said_so() -> None:
    t = FakeTracker()
    crash = R.crash("cpu", "t.py::c", "abcd")
    rec = R.record("cpu", [R.test("t.py::c", "crashed", crash_id=crash["id"])], [crash], started="run-1")
    _sync([rec], t)
    t.issues[0].state = "closed"
    rec2 = R.record("cpu", [R.test("t.py::c", "crashed", crash_id=crash["id"])], [crash], started="run-2")
    assert "  reopened fake:1: its crash is back" in _sync([rec2], t).lines()


def test_a_crash_is_placed_by_environment_and_a_failure_group_never() -> None:
    t = FakeTracker()
    crash = R.crash("cpu", "t.py::c", "abcd")
    rec = _record("cpu", [_failing("t.py::a", cause="abcd"), R.test("t.py::c", "crashed", crash_id=crash["id"])])
    rec["crashes"] = [crash]
    # a placement under the failure group's own key too: never read for it
    _sync([rec], t, placements={"abcd": "12 of 12 crashes on Tesla T4", failure_key("abcd"): "on T4"})
    crash_issue, failure_issue = t.issues
    assert "### Where it happens\n\n12 of 12 crashes on Tesla T4" in crash_issue.body
    assert crash_issue.body.index("### What happened") < crash_issue.body.index("### Where it happens")
    assert "Where it happens" not in failure_issue.body


# --- what its issue says ------------------------------------------------------------------


def test_a_groups_issue_says_how_many_fail_where_the_cause_the_tests_and_the_first_traceback() -> None:
    t = FakeTracker()
    long = "\n".join(f"line {i:05d}" for i in range(1000))
    tests = [_failing(f"t.py::a[{i}]", message=long) for i in range(FAILURE_TESTS_LISTED + 3)]
    _sync([_record("cpu", tests[:20]), _record("tpu", tests[20:])], t)
    body = t.issues[0].body
    assert (
        f"### What fails\n\n{len(tests)} tests: 20 on cpu, 3 on tpu, with the same cause (the first at `t.py:3`)."
        in body
    )
    assert "### Cause\n\n```\nOSError: hub\n```" in body
    assert "### Signature\n\n```\nOSError: hub\n```" in body
    assert "- `t.py::a[0]` on cpu" in body and f"- `t.py::a[{FAILURE_TESTS_LISTED - 1}]` on cpu" in body
    assert f"`t.py::a[{FAILURE_TESTS_LISTED}]`" not in body
    assert "- … and 3 more (the run's triage.json lists every one)" in body
    first = body[body.index("### First failure") :]
    assert "line 00999" in first and long[-FAILURE_TEXT_KEPT:] in first and long[-FAILURE_TEXT_KEPT - 1 :] not in first
    assert "### To close" in body


def test_one_failing_test_without_a_place_is_said_so() -> None:
    t = FakeTracker()
    test = _failing("t.py::a")
    test["file"] = None
    _sync([_record("cpu", [test])], t)
    assert "### What fails\n\n1 test: 1 on cpu, with the same cause." in t.issues[0].body


# --- a red main does not flood the tracker -------------------------------------------------


def test_a_sync_files_at_most_the_cap_of_new_failure_groups_the_largest_first() -> None:
    # #32: a failure's group is its masked line and the innermost frame of the project's: a
    # main where 30 tests each fail on their own assert line is 30 groups; one sync filed 30
    t = FakeTracker()
    tests = [_failing(f"t.py::solo{n}", cause=f"AssertionError: solo {chr(97 + n % 26)}{n // 26}") for n in range(30)]
    tests += [_failing(f"t.py::big{n}", cause="OSError: hub") for n in range(4)]
    tests += [_failing(f"t.py::mid{n}", cause="KeyError: mid") for n in range(2)]
    report = _sync([_record("cpu", tests)], t, max_failure_issues=3)
    assert t.creates == 3
    titles = [i.title for i in t.issues]
    assert "Failing: OSError: hub" in titles and "Failing: KeyError: mid" in titles  # the largest two
    assert len(report.filed) == 3
    assert len(report.held) == 29
    assert "29 failure groups not filed: over tracker.max_failure_issues (3)" in "\n".join(report.lines())
    # what has an issue is linked whatever the cap; the next sync files no more than it either
    again = _sync([_record("cpu", tests, run="run-2")], t, max_failure_issues=3)
    assert len(again.linked) == 3 and t.creates == 6


def test_a_dry_run_says_what_the_cap_would_hold_back() -> None:
    t = FakeTracker()
    tests = [_failing(f"t.py::s{n}", cause=f"E{chr(97 + n)}") for n in range(5)]
    report = _sync([_record("cpu", tests)], t, apply=False, max_failure_issues=2)
    assert len(report.would_file) == 2 and len(report.held) == 3 and t.creates == 0


def test_the_cap_holds_back_no_crash_or_skip() -> None:
    t = FakeTracker()
    crash = R.test("t.py::c", "crashed")
    rec = _record("cpu", [crash, *[_failing(f"t.py::s{n}", cause=f"E{chr(97 + n)}") for n in range(3)]])
    rec["crashes"] = [R.crash("cpu", "t.py::c", "abc123")]
    report = _sync([rec], t, max_failure_issues=0)
    assert len(report.held) == 3
    assert t.creates == 1 and t.issues[0].title.startswith("Crash")


def test_a_group_whose_cause_moved_to_another_line_is_linked_never_filed_again() -> None:
    # #42: an edit above the line that raises moves it, and the group's issue was filed anew
    t = FakeTracker()
    first = _sync([_record("cpu", [_failing("t.py::a", cause="OSError: hub @ src/pkg/hub.py:41")])], t)
    ((_, issue),) = first.filed
    moved = _record("cpu", [_failing("t.py::a", cause="OSError: hub @ src/pkg/hub.py:44")], run="run-2")
    report = _sync([moved], t)
    assert report.filed == [] and t.creates == 1 and [key for _, key in report.linked] == [issue]
    # raised in another file, or with other words: another cause, its own issue
    other = _record("cpu", [_failing("t.py::b", cause="OSError: hub @ src/pkg/cache.py:41")], run="run-3")
    assert len(_sync([other], t).filed) == 1


def test_a_group_filed_under_its_line_is_linked_from_the_same_line() -> None:
    # an issue filed before the key left the line out carries the key with it: found by that
    sig = "OSError: hub @ src/pkg/hub.py:41"
    body = f"filed before\n\n{FINGERPRINT_MARKER.format(failure_key(sig))}"
    t = FakeTracker([Issue("fake:1", 1, f"Failing: {sig}", body, "open", url="https://fake/1", labels=[])])
    report = _sync([_record("cpu", [_failing("t.py::a", cause=sig)])], t)
    assert report.filed == [] and t.creates == 0 and [key for _, key in report.linked] == ["fake:1"]
