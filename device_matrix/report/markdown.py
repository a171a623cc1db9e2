"""Markdown for a GitHub step summary: read in a minute, under GitHub's 1 MiB cap."""

from __future__ import annotations

from device_matrix.issues.base import code_block, neutralize
from device_matrix.report.model import Triage

STEP_SUMMARY_LIMIT = 1024 * 1024  # bytes GitHub accepts per step summary
SAFETY = 16 * 1024
MAX_LISTED = 50

ICON = {
    "passed": "✅",
    "failed": "❌",
    "crashed": "💥",
    "unavailable": "⚪",
    "error": "⚠️",
}


def _cell(text: str | None) -> str:
    return neutralize((text or "").replace("|", "\\|").replace("\n", " "))


def render(t: Triage, *, limit: int = STEP_SUMMARY_LIMIT) -> str:
    out: list[str] = ["# device-matrix triage", ""]
    ch = t["changes"]
    crashes = t["crashes"]
    headline = []
    for r in t["rows"]:
        headline.append(f"{ICON.get(r['status'], '')} **{r['row']}** {r['status']}")
    out.append(" · ".join(headline) or "no rows")
    out.append("")
    out.append("| row | status | passed | failed | crashed | skipped | xfailed | not run | time | versions |")
    out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|---|")
    for r in t["rows"]:
        s = r["summary"]
        versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        status = r["status"] + (
            f" ({_cell(r['reason'])})" if r["status"] in ("unavailable", "error") and r["reason"] else ""
        )
        out.append(
            f"| {r['row']} | {status} | {s.get('passed', 0)} "
            f"| {s.get('failed', 0) + s.get('error', 0) + s.get('xpassed', 0)} "
            f"| {s.get('crashed', 0) + s.get('timeout', 0)} | {s.get('skipped', 0)} | {s.get('xfailed', 0)} "
            f"| {s.get('not_run', 0)} | {r['duration']:.0f}s | {_cell(versions)} |"
        )
    for p in t["problems"]:
        out.append("")
        out.append(f"> ⚠️ **{p['row']}**: {_cell(p['problem'])}")
    out.append("")

    if ch["previous"] is not None:
        out.append(f"## What changed since {ch['previous']}")
        out.append("")
        if not any((ch["new_failures"], ch["fixed"], ch["new_crashes"], ch["newly_flaky"])):
            out.append("Nothing: same results as last time.")
        for nodeid, row in ch["new_failures"][:MAX_LISTED]:
            out.append(f"- 🆕 failing on **{row}**: `{nodeid}`")
        for nodeid, row in ch["fixed"][:MAX_LISTED]:
            out.append(f"- ✅ fixed on **{row}**: `{nodeid}`")
        for fp in ch["new_crashes"]:
            out.append(f"- 💥 new crash `{fp}`")
        for fp in ch["newly_flaky"]:
            out.append(f"- 🎲 newly flaky crash `{fp}`")
        out.append("")

    if crashes:
        out.append(f"## Crashes ({len(crashes)})")
        out.append("")
        for c in crashes[:MAX_LISTED]:
            issue = f" — {c['issue']} ({c['issue_state'] or 'state unknown'})" if c["issue"] else " — **no issue yet**"
            out.append(
                f"- **{c['signal'] or c['kind']}** in `{', '.join(c['nodeids'][:3])}` on {', '.join(c['rows'])}, "
                f"{c['classification']}, fingerprint `{c['fingerprint']}`{issue}"
            )
            if c["fatal"]:
                out.append(f"  - `{_cell(c['fatal'])[:300]}`")
            out.append(f"  - repro: `{_cell(c['repro'].splitlines()[0])}`")
        out.append("")

    failures = t["failures"]
    if failures:
        out.append(f"## Failures ({len(failures)})")
        out.append("")
        for f in failures[:MAX_LISTED]:
            out.append(f"- **{f['row']}** {f['outcome']} `{f['nodeid']}`: {_cell(f['message'])[:200]}")
        if len(failures) > MAX_LISTED:
            out.append(f"- … and {len(failures) - MAX_LISTED} more (see the HTML report)")
        out.append("")

    attention = [s for s in t["skips"] if not s["issue"] or s["issue_state"] == "closed"]
    out.append(f"## Device skips ({len(t['skips'])}, {len(attention)} need attention)")
    out.append("")
    for sk in attention[:MAX_LISTED]:
        what = "cites no issue" if not sk["issue"] else f"{sk['issue']} is closed: can be re-enabled"
        out.append(f"- `{sk['nodeid']}` ({sk['mode']} on {', '.join(sk['rows'])}): {what}")
    cited = [s for s in t["skips"] if s["issue"] and s["issue_state"] != "closed"]
    if cited:
        out.append("")
        out.append("<details><summary>Skips with open issues</summary>")
        out.append("")
        for sk in cited[:200]:
            out.append(
                f"- `{sk['nodeid']}` ({sk['mode']} on {', '.join(sk['rows'])}): "
                f"{sk['issue']} ({sk['issue_state'] or 'state unknown'})"
            )
        out.append("")
        out.append("</details>")
    out.append("")
    text = "\n".join(out)
    return truncate(text, limit)


def truncate(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    note = "\n\n_(report truncated to fit GitHub's step summary; the full report is in the HTML and JSON artifacts)_\n"
    room = limit - min(SAFETY, limit // 10) - len(note.encode())
    cut = data[:room].decode("utf-8", "ignore")
    cut = cut[: cut.rfind("\n")] if "\n" in cut else cut
    return cut + note


__all__ = ["code_block", "render", "truncate"]
