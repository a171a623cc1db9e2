"""The decisions of an issue sync, pinned exactly: what is a finding, which issue it gets, what is filed or reopened."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from device_matrix.diagnostics.fingerprint import NO_FRAMES
from device_matrix.errors import TrackerError
from device_matrix.findings import skip_key
from device_matrix.issues.base import (
    FINGERPRINT_MARKER,
    SEEN_MARKER,
    AmbiguousWrite,
    Cited,
    Issue,
    pick,
)
from device_matrix.issues.sync import FRAMELESS_MARK, Finding, collect, load_links, sync
from device_matrix.redact import Redactor
from tests import records as R


class FakeTracker:
    """A tracker in memory that records every write; unclear answers on demand."""

    name = "fake"

    def __init__(self, issues: Sequence[Issue] = (), cited: dict[str, Cited] | None = None) -> None:
        self.issues = list(issues)
        self.notes: dict[str, list[str]] = {}
        self.cited = cited or {}
        self.lookups: list[list[str]] = []
        self.creates = 0
        self.finds = 0
        self.unclear_creates: list[bool] = []  # per create: True = applied anyway, False = not
        self.unclear_comments: list[bool] = []
        self.filed_meanwhile: Issue | None = None  # appears at the first recheck

    @contextmanager
    def transaction(self) -> Iterator[None]:
        yield

    def _with(self, fp: str) -> list[Issue]:
        return [i for i in self.issues if i.fingerprint == fp]

    def find(self, fingerprints: Collection[str]) -> dict[str, list[Issue]]:
        self.finds += 1
        return {fp: self._with(fp) for fp in fingerprints if self._with(fp)}

    def recheck(self, fingerprint: str) -> Issue | None:
        if self.filed_meanwhile is not None:
            self.issues.append(self.filed_meanwhile)
            self.filed_meanwhile = None
        found = self._with(fingerprint)
        return pick(found) if found else None

    def lookup(self, refs: Sequence[str]) -> dict[str, Cited]:
        self.lookups.append(list(refs))
        return {r: self.cited[r] for r in refs if r in self.cited}

    def create(self, title: str, body: str, labels: Sequence[str]) -> Issue:
        self.creates += 1
        n = len(self.issues) + 1
        issue = Issue(f"fake:{n}", n, title, body, "open", url=f"https://fake/{n}", labels=list(labels))
        if self.unclear_creates:
            if self.unclear_creates.pop(0):
                self.issues.append(issue)
            raise AmbiguousWrite("unclear")
        self.issues.append(issue)
        return issue

    def settle(self, issue: Issue) -> Issue:
        return issue

    def comment(self, issue: Issue, body: str) -> None:
        if self.unclear_comments:
            if self.unclear_comments.pop(0):
                self.notes.setdefault(issue.key, []).append(body)
            raise AmbiguousWrite("unclear")
        self.notes.setdefault(issue.key, []).append(body)

    def comments(self, issue: Issue) -> list[str]:
        return list(self.notes.get(issue.key, []))

    def reopen(self, issue: Issue) -> Issue:
        issue.state = "open"
        return issue


def _crash_record(row: str = "cpu", run: str = "2026-11-29T10:00:00+00:00", **crash: Any) -> dict[str, Any]:
    c = R.crash(row, "s/t.py::test_x", "abcd")
    c.update(crash)
    return R.record(row, [R.test("s/t.py::test_x", "crashed", crash_id=c["id"])], [c], started=run)


def _sync(records: list[dict[str, Any]], tracker: FakeTracker, **kw: Any) -> Any:
    kw.setdefault("apply", True)
    return sync(records, tracker, labels=["dm"], redactor=Redactor({}), **kw)  # type: ignore[arg-type]


def test_a_crash_finding_says_what_where_and_how_to_reproduce() -> None:
    rec = _crash_record()
    rec["crashes"][0]["diagnosis"].update(
        fatal_lines=["F a.cc:1] first", "F c.cc:3] middle", "F b.cc:2] last"],
        native_stack="frame",
        gdb_frames=["#0 f", "#1 g"],
    )
    rec["crashes"][0]["reruns"] = [{}, {}]
    rec["crashes"][0]["diagnosis"]["last_output"] = [f"line {i}" for i in range(30)]
    (f,), cited = collect([rec])  # type: ignore[list-item]
    assert cited == []
    assert f == Finding(
        fingerprint="crash-abcd",
        kind="crash",
        title="Crash: SIGSEGV in s/t.py::test_x",
        sections=[
            (
                "What happened",
                "crash (SIGSEGV) during call of `s/t.py::test_x`; deterministic over 2 rerun(s). "
                "invalid memory access in native code",
                False,
            ),
            ("Fatal message", "F b.cc:2] last", True),
            ("Python stack", R.crash("cpu", "x", "y")["diagnosis"]["python_stack"], True),
            ("Native stack", "frame", True),
            ("gdb backtrace (top frames)", "#0 f\n#1 g", True),
            ("Last output", "\n".join(f"line {i}" for i in range(5, 30)), True),
            ("Reproduce", "cd /p && python -m pytest s/t.py::test_x", True),
            ("Fingerprint basis", "SIGSEGV\nt.py:test_x", True),
        ],
        rows=["cpu"],
        nodeids=["s/t.py::test_x"],
        runs=[("cpu", "2026-11-29T10:00:00+00:00")],
    )


def test_a_hang_outside_a_test_and_an_exit_without_signal() -> None:
    hang = _crash_record(kind="timeout", nodeid=None, phase="collection", when=None)
    hang["crashes"][0]["diagnosis"].update(signal_name=None, hint=None, terminate="std::bad_alloc")
    (f,), _ = collect([hang])  # type: ignore[list-item]
    assert f.title == "Hang: timeout in pytest collection"
    assert (
        f.sections[0][1]
        == "timeout (timeout) during collection of `pytest collection`; deterministic over 0 rerun(s). "
    )
    assert f.sections[1] == ("Fatal message", "std::bad_alloc", True)
    assert f.sections[4] == ("gdb backtrace (top frames)", None, True)
    assert f.nodeids == []
    gone = _crash_record()
    gone["crashes"][0]["diagnosis"].update(signal_name=None, exit_code=3, hint=None, fatal_error=None)
    (g,), _ = collect([gone])  # type: ignore[list-item]
    assert g.title == "Crash: exit code 3 in s/t.py::test_x"
    assert g.sections[1] == ("Fatal message", "", True)


def test_the_fatal_message_is_what_the_process_said_never_our_hint() -> None:
    # a segfault in ctypes: faulthandler's "Fatal Python error: Segmentation fault" and no F
    # line; the issue's "Fatal message" showed the hint, which "What happened" already says
    rec = _crash_record()
    assert rec["crashes"][0]["diagnosis"]["hint"] and not rec["crashes"][0]["diagnosis"]["fatal_lines"]
    (f,), _ = collect([rec])  # type: ignore[list-item]
    assert f.sections[1] == ("Fatal message", "Fatal Python error: Segmentation fault", True)
    rec["crashes"][0]["diagnosis"].update(fatal_error=None)
    (g,), _ = collect([rec])  # type: ignore[list-item]
    assert g.sections[1] == ("Fatal message", "", True)


def test_one_finding_per_fingerprint_across_rows_and_runs() -> None:
    recs = [
        _crash_record("cpu", "run-1"),
        _crash_record("tpu", "run-1"),
        _crash_record("cpu", "run-2"),
        {**_crash_record("cpu", "run-3"), "run_url": "https://ci/run/3"},
    ]
    (f,), _ = collect(recs)  # type: ignore[arg-type]
    assert f.rows == ["cpu", "tpu"] and f.nodeids == ["s/t.py::test_x"]
    assert f.runs == [("cpu", "run-1"), ("tpu", "run-1"), ("cpu", "run-2"), ("cpu", "https://ci/run/3")]


def test_cited_crashes_and_skips_are_looked_up_not_filed() -> None:
    crash = _crash_record(issue="https://github.com/o/n/issues/7")
    outside = _crash_record(issue="ledger:0003", nodeid=None, phase="exit")
    skip = R.record(
        "cpu",
        [
            R.test("s/t.py::a", "skipped", skip=R.skip_info("https://github.com/o/n/issues/5")),
            R.test("s/t.py::b", "skipped", skip=R.skip_info("not a ref")),
            R.test("s/t.py::c", "skipped", skip={**R.skip_info("#6"), "source": "pytest"}),
            R.test("s/t.py::d", "skipped"),
        ],
    )
    findings, cited = collect([crash, outside, skip])  # type: ignore[list-item]
    assert findings == []
    assert cited == [
        ("s/t.py::test_x", "cpu", "o/n#7"),
        ("exit", "cpu", "ledger:3"),
        ("s/t.py::a", "cpu", "o/n#5"),
        ("s/t.py::b", "cpu", "not a ref"),
    ]


def test_a_skip_without_an_issue_is_a_finding() -> None:
    info = {**R.skip_info(None, mode="xfail", devices=("cpu", "tpu")), "reason": None}
    recs = [
        R.record("cpu", [R.test("s/t.py::a", "xfailed", skip=info)], started="run-1"),
        R.record("tpu", [R.test("s/t.py::a", "xfailed", skip=info)], started="run-1"),
    ]
    (f,), cited = collect(recs)  # type: ignore[arg-type]
    assert cited == []
    assert f == Finding(
        fingerprint=skip_key("s/t.py::a", "xfail"),
        kind="skip",
        title="Disabled (xfail): s/t.py::a",
        sections=[
            (
                "Test",
                "`s/t.py::a` is marked xfail on cpu, tpu (marker, suites/x/test_x.py:10) without an issue.",
                False,
            ),
            ("Reason given", "(none)", False),
            ("To re-enable", "Fix the cause, then remove the marker or disable-list entry.", False),
        ],
        rows=["cpu", "tpu"],
        nodeids=["s/t.py::a", "s/t.py::a"],
        runs=[("cpu", "run-1"), ("tpu", "run-1")],
    )
    assert skip_key("s/t.py::a", "xfail") != skip_key("s/t.py::a", "skip")
    assert skip_key("s/t.py::a", "skip").startswith("skip-") and len(skip_key("x", "skip")) == 21


@pytest.mark.parametrize(
    ("file", "line", "devices", "where"),
    [
        ("d.toml", None, (), "`s/t.py::a` is marked skip on some devices (disable_list, d.toml) without an issue."),
        (None, None, ("cpu",), "`s/t.py::a` is marked skip on cpu (disable_list) without an issue."),
    ],
)
def test_where_a_skip_is_declared(file: str | None, line: int | None, devices: tuple[str, ...], where: str) -> None:
    info = {**R.skip_info(None, devices=devices), "file": file, "line": line, "source": "disable_list"}
    (f,), _ = collect([R.record("cpu", [R.test("s/t.py::a", "skipped", skip=info)])])  # type: ignore[list-item]
    assert f.sections[0][1] == where


def test_a_dry_run_lists_what_it_would_file() -> None:
    t = FakeTracker()
    report = _sync([_crash_record()], t, apply=False)
    assert report.would_file == [("crash-abcd", "Crash: SIGSEGV in s/t.py::test_x")]
    assert t.creates == 0 and report.filed == [] and not report.applied


def test_a_new_finding_is_filed_with_a_marker_per_run() -> None:
    t = FakeTracker()
    report = _sync([_crash_record("cpu", "run-1"), _crash_record("tpu", "https://ci/2")], t)
    (issue,) = t.issues
    assert report.filed == [("crash-abcd", "fake:1")] and report.linked == []
    assert issue.labels == ["dm"] and issue.fingerprint == "crash-abcd"
    assert "### Seen on\n\ncpu, tpu (https://ci/2)" in issue.body
    for run in ("run-1", "https://ci/2"):
        assert SEEN_MARKER.format("crash-abcd", hashlib.sha256(run.encode()).hexdigest()[:16]) in issue.body
    assert report.issues == {
        "fake:1": {"state": "open", "title": issue.title, "url": "https://fake/1", "locked": False}
    }
    assert report.tracker == "fake" and report.applied is True
    assert t.notes == {}
    # the same results again: linked, no comment
    again = _sync([_crash_record("cpu", "run-1")], t)
    assert again.linked == [("crash-abcd", "fake:1")] and again.filed == [] and t.notes == {}


def test_a_crash_seen_in_new_runs_gets_one_comment_per_run() -> None:
    t = FakeTracker()
    _sync([_crash_record("cpu", "run-1")], t)
    report = _sync(
        [_crash_record("cpu", "run-2"), _crash_record("tpu", "run-2"), _crash_record("cpu", "https://ci/3")], t
    )
    notes = t.notes["fake:1"]
    assert [n.split("\n\n")[0] for n in notes] == [
        "Seen again in the run of run-2 on cpu, tpu.",
        "Seen again in https://ci/3 on cpu.",
    ]
    assert report.commented == [("fake:1", "cpu"), ("fake:1", "tpu"), ("fake:1", "cpu")]
    assert report.reopened == []


def test_a_closed_crash_issue_is_reopened_once_by_a_new_run() -> None:
    t = FakeTracker()
    _sync([_crash_record("cpu", "run-1")], t)
    t.issues[0].state = "closed"
    report = _sync([_crash_record("cpu", "run-2"), _crash_record("cpu", "run-3")], t)
    assert report.reopened == ["fake:1"] and t.issues[0].state == "open"
    assert [n.split("\n\n")[0] for n in t.notes["fake:1"]] == [
        "Reopened: seen again in the run of run-2 on cpu.",
        "Seen again in the run of run-3 on cpu.",
    ]
    assert report.issues["fake:1"]["state"] == "open"


def test_a_closed_issue_stays_closed_without_a_new_run() -> None:
    t = FakeTracker()
    _sync([_crash_record("cpu", "run-1")], t)
    t.issues[0].state = "closed"
    report = _sync([_crash_record("cpu", "run-1")], t)
    assert report.reopened == [] and t.issues[0].state == "closed" and t.notes == {}
    assert report.linked == [("crash-abcd", "fake:1")] and len(t.issues) == 1


def test_on_recurrence_new_files_a_new_issue_naming_the_old_one() -> None:
    t = FakeTracker()
    _sync([_crash_record("cpu", "run-1")], t)
    t.issues[0].state = "closed"
    report = _sync([_crash_record("cpu", "run-2")], t, on_recurrence="new")
    assert report.filed == [("crash-abcd", "fake:2")] and report.reopened == []
    assert "### Earlier issue\n\nfake:1 (closed) had the same fingerprint." in t.issues[1].body
    # without a new run nothing is filed
    t2 = FakeTracker()
    _sync([_crash_record("cpu", "run-1")], t2)
    t2.issues[0].state = "closed"
    assert _sync([_crash_record("cpu", "run-1")], t2, on_recurrence="new").filed == []


def test_a_closed_skip_issue_is_linked_not_reopened() -> None:
    info = R.skip_info(None)
    rec = R.record("cpu", [R.test("s/t.py::a", "skipped", skip=info)], started="run-1")
    t = FakeTracker()
    _sync([rec], t)
    t.issues[0].state = "closed"
    later = R.record("cpu", [R.test("s/t.py::a", "skipped", skip=info)], started="run-2")
    report = _sync([later], t)
    assert report.linked == [(skip_key("s/t.py::a", "skip"), "fake:1")]
    assert report.reopened == [] and t.notes == {} and t.issues[0].state == "closed"


def test_an_issue_filed_meanwhile_is_linked_and_told_about_the_runs() -> None:
    t = FakeTracker()
    body = "filed by another sync\n" + FINGERPRINT_MARKER.format("crash-abcd")
    t.filed_meanwhile = Issue("fake:9", 9, "other", body, "open")
    report = _sync([_crash_record("cpu", "run-1")], t)
    assert t.creates == 0
    assert report.linked == [("crash-abcd", "fake:9")] and report.filed == []
    assert [n.split("\n\n")[0] for n in t.notes["fake:9"]] == ["Seen again in the run of run-1 on cpu."]


def test_an_unclear_create_is_looked_up_before_trying_again() -> None:
    t = FakeTracker()
    t.unclear_creates = [True]  # made after all: the next look finds it
    report = _sync([_crash_record()], t)
    assert t.creates == 1 and len(t.issues) == 1
    assert report.linked == [("crash-abcd", "fake:1")] and report.filed == []
    lost = FakeTracker()
    lost.unclear_creates = [False, False]  # not made: tried again
    assert _sync([_crash_record()], lost).filed == [("crash-abcd", "fake:1")]
    assert lost.creates == 3
    hopeless = FakeTracker()
    hopeless.unclear_creates = [False, False, False]
    with pytest.raises(TrackerError, match="3 unclear answers from fake") as err:
        _sync([_crash_record()], hopeless)
    assert err.value.tip == "Run the sync again later: an issue that was created after all is found and linked."
    assert hopeless.creates == 3


def test_an_unclear_comment_is_checked_before_it_is_sent_again() -> None:
    t = FakeTracker()
    _sync([_crash_record("cpu", "run-1")], t)
    t.unclear_comments = [True]
    report = _sync([_crash_record("cpu", "run-2"), _crash_record("cpu", "run-2b")], t)
    assert len(t.notes["fake:1"]) == 2  # the unclear one once, and the next run's
    assert report.commented == [("fake:1", "cpu"), ("fake:1", "cpu")]
    t.unclear_comments = [False]  # not made: sent again
    _sync([_crash_record("cpu", "run-3")], t)
    assert len(t.notes["fake:1"]) == 3
    t.unclear_comments = [False, False, False]
    with pytest.raises(TrackerError, match="commenting on fake:1: 3 unclear answers") as err:
        _sync([_crash_record("cpu", "run-4")], t)
    assert err.value.tip == "Run the sync again later; a comment that was made after all is not repeated."


def test_cited_issues_are_looked_up_once_and_closed_ones_can_be_reenabled() -> None:
    recs = [
        R.record(
            "cpu",
            [
                R.test("s/t.py::a", "skipped", skip=R.skip_info("ledger:1")),
                R.test("s/t.py::b", "skipped", skip=R.skip_info("ledger:1")),
                R.test("s/t.py::c", "skipped", skip=R.skip_info("ledger:2")),
                R.test("s/t.py::d", "skipped", skip=R.skip_info("ledger:3")),
            ],
        ),
        R.record("tpu", [R.test("s/t.py::a", "skipped", skip=R.skip_info("ledger:1"))]),
    ]
    t = FakeTracker(
        cited={
            "ledger:1": Cited("ledger:1", "closed", title="old", url="u1"),
            "ledger:2": Cited("ledger:2", "missing"),
        }
    )
    report = _sync(recs, t)
    assert t.lookups == [["ledger:1", "ledger:2", "ledger:3"]]
    assert report.cited == {"ledger:1": "closed", "ledger:2": "missing", "ledger:3": "unknown"}
    assert report.cited_by == {
        "ledger:1": {"s/t.py::a", "s/t.py::b"},
        "ledger:2": {"s/t.py::c"},
        "ledger:3": {"s/t.py::d"},
    }
    assert report.reenable == [("s/t.py::a", "ledger:1"), ("s/t.py::b", "ledger:1")]
    assert report.issues == {"ledger:1": {"state": "closed", "title": "old", "url": "u1", "locked": False}}
    # nothing cited: nothing looked up
    t2 = FakeTracker()
    _sync([_crash_record()], t2)
    assert t2.lookups == []


def test_crashes_after_a_cited_one_are_still_findings() -> None:
    rec = _crash_record(issue="ledger:1")
    second = R.crash("cpu", "s/t.py::test_y", "ffff", index=2)
    rec["crashes"].append(second)
    findings, cited = collect([rec])  # type: ignore[list-item]
    assert [f.fingerprint for f in findings] == ["crash-ffff"]
    assert cited == [("s/t.py::test_x", "cpu", "ledger:1")]


def test_a_run_named_by_a_plain_http_url_is_linked_as_such() -> None:
    t = FakeTracker()
    _sync([_crash_record("cpu", "run-1")], t)
    _sync([{**_crash_record("cpu", "x"), "run_url": "http://ci.local/7"}], t)
    assert t.notes["fake:1"][0].startswith("Seen again in http://ci.local/7 on cpu.")


def test_nothing_to_find_asks_the_tracker_nothing() -> None:
    t = FakeTracker()
    report = _sync([R.record("cpu", [R.test("s/t.py::a")])], t)
    assert t.finds == 0 and t.lookups == [] and report.linked == report.filed == []


def test_a_skip_issue_filed_meanwhile_gets_no_comment() -> None:
    info = R.skip_info(None)
    fp = skip_key("s/t.py::a", "skip")
    t = FakeTracker()
    t.filed_meanwhile = Issue("fake:3", 3, "other", "x\n" + FINGERPRINT_MARKER.format(fp), "open")
    report = _sync([R.record("cpu", [R.test("s/t.py::a", "skipped", skip=info)])], t)
    assert report.linked == [(fp, "fake:3")] and t.notes == {}


def test_locked_and_open_issues_are_remembered_as_they_are(tmp_path: Path) -> None:
    t = FakeTracker(
        [Issue("fake:1", 1, "t", "b\n" + FINGERPRINT_MARKER.format("crash-abcd"), "open", url="u", locked=True)],
        cited={"ledger:7": Cited("ledger:7", "open", locked=True, title="seven", url="u7")},
    )
    rec = _crash_record()
    rec["tests"].append(R.test("s/t.py::s", "skipped", skip=R.skip_info("ledger:7")))
    report = _sync([rec], t, results_dir=tmp_path)
    assert report.issues == {
        "fake:1": {"state": "open", "title": "t", "url": "u", "locked": True},
        "ledger:7": {"state": "open", "title": "seven", "url": "u7", "locked": True},
    }
    assert report.reenable == []


def test_the_links_file_keeps_earlier_links_and_names_the_tracker(tmp_path: Path) -> None:
    t = FakeTracker()
    _sync([_crash_record()], t, results_dir=tmp_path)
    other = R.record("cpu", [R.test("s/t.py::a", "skipped", skip=R.skip_info(None))])
    _sync([other], t, results_dir=tmp_path)
    links = load_links(tmp_path)
    assert links["tracker"] == "fake"
    assert links["links"] == {"crash-abcd": "fake:1", skip_key("s/t.py::a", "skip"): "fake:2"}


def test_an_uncited_device_skip_in_the_sources_is_filed_once() -> None:
    from device_matrix.skips import DeviceSkip

    declared = DeviceSkip(
        mode="skip",
        devices=("cpu", "cuda"),
        issue=None,
        reason="Skipping, not on TPU.",
        source="unittest",
        test="test/test_ops.py::TestOps::test_layout",
        file="test/test_ops.py",
        line=12,
        form="skipIf",
    )
    tracker = FakeTracker()
    report = _sync([], tracker, declared=[declared, declared])
    assert tracker.creates == 1 and len(report.filed) == 1
    (issue,) = tracker.issues
    assert issue.title == "Disabled (skip) on cpu, cuda: test/test_ops.py::TestOps::test_layout"
    assert skip_key("test/test_ops.py::TestOps::test_layout", "skip") in issue.body


def test_a_source_skip_already_found_at_run_time_is_not_filed_twice() -> None:
    from device_matrix.skips import DeviceSkip

    info = R.skip_info(None)
    rec = R.record("cpu", [R.test("s/t.py::a", "skipped", skip=info)], started="run-1")
    declared = DeviceSkip(
        mode="skip", devices=("cpu",), issue=None, reason="r", source="marker", test="s/t.py::a", file="s/t.py", line=3
    )
    tracker = FakeTracker()
    _sync([rec], tracker, declared=[declared])
    assert tracker.creates == 1
    # the run-time finding, with its rows, is the one filed
    assert "`s/t.py::a` is marked skip on cpu" in tracker.issues[0].body


def test_a_crash_filed_before_digits_in_names_were_kept_is_linked_never_filed_again() -> None:
    # #42: a crash's fingerprint keeps a name's digits now (sm_80); its issue was filed under
    # the fingerprint that masked them, and a sync after the upgrade filed it a second time
    t = FakeTracker()
    assert _sync([_crash_record()], t).filed == [("crash-abcd", "fake:1")]
    now = _crash_record()
    now["crashes"][0]["diagnosis"].update(fingerprint="ef01", former_fingerprint="abcd")
    report = _sync([now], t)
    assert report.filed == [] and t.creates == 1 and report.linked == [("crash-ef01", "fake:1")]
    # a crash whose basis holds no frame keeps its test in its key, former or not
    frameless = _crash_record()
    frameless["crashes"][0]["diagnosis"].update(fingerprint_basis=["SIGABRT", NO_FRAMES], fingerprint="99")
    filed = _sync([frameless], t).filed
    assert [fp.partition(FRAMELESS_MARK)[0] for fp, _ in filed] == ["crash-99"]
    frameless["crashes"][0]["diagnosis"].update(fingerprint="98", former_fingerprint="99")
    again = _sync([frameless], t)
    assert again.filed == [] and [key for _, key in again.linked] == [filed[0][1]]
