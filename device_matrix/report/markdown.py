"""Markdown for a GitHub step summary: read in a minute, under GitHub's 1 MiB cap.

Text that comes from a run (nodeids, messages, reasons, row names) is either in a code
span its content cannot close (:func:`code`) or passed through :func:`_cell`, which
neutralises @mentions and #N links and keeps it inside its table cell (issue 11).
"""

from __future__ import annotations

from collections.abc import Sequence

from device_matrix.issues.base import neutralize
from device_matrix.records.atomic import storable_text
from device_matrix.records.outcomes import BAD_BUCKETS, BEFORE_TESTS_STATUSES, BUCKETS
from device_matrix.report.escape import cell as _cell
from device_matrix.report.escape import code
from device_matrix.report.model import HistoryView, RowView, Triage, nothing_changed
from device_matrix.report.verdict_views import markdown as verdicts_markdown

STEP_SUMMARY_LIMIT = 1024 * 1024  # bytes GitHub accepts per step summary
SAFETY = 16 * 1024
MAX_LISTED = 50
MAX_CHANGES_LISTED = 20

ICON = {
    "passed": "✅",
    "failed": "❌",
    "crashed": "💥",
    "timed out": "⏱️",
    "unavailable": "⚪",
    "error": "⚠️",
}
SPARK = "▁▂▃▄▅▆▇█"
COLUMN = {"not_run": "not run"}


def sparkline(values: Sequence[float | None]) -> str:
    """Eight levels from 0 to the largest value; a gap where a run has no value."""
    known = [v for v in values if v is not None]
    top = max(known, default=0.0)
    out = []
    for v in values:
        if v is None:
            out.append(" ")
        elif top <= 0:
            out.append(SPARK[0])
        else:
            out.append(SPARK[min(len(SPARK) - 1, int(v / top * (len(SPARK) - 1) + 0.5))])
    return "".join(out)


def _seconds(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f} s" if value >= 10 else f"{value:.2f} s"


def _rows_table(rows: Sequence[RowView]) -> list[str]:
    head = " | ".join(COLUMN.get(b, b) for b in BUCKETS)
    out = [
        f"| row | status | {head} | time | versions |",
        "|---|---|" + "--:|" * len(BUCKETS) + "--:|---|",
    ]
    for r in rows:
        versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        status = r["label"] + (
            f" ({_cell(r['reason'])})" if r["status"] in BEFORE_TESTS_STATUSES and r["reason"] else ""
        )
        counts = " | ".join(str(r["counts"].get(b, 0)) for b in BUCKETS)
        out.append(f"| {_cell(r['row'])} | {status} | {counts} | {_seconds(r['duration'])} | {_cell(versions)} |")
    return out


def _trends(h: HistoryView) -> list[str]:
    out = [
        f"## Trends (last {len(h['runs'])} of up to {h['window']} runs)",
        "",
        "Oldest run on the left. Failing = failed + crashed + timeout + not run.",
        "",
        "| row | runs | passed | failing | skipped + xfailed | wall time | latest |",
        "|---|--:|---|---|---|---|---|",
    ]
    for row, points in sorted(h["trends"].items()):
        passed = [float(p["counts"].get("passed", 0)) for p in points]
        failing = [float(sum(p["counts"].get(b, 0) for b in BAD_BUCKETS)) for p in points]
        skipped = [float(p["counts"].get("skipped", 0) + p["counts"].get("xfailed", 0)) for p in points]
        wall = [p["duration"] for p in points]
        last = points[-1]
        latest = ", ".join(f"{n} {COLUMN.get(b, b)}" for b, n in last["counts"].items() if n) or "no tests"
        out.append(
            f"| {_cell(row)} | {len(points)} | {sparkline(passed)} max {max(passed):.0f} "
            f"| {sparkline(failing)} max {max(failing):.0f} | {sparkline(skipped)} max {max(skipped):.0f} "
            f"| {sparkline(wall)} max {_seconds(max((w for w in wall if w is not None), default=None))} "
            f"| {_cell(last['label'])}: {latest} |"
        )
    out.append("")
    return out


