"""The failure groups (#32) in Markdown (triage.md, the step summary, the pull request's
comment) and HTML (triage.html): what the reports lead with.

Markdown lists every group holding a ``new`` failure and the others up to
``groups.GROUPS_LISTED``, saying how many groups and tests it left out; each group shows
its first ``groups.TESTS_SHOWN`` tests. The HTML report shows every group with its first
tests; triage.json has every test of every group.
"""

from __future__ import annotations

import re

from device_matrix.report import groups as grouping
from device_matrix.report.escape import cell, code
from device_matrix.report.escape import html_text as _e
from device_matrix.report.groups import FailureGroup
from device_matrix.report.model import Triage
from device_matrix.report.verdicts import WORDS

CAUSE_FOLDED = 200  # characters of a cause shown before the rest folds (HTML)
_BREAK_RE = re.compile(r"(::|/|\[)")


def _lead(g: FailureGroup) -> str:
    return WORDS.get(g["lead"], g["lead"]) if g["lead"] else "failing"


def _verdicts(g: FailureGroup) -> str:
    return ", ".join(f"{n} {WORDS.get(v, v)}" for v, n in g["verdicts"].items())


def _issue(g: FailureGroup) -> str:
    return f"{g['issue']} ({g['issue_state'] or 'state unknown'})" if g["issue"] else ""


# --- Markdown ----------------------------------------------------------------------------


def _keyed_by(g: FailureGroup) -> str:
    """What besides the cause's words the signature holds: the crash's fingerprint, or the frame."""
    if g["fingerprint"]:
        return f" ({code(g['fingerprint'], in_table=True)})"
    return f" @ {code(g['frame'], in_table=True)}" if g["frame"] else ""


def markdown(t: Triage, *, heading: str = "##", limit: int = grouping.GROUPS_LISTED) -> list[str]:
    all_groups = grouping.of(t)
    if not all_groups:
        return []
    tests = sum(g["count"] for g in all_groups)
    shown, left, left_tests = grouping.listed(all_groups, limit)
    out = [
        f"{heading} Failure groups ({len(all_groups)} groups, {tests} tests)",
        "",
        "| # | class | tests | cause | first test | more | issue |",
        "|---|---|---|---|---|---|---|",
    ]
    for n, g in enumerate(shown, 1):
        first = g["tests"][0]
        where = f" at {code(first['where'], in_table=True)}" if first["where"] else ""
        verdicts = f" ({cell(_verdicts(g))})" if g["verdicts"] else ""
        others = [code(x["nodeid"], in_table=True) for x in g["tests"][1 : grouping.TESTS_SHOWN]]
        more = g["count"] - min(g["count"], grouping.TESTS_SHOWN)
        if more:
            others.append(f"… {more} more")
        out.append(
            f"| {n} | {cell(_lead(g))}{verdicts} | {cell(grouping.spread(g))} "
            # the cause as plain text, never code: a @mention or #N in it must stay inert
            f"| {cell(g['cause'] or g['signature'])}{_keyed_by(g)} "
            f"| {code(first['nodeid'], in_table=True)} on {cell(first['row'])}{where} | {', '.join(others)} "
            f"| {cell(_issue(g))} |"
        )
    if left:
        out.append(f"\n… {left} more groups ({left_tests} tests; see triage.json)")
    out.append("")
    return out


# --- HTML --------------------------------------------------------------------------------


def breakable(text: str) -> str:
    """``text`` escaped, with a break opportunity after each ``/``, ``::`` and ``[``: a
    long test id wraps at its parts, never one character a line."""
    return "".join(_e(part) + ("<wbr>" if _BREAK_RE.fullmatch(part) else "") for part in _BREAK_RE.split(text) if part)


def _cause_html(text: str) -> str:
    if len(text) <= CAUSE_FOLDED and "\n" not in text:
        return f"<pre class='cause'>{_e(text)}</pre>"
    head = text.splitlines()[0][:CAUSE_FOLDED] if text.strip() else text[:CAUSE_FOLDED]
    return (
        f"<details class='cause'><summary><code>{_e(head)}</code> …</summary>"
        f"<pre class='cause'>{_e(text)}</pre></details>"
    )


def _group_html(g: FailureGroup) -> str:
    first = g["tests"][0]
    tests = "".join(
        f"<li><code>{breakable(x['nodeid'])}</code> on {_e(x['row'])}"
        + (f" at <code>{breakable(x['where'])}</code>" if x["where"] else "")
        + (f" · {_e(WORDS.get(x['verdict'], x['verdict']))}" if x["verdict"] else "")
        + "</li>"
        for x in g["tests"][1 : grouping.TESTS_SHOWN]  # the first is in its own cell
    )
    more = g["count"] - min(g["count"], grouping.TESTS_SHOWN)
    if more:
        tests += f"<li class='muted'>… {more} more (see triage.json)</li>"
    issue = _e(_issue(g))
    verdicts = f"<br><span class='muted'>{_e(_verdicts(g))}</span>" if g["verdicts"] else ""
    return (
        f"<tr id='{_e(g['id'])}' data-lead='{_e(g['lead'])}' data-count='{g['count']}'>"
        f"<td><span class='tag verdict-{_e(g['lead'] or 'none')}'>{_e(_lead(g))}</span>{verdicts}</td>"
        f"<td>{_e(grouping.spread(g))}</td>"
        f"<td>{_cause_html(g['cause'] or g['signature'])}<br><span class='muted'>signature: "
        f"<code>{breakable(g['signature'])}</code></span></td>"
        f"<td><code>{breakable(first['nodeid'])}</code>"
        + (f"<br>at <code>{breakable(first['where'])}</code>" if first["where"] else "")
        + f"<ul class='group-tests'>{tests}</ul></td><td>{issue}</td></tr>"
    )


def html_section(t: Triage) -> str:
    all_groups = grouping.of(t)
    tests = sum(g["count"] for g in all_groups)
    out = [
        f"<section id='groups'><h2>Failure groups ({len(all_groups)} groups, {tests} tests)</h2>"
        "<p class='answers'>Every failure by its cause, across rows: what needs action first.</p>"
    ]
    if all_groups:
        out.append(
            "<div class='scroll'><table id='groups-table' class='wrapping'><thead><tr>"
            "<th>class</th><th>tests</th><th>cause</th>"
            "<th>tests (first)</th><th>issue</th></tr></thead><tbody>"
        )
        out.extend(_group_html(g) for g in all_groups)
        out.append("</tbody></table></div>")
    else:
        out.append("<p class='muted'>none</p>")
    out.append("</section>")
    return "".join(out)
