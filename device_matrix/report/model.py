"""The triage model: every row's record folded into one view, plus what changed."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from device_matrix.issues.sync import DEVICE_SKIP_SOURCES, skip_fingerprint
from device_matrix.records.schema import FAILING_OUTCOMES, RunRecord

TRIAGE_SCHEMA = "device-matrix/triage"
TRIAGE_VERSION = 1


class RowView(TypedDict):
    row: str
    status: str
    reason: str | None
    mode: str
    duration: float
    summary: dict[str, int]
    run_url: str | None
    versions: dict[str, str]
    image: str | None


class CrashView(TypedDict):
    fingerprint: str
    kind: str
    signal: str | None
    hint: str | None
    rows: list[str]
    nodeids: list[str]
    phase: str
    classification: str
    fatal: str | None
    python_stack: str | None
    native_stack: str | None
    gdb_frames: list[str]
    repro: str
    issue: str | None
    issue_state: str | None


class SkipView(TypedDict):
    nodeid: str
    rows: list[str]
    mode: str
    reason: str
    issue: str | None
    issue_state: str | None
    source: str
    where: str | None


class Changes(TypedDict):
    previous: str | None
    new_failures: list[list[str]]  # [nodeid, row]
    fixed: list[list[str]]
    new_crashes: list[str]  # fingerprints
    newly_flaky: list[str]


class Triage(TypedDict):
    schema: str
    version: int
    generated_at: str
    rows: list[RowView]
    problems: list[dict[str, str]]
    devices: list[str]
    tests: list[dict[str, Any]]  # {"nodeid", "outcomes": {row: outcome}}
    failures: list[dict[str, Any]]  # {"nodeid", "row", "outcome", "message"}
    crashes: list[CrashView]
    skips: list[SkipView]
    changes: Changes


def _first_line(text: str | None, limit: int = 300) -> str | None:
    if not text:
        return None
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:limit]
    return None


def build(
    records: Sequence[RunRecord],
    problems: Sequence[tuple[str, str]],
    links: Mapping[str, Any],
) -> Triage:
    issues: Mapping[str, Any] = links.get("issues", {}) if links else {}
    fp_links: Mapping[str, str] = links.get("links", {}) if links else {}
    cited_states: Mapping[str, str] = links.get("cited", {}) if links else {}

    def state_of(ref: str | None) -> str | None:
        if not ref:
            return None
        info = issues.get(ref)
        if isinstance(info, dict) and info.get("state"):
            return str(info["state"])
        return cited_states.get(ref)

    rows: list[RowView] = []
    devices: list[str] = []
    matrix: dict[str, dict[str, str]] = {}
    failures: list[dict[str, Any]] = []
    crashes: dict[str, CrashView] = {}
    skips: dict[tuple[str, str], SkipView] = {}
    for rec in records:
        row = rec["row"]
        devices.append(row)
        env = rec.get("environment") or {}
        packages = env.get("packages") if isinstance(env, dict) else None
        rows.append(
            RowView(
                row=row,
                status=rec["status"],
                reason=rec.get("reason"),
                mode=rec.get("mode", "local"),
                duration=float(rec.get("duration", 0.0)),
                summary={k: int(v) for k, v in rec["summary"].items()},  # type: ignore[call-overload]
                run_url=rec.get("run_url"),
                versions={
                    k: str(v)
                    for k, v in (packages or {}).items()
                    if k in ("torch", "torch_xla", "libtpu", "jax", "torch_neuronx")
                },
                image=rec.get("image"),
            )
        )
        for t in rec["tests"]:
            matrix.setdefault(t["nodeid"], {})[row] = t["outcome"]
            if t["outcome"] in FAILING_OUTCOMES and t["outcome"] not in ("crashed", "timeout"):
                failures.append(
                    {
                        "nodeid": t["nodeid"],
                        "row": row,
                        "outcome": t["outcome"],
                        "message": _first_line(t["message"]),
                    }
                )
            skip = t.get("skip")
            if skip and skip["source"] in DEVICE_SKIP_SOURCES:
                key = (t["nodeid"], skip["mode"])
                view = skips.get(key)
                issue = skip["issue"] or fp_links.get(skip_fingerprint(t["nodeid"], skip["mode"]))
                if view is None:
                    where = (
                        f"{skip['file']}:{skip['line']}" if skip.get("file") and skip.get("line") else skip.get("file")
                    )
                    view = SkipView(
                        nodeid=t["nodeid"],
                        rows=[],
                        mode=skip["mode"],
                        reason=skip["reason"],
                        issue=issue,
                        issue_state=state_of(issue),
                        source=skip["source"],
                        where=where,
                    )
                    skips[key] = view
                view["rows"].append(row)
        for c in rec["crashes"]:
            d = c["diagnosis"]
            fp = d["fingerprint"]
            view_c = crashes.get(fp)
            if view_c is None:
                issue = c.get("issue") or fp_links.get("crash-" + fp)
                view_c = CrashView(
                    fingerprint=fp,
                    kind=c["kind"],
                    signal=d["signal_name"] or (f"exit {d['exit_code']}" if d["exit_code"] is not None else None),
                    hint=d["hint"],
                    rows=[],
                    nodeids=[],
                    phase=c["phase"],
                    classification=c["classification"],
                    fatal=(d["fatal_lines"][-1] if d["fatal_lines"] else d["terminate"]),
                    python_stack=d["python_stack"],
                    native_stack=d["native_stack"],
                    gdb_frames=list(d.get("gdb_frames") or []),
                    repro=c["repro"],
                    issue=issue,
                    issue_state=state_of(issue),
                )
                crashes[fp] = view_c
            if row not in view_c["rows"]:
                view_c["rows"].append(row)
            where = c["nodeid"] or f"({c['phase']})"
            if where not in view_c["nodeids"]:
                view_c["nodeids"].append(where)
            if c["classification"] == "flaky":
                view_c["classification"] = "flaky"
    return Triage(
        schema=TRIAGE_SCHEMA,
        version=TRIAGE_VERSION,
        generated_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        rows=rows,
        problems=[{"row": r, "problem": p} for r, p in problems],
        devices=devices,
        tests=[{"nodeid": n, "outcomes": o} for n, o in sorted(matrix.items())],
        failures=failures,
        crashes=sorted(crashes.values(), key=lambda c: (-len(c["rows"]), c["fingerprint"])),
        skips=sorted(
            skips.values(),
            key=lambda s: (s["issue"] is not None, s["issue_state"] != "closed", s["nodeid"]),
        ),
        changes=Changes(previous=None, new_failures=[], fixed=[], new_crashes=[], newly_flaky=[]),
    )
