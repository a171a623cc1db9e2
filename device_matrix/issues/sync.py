"""Link every skip and crash to an issue: file what has none, never twice.

Each finding has a fingerprint: a crash's diagnosis fingerprint, or for a device skip
that cites no issue, a hash of its test and mode. Every issue the tool files ends its
body with the fingerprint in a hidden marker; only that closing marker counts, so the
same text quoted in a skip reason or in crash output matches nothing. What the sync
guarantees:

* idempotent: the tracker is searched by marker, whatever the issue's labels, before
  anything is filed; a create is never retried blindly: after an unclear answer (5xx,
  reset, timeout) the tracker is read again and what is there is linked;
* one "seen again" comment per finding and run: each carries a hidden marker naming the
  run, and the issue's body and comments are read before commenting;
* concurrent syncs: the ledger is held in one ``BEGIN IMMEDIATE`` transaction; on
  GitHub the newest issues are re-read right before each create (and the workflow's
  issues job runs in one concurrency group);
* a crash whose issue was closed reopens it with a comment naming the run, or, with
  ``tracker.on_recurrence = "new"``, files a new issue that links the old one;
* a crash placed by environment (#25: the accelerator, driver or versions that separate
  its runs from the passing ones, over the history) says where in its body and in each
  "seen again" comment.
* a failure group (#32: the failing tests of one signature, across rows) is a finding as a
  crash is, keyed by its signature's hash, found, filed, commented on and reopened alike;
  a pull request's run files none, comments on none and reopens none (its new failure is
  its author's to fix), but links the issue the group already has. ``tracker.file_failures
  = false`` links without filing.

Cited issues (skips and crashes that name one, in any repository) are looked up in one
batched query; a closed one is reported as "can be re-enabled", and a missing or deleted
one is a state, not an error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from device_matrix.config import OnRecurrence
from device_matrix.diagnostics.fingerprint import NO_FRAMES
from device_matrix.errors import EnvironmentProblem, TrackerError
from device_matrix.findings import (
    crash_key,
    declared_test,
    fingerprint_of,
    former_group_keys,
    group_key,
    is_device_skip,
    skip_key,
    test_files,
)
from device_matrix.issues.base import (
    SEEN_MARKER,
    AmbiguousWrite,
    Cited,
    Issue,
    Tracker,
    clip_title,
    code_block,
    neutralize,
    pick,
    safe_body,
)
from device_matrix.links import LINKS_FILE as STATE_FILE
from device_matrix.links import LINKS_VERSION as STATE_VERSION
from device_matrix.links import load_links
from device_matrix.links import read_links as _load_state
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.outcomes import REPORTED_FAILURES
from device_matrix.records.schema import CrashRecord, RunRecord, SkipInfo, TestRecord
from device_matrix.redact import Redactor
from device_matrix.skips import DeviceSkip, normalize_issue

MAX_CREATE_TRIES = 3
# the kinds of finding a later run sees again: commented on, and reopened when closed
RECURRING = ("crash", "failure")
FAILURE_TESTS_LISTED = 20  # of a failure group, in its issue's body
FAILURE_TEXT_KEPT = 6000  # characters of the first failure's traceback, in its issue's body
# a failing test and its run's test files -> its failure group's signature (report/groups.py:test_signature)
Signature = Callable[[TestRecord, Collection[str]], str]


@dataclass
class Finding:
    fingerprint: str
    kind: str  # "crash" | "skip" | "failure"
    title: str
    sections: list[tuple[str, str | None, bool]]
    rows: list[str] = field(default_factory=list)
    nodeids: list[str] = field(default_factory=list)
    runs: list[tuple[str, str]] = field(default_factory=list)  # (row, run id or url)
    cited: str | None = None
    placement: str | None = None  # where it happens, by environment (#25)
    # for the lines that name a finding, not part of what it is (equality ignores them):
    # "SIGSEGV", "timeout", "skip", "xfail"; the devices of a skip found in the sources
    what: str = field(default="", compare=False)
    devices: list[str] = field(default_factory=list, compare=False)
    # #32: a failure group seen only in pull requests' runs: linked, never filed
    link_only: bool = False
    # a failure group's signature, its tests (row, nodeid) and its first failing test, for its body
    signature: str = field(default="", compare=False)
    failed: list[tuple[str, str]] = field(default_factory=list, compare=False)
    first: TestRecord | None = field(default=None, compare=False)
    # #42: the keys a failure group (a crash) had before its line was left out and numbers (a
    # name's digits) were kept, where they differ: its issue may be filed under one
    formers: tuple[str, ...] = field(default=(), compare=False)

    def subject(self) -> str:
        """``tests/t.py::test_x (skip on cuda)``: what the finding is about, in a line (#20)."""
        tests = ", ".join(self.nodeids[:3]) + (f" and {len(self.nodeids) - 3} more" if len(self.nodeids) > 3 else "")
        where = ", ".join(self.rows or self.devices) or "no row"
        return f"{tests or self.title} ({self.what or self.kind} on {where})"


@dataclass
class SyncReport:
    tracker: str
    applied: bool
    linked: list[tuple[str, str]] = field(default_factory=list)  # (fingerprint, issue key)
    filed: list[tuple[str, str]] = field(default_factory=list)
    would_file: list[tuple[str, str]] = field(default_factory=list)  # (fingerprint, title)
    commented: list[tuple[str, str]] = field(default_factory=list)  # (issue key, row)
    reopened: list[str] = field(default_factory=list)  # issue keys
    back: dict[str, str] = field(default_factory=dict)  # a reopened issue's key -> its finding's kind
    cited: dict[str, str] = field(default_factory=dict)  # issue key -> state ("unknown" if not found)
    cited_by: dict[str, set[str]] = field(default_factory=dict)  # issue key -> nodeids citing it
    reenable: list[tuple[str, str]] = field(default_factory=list)  # (nodeid, issue key)
    issues: dict[str, dict[str, Any]] = field(default_factory=dict)
    subjects: dict[str, str] = field(default_factory=dict)  # fingerprint -> Finding.subject()
    # failure groups without an issue past the sync's cap (#32), and the cap
    held: list[tuple[str, str]] = field(default_factory=list)  # (fingerprint, title)
    cap: int = 0

    def lines(self) -> list[str]:
        out = []
        verb = "" if self.applied else " (dry run)"
        out.append(
            f"issues{verb} [{self.tracker}]: {len(self.linked)} linked, {len(self.filed)} filed, "
            f"{len(self.would_file)} to file, {len(self.commented)} comment(s), "
            f"{len(self.cited)} cited issue(s) checked"
        )
        for fp, key in self.filed:
            out.append(f"  filed {key} for {self._named(fp)}")
        for fp, key in self.linked:
            out.append(f"  linked {self._named(fp)} -> {key}")
        for key in self.reopened:
            out.append(f"  reopened {key}: its {self.back.get(key, 'crash')} is back")
        for fp, title in self.would_file:
            out.append(f"  would file: {title} [{fp}]")
        if self.held:
            out.append(
                f"  {len(self.held)} failure groups not filed: over tracker.max_failure_issues ({self.cap}) for one "
                "sync, the largest filed first; the rest are in triage.json (fix what broke them, or raise the cap)"
            )
        for nodeid, key in self.reenable:
            out.append(f"  can be re-enabled: {nodeid} ({key} is closed)")
        if self.cited:
            tests = sum(len(v) for v in self.cited_by.values())
            listed = ", ".join(
                f"{key} {state} ({len(self.cited_by.get(key, ()))})" for key, state in sorted(self.cited.items())
            )
            out.append(f"  {tests} skipped/xfailed test(s) cite {len(self.cited)} issue(s): {listed}")
        for key, state in sorted(self.cited.items()):
            if state == "unknown":
                out.append(f"  cited {key}: {self.tracker} cannot look it up")
            elif state in ("missing", "deleted"):
                out.append(f"  cited {key}: {state} in {self.tracker}; cite an existing issue")
        return out

    def _named(self, fingerprint: str) -> str:
        subject = self.subjects.get(fingerprint)
        return f"{subject} [{fingerprint}]" if subject else fingerprint


def _run_id(record: RunRecord) -> str:
    return record.get("run_url") or record["started_at"]


# between a frameless crash's fingerprint and its test's hash in its finding's key
FRAMELESS_MARK = ":"  # a character the issue body's marker keeps (FINGERPRINT_END_RE)


def collect(
    records: Sequence[RunRecord], signature: Signature | None = None, *, file_failures: bool = True
) -> tuple[list[Finding], list[tuple[str, str, str]]]:
    """Findings that need an issue, and (nodeid, row, cited issue) for cited skips/crashes.
    ``signature``: a failing test's group signature; None: failure groups are not findings."""
    findings: dict[str, Finding] = {}
    cited: list[tuple[str, str, str]] = []
    for record in records:
        row = record["row"]
        for crash in record["crashes"]:
            if crash.get("issue"):
                ref = str(crash["issue"])
                cited.append((crash["nodeid"] or crash["phase"], row, normalize_issue(ref) or ref))
                continue
            fp = _crash_finding_key(crash, crash["diagnosis"]["fingerprint"])
            f = findings.get(fp)
            if f is None:
                f = findings[fp] = _crash_finding(fp, crash)
                # #42: its issue may be filed under the fingerprint a name's digits had then
                former = crash["diagnosis"].get("former_fingerprint")
                f.formers = (_crash_finding_key(crash, former),) if former else ()
            _seen(f, record)
            if crash["nodeid"] and crash["nodeid"] not in f.nodeids:
                f.nodeids.append(crash["nodeid"])
        for test in record["tests"]:
            skip = test["skip"]
            if skip is None or not is_device_skip(skip):
                continue
            if skip["issue"]:
                cited.append((test["nodeid"], row, normalize_issue(skip["issue"]) or skip["issue"]))
                continue
            fp = skip_key(test["nodeid"], skip["mode"])
            f = findings.get(fp)
            if f is None:
                f = findings[fp] = _skip_finding(fp, test["nodeid"], skip)
            _seen(f, record)
            f.nodeids.append(test["nodeid"])
    # #32: the failure groups after every crash and skip, so those keep the numbers they had
    if signature is not None:
        for record in records:
            _failures_of(record, signature, findings, file=file_failures and not _of_pull_request(record))
    return list(findings.values()), cited


def _of_pull_request(record: RunRecord) -> bool:
    """Whether ``record`` is the run of a pull request (#32: its new failure is its author's)."""
    source = record.get("source")
    return source is not None and (source.get("event") == "pull_request" or source.get("pull_request") is not None)


def _failures_of(record: RunRecord, signature: Signature, findings: dict[str, Finding], *, file: bool) -> None:
    """#32: ``record``'s failing tests, one finding per failure group. A run that may not
    file one (a pull request's) adds its tests, never its run: it comments on nothing and
    reopens nothing."""
    row = record["row"]
    here: set[str] = set()
    files = test_files(t["nodeid"] for t in record["tests"])
    for test in record["tests"]:
        if test["outcome"] not in REPORTED_FAILURES:
            continue
        sig = signature(test, files)
        fp = group_key(sig)
        f = findings.get(fp)
        if f is None:
            f = findings[fp] = Finding(
                fingerprint=fp, kind="failure", what="failure", title=clip_title(f"Failing: {sig}"), sections=[]
            )
            f.link_only, f.signature, f.first, f.formers = True, sig, test, former_group_keys(sig)
        if file:
            f.link_only = False
        if fp not in here:
            here.add(fp)
            if file:
                _seen(f, record)
            elif row not in f.rows:
                f.rows.append(row)
        f.nodeids.append(test["nodeid"])
        f.failed.append((row, test["nodeid"]))


def _with_former(
    tracker: Tracker, findings: Sequence[Finding], found: dict[str, list[Issue]]
) -> dict[str, list[Issue]]:
    """``found``, and for each failure group or crash without an issue under its key, the
    issues filed under a former key (#42: before numbers were kept by their role, the groups
    of exit status 1 and 137 were one, filed once; a group's key held its site's line; a
    crash's fingerprint masked a name's digits): linked, never filed again."""
    former = [(key, f.fingerprint) for f in findings if f.fingerprint not in found for key in f.formers]
    if not former:
        return found
    by_former = tracker.find(sorted({key for key, _ in former}))
    linked = dict(found)
    for key, fp in former:
        if key in by_former:
            linked.setdefault(fp, by_former[key])  # the first former key that has one
    return linked


def _failure_sections(f: Finding) -> list[tuple[str, str | None, bool]]:
    """What a failure group's issue says: how many fail where, the cause, the tests, and the
    first one's traceback (its end: where it was raised and with what)."""
    per_row: dict[str, int] = {}
    for row, _ in f.failed:
        per_row[row] = per_row.get(row, 0) + 1
    count = len(f.failed)
    spread = f"{count} {'test' if count == 1 else 'tests'}: " + ", ".join(f"{n} on {r}" for r, n in per_row.items())
    listed = [f"- `{nodeid}` on {row}" for row, nodeid in f.failed[:FAILURE_TESTS_LISTED]]
    if count > FAILURE_TESTS_LISTED:
        listed.append(f"- … and {count - FAILURE_TESTS_LISTED} more (the run's triage.json lists every one)")
    first = f.first
    text = (first["message"] or "") if first else ""
    where = f"{first['file']}:{first['line']}" if first and first.get("file") and first.get("line") else None
    return [
        ("What fails", f"{spread}, with the same cause" + (f" (the first at `{where}`)." if where else "."), False),
        ("Cause", first.get("cause") if first else None, True),
        ("Signature", f.signature, True),
        ("Tests", "\n".join(listed), False),
        ("First failure", text[-FAILURE_TEXT_KEPT:], True),
        ("To close", "Fix the cause and close this issue; a later run that fails this way again reopens it.", False),
    ]


def _crash_finding_key(crash: CrashRecord, fingerprint: str) -> str:
    """The key of a crash's finding by ``fingerprint`` (its own, or its former one): the
    fingerprint's; where its basis holds no frame of the project's (#29: every abort under
    XLA's handler read alike), its test's too, so it is never linked to another test's crash issue."""
    if NO_FRAMES not in crash["diagnosis"]["fingerprint_basis"]:
        return crash_key(fingerprint)
    where = crash["nodeid"] or crash["phase"]
    return crash_key(f"{fingerprint}{FRAMELESS_MARK}{hashlib.sha256(where.encode()).hexdigest()[:8]}")


def _seen(f: Finding, record: RunRecord) -> None:
    """``f`` was seen in ``record``'s run."""
    if record["row"] not in f.rows:
        f.rows.append(record["row"])
    f.runs.append((record["row"], _run_id(record)))


def _crash_finding(fp: str, crash: CrashRecord) -> Finding:
    """The finding of a crash no issue is cited for: what its issue says."""
    d = crash["diagnosis"]
    what = d["signal_name"] or (f"exit code {d['exit_code']}" if crash["kind"] == "crash" else "timeout")
    where = crash["nodeid"] or f"pytest {crash['phase']}"
    # what the process said (an F line, a terminate, faulthandler's fatal error),
    # never the hint: that is ours, and "What happened" says it already
    fatal = f"Fatal Python error: {d['fatal_error']}" if d["fatal_error"] else ""
    head = d["fatal_lines"][-1] if d["fatal_lines"] else (d["terminate"] or fatal)
    return Finding(
        fingerprint=fp,
        kind="crash",
        what=what,
        title=clip_title(f"{'Hang' if crash['kind'] == 'timeout' else 'Crash'}: {what} in {where}"),
        sections=[
            (
                "What happened",
                f"{crash['kind']} ({what}) during {crash['when'] or crash['phase']}"
                f" of `{where}`; {crash['classification']} over {len(crash['reruns'])} rerun(s). "
                f"{d['hint'] or ''}",
                False,
            ),
            ("Fatal message", head, True),
            ("Python stack", d["python_stack"], True),
            ("Native stack", d["native_stack"], True),
            (
                "gdb backtrace (top frames)",
                "\n".join(d["gdb_frames"]) if d.get("gdb_frames") else None,
                True,
            ),
            ("Last output", "\n".join(d["last_output"][-25:]), True),
            ("Reproduce", crash["repro"], True),
            ("Fingerprint basis", "\n".join(d["fingerprint_basis"]), True),
        ],
    )


def _skip_finding(fp: str, nodeid: str, skip: SkipInfo) -> Finding:
    """The finding of a device skip that cites no issue: what its issue says."""
    where = f"{skip['file']}:{skip['line']}" if skip["file"] and skip["line"] else (skip["file"] or "")
    return Finding(
        fingerprint=fp,
        kind="skip",
        what=skip["mode"],
        title=clip_title(f"Disabled ({skip['mode']}): {nodeid}"),
        sections=[
            (
                "Test",
                f"`{nodeid}` is marked {skip['mode']} on "
                f"{', '.join(skip['devices']) or 'some devices'}"
                f" ({skip['source']}{', ' + where if where else ''}) without an issue.",
                False,
            ),
            ("Reason given", skip["reason"] or "(none)", False),
            (
                "To re-enable",
                "Fix the cause, then remove the marker or disable-list entry.",
                False,
            ),
        ],
    )


def uncited_skip_findings(declared: Sequence[DeviceSkip]) -> list[Finding]:
    """A finding for each device skip in the sources that cites no issue (not by design)."""
    findings: dict[str, Finding] = {}
    for skip in declared:
        test = declared_test(skip)
        fp = skip_key(test, skip.mode)
        if fp in findings:
            continue
        devices = ", ".join(skip.devices) or "some devices"
        findings[fp] = Finding(
            fingerprint=fp,
            kind="skip",
            what=skip.mode,
            devices=list(skip.devices),
            title=clip_title(f"Disabled ({skip.mode}) on {devices}: {test}"),
            sections=[
                (
                    "Test",
                    f"`{test}` is skipped on {devices} ({skip.form or skip.source}, {skip.file}:{skip.line})"
                    " without an issue.",
                    False,
                ),
                ("Reason given", skip.reason or "(none)", False),
                (
                    "To re-enable",
                    "Fix the cause and remove the skip; or, if the test does not apply on these devices, "
                    "say so with `only_on` or a `# device-matrix: by-design` comment.",
                    False,
                ),
            ],
            nodeids=[test],
        )
    return list(findings.values())


def _run_hash(run: str) -> str:
    return hashlib.sha256(run.encode()).hexdigest()[:16]


def _runs_of(runs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Each distinct run -> the rows it covers."""
    out: dict[str, list[str]] = {}
    for row, run in runs:
        rows = out.setdefault(run, [])
        if row not in rows:
            rows.append(row)
    return out


def _held(findings: Sequence[Finding], found: Mapping[str, Any], cap: int) -> list[tuple[str, str]]:
    """#32: the failure groups to file that one sync holds back, past the ``cap`` largest (a
    red main where each test fails on its own line is as many groups as tests)."""
    new = [f for f in findings if f.kind == "failure" and not f.link_only and not found.get(f.fingerprint)]
    new.sort(key=lambda f: -len(f.failed))
    return [(f.fingerprint, f.title) for f in new[cap:]]


def _run_text(run: str) -> str:
    return run if run.startswith(("http://", "https://")) else f"the run of {run}"


def sync(
    records: Sequence[RunRecord],
    tracker: Tracker,
    *,
    apply: bool,
    labels: Sequence[str],
    results_dir: Path | None = None,
    redactor: Redactor | None = None,
    on_recurrence: OnRecurrence = "reopen",
    declared: Sequence[DeviceSkip] = (),
    placements: Mapping[str, str] | None = None,
    signature: Signature | None = None,
    file_failures: bool = True,
    max_failure_issues: int = 10,
) -> SyncReport:
    """``declared``: the device skips in the sources that cite no issue (:func:`skips.uncited`).
    ``placements``: a crash's diagnosis fingerprint -> where it happens, by environment.
    ``signature``: a failing test's failure-group signature (#32); None: failure groups are
    not synced. ``file_failures``: False links a failure group's issue but files none.
    ``max_failure_issues``: the most failure groups one sync files, the largest first."""
    redactor = redactor or Redactor()
    report = SyncReport(tracker=tracker.name, applied=apply, cap=max_failure_issues)
    # this process's own secrets too (#22): titles, bodies and fingerprints are made of
    # values redacted as the triage redacts them, before any text is built (the triage's
    # failure groups are keyed from records redacted alike, so the keys meet)
    findings, cited = collect([redactor.data(record) for record in records], signature, file_failures=file_failures)
    findings = _completed(findings, placements or {}, declared)
    report.subjects = {f.fingerprint: redactor.text(f.subject()) for f in findings}
    state_path = results_dir / STATE_FILE if results_dir else None
    previous = _load_state(state_path) if state_path else {}

    def remember(key: str, state: str, title: str, url: str | None, locked: bool = False) -> None:
        report.issues[key] = {"state": state, "title": title, "url": url, "locked": locked}

    try:
        with tracker.transaction():
            found = _with_former(tracker, findings, tracker.find([f.fingerprint for f in findings]) if findings else {})
            report.held = _held(findings, found, max_failure_issues)
            held = {fp for fp, _ in report.held}
            for f in findings:
                existing = found.get(f.fingerprint)
                issue = pick(existing) if existing else None
                if (issue is None and f.link_only) or f.fingerprint in held:
                    continue  # #32: a pull request's failure group (nothing to link or file), or past the cap
                if issue is None and not apply:
                    report.would_file.append((f.fingerprint, f.title))
                    continue
                # runs of a crash that its issue does not mention yet (read only when writing)
                new_runs = _new_runs(tracker, issue, f) if issue is not None and apply and f.kind in RECURRING else {}
                if issue is None or (issue.state == "closed" and new_runs and on_recurrence == "new"):
                    issue, filed = _file(tracker, f, labels, redactor, issue)
                    (report.filed if filed else report.linked).append((f.fingerprint, issue.key))
                    if not filed and f.kind in RECURRING:
                        _comment(tracker, issue, f, _new_runs(tracker, issue, f), redactor=redactor, report=report)
                else:
                    report.linked.append((f.fingerprint, issue.key))
                    reopen = issue.state == "closed" and bool(new_runs)
                    if reopen:
                        issue = tracker.reopen(issue)
                        report.reopened.append(issue.key)
                        report.back[issue.key] = f.kind
                    _comment(tracker, issue, f, new_runs, redactor=redactor, report=report, reopened=reopen)
                remember(issue.key, issue.state, issue.title, issue.url, issue.locked)

            refs = list(dict.fromkeys(ref for _, _, ref in cited))  # each looked up once, in one batch
            states = tracker.lookup(refs) if refs else {}
            for nodeid, _row, ref in cited:
                c = states.get(ref, Cited(ref, "unknown"))
                report.cited[ref] = c.state
                report.cited_by.setdefault(ref, set()).add(nodeid)
                if c.state in ("open", "closed"):
                    remember(ref, c.state, c.title, c.url, c.locked)
                if c.state == "closed" and (nodeid, ref) not in report.reenable:
                    report.reenable.append((nodeid, ref))
    finally:
        # what was filed before a failure is recorded, so the next sync starts from there
        if state_path is not None:
            _write_state(state_path, tracker.name, previous, report)
    return report


def _completed(findings: list[Finding], placements: Mapping[str, str], declared: Sequence[DeviceSkip]) -> list[Finding]:
    """The findings with what their records alone do not say: where a crash happens, a
    failure group's body (once every row's tests are in it), and the uncited skips found
    in the sources."""
    for f in findings:
        if f.kind == "crash" and placements:
            f.placement = placements.get(fingerprint_of(f.fingerprint).partition(FRAMELESS_MARK)[0])
        if f.kind == "failure":
            f.sections = _failure_sections(f)
    known = {f.fingerprint for f in findings}
    return findings + [f for f in uncited_skip_findings(declared) if f.fingerprint not in known]


def _write_state(path: Path, tracker: str, previous: dict[str, Any], report: SyncReport) -> None:
    links = dict(previous.get("links", {}))
    links.update(dict(report.linked + report.filed))
    try:
        write_json_atomic(
            path,
            {
                "version": STATE_VERSION,
                "tracker": tracker,
                "links": links,
                "issues": {**previous.get("issues", {}), **report.issues},
                "cited": report.cited,
                "reenable": report.reenable,
                "would_file": report.would_file,
            },
        )
    except OSError as exc:
        raise EnvironmentProblem(
            f"{path}: cannot write the issue links ({exc.strerror or exc})",
            tip="Make the results folder writable, or pass another one.",
        ) from None


def _file(
    tracker: Tracker,
    f: Finding,
    labels: Sequence[str],
    redactor: Redactor,
    previous: Issue | None,
) -> tuple[Issue, bool]:
    """File ``f``, unless a fresh look finds it filed; (issue, True when filed here)."""
    sections = [*f.sections, ("Seen on", ", ".join(f.rows) + _runs_text(f.runs), False)]
    if f.placement:
        sections.insert(1, ("Where it happens", f.placement, False))
    if previous is not None:
        sections.append(("Earlier issue", f"{previous.key} ({previous.state}) had the same fingerprint.", False))
    seen = [SEEN_MARKER.format(f.fingerprint, _run_hash(run)) for run in _runs_of(f.runs)]
    body = safe_body(sections, f.fingerprint, redactor, seen)
    for _ in range(MAX_CREATE_TRIES):
        # right before each create (and again after an unclear answer): filed meanwhile?
        again = tracker.recheck(f.fingerprint)
        if again is not None and (previous is None or again.number != previous.number):
            return again, False
        try:
            issue = tracker.create(redactor.ident(f.title), body, labels)
        except AmbiguousWrite:
            continue
        first = tracker.settle(issue)
        return first, first is issue
    raise TrackerError(
        f"filing {f.fingerprint!r}: {MAX_CREATE_TRIES} unclear answers from {tracker.name}",
        tip="Run the sync again later: an issue that was created after all is found and linked.",
    )


def _new_runs(tracker: Tracker, issue: Issue, f: Finding) -> dict[str, list[str]]:
    """The runs of ``f`` (run -> rows) whose marker is in neither the body nor a comment."""
    runs = _runs_of(f.runs)
    if not runs:
        return {}
    known = "\n".join([issue.body, *tracker.comments(issue)])
    return {run: rows for run, rows in runs.items() if SEEN_MARKER.format(f.fingerprint, _run_hash(run)) not in known}


def _comment(
    tracker: Tracker,
    issue: Issue,
    f: Finding,
    runs: dict[str, list[str]],
    *,
    redactor: Redactor,
    report: SyncReport,
    reopened: bool = False,
) -> None:
    """One "seen again" comment per run, with the run's marker; an unclear answer is
    checked against the issue's comments before anything is sent again."""
    for run, rows in runs.items():
        marker = SEEN_MARKER.format(f.fingerprint, _run_hash(run))
        verb = "Reopened: seen again" if reopened else "Seen again"
        placed = f" Placed by environment: {f.placement}." if f.placement else ""
        text = neutralize(redactor.text(f"{verb} in {_run_text(run)} on {', '.join(rows)}.{placed}"))
        for _ in range(MAX_CREATE_TRIES):
            try:
                tracker.comment(issue, f"{text}\n\n{marker}")
                break
            except AmbiguousWrite:
                if marker in "\n".join(tracker.comments(issue)):
                    break
        else:
            raise TrackerError(
                f"commenting on {issue.key}: {MAX_CREATE_TRIES} unclear answers from {tracker.name}",
                tip="Run the sync again later; a comment that was made after all is not repeated.",
            )
        report.commented.extend((issue.key, row) for row in rows)
        reopened = False


def _runs_text(runs: Sequence[tuple[str, str]]) -> str:
    links = sorted({r for _, r in runs if r.startswith("http")})
    return (" (" + ", ".join(links) + ")") if links else ""


__all__ = [
    "Finding",
    "SyncReport",
    "code_block",
    "collect",
    "load_links",
    "sync",
]
