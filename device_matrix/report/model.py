"""The triage model: every row's record folded into one view, plus what changed."""

from __future__ import annotations

import datetime as dt
import heapq
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

from device_matrix.diagnostics.environment import facets as environment_facets
from device_matrix.findings import FAILURE_PREFIX, crash_key, declared_test, is_device_skip, skip_key, test_files
from device_matrix.records.cause import cause_from_text
from device_matrix.records.outcomes import CRASHING_OUTCOMES, DESELECTED_OUTCOMES, OUTCOMES, REPORTED_FAILURES
from device_matrix.records.schema import CrashRecord, RunRecord, SelectionInfo, SkipInfo, SourceInfo, TestRecord
from device_matrix.records.summary import crash_headline, crash_kind_label, failed_before, fold
from device_matrix.report.misses import Backstop, Miss
from device_matrix.report.placement import Placement
from device_matrix.report.signature import cause_site, innermost_frame
from device_matrix.skips import DeviceSkip

TRIAGE_SCHEMA = "device-matrix/triage"
TRIAGE_VERSION = 2
SLOWEST_LISTED = 20


class RowView(TypedDict):
    row: str
    status: str
    reason: str | None
    mode: str
    duration: float
    summary: dict[str, int]  # total and per outcome
    label: str  # the row's status in words, from the one fold (records/summary.py)
    counts: dict[str, int]  # per bucket: passed, failed, crashed, timeout, skipped, xfailed, not_run
    phrase: str  # "3 passed, 6 xfailed"
    headlines: list[str]  # one per crash: "SIGSEGV in test_x (deterministic)"
    run_url: str | None
    versions: dict[str, str]
    image: str | None
    facets: dict[str, str]  # accelerator, driver, versions, image, host (#25: crashes placed by them)
    selection: str | None  # what the run selected (records' ``selection``); None: the whole row
    test_selection: SelectionInfo | None  # #34: how a change chose the tests (records' ``test_selection``)
    started_at: str | None  # #41: the record's times: with its row, the run's identity in the history
    finished_at: str | None


class CrashView(TypedDict):
    fingerprint: str
    kind: str
    label: str  # "SIGSEGV", "TIMEOUT after 300 s": what happened, not the signal we sent
    headline: str
    signal: str | None
    hint: str | None
    rows: list[str]
    nodeids: list[str]
    phase: str
    classification: str
    fatal: str | None
    python_stack: str | None
    python_stack_missing: str | None  # why there is no Python stack, where the record says (#39)
    native_stack: str | None
    gdb_frames: list[str]
    gdb_frames_missing: str | None  # why gdb's frames were not recorded, where the record says (#21)
    repro: str
    issue: str | None
    issue_state: str | None
    file: str | None  # of the test that was running: its file and the line it died on (#20)
    line: int | None
    failed_before: list[str]  # the test's own failures before it crashed, a line each
    seen: list[list[str]]  # [row, nodeid or "(phase)"]: where it happened in this run
    placement: Placement | None  # by environment, over the history (#25)


class FailureView(TypedDict):
    nodeid: str
    row: str
    outcome: str
    message: str | None  # the cause's first line: what a one-line list shows
    cause: str | None  # the exception line(s), as pytest's E lines show them (#20)
    file: str | None  # where, relative to the project root
    line: int | None
    frame: str | None  # #32: the innermost frame in the project's own code ("pkg/lib.py:3"), for its group
    site: str | None  # #32: where its cause lies, for its group's signature (signature.cause_site)


class SkipView(TypedDict):
    nodeid: str
    rows: list[str]
    mode: str
    reason: str
    issue: str | None
    issue_state: str | None
    source: str
    where: str | None
    by_design: bool  # #32: the test does not apply on these devices (only_on, a by-design skip): no issue needed


class Changes(TypedDict):
    previous: str | None
    new_failures: list[list[str]]  # [nodeid, row]
    fixed: list[list[str]]
    new_crashes: list[str]  # fingerprints
    newly_flaky: list[str]
    stopped_crashes: list[list[str]]  # [fingerprint, headline]: seen last time, gone now
    appeared: list[list[str]]  # [nodeid, row]: tests not there last time
    disappeared: list[list[str]]  # [nodeid, row]: tests there last time, absent now
    not_run: list[list[str]]  # [nodeid, row]: tests that ran last time and did not run now (#41)
    rows_added: list[str]
    rows_gone: list[str]


