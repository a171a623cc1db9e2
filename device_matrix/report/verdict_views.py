"""The verdicts of a pull request (#25) in Markdown (triage.md, the step summary, the pull
request's comment) and HTML (triage.html), and the rows against commits grid.

Run text (nodeids, messages, branch names, facet values) is escaped as the rest of each
report escapes it (:mod:`device_matrix.report.escape`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from device_matrix.records.outcomes import BAD_BUCKETS, FAIL_CODES
from device_matrix.records.source import lane_words, short
from device_matrix.report import group_views, view
from device_matrix.report.escape import cell as _cell
from device_matrix.report.escape import code
from device_matrix.report.escape import html_text as _e
from device_matrix.report.model import HistoryView, TrendPoint, Triage, VerdictItem, VerdictReport
from device_matrix.report.verdicts import WORDS

_PLAIN_URL_RE = re.compile(r"https://[A-Za-z0-9.-]+(?::\d+)?(?:/[A-Za-z0-9._~%/-]*)?")
MAX_LISTED = 50
COMMITS_SHOWN = 20
ICON = {
    "new": "🆕",
    "broken-on-base": "🧱",
    "flaky": "🎲",
    "device-unstable": "🌩️",
    "infrastructure": "🔧",
    "unknown": "❔",
}
# the outcome codes of a base series as a reader sees them: one character per run
SHOWN_CODE = {"P": "✓", "x": "✓", "S": "s", "N": "·", "-": "·"}


def _codes(text: str) -> str:
    return "".join(SHOWN_CODE.get(c, "✗" if c in FAIL_CODES else "·") for c in text)


def _compared(v: VerdictReport) -> str:
    if v["base"] is None:
        return "no base branch named"
    if not v["base_runs"]:
        return f"no history of {v['base']}"
    commit = f" (base commit {short(v['base_commit'])})" if v["base_commit"] else ""
    return f"compared with the last {v['base_runs']} run(s) of {v['base']}{commit}"


# --- Markdown ----------------------------------------------------------------------------


def markdown(v: VerdictReport, *, heading: str = "##") -> list[str]:
    items = v["items"]
    out = [
        f"{heading} Verdicts: is this failure mine?",
        "",
        f"**{_cell(v['line'])}** — {_cell(_compared(v))}.",
        "",
    ]
    if not items:
        return out
    out += [
        "| row | test | outcome | verdict | evidence | on the base (oldest first) |",
        "|---|---|---|---|---|---|",
    ]
    # #32: every `new` failure is listed, first; the limit applies to the others
    new = [i for i in items if i["verdict"] == "new"]
    shown = new + [i for i in items if i["verdict"] != "new"][: max(MAX_LISTED - len(new), 0)]
    for i in shown:
        test = code(i["nodeid"], in_table=True) if i["nodeid"] else "(the row)"
        evidence = _cell(i["evidence"])
        if i["placement"] and i["verdict"] != "device-unstable":
            evidence += f"; placed: {_cell(i['placement'])}"
        out.append(
            f"| {_cell(i['row'])} | {test} | {i['outcome']} | {ICON[i['verdict']]} {WORDS[i['verdict']]} "
            f"| {evidence} | {code(_codes(i['base_outcomes']), in_table=True) if i['base_outcomes'] else ''} |"
        )
    if len(items) > len(shown):
        listed = {id(i) for i in shown}
        left = [i for i in items if id(i) not in listed]
        counts = ", ".join(
            f"{sum(1 for i in left if i['verdict'] == v)} {WORDS[v]}"
            for v in WORDS
            if any(i["verdict"] == v for i in left)
        )
        out.append(f"\n… and {len(left)} more ({counts}; see triage.json)")
    out += [
        "",
        "<sub>new: passes on the base (or is not there); broken on base: fails there the same way; flaky: flips "
        "there; device-unstable: the row is declared unstable, or the crash recurs on this row only; "
        "infrastructure: the row never reached its tests; unknown: no history to compare with. "
        "✓ passed, ✗ failed, s skipped, · did not run.</sub>",
        "",
    ]
    return out


def comment(t: Triage, run_url: str | None) -> str:
    """The pull request's comment: the verdicts, and where the whole report is."""
    v = t["verdicts"]
    assert v is not None
    # #32: the failures by cause lead, every group holding a `new` failure listed
    out = group_views.markdown(t, heading="###") + markdown(v, heading="###")
    # a link only to a plain https address: nothing in it can end the link or start markup
    where = f"[the run]({run_url})" if run_url and _PLAIN_URL_RE.fullmatch(run_url) else "the run"
    out.append(f"The full report (trends, crashes, every test) is the `triage-report` artifact of {where}.")
    return "\n".join(out)


# --- HTML --------------------------------------------------------------------------------


