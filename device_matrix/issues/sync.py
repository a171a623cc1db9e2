"""Link every skip and crash to an issue: file what has none, never twice.

Each finding has a fingerprint: a crash's diagnosis fingerprint, or for a device skip
that cites no issue, a hash of its test and mode. Every issue the tool files carries
the fingerprint in a hidden marker in its body. Before filing, the tracker's issues are
listed (listing, not search: search lags behind writes) and matched by marker, so a
second sync, or two rows with the same crash, link the existing issue instead; a crash
seen again adds one comment per row and run.

Cited issues (skips that name one) are looked up for their state: a skip whose issue is
closed is reported as "can be re-enabled".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from device_matrix.issues.base import Issue, Tracker, clip_title, code_block, neutralize, safe_body
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.schema import RunRecord
from device_matrix.redact import Redactor

STATE_FILE = "issues.json"
STATE_VERSION = 1
DEVICE_SKIP_SOURCES = frozenset({"marker", "disable_list", "unittest"})


@dataclass
class Finding:
    fingerprint: str
    kind: str  # "crash" | "skip"
    title: str
    sections: list[tuple[str, str | None, bool]]
    rows: list[str] = field(default_factory=list)
    nodeids: list[str] = field(default_factory=list)
    runs: list[tuple[str, str]] = field(default_factory=list)  # (row, run id or url)
    cited: str | None = None


@dataclass
class SyncReport:
    tracker: str
    applied: bool
    linked: list[tuple[str, str]] = field(default_factory=list)  # (fingerprint, issue key)
    filed: list[tuple[str, str]] = field(default_factory=list)
    would_file: list[tuple[str, str]] = field(default_factory=list)  # (fingerprint, title)
    commented: list[tuple[str, str]] = field(default_factory=list)  # (issue key, row)
    cited: dict[str, str] = field(default_factory=dict)  # issue key -> state ("unknown" if not found)
    cited_by: dict[str, set[str]] = field(default_factory=dict)  # issue key -> nodeids citing it
    reenable: list[tuple[str, str]] = field(default_factory=list)  # (nodeid, issue key)
    issues: dict[str, dict[str, Any]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = []
        verb = "" if self.applied else " (dry run)"
        out.append(
            f"issues{verb} [{self.tracker}]: {len(self.linked)} linked, {len(self.filed)} filed, "
            f"{len(self.would_file)} to file, {len(self.commented)} comment(s), "
            f"{len(self.cited)} cited issue(s) checked"
        )
        for fp, key in self.filed:
            out.append(f"  filed {key} for {fp}")
        for fp, key in self.linked:
            out.append(f"  linked {fp} -> {key}")
        for fp, title in self.would_file:
            out.append(f"  would file: {title} [{fp}]")
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
                out.append(f"  cited {key}: not found in {self.tracker}")
        return out


def skip_fingerprint(nodeid: str, mode: str) -> str:
    return "skip-" + hashlib.sha256(f"{mode}|{nodeid}".encode()).hexdigest()[:16]


def _run_id(record: RunRecord) -> str:
    return record.get("run_url") or record["started_at"]


def collect(records: Sequence[RunRecord]) -> tuple[list[Finding], list[tuple[str, str, str]]]:
    """Findings that need an issue, and (nodeid, row, cited issue) for cited skips/crashes."""
    findings: dict[str, Finding] = {}
    cited: list[tuple[str, str, str]] = []
    for record in records:
        row = record["row"]
        for crash in record["crashes"]:
            d = crash["diagnosis"]
            fp = "crash-" + d["fingerprint"]
            if crash.get("issue"):
                cited.append((crash["nodeid"] or crash["phase"], row, str(crash["issue"])))
                continue
            f = findings.get(fp)
            if f is None:
                what = d["signal_name"] or (f"exit code {d['exit_code']}" if crash["kind"] == "crash" else "timeout")
                where = crash["nodeid"] or f"pytest {crash['phase']}"
                head = d["fatal_lines"][-1] if d["fatal_lines"] else (d["terminate"] or d["hint"] or "")
                f = Finding(
                    fingerprint=fp,
                    kind="crash",
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
                findings[fp] = f
            if row not in f.rows:
                f.rows.append(row)
            f.runs.append((row, _run_id(record)))
            if crash["nodeid"] and crash["nodeid"] not in f.nodeids:
                f.nodeids.append(crash["nodeid"])
        for test in record["tests"]:
            skip = test["skip"]
            if not skip or skip["source"] not in DEVICE_SKIP_SOURCES:
                continue
            if skip["issue"]:
                cited.append((test["nodeid"], row, skip["issue"]))
                continue
            fp = skip_fingerprint(test["nodeid"], skip["mode"])
            f = findings.get(fp)
            if f is None:
                where = f"{skip['file']}:{skip['line']}" if skip["file"] and skip["line"] else (skip["file"] or "")
                f = Finding(
                    fingerprint=fp,
                    kind="skip",
                    title=clip_title(f"Disabled ({skip['mode']}): {test['nodeid']}"),
                    sections=[
                        (
                            "Test",
                            f"`{test['nodeid']}` is marked {skip['mode']} on "
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
                findings[fp] = f
            if row not in f.rows:
                f.rows.append(row)
            f.runs.append((row, _run_id(record)))
            f.nodeids.append(test["nodeid"])
    return list(findings.values()), cited


def _load_state(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("version") == STATE_VERSION else {}


def sync(
    records: Sequence[RunRecord],
    tracker: Tracker,
    *,
    apply: bool,
    labels: Sequence[str],
    results_dir: Path | None = None,
    redactor: Redactor | None = None,
) -> SyncReport:
    redactor = redactor or Redactor()
    report = SyncReport(tracker=tracker.name, applied=apply)
    findings, cited = collect(records)
    state_path = results_dir / STATE_FILE if results_dir else None
    previous = _load_state(state_path) if state_path else {}
    done_comments = {tuple(x) for x in previous.get("comments", [])}

    by_fp: dict[str, Issue] = {}
    for issue in tracker.list_issues():
        fp = issue.fingerprint
        if fp and fp not in by_fp:
            by_fp[fp] = issue

    def remember(issue: Issue) -> None:
        report.issues[issue.key] = {"state": issue.state, "title": issue.title, "url": issue.url}

    for f in findings:
        found = by_fp.get(f.fingerprint)
        if found is None:
            if not apply:
                report.would_file.append((f.fingerprint, f.title))
                continue
            sections = [*f.sections, ("Seen on", ", ".join(f.rows) + _runs_text(f.runs), False)]
            issue = tracker.create(f.title, safe_body(sections, f.fingerprint, redactor), labels)
            by_fp[f.fingerprint] = issue
            report.filed.append((f.fingerprint, issue.key))
        else:
            issue = found
            report.linked.append((f.fingerprint, issue.key))
            if f.kind == "crash" and apply:
                for row, run in f.runs:
                    mark = (issue.key, row, run)
                    if mark in done_comments:
                        continue
                    body = neutralize(f"Seen again on `{row}`, {run}.")
                    tracker.comment(issue, redactor.text(body))
                    done_comments.add(mark)
                    report.commented.append((issue.key, row))
        remember(issue)

    checked: dict[str, Issue | None] = {}
    for nodeid, _row, ref in cited:
        if ref not in checked:
            checked[ref] = tracker.get(ref)
        cited_issue = checked[ref]
        report.cited[ref] = cited_issue.state if cited_issue else "unknown"
        report.cited_by.setdefault(ref, set()).add(nodeid)
        if cited_issue is not None:
            remember(cited_issue)
            if cited_issue.state == "closed" and (nodeid, ref) not in report.reenable:
                report.reenable.append((nodeid, ref))

    if state_path is not None:
        links = dict(previous.get("links", {}))
        links.update(dict(report.linked + report.filed))
        write_json_atomic(
            state_path,
            {
                "version": STATE_VERSION,
                "tracker": tracker.name,
                "links": links,
                "issues": {**previous.get("issues", {}), **report.issues},
                "cited": report.cited,
                "reenable": report.reenable,
                "would_file": report.would_file,
                "comments": sorted(done_comments),
            },
        )
    return report


def _runs_text(runs: Sequence[tuple[str, str]]) -> str:
    links = sorted({r for _, r in runs if r.startswith("http")})
    return (" (" + ", ".join(links) + ")") if links else ""


def load_links(results_dir: Path) -> dict[str, Any]:
    """What the last sync recorded, for the triage report."""
    return _load_state(results_dir / STATE_FILE)


__all__ = [
    "Finding",
    "SyncReport",
    "code_block",
    "collect",
    "load_links",
    "skip_fingerprint",
    "sync",
]