def no_changes(previous: str | None = None) -> Changes:
    return Changes(
        previous=previous,
        new_failures=[],
        fixed=[],
        new_crashes=[],
        newly_flaky=[],
        stopped_crashes=[],
        appeared=[],
        disappeared=[],
        not_run=[],
        rows_added=[],
        rows_gone=[],
    )


CHANGE_KEYS = (
    "new_failures",
    "fixed",
    "new_crashes",
    "newly_flaky",
    "stopped_crashes",
    "appeared",
    "disappeared",
    "not_run",
    "rows_added",
    "rows_gone",
)


def nothing_changed(ch: Changes) -> bool:
    # a triage.json written before a kind was added has none of it
    return not any(ch.get(k) for k in CHANGE_KEYS)


class SlowTest(TypedDict):
    nodeid: str
    row: str
    duration: float
    median: float | None  # over the earlier runs of the history window
    ratio: float | None


class TrendPoint(TypedDict):
    run_id: int  # the run's number in the history
    run: str
    created: str
    label: str
    counts: dict[str, int]
    duration: float | None


class Flip(TypedDict):
    run: str
    before: str
    after: str


class FlakyTest(TypedDict):
    nodeid: str
    row: str
    flips: int
    runs: int  # runs in the window where the test passed or failed
    flip_rate: float  # flips / (runs - 1)
    last_flips: list[Flip]
    current: str | None


class CrashHistory(TypedDict):
    fingerprint: str
    headline: str
    first_seen: str
    last_seen: str
    runs: int
    rows: list[str]
    issue: str | None
    flaky: bool
    state: str  # "current" | "stopped" | "selection not run" | "row not run"


class RunSource(TypedDict):
    id: int  # the run's number in the history
    label: str
    lane: str  # "branch:main", "pr:12", "tag:v1", "" (no source recorded)
    commit: str | None
    pull_request: int | None


class HistoryView(TypedDict):
    window: int
    runs: list[str]  # labels, oldest first; the last is this run
    trends: dict[str, list[TrendPoint]]  # per row, oldest first
    flaky: list[FlakyTest]
    slower: list[SlowTest]
    crashes: list[CrashHistory]
    lane: str  # this run's lane
    flaky_lane: str  # the lane flaky tests and slowdowns are read from (a pull request's base)
    sources: list[RunSource]  # one per run, as ``runs``


# a pull request's failures, each judged against its base branch (report/verdicts.py, #25)
Verdict: TypeAlias = Literal["new", "broken-on-base", "flaky", "device-unstable", "infrastructure", "unknown"]


class VerdictItem(TypedDict):
    anchor: str  # its id in the HTML report
    row: str
    nodeid: str | None  # None: the row itself (infrastructure)
    outcome: str  # of this run: failed, error, xpassed, crashed, timeout; or the row's status
    verdict: Verdict
    evidence: str  # the sentence a reader weighs
    signature: str | None  # this failure's: "crash <fingerprint>" or "failed: <first line>"
    base_outcomes: str  # the test's codes over the base's runs (records/outcomes.py CODE), oldest first
    base_ran: int  # base runs where it passed or failed
    base_failures: int
    flips: int
    rate: float | None  # failure rate over the base runs where it ran
    low: float | None  # 90% bounds on that rate (for a test that only passed: 0 and the bound)
    high: float | None
    runs_needed: int | None  # runs to see a failure at ``rate`` 9 times out of 10
    since: str | None  # the base run where its current failing streak began
    last_pass: str | None  # the base run (commit) where it last passed
    fingerprint: str | None
    placement: str | None  # where the crash happens, by environment


class NotRunItem(TypedDict):
    row: str
    nodeid: str
    reason: str  # why selection left it out ("covers none of the 3 changed files")