def _item_html(i: VerdictItem) -> str:
    test = f"<code>{_e(i['nodeid'])}</code>" if i["nodeid"] else "<i>the row</i>"
    placed = (
        f"<br><span class='muted'>placed: {_e(i['placement'])}</span>"
        if i["placement"] and i["verdict"] != "device-unstable"
        else ""
    )
    codes = f"<code title='✓ passed, ✗ failed, s skipped, · did not run'>{_e(_codes(i['base_outcomes']))}</code>"
    return (
        f"<tr id='{_e(i['anchor'])}' data-verdict='{_e(i['verdict'])}' data-row='{_e(i['row'])}'>"
        f"<td>{_e(i['row'])}</td><td>{test}</td><td class='{_e(i['outcome'])}'>{_e(i['outcome'])}</td>"
        f"<td><span class='tag verdict-{_e(i['verdict'])}'>{_e(WORDS[i['verdict']])}</span></td>"
        f"<td>{_e(i['evidence'])}{placed}</td><td>{codes if i['base_outcomes'] else ''}</td></tr>"
    )


def html_section(v: VerdictReport) -> str:
    out = [
        "<section id='verdicts'><h2>Verdicts: is this failure mine?</h2>"
        "<p class='answers'>For each failure of this pull request: did this change cause it, or was it broken, "
        "flaky or the device's fault before it.</p>"
        f"<p><b class='verdict-line'>{_e(v['line'])}</b> <span class='muted'>{_e(_compared(v))}</span></p>"
    ]
    if v["items"]:
        out.append(
            "<div class='scroll'><table id='verdict-table'><thead><tr><th>row</th><th>test</th><th>outcome</th>"
            "<th>verdict</th><th>evidence</th><th>on the base (oldest first)</th></tr></thead><tbody>"
        )
        # #32: at scale every new failure and the others up to the limit, in their order;
        # the groups above hold them all, and triage.json
        items = v["items"]
        room = max(view.FAILURES_SHOWN - sum(1 for i in items if i["verdict"] == "new"), 0)
        shown = [i for n, i in enumerate(items) if i["verdict"] == "new" or n < room]
        out.extend(_item_html(i) for i in shown)
        out.append("</tbody></table></div>")
        if len(items) > len(shown):
            left = len(items) - len(shown)
            out.append(f"<p class='muted'>… {left} more verdicts (every one is in triage.json)</p>")
    out.append("</section>")
    return "".join(out)


def _cell_html(point: TrendPoint | None, link: str | None) -> str:
    if point is None:
        return "<td class='o absent'>—</td>"
    label = point["label"]
    bad = sum(point["counts"].get(b, 0) for b in BAD_BUCKETS)
    word = f"{label} ({bad})" if bad else label
    cls = label.replace(" ", "-")
    inner = f"<a href='#{_e(link)}'>{_e(word)}</a>" if link else _e(word)
    return f"<td class='o status-{_e(cls)}' data-status='{_e(label)}'>{inner}</td>"


def commits_section(t: Triage, h: HistoryView) -> str:
    """The rows against the last commits of the lane (a pull request: its base's, then its own)."""
    sources = h["sources"][-COMMITS_SHOWN:]
    if not sources:
        return ""
    shown = {s["id"] for s in sources}
    by_row: dict[str, dict[int, TrendPoint]] = {
        row: {p["run_id"]: p for p in points if p["run_id"] in shown} for row, points in h["trends"].items()
    }
    links = _links(t, h)
    title = lane_words(h["flaky_lane"] if h["flaky_lane"] != h["lane"] else h["lane"])
    out = [
        f"<section id='commits'><h2>Rows against commits ({_e(title)})</h2>"
        f"<p class='answers'>Each row's outcome in the last {len(sources)} run(s), oldest on the left; a "
        "failure links to its verdict.</p><div class='scroll'><table id='commits-table'><thead><tr><th>row</th>"
    ]
    for s in sources:
        commit = s["commit"][:7] if s["commit"] else "?"  # 20 columns: git's short form
        pr = f" PR {s['pull_request']}" if s["pull_request"] else ""
        out.append(f"<th class='o' data-run='{s['id']}' title='{_e(s['label'])}'>{_e(commit)}{_e(pr)}</th>")
    out.append("</tr></thead><tbody>")
    for row in sorted(by_row):
        out.append(f"<tr data-row='{_e(row)}'><td>{_e(row)}</td>")
        for s in sources:
            out.append(_cell_html(by_row[row].get(s["id"]), links.get((row, s["id"]))))
        out.append("</tr>")
    out.append("</tbody></table></div></section>")
    return "".join(out)


def _links(t: Triage, h: HistoryView) -> Mapping[tuple[str, int], str]:
    """(row, run id) -> the anchor of the verdict a failure there belongs to."""
    v = t["verdicts"]
    if v is None or not h["sources"]:
        return {}
    out: dict[tuple[str, int], str] = {}
    this = h["sources"][-1]["id"]
    for i in v["items"]:
        out.setdefault((i["row"], this), i["anchor"])
        for run_id, c in zip(v["run_ids"], i["base_outcomes"], strict=False):
            if c in FAIL_CODES:
                out.setdefault((i["row"], run_id), i["anchor"])
    return out