def _changes(t: Triage) -> list[str]:
    ch = t["changes"]
    out = [f"## What changed since {_cell(ch['previous'])}", ""]
    if nothing_changed(ch):
        out.append("Nothing: same results as last time.")
    for row in ch["rows_added"]:
        out.append(f"- 🆕 new row **{_cell(row)}**")
    for row in ch["rows_gone"]:
        out.append(f"- 🚫 row **{_cell(row)}** is gone (no results this time)")
    for nodeid, row in ch["new_failures"][:MAX_LISTED]:
        out.append(f"- 🆕 failing on **{_cell(row)}**: {code(nodeid)}")
    for nodeid, row in ch["fixed"][:MAX_LISTED]:
        out.append(f"- ✅ fixed on **{_cell(row)}**: {code(nodeid)}")
    headline = {c["fingerprint"]: c["headline"] for c in t["crashes"]}
    for fp in ch["new_crashes"]:
        out.append(f"- 💥 new crash: {_cell(headline.get(fp, fp))}, fingerprint {code(fp)}")
    for fp, text in ch["stopped_crashes"]:
        out.append(f"- 🩹 crash stopped: {_cell(text)}, fingerprint {code(fp)}")
    for fp in ch["newly_flaky"]:
        out.append(f"- 🎲 newly flaky crash: {_cell(headline.get(fp, fp))}, fingerprint {code(fp)}")
    for key, what in (("appeared", "🌱 new test"), ("disappeared", "🕳️ test gone")):
        items = ch[key]  # type: ignore[literal-required]
        for nodeid, row in items[:MAX_CHANGES_LISTED]:
            out.append(f"- {what} on **{_cell(row)}**: {code(nodeid)}")
        if len(items) > MAX_CHANGES_LISTED:
            out.append(f"- … {len(items) - MAX_CHANGES_LISTED} more ({what.split(' ', 1)[1]}; see triage.json)")
    out.append("")
    return out


def _issue(issue: str | None, state: str | None) -> str:
    return f"{_cell(issue)} ({_cell(state or 'state unknown')})" if issue else "**no issue yet**"


def _crashes(t: Triage) -> list[str]:
    crashes = t["crashes"]
    out = [f"## Crashes ({len(crashes)})", ""]
    for c in crashes[:MAX_LISTED]:
        out.append(
            f"- **{_cell(c['headline'])}** on {_cell(', '.join(c['rows']))}: "
            f"{', '.join(code(n) for n in c['nodeids'][:3])}, fingerprint {code(c['fingerprint'])} "
            f"— {_issue(c['issue'], c['issue_state'])}"
        )
        where = place(c["file"], c["line"])
        if where:
            out.append(f"  - at {code(where)}")
        if c["fatal"]:
            out.append(f"  - {code(c['fatal'][:300])}")
        out.append(f"  - repro: {code(c['repro'].splitlines()[0] if c['repro'] else '')}")
        if c["placement"] is not None:
            out.append(f"  - placed by environment: {_cell(c['placement']['text'])}")
    out.append("")
    return out


def _crash_history(h: HistoryView) -> list[str]:
    out = [
        f"## Crash history ({len(h['crashes'])})",
        "",
        "| crash | now | first seen | last seen | runs | rows | issue |",
        "|---|---|---|---|--:|---|---|",
    ]
    for c in h["crashes"][:MAX_LISTED]:
        flaky = " 🎲 flaky" if c["flaky"] else ""
        out.append(
            f"| {_cell(c['headline'])} {code(c['fingerprint'], in_table=True)} | {c['state']}{flaky} "
            f"| {_cell(c['first_seen'])} | {_cell(c['last_seen'])} | {c['runs']} | {_cell(', '.join(c['rows']))} "
            f"| {_cell(c['issue']) if c['issue'] else 'no issue'} |"
        )
    out.append("")
    return out


def _flaky(t: Triage, h: HistoryView) -> list[str]:
    crashes = [c for c in h["crashes"] if c["flaky"]]
    out = [f"## Flaky tests ({len(h['flaky'])}) and flaky crashes ({len(crashes)})", ""]
    if h["flaky"]:
        out += [
            "A test is flaky when it went from pass to fail and back within the window.",
            "",
            "| test | row | flips | flip rate | last flips (newest first) | now |",
            "|---|---|--:|--:|---|---|",
        ]
        for f in h["flaky"][:MAX_LISTED]:
            flips = "; ".join(f"{_cell(x['run'])}: {x['before']}→{x['after']}" for x in f["last_flips"][:3])
            out.append(
                f"| {code(f['nodeid'], in_table=True)} | {_cell(f['row'])} | {f['flips']} of {f['runs'] - 1} "
                f"| {f['flip_rate']:.0%} | {flips} | {_cell(f['current'] or 'absent')} |"
            )
        if len(h["flaky"]) > MAX_LISTED:
            out.append(f"\n… and {len(h['flaky']) - MAX_LISTED} more (see the HTML report)")
        out.append("")
    for c in crashes[:MAX_LISTED]:
        out.append(f"- 🎲 {_cell(c['headline'])}, fingerprint {code(c['fingerprint'])}, seen in {c['runs']} run(s)")
    if not h["flaky"] and not crashes:
        out.append("None in this window.")
    out.append("")
    return out


def _durations(t: Triage) -> list[str]:
    out = ["## Durations", "", "Slowest tests in this run:", "", "| test | row | time |", "|---|---|--:|"]
    for s in t["slowest"][:10]:
        out.append(f"| {code(s['nodeid'], in_table=True)} | {_cell(s['row'])} | {_seconds(s['duration'])} |")
    h = t["history"]
    if h is not None:
        out.append("")
        if h["slower"]:
            out += [
                "At least 2x slower than their median over the earlier runs (and over 1 s):",
                "",
                "| test | row | now | median | ratio |",
                "|---|---|--:|--:|--:|",
            ]
            for s in h["slower"][:MAX_LISTED]:
                out.append(
                    f"| {code(s['nodeid'], in_table=True)} | {_cell(s['row'])} | {_seconds(s['duration'])} "
                    f"| {_seconds(s['median'])} | {s['ratio']}x |"
                )
        else:
            out.append("No test got 2x slower than its median (over 1 s).")
    out.append("")
    return out