class VerdictReport(TypedDict):
    base: str | None  # the base branch, as named ("main")
    base_lane: str | None
    base_commit: str | None
    base_runs: int  # runs of the base the verdicts read
    run_ids: list[int]  # the history's ids of those runs, aligned with each item's base_outcomes
    line: str  # "2 new failures from this change; 1 already failing on main; 1 flaky"
    counts: dict[str, int]  # per verdict
    items: list[VerdictItem]
    # #34: the tests selection left out of this run: no verdict, not run on this PR
    not_run: list[NotRunItem]
    # #40: the tests this pull request's selection left out that a full run of the base then
    # failed (the backstop's misses of its lane): counted on its line
    missed: list[Miss]


class IssueLink(TypedDict):
    issue: str
    state: str | None


class Triage(TypedDict):
    schema: str
    version: int
    generated_at: str
    rows: list[RowView]
    problems: list[dict[str, str]]
    devices: list[str]
    # {"nodeid", "outcomes": {row: outcome}, "durations": {row: seconds}, "causes": {row: first line}}
    tests: list[dict[str, Any]]
    failures: list[FailureView]
    crashes: list[CrashView]
    skips: list[SkipView]
    changes: Changes
    slowest: list[SlowTest]
    history: HistoryView | None
    source: SourceInfo | None  # the commit under test, from the rows' records or flags (#25)
    verdicts: VerdictReport | None  # a pull request's failures judged against its base (#25)
    # #32: the issue of each failure group the last sync linked, by the group's key
    # (findings.group_key); report/groups.py gives each group its own
    failure_issues: dict[str, IssueLink]
    # #40: of a base branch's full run, what the selections of the pull requests before it
    # missed, and each row's miss rate (report/misses.py); absent without a history
    backstop: NotRequired[Backstop | None]


def _first_line(text: str | None, limit: int = 300) -> str | None:
    if not text:
        return None
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:limit]
    return None


def failure_view(t: TestRecord, row: str, tests: Collection[str] = ()) -> FailureView:
    """A failing test's cause and place; a record written before causes were recorded
    has its cause read from the report's text. ``tests``: the run's test files
    (``findings.test_files``), for where its cause lies."""
    cause = t.get("cause") or cause_from_text(t["message"])
    if t["outcome"] == "xpassed" and not t.get("cause"):
        cause = f"XPASS: {_first_line(t['message']) or 'expected to fail, and passed'}"
    return FailureView(
        nodeid=t["nodeid"],
        row=row,
        outcome=t["outcome"],
        message=_first_line(cause),
        cause=cause,
        file=t.get("file"),
        line=t.get("line"),
        frame=innermost_frame(t["message"]),
        site=cause_site(t["message"], t["nodeid"].partition("::")[0], tests),
    )


def build(
    records: Sequence[RunRecord],
    problems: Sequence[tuple[str, str]],
    links: Mapping[str, Any],
    declared: Sequence[DeviceSkip] = (),
) -> Triage:
    """``declared``: device skips in the sources that cite no issue (see ``skips.uncited``)."""
    found = _Found(_Links.of(links))
    for rec in records:
        found.rows.append(_row_view(rec))
        found.tests(rec)
        found.crashes_of(rec)
    return Triage(
        schema=TRIAGE_SCHEMA,
        version=TRIAGE_VERSION,
        generated_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        rows=found.rows,
        problems=[{"row": r, "problem": p} for r, p in problems],
        devices=[rec["row"] for rec in records],
        tests=[
            {"nodeid": n, "outcomes": o, "durations": found.durations[n], **_causes_of(found.causes, n)}
            for n, o in sorted(found.matrix.items())
        ],
        failures=found.failures,
        crashes=sorted(found.crashes.values(), key=lambda c: (-len(c["rows"]), c["fingerprint"])),
        skips=sorted(
            [*found.skips.values(), *_declared_views(declared, found.links.fp, found.links.state_of, set(found.skips))],
            key=lambda s: (s["issue"] is not None, s["issue_state"] != "closed", s["nodeid"]),
        ),
        changes=no_changes(),
        slowest=slowest(found.durations),
        history=None,
        source=None,
        verdicts=None,
        failure_issues=found.links.failures(),
    )


def _causes_of(causes: Mapping[str, dict[str, str]], nodeid: str) -> dict[str, dict[str, str]]:
    return {"causes": causes[nodeid]} if nodeid in causes else {}


VERSIONS_SHOWN = ("torch", "torch_xla", "libtpu", "jax", "torch_neuronx")


