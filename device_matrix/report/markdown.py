"""Markdown for a GitHub step summary: read in a minute, under GitHub's 1 MiB cap.

Text that comes from a run (nodeids, messages, reasons, row names) is either in a code
span its content cannot close (:func:`code`) or passed through :func:`_cell`, which
neutralises @mentions and #N links and keeps it inside its table cell (issue 11).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence

from device_matrix.markup import neutralize
from device_matrix.records.atomic import storable_text
from device_matrix.records.outcomes import BAD_BUCKETS, BEFORE_TESTS_STATUSES, BUCKETS
from device_matrix.report import group_views, misses, view
from device_matrix.report.escape import cell as _cell
from device_matrix.report.escape import code
from device_matrix.report.model import HistoryView, RowView, Triage
from device_matrix.report.skip_meet import counted, needs_attention, why_attention
from device_matrix.report.verdict_views import markdown as verdicts_markdown
from device_matrix.report.view import Change, ChangeKind
from device_matrix.skips.tracker import disabled_for

STEP_SUMMARY_LIMIT = 1024 * 1024  # bytes GitHub accepts per step summary
SAFETY = 16 * 1024
MAX_LISTED = 50

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


_CHANGE_MD: Mapping[ChangeKind, Callable[[Change], str]] = {
    "row_added": lambda c: f"🆕 new row **{_cell(c.subject)}**",
    "row_gone": lambda c: f"🚫 row **{_cell(c.subject)}** is gone (no results this time)",
    "new_failure": lambda c: f"🆕 failing on **{_cell(c.row)}**: {code(c.subject)}",
    "fixed": lambda c: f"✅ fixed on **{_cell(c.row)}**: {code(c.subject)}",
    "new_crash": lambda c: f"💥 new crash: {_cell(c.text)}, fingerprint {code(c.subject)}",
    "crash_stopped": lambda c: f"🩹 crash stopped: {_cell(c.text)}, fingerprint {code(c.subject)}",
    "newly_flaky": lambda c: f"🎲 newly flaky crash: {_cell(c.text)}, fingerprint {code(c.subject)}",
    "appeared": lambda c: f"🌱 new test on **{_cell(c.row)}**: {code(c.subject)}",
    "disappeared": lambda c: f"🕳️ test gone on **{_cell(c.row)}**: {code(c.subject)}",
    "not_run": lambda c: f"⏸️ not run this time on **{_cell(c.row)}**: {code(c.subject)}",
}


def _changes(t: Triage) -> list[str]:
    ch = view.changes(t)
    out = [f"## What changed since {_cell(ch.previous)}", ""]
    if ch.nothing:
        out.append("Nothing: same results as last time.")
    for k, c in enumerate(ch.lines):
        out.append(f"- {_CHANGE_MD[c.kind](c)}")
        last_of_kind = k + 1 == len(ch.lines) or ch.lines[k + 1].kind != c.kind
        if last_of_kind and c.kind in ch.more:
            out.append(f"- … {ch.more[c.kind]} more ({view.CHANGE_WORDS[c.kind]}; see triage.json)")
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
        out.extend(f"  - before it ended: {_cell(line[:300])}" for line in c["failed_before"])
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
    out += group_views.markdown(t)  # #32: the row's failures by cause, before them one by one
    if t["crashes"]:
        out += _crashes(t)
    out += _failures(t)
    return truncate("\n".join(out), limit)


def _rows(t: Triage) -> list[str]:
    headline = [f"{ICON.get(r['label'], '')} **{_cell(r['row'])}** {r['label']}: {r['phrase']}" for r in t["rows"]]
    out = [" · ".join(headline) or "no readable rows", ""]
    out += _rows_table(t["rows"])
    # #34: how much of each row a change's selection ran, and why
    selected = [f"- **{_cell(r['row'])}**: {_cell(s)}" for r in t["rows"] if (s := view.selection_line(r))]
    out += ["", *selected] if selected else []
    out += _backstop(t)
    for p in t["problems"]:
        out += ["", f"> ⚠️ **{_cell(p['row'])}**: {_cell(p['problem'])}"]
    out.append("")
    return out


def _backstop(t: Triage) -> list[str]:
    """#40: what the pull requests' selections missed that this full run of the base fails,
    and each row's miss rate."""
    found = t.get("backstop")
    if not found:
        return []
    lines = [
        f"- ❗ **{_cell(m['row'])}** {code(m['nodeid'])}: {_cell(misses.missed_words(m))}" for m in found["misses"]
    ]
    lines += [f"- **{_cell(r['row'])}**: {_cell(misses.rate_words(r))}" for r in found["rates"]]
    return ["", *lines] if lines else []


def _skips(t: Triage) -> list[str]:
    # #32: a by-design skip (the test does not apply there) needs no issue: counted as such
    attention = [s for s in t["skips"] if needs_attention(s)]
    out = [f"## Device skips ({len(t['skips'])}: {counted(t['skips'])})", ""]
    for sk in attention[:MAX_LISTED]:
        what = _cell(why_attention(sk) or "")
        out.append(f"- {code(sk['nodeid'])} ({_cell(sk['mode'])} on {_cell(', '.join(sk['rows']))}): {what}")
    # #41: a skip is listed here or above, never both: one whose issue is missing is not tracked
    cited = [s for s in t["skips"] if s["issue"] and not needs_attention(s)]
    if cited:
        out += ["", "<details><summary>Skips with open issues</summary>", ""]
        for sk in cited[:200]:
            # #33: a disable filed on the tracker says how long it has held
            held = disabled_for(sk["reason"], dt.date.fromisoformat(t["generated_at"][:10]))
            out.append(
                f"- {code(sk['nodeid'])} ({_cell(sk['mode'])} on {_cell(', '.join(sk['rows']))}): "
                f"{_issue(sk['issue'], sk['issue_state'])}" + (f", disabled {held}" if held else "")
            )
        out += ["", "</details>"]
    out.append("")
    return out


def _history(piece: Callable[[HistoryView], list[str]]) -> Callable[[Triage], list[str]]:
    def drawn(t: Triage) -> list[str]:
        return piece(t["history"]) if t["history"] is not None else []

    return drawn


def _if(has: Callable[[Triage], object], piece: Callable[[Triage], list[str]]) -> Callable[[Triage], list[str]]:
    def drawn(t: Triage) -> list[str]:
        return piece(t) if has(t) else []

    return drawn


# each section's piece, by its id in view.SECTIONS (no commits table, no test matrix here)
PIECES: Mapping[str, Callable[[Triage], list[str]]] = {
    "rows": _rows,
    "groups": group_views.markdown,
    "verdicts": lambda t: verdicts_markdown(t["verdicts"]) if t["verdicts"] is not None else [],
    "trends": _history(_trends),
    "changes": _changes,
    "failures": _failures,
    "crashes": _if(lambda t: t["crashes"], _crashes),
    "crash-history": _history(lambda h: _crash_history(h) if h["crashes"] else []),
    "flaky": lambda t: _flaky(t, t["history"]) if t["history"] is not None else [],
    "durations": _if(lambda t: t["slowest"], _durations),
    "skips": _skips,
}


def render(t: Triage, *, limit: int = STEP_SUMMARY_LIMIT) -> str:
    out: list[str] = ["# device-matrix triage", ""]
    for s in view.sections(t, PIECES.__contains__):
        out += PIECES[s.id](t)
    return truncate("\n".join(out), limit)


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