def place(file: str | None, line: int | None) -> str | None:
    """``tests/test_x.py:12``: where a failure or crash happened, relative to the project root."""
    if not file:
        return None
    return f"{file}:{line}" if line else file


def _failures(t: Triage) -> list[str]:
    """Each failure with its cause (the exception line) and where (#20)."""
    failures = t["failures"]
    if not failures:
        return []
    out = [f"## Failures ({len(failures)})", ""]
    for f in failures[:MAX_LISTED]:
        where = place(f["file"], f["line"])
        at = f" at {code(where)}" if where else ""
        # the exception's text in code, as it was raised; no @mention or #N link in it either
        message = f": {code(neutralize(f['message'][:200]))}" if f["message"] else ""
        out.append(f"- **{_cell(f['row'])}** {f['outcome']} {code(f['nodeid'])}{at}{message}")
        rest = (f["cause"] or "").splitlines()[1:]
        if rest:
            # the lines after the first (an assertion's comparison): shown, kept short
            out.append(f"  - {code(neutralize(' · '.join(x.strip() for x in rest[:5])[:300]))}")
    if len(failures) > MAX_LISTED:
        out.append(f"- … and {len(failures) - MAX_LISTED} more (see the HTML report)")
    out.append("")
    return out


def render_rows(t: Triage, *, limit: int = STEP_SUMMARY_LIMIT) -> str:
    """A row job's own step summary: its status and counts, its crashes, its failures
    with their causes (#20). The triage job's report adds the rest."""
    out: list[str] = []
    for r in t["rows"]:
        out.append(f"## {ICON.get(r['label'], '')} device-matrix {_cell(r['row'])}: {r['label']}, {r['phrase']}")
        out.append("")
    out += _rows_table(t["rows"])
    out.append("")
    if t["crashes"]:
        out += _crashes(t)
    out += _failures(t)
    return truncate("\n".join(out), limit)


def render(t: Triage, *, limit: int = STEP_SUMMARY_LIMIT) -> str:
    out: list[str] = ["# device-matrix triage", ""]
    headline = [f"{ICON.get(r['label'], '')} **{_cell(r['row'])}** {r['label']}: {r['phrase']}" for r in t["rows"]]
    out.append(" · ".join(headline) or "no readable rows")
    out.append("")
    out += _rows_table(t["rows"])
    for p in t["problems"]:
        out.append("")
        out.append(f"> ⚠️ **{_cell(p['row'])}**: {_cell(p['problem'])}")
    out.append("")
    if t["verdicts"] is not None:
        out += verdicts_markdown(t["verdicts"])

    h = t["history"]
    if h is not None and h["trends"]:
        out += _trends(h)
    if t["changes"]["previous"] is not None:
        out += _changes(t)
    if t["crashes"]:
        out += _crashes(t)
    if h is not None and h["crashes"]:
        out += _crash_history(h)
    if h is not None:
        out += _flaky(t, h)

    out += _failures(t)
    if t["slowest"]:
        out += _durations(t)

    attention = [s for s in t["skips"] if not s["issue"] or s["issue_state"] == "closed"]
    out.append(f"## Device skips ({len(t['skips'])}, {len(attention)} need attention)")
    out.append("")
    for sk in attention[:MAX_LISTED]:
        what = "cites no issue" if not sk["issue"] else f"{_cell(sk['issue'])} is closed: can be re-enabled"
        out.append(f"- {code(sk['nodeid'])} ({_cell(sk['mode'])} on {_cell(', '.join(sk['rows']))}): {what}")
    cited = [s for s in t["skips"] if s["issue"] and s["issue_state"] != "closed"]
    if cited:
        out.append("")
        out.append("<details><summary>Skips with open issues</summary>")
        out.append("")
        for sk in cited[:200]:
            out.append(
                f"- {code(sk['nodeid'])} ({_cell(sk['mode'])} on {_cell(', '.join(sk['rows']))}): "
                f"{_issue(sk['issue'], sk['issue_state'])}"
            )
        out.append("")
        out.append("</details>")
    out.append("")
    text = "\n".join(out)
    return truncate(text, limit)


def truncate(text: str, limit: int) -> str:
    # a lone surrogate (a nodeid from a file name that is not UTF-8) as its escape: the
    # step summary and triage.md are UTF-8 files
    text = storable_text(text)
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    note = "\n\n_(report truncated to fit GitHub's step summary; the full report is in the HTML and JSON artifacts)_\n"
    room = limit - min(SAFETY, limit // 10) - len(note.encode())
    cut = data[:room].decode("utf-8", "ignore")
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return cut + note


__all__ = ["code", "place", "render", "render_rows", "sparkline", "truncate"]