def _row_view(rec: RunRecord) -> RowView:
    env = rec.get("environment") or {}
    packages = env.get("packages") if isinstance(env, dict) else None
    if not isinstance(packages, dict):
        packages = None  # a free-form snapshot: anything else names no versions
    folded = fold(rec)
    return RowView(
        row=rec["row"],
        status=rec["status"],
        reason=rec.get("reason"),
        mode=rec.get("mode", "local"),
        duration=float(rec.get("duration", 0.0)),
        # per outcome, counted from the tests by the one fold: never the record's own
        # summary, which a renderer could otherwise show beside different numbers
        summary={"total": folded.counts.total, **{o: folded.counts.outcome(o) for o in OUTCOMES}},
        label=folded.label,
        counts=dict(folded.counts.buckets()),
        phrase=folded.counts.phrase(),
        headlines=list(folded.headlines),
        run_url=rec.get("run_url"),
        versions={k: str(v) for k, v in (packages or {}).items() if k in VERSIONS_SHOWN},
        image=rec.get("image"),
        facets=environment_facets(env if isinstance(env, dict) else {}, image=rec.get("image")),
        selection=rec.get("selection"),
        test_selection=rec.get("test_selection"),
        started_at=rec.get("started_at"),
        finished_at=rec.get("finished_at"),
    )


@dataclass(frozen=True)
class _Links:
    """What the last sync recorded: each finding's issue, and each issue's state."""

    issues: Mapping[str, Any]
    fp: Mapping[str, str]  # a finding's key -> its issue
    cited: Mapping[str, str]  # an issue the sources cite -> its state

    @classmethod
    def of(cls, links: Mapping[str, Any]) -> _Links:
        if not links:
            return cls({}, {}, {})
        return cls(links.get("issues", {}), links.get("links", {}), links.get("cited", {}))

    def failures(self) -> dict[str, IssueLink]:
        """The failure groups' issues (#32), by the group's key."""
        return {
            key: IssueLink(issue=issue, state=self.state_of(issue))
            for key, issue in self.fp.items()
            if key.startswith(FAILURE_PREFIX)
        }

    def state_of(self, ref: str | None) -> str | None:
        if not ref:
            return None
        info = self.issues.get(ref)
        if isinstance(info, dict) and info.get("state"):
            return str(info["state"])
        return self.cited.get(ref)


@dataclass
class _Found:
    """What the rows' records hold, gathered record by record into the triage's views."""

    links: _Links
    rows: list[RowView] = field(default_factory=list)
    matrix: dict[str, dict[str, str]] = field(default_factory=dict)
    failures: list[FailureView] = field(default_factory=list)
    causes: dict[str, dict[str, str]] = field(default_factory=dict)  # nodeid -> row -> the cause's first line
    crashes: dict[str, CrashView] = field(default_factory=dict)
    skips: dict[tuple[str, str], SkipView] = field(default_factory=dict)
    durations: dict[str, dict[str, float]] = field(default_factory=dict)

    def tests(self, rec: RunRecord) -> None:
        row = rec["row"]
        files = test_files(t["nodeid"] for t in rec["tests"])
        for t in rec["tests"]:
            self.matrix.setdefault(t["nodeid"], {})[row] = t["outcome"]
            self.durations.setdefault(t["nodeid"], {})[row] = round(float(t["duration"]), 3)
            if t["outcome"] in REPORTED_FAILURES:
                failure = failure_view(t, row, files)
                self.failures.append(failure)
                if failure["message"]:
                    self.causes.setdefault(t["nodeid"], {})[row] = failure["message"]
            elif t["outcome"] in DESELECTED_OUTCOMES and t["message"]:
                # #34: why selection left it out, shown in its cell as a failure's cause is
                self.causes.setdefault(t["nodeid"], {})[row] = t["message"]
            skip = t.get("skip")
            # #32: a runtime skip that met its declaration in the sources names its devices
            if skip is not None and (is_device_skip(skip) or skip.get("devices")):
                self._skip(t["nodeid"], skip, row)

    def _skip(self, nodeid: str, skip: SkipInfo, row: str) -> None:
        key = (nodeid, skip["mode"])
        view = self.skips.get(key)
        if view is None:
            issue = skip["issue"] or self.links.fp.get(skip_key(nodeid, skip["mode"]))
            where = f"{skip['file']}:{skip['line']}" if skip.get("file") and skip.get("line") else skip.get("file")
            view = SkipView(
                nodeid=nodeid,
                rows=[],
                mode=skip["mode"],
                reason=skip["reason"],
                issue=issue,
                issue_state=self.links.state_of(issue),
                source=skip["source"],
                where=where,
                by_design=bool(skip.get("by_design")),
            )
            self.skips[key] = view
        view["rows"].append(row)

    def crashes_of(self, rec: RunRecord) -> None:
        row = rec["row"]
        by_nodeid = {t["nodeid"]: t for t in rec["tests"] if t["outcome"] in CRASHING_OUTCOMES}
        for c in rec["crashes"]:
            died = by_nodeid.get(c["nodeid"] or "")
            fp = c["diagnosis"]["fingerprint"]
            view = self.crashes.get(fp)
            if view is None:
                view = self.crashes[fp] = self._crash_view(c, rec["tests"], died)
            if row not in view["rows"]:
                view["rows"].append(row)
            where = c["nodeid"] or f"({c['phase']})"
            if where not in view["nodeids"]:
                view["nodeids"].append(where)
            if [row, where] not in view["seen"]:
                view["seen"].append([row, where])
            if c["classification"] == "flaky":
                view["classification"] = "flaky"
            if died is not None:
                # a crashed cell says what killed it, as a failed one says its exception
                self.causes.setdefault(died["nodeid"], {})[row] = crash_headline(c, rec["tests"])

    def _crash_view(self, c: CrashRecord, tests: Sequence[TestRecord], died: TestRecord | None) -> CrashView:
        d = c["diagnosis"]
        issue = c.get("issue") or self.links.fp.get(crash_key(d["fingerprint"]))
        return CrashView(
            fingerprint=d["fingerprint"],
            kind=c["kind"],
            label=crash_kind_label(c, tests),
            headline=crash_headline(c, tests),
            signal=d["signal_name"] or (f"exit {d['exit_code']}" if d["exit_code"] is not None else None),
            hint=d["hint"],
            rows=[],
            nodeids=[],
            phase=c["phase"],
            classification=c["classification"],
            fatal=(d["fatal_lines"][-1] if d["fatal_lines"] else d["terminate"]),
            python_stack=d["python_stack"],
            python_stack_missing=None if d["python_stack"] else d.get("python_stack_missing"),
            native_stack=d["native_stack"],
            gdb_frames=list(d.get("gdb_frames") or []),
            gdb_frames_missing=None if d.get("gdb_frames") else d.get("gdb_frames_missing"),
            repro=c["repro"],
            issue=issue,
            issue_state=self.links.state_of(issue),
            file=died.get("file") if died else None,
            line=died.get("line") if died else None,
            failed_before=failed_before(c),
            seen=[],
            placement=None,
        )


def _declared_views(
    declared: Sequence[DeviceSkip],
    fp_links: Mapping[str, str],
    state_of: Callable[[str | None], str | None],
    seen: set[tuple[str, str]],
) -> list[SkipView]:
    """Uncited device skips found in the sources: each needs an issue (or a by-design mark)."""
    views: dict[tuple[str, str], SkipView] = {}
    for skip in declared:
        test = declared_test(skip)
        key = (test, skip.mode)
        if key in seen or key in views:
            continue
        issue = fp_links.get(skip_key(test, skip.mode))
        views[key] = SkipView(
            nodeid=test,
            rows=list(skip.devices),
            mode=skip.mode,
            reason=skip.reason,
            issue=issue,
            issue_state=state_of(issue),
            source=f"source ({skip.form or skip.source})",
            where=f"{skip.file}:{skip.line}" if skip.file and skip.line else skip.file,
            by_design=skip.by_design,
        )
    return list(views.values())


def slowest(durations: Mapping[str, Mapping[str, float]], limit: int = SLOWEST_LISTED) -> list[SlowTest]:
    every = ((d, n, r) for n, by_row in durations.items() for r, d in by_row.items() if d > 0)
    top = heapq.nsmallest(limit, every, key=lambda x: (-x[0], x[1], x[2]))
    return [SlowTest(nodeid=n, row=r, duration=d, median=None, ratio=None) for d, n, r in top]
