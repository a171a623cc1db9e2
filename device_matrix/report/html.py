"""A self-contained HTML report: no network at view time, everything inline.

Charts are inline SVG drawn here; the one script (triage.js) only filters the test table.
Every colour has a text label beside it (cards, legends, cells), every number a chart
shows is also in a table, and links are made only for http(s) URLs (issue 11).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from urllib.parse import urlsplit

from device_matrix.records.outcomes import BAD_OUTCOMES, BUCKET_OF, BUCKETS
from device_matrix.report import group_views, misses, view
from device_matrix.report.escape import html_text as _e
from device_matrix.report.group_views import breakable
from device_matrix.report.misses import Backstop
from device_matrix.report.model import HistoryView, RowView, TrendPoint, Triage
from device_matrix.report.skip_meet import counted, needs_attention
from device_matrix.report.verdict_views import commits_section, html_section
from device_matrix.report.view import Change, ChangeKind

LABEL = {"not_run": "not run"}
SLOW_S = 1.0  # the "slow" filter: seconds that matter
# the buckets of the outcomes that make a test a problem: the "only problems" filter
_BAD_BUCKETS = tuple(sorted({BUCKET_OF.get(o, o) for o in BAD_OUTCOMES}))

# the chart's drawing box (user units; the SVG scales to its container)
CHART_W = 300
BARS_H = 90
WALL_H = 30
GAP = 20
AXIS_W = 64  # room right of the bars for the scale's words
LABEL_PX = 7.5  # a character of the chart's 12 px font, at its widest on average: labels never meet
LINE_H = 14


def safe_href(url: str | None) -> str | None:
    """The URL if it is http(s) with a host; anything else (javascript:, data:, relative) is not a link."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return url.strip()


def _link(url: str | None, text: str) -> str:
    href = safe_href(url)
    return f"<a href='{_e(href)}' rel='noopener noreferrer'>{_e(text)}</a>" if href else _e(text)


def _asset(name: str) -> str:
    return resources.files("device_matrix.report").joinpath(name).read_text("utf-8")


def _seconds(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.0f} s" if value >= 10 else f"{value:.2f} s"


def _issue(issue: str | None, state: str | None) -> str:
    if not issue:
        return "<b class='failed'>no issue yet</b>"
    return f"{_link(issue, issue)} <span class='muted'>({_e(state or 'state unknown')})</span>"


def trend_svg(row: str, points: Sequence[TrendPoint]) -> str:
    """Stacked test counts per run (bars) and wall time (a line below), oldest on the left.

    Each bar segment carries ``data-outcome`` and ``data-count``, and a ``<title>`` with the
    same words, so the numbers can be read back without the colours.
    """
    n = max(len(points), 1)
    step = CHART_W / n
    bar_w = max(step * 0.8, 1.0)
    top = max((sum(p["counts"].values()) for p in points), default=0) or 1
    walls = [p["duration"] for p in points if p["duration"] is not None]
    wall_top = max(walls, default=0.0) or 1.0
    labels = _run_labels([p["run"] for p in points])
    height = BARS_H + GAP + WALL_H + 2 + LINE_H * len(labels)
    latest = points[-1] if points else None
    desc = f"{row}: {len(points)} runs" + (
        f"; latest {', '.join(f'{v} {LABEL.get(k, k)}' for k, v in latest['counts'].items() if v)}" if latest else ""
    )
    out = [
        f"<svg class='trend' data-row='{_e(row)}' viewBox='0 0 {CHART_W + AXIS_W} {height}' role='img' "
        f"aria-label='{_e(desc)}' xmlns='http://www.w3.org/2000/svg'>",
        f"<text x='{CHART_W + 4}' y='12'>{top} tests</text>",
        f"<text x='{CHART_W + 4}' y='{BARS_H}'>0</text>",
        f"<text x='{CHART_W + 4}' y='{BARS_H + GAP + 10}'>{_e(_seconds(wall_top if walls else None))}</text>",
        f"<text x='{CHART_W + 4}' y='{BARS_H + GAP + WALL_H}'>wall time</text>",
    ]
    line: list[str] = []
    for i, p in enumerate(points):
        x = i * step + (step - bar_w) / 2
        dur = "" if p["duration"] is None else f"{p['duration']:.3f}"
        out.append(f"<g class='run' data-run='{_e(p['run'])}' data-duration='{dur}'>")
        y = float(BARS_H)
        for b in BUCKETS:
            count = p["counts"].get(b, 0)
            if not count:
                continue
            h = count / top * BARS_H
            y -= h
            out.append(
                f"<rect class='fill-{b}' data-outcome='{b}' data-count='{count}' x='{x:.2f}' y='{y:.2f}' "
                f"width='{bar_w:.2f}' height='{max(h, 0.5):.2f}'><title>{_e(p['run'])}: {count} "
                f"{LABEL.get(b, b)}</title></rect>"
            )
        if p["duration"] is not None:
            cy = BARS_H + GAP + WALL_H - p["duration"] / wall_top * WALL_H
            cx = x + bar_w / 2
            line.append(f"{cx:.2f},{cy:.2f}")
            out.append(
                f"<circle class='wall-dot' cx='{cx:.2f}' cy='{cy:.2f}' r='2'><title>{_e(p['run'])}: wall time "
                f"{_e(_seconds(p['duration']))}</title></circle>"
            )
        out.append("</g>")
    if len(line) > 1:
        out.append(f"<polyline class='wall' points='{' '.join(line)}'/>")
    for k, line_labels in enumerate(labels):
        y = BARS_H + GAP + WALL_H + LINE_H * (k + 1)
        for text, end in line_labels:
            out.append(f"<text x='{CHART_W if end else 0}' y='{y}'{_END if end else ''}>{_e(text)}</text>")
    out.append("</svg>")
    return "".join(out)


_END = " text-anchor='end'"


def _run_labels(runs: Sequence[str]) -> list[list[tuple[str, bool]]]:
    """The lines of run labels under a chart: (text, anchored at the right end) each.

    #30: the oldest run at the left and the newest at the right on one line where both fit,
    else on two lines; one run is named once.
    """
    if not runs:
        return []
    room = int((CHART_W + AXIS_W) / LABEL_PX)
    first, last = (r if len(r) <= room else r[: room - 1] + "…" for r in (runs[0], runs[-1]))
    if len(runs) == 1:
        return [[(first, False)]]
    if (len(first) + len(last) + 2) * LABEL_PX <= CHART_W:
        return [[(first, False), (last, True)]]
    return [[(first, False)], [(last, len(last) * LABEL_PX <= CHART_W)]]


def _legend(counts: dict[str, int]) -> str:
    items = "".join(
        f"<li><span class='swatch bg-{b}'></span>{_e(LABEL.get(b, b))} {counts.get(b, 0)}</li>" for b in BUCKETS
    )
    return f"<ul class='legend'>{items}</ul>"


def _trend_table(points: Sequence[TrendPoint]) -> str:
    head = "".join(f"<th class='num'>{_e(LABEL.get(b, b))}</th>" for b in BUCKETS)
    body = "".join(
        f"<tr><td>{_e(p['run'])}</td><td>{_e(p['label'])}</td>"
        + "".join(f"<td class='num'>{p['counts'].get(b, 0)}</td>" for b in BUCKETS)
        + f"<td class='num'>{_e(_seconds(p['duration']))}</td></tr>"
        for p in reversed(points)
    )
    return (
        "<details><summary>the numbers, newest first</summary><div class='scroll'><table class='trend-table'>"
        f"<thead><tr><th>run</th><th>status</th>{head}<th class='num'>wall time</th></tr></thead>"
        f"<tbody>{body}</tbody></table></div></details>"
    )


def _card(r: RowView, h: HistoryView | None, found: Backstop | None = None) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
    parts = [
        f"<div class='card status-{_e(r['label'].replace(' ', '-'))}' data-row='{_e(r['row'])}'>"
        f"<b>{_e(r['row'])}</b> <span class='label'>{_e(r['label'])}</span><br>"
        f"<span class='counts'>{_e(r['phrase'])}</span><br>"
        f"<span class='muted'>{_e(r['mode'])} · {_e(_seconds(r['duration']))} · {_e(versions)}</span>"
    ]
    if r["headlines"]:
        parts.append("<ul class='headlines'>" + "".join(f"<li>{_e(x)}</li>" for x in r["headlines"]) + "</ul>")
    if r["reason"]:
        parts.append(f"<br><span class='muted'>{_e(r['reason'])}</span>")
    if (selected := view.selection_line(r)) is not None:
        parts.append(f"<br><span class='selection'>{_e(selected)}</span>")
    # #40: what the pull requests' selections missed that this full run of the base fails
    missed, rates = (found["misses"], found["rates"]) if found else ([], [])
    said = [f"❗ {m['nodeid']}: {misses.missed_words(m)}" for m in missed if m["row"] == r["row"]]
    said += [misses.rate_words(x) for x in rates if x["row"] == r["row"]]
    parts += [f"<br><span class='selection'>{_e(line)}</span>" for line in said]
    if safe_href(r["run_url"]):
        parts.append(f"<br>{_link(r['run_url'], 'CI run')}")
    points = h["trends"].get(r["row"], []) if h else []
    if points and not any(sum(p["counts"].values()) for p in points):
        parts.append(f"<p class='muted'>no tests in the last {len(points)} run(s)</p>")
    elif points:
        parts.append(trend_svg(r["row"], points))
        parts.append(_legend(points[-1]["counts"]))
        parts.append(_trend_table(points))
    parts.append("</div>")
    return "".join(parts)


_CHANGE_HTML: Mapping[ChangeKind, Callable[[Change], str]] = {
    "row_added": lambda c: f"new row <b>{_e(c.subject)}</b>",
    "row_gone": lambda c: f"row <b>{_e(c.subject)}</b> is gone (no results this time)",
    "new_failure": lambda c: f"<span class='failed'>new failure</span> on {_e(c.row)}: <code>{_e(c.subject)}</code>",
    "fixed": lambda c: f"<span class='passed'>fixed</span> on {_e(c.row)}: <code>{_e(c.subject)}</code>",
    "new_crash": lambda c: f"<span class='crashed'>new crash</span> {_e(c.text)} <code>{_e(c.subject)}</code>",
    "crash_stopped": lambda c: f"<span class='passed'>crash stopped</span> {_e(c.text)} <code>{_e(c.subject)}</code>",
    "newly_flaky": lambda c: f"newly flaky crash {_e(c.text)} <code>{_e(c.subject)}</code>",
    "appeared": lambda c: f"new test on {_e(c.row)}: <code>{_e(c.subject)}</code>",
    "disappeared": lambda c: f"test gone on {_e(c.row)}: <code>{_e(c.subject)}</code>",
    "not_run": lambda c: f"not run this time on {_e(c.row)}: <code>{_e(c.subject)}</code>",
}


def _changes(t: Triage) -> str:
    ch = view.changes(t)
    out = [
        f"<section id='changes'><h2>What changed since {_e(ch.previous)}</h2>"
        "<p class='answers'>What is different from the previous triage in the history.</p><ul>"
    ]
    kinds = list(dict.fromkeys(c.kind for c in ch.lines))
    for kind in kinds:
        out += [f"<li>{_CHANGE_HTML[kind](c)}</li>" for c in ch.lines if c.kind == kind]
        if kind in ch.more:
            out.append(f"<li>… {ch.more[kind]} more ({view.CHANGE_WORDS[kind]}; see triage.json)</li>")
    if ch.nothing:
        out.append("<li class='muted'>nothing changed: same results as last time</li>")
    out.append("</ul></section>")
    return "".join(out)


def _crashes(t: Triage) -> str:
    out = [
        f"<section id='crashes'><h2>Crashes ({len(t['crashes'])})</h2>"
        "<p class='answers'>What died in this run, where, how to reproduce it, and its issue.</p>"
    ]
    for c in t["crashes"]:
        out.append(
            f"<details class='crash' data-fingerprint='{_e(c['fingerprint'])}'><summary>"
            f"<span class='crashed'>{_e(c['headline'])}</span> "
            f"<code>{_e(', '.join(c['nodeids'][:3]))}</code> on {_e(', '.join(c['rows']))} · "
            f"<span class='tag'>{_e(c['fingerprint'])}</span> · {_issue(c['issue'], c['issue_state'])}</summary>"
        )
        if c["hint"]:
            out.append(f"<p class='muted'>{_e(c['hint'])}</p>")
        where = _place(c["file"], c["line"])
        if where:
            out.append(f"<p><b>At:</b> <code>{_e(where)}</code></p>")
        if c["fatal"]:
            out.append(f"<p><b>Fatal:</b> <code>{_e(c['fatal'])}</code></p>")
        for line in c["failed_before"]:
            out.append(f"<p><b>Before it ended:</b> {_e(line)}</p>")
        if c["placement"] is not None:
            out.append(f"<p class='placement'><b>Placed by environment:</b> {_e(c['placement']['text'])}</p>")
        out.append(f"<p><b>Reproduce:</b></p><pre>{_e(c['repro'])}</pre>")
        out.append(_stack("Python stack", c["python_stack"], c["python_stack_missing"]))
        if c["native_stack"]:
            out.append(f"<p><b>Native stack</b></p><pre>{_e(c['native_stack'])}</pre>")
        out.append(_stack("gdb (top frames)", "\n".join(c["gdb_frames"]), c["gdb_frames_missing"]))
        out.append("</details>")
    if not t["crashes"]:
        out.append("<p class='muted'>none</p>")
    out.append("</section>")
    return "".join(out)


def _stack(title: str, text: str | None, missing: str | None) -> str:
    """A crash's stack under its title; where the record has none, why not (#21, #39)."""
    if text:
        return f"<p><b>{_e(title)}</b></p><pre>{_e(text)}</pre>"
    if missing:
        return f"<p><b>{_e(title)}</b></p><p class='missing'>{_e(missing)}</p>"
    return ""


def _place(file: str | None, line: int | None) -> str | None:
    if not file:
        return None
    return f"{file}:{line}" if line else file


def _failures(t: Triage) -> str:
    """Each failure, its cause (the exception line(s)) and where it happened (#20)."""
    out = [
        f"<section id='failures'><h2>Failures ({len(t['failures'])})</h2>"
        "<p class='answers'>What failed, on which row, with which exception, and where.</p>"
    ]
    if t["failures"]:
        out.append(
            "<div class='scroll'><table id='failures-table' class='wrapping'><thead><tr>"
            "<th>test</th><th>row</th><th>outcome</th>"
            "<th>where</th><th>cause</th></tr></thead><tbody>"
        )
        # #32: at scale the groups carry the failures; the full list is in triage.json
        for f in t["failures"][: view.FAILURES_SHOWN]:
            where = _place(f["file"], f["line"])
            cause = f"<pre class='cause'>{_e(f['cause'])}</pre>" if f["cause"] else "<span class='muted'>none</span>"
            out.append(
                f"<tr data-nodeid='{_e(f['nodeid'])}' data-row='{_e(f['row'])}'>"
                f"<td><code>{breakable(f['nodeid'])}</code></td>"
                f"<td>{_e(f['row'])}</td><td class='{_e(f['outcome'])}'>{_e(f['outcome'])}</td>"
                f"<td>{f'<code>{_e(where)}</code>' if where else ''}</td><td>{cause}</td></tr>"
            )
        out.append("</tbody></table></div>")
        if len(t["failures"]) > view.FAILURES_SHOWN:
            left = len(t["failures"]) - view.FAILURES_SHOWN
            out.append(
                f"<p class='muted'>… {left} more failures (every one is in its group above and in triage.json)</p>"
            )
    else:
        out.append("<p class='muted'>none</p>")
    out.append("</section>")
    return "".join(out)


def _crash_history(h: HistoryView) -> str:
    out = [
        f"<section id='crash-history'><h2>Crash history ({len(h['crashes'])})</h2>"
        "<p class='answers'>Which crash keeps coming back, since when, on which rows; which stopped.</p>"
        "<div class='scroll'><table><thead><tr><th>crash</th><th>now</th><th>first seen</th><th>last seen</th>"
        "<th class='num'>runs</th><th>rows</th><th>issue</th></tr></thead><tbody>"
    ]
    for c in h["crashes"]:
        flaky = " <span class='tag'>flaky</span>" if c["flaky"] else ""
        out.append(
            f"<tr data-fingerprint='{_e(c['fingerprint'])}' data-state='{_e(c['state'])}'>"
            f"<td>{_e(c['headline'])} <code>{_e(c['fingerprint'])}</code></td>"
            f"<td><span class='tag state-{_e(c['state'].replace(' ', '-'))}'>{_e(c['state'])}</span>{flaky}</td>"
            f"<td>{_e(c['first_seen'])}</td><td>{_e(c['last_seen'])}</td><td class='num'>{c['runs']}</td>"
            f"<td>{_e(', '.join(c['rows']))}</td><td>{_link(c['issue'], c['issue']) if c['issue'] else 'none'}</td>"
            "</tr>"
        )
    out.append("</tbody></table></div></section>")
    return "".join(out)


def _flaky(h: HistoryView) -> str:
    crashes = [c for c in h["crashes"] if c["flaky"]]
    out = [
        f"<section id='flaky'><h2>Flaky tests ({len(h['flaky'])}) and flaky crashes ({len(crashes)})</h2>"
        f"<p class='answers'>Which tests went from pass to fail and back in the last {len(h['runs'])} runs, "
        "how often, and when they last flipped.</p>"
    ]
    if h["flaky"]:
        out.append(
            "<div class='scroll'><table id='flaky-tests'><thead><tr><th>test</th><th>row</th>"
            "<th class='num'>flips</th><th class='num'>flip rate</th><th>last flips (newest first)</th>"
            "<th>now</th></tr></thead><tbody>"
        )
        for f in h["flaky"]:
            flips = "<br>".join(
                f"{_e(x['run'])}: <span class='{_e(x['before'])}'>{_e(x['before'])}</span> → "
                f"<span class='{_e(x['after'])}'>{_e(x['after'])}</span>"
                for x in f["last_flips"]
            )
            out.append(
                f"<tr data-nodeid='{_e(f['nodeid'])}' data-row='{_e(f['row'])}' data-flips='{f['flips']}'>"
                f"<td><code>{_e(f['nodeid'])}</code></td><td>{_e(f['row'])}</td>"
                f"<td class='num'>{f['flips']} of {f['runs'] - 1}</td><td class='num'>{f['flip_rate']:.0%}</td>"
                f"<td>{flips}</td><td class='{_e(f['current'] or 'absent')}'>{_e(f['current'] or 'absent')}</td></tr>"
            )
        out.append("</tbody></table></div>")
    if crashes:
        out.append("<h3>Crashes classified flaky</h3><ul>")
        for c in crashes:
            out.append(
                f"<li>{_e(c['headline'])} <code>{_e(c['fingerprint'])}</code>: seen in {c['runs']} run(s), "
                f"now {_e(c['state'])}</li>"
            )
        out.append("</ul>")
    if not h["flaky"] and not crashes:
        out.append("<p class='muted'>none in this window</p>")
    out.append("</section>")
    return "".join(out)


def _durations(t: Triage) -> str:
    out = [
        "<section id='durations'><h2>Durations</h2>"
        "<p class='answers'>What is slow, and what got slower than it usually is.</p>"
        "<h3>Slowest tests in this run</h3><div class='scroll'><table id='slowest'><thead><tr><th>test</th>"
        "<th>row</th><th class='num'>time</th></tr></thead><tbody>"
    ]
    for s in t["slowest"]:
        out.append(
            f"<tr><td><code>{_e(s['nodeid'])}</code></td><td>{_e(s['row'])}</td>"
            f"<td class='num'>{_e(_seconds(s['duration']))}</td></tr>"
        )
    out.append("</tbody></table></div>")
    h = t["history"]
    if h is not None:
        out.append("<h3>At least 2x slower than their median over the earlier runs (and over 1 s)</h3>")
        if h["slower"]:
            out.append(
                "<div class='scroll'><table id='slower'><thead><tr><th>test</th><th>row</th><th class='num'>now</th>"
                "<th class='num'>median</th><th class='num'>ratio</th></tr></thead><tbody>"
            )
            for s in h["slower"]:
                out.append(
                    f"<tr><td><code>{_e(s['nodeid'])}</code></td><td>{_e(s['row'])}</td>"
                    f"<td class='num'>{_e(_seconds(s['duration']))}</td><td class='num'>{_e(_seconds(s['median']))}"
                    f"</td><td class='num'>{_e(s['ratio'])}x</td></tr>"
                )
            out.append("</tbody></table></div>")
        else:
            out.append("<p class='muted'>none</p>")
    out.append("</section>")
    return "".join(out)


def _matrix(t: Triage) -> str:
    out = [
        f"<section id='matrix-section'><h2>Tests by device ({len(t['tests'])} tests)</h2>"
        "<p class='answers'>Every test's outcome and duration on every row.</p>"
        "<div class='controls'><input type='search' id='filter' placeholder='filter by test id' aria-label='filter'>"
        "<label><input type='checkbox' id='only-problems'> only problems</label>"
        "<label>outcome <select id='outcome'><option value=''>any</option>"
        + "".join(f"<option value='{b}'>{_e(LABEL.get(b, b))}</option>" for b in BUCKETS)
        + "<option value='slow'>slow (1 s or more)</option></select></label>"
        "<span class='muted'><span id='shown'>0</span> shown</span></div>"
        # #42: which outcomes make a row a problem, once: each row's data-outcomes says the rest
        f"<div class='scroll'><table id='matrix' data-bad='{_e(' '.join(_BAD_BUCKETS))}'><thead><tr><th>test</th>"
    ]
    for d in t["devices"]:
        out.append(f"<th class='o'>{_e(d)}</th>")
    out.append("</tr></thead><tbody>")
    # 20,000 cells on a big matrix: each outcome's cell is escaped once, each nodeid once
    cell = {o: f"<td class='o {_e(o)}'>{_e(o)}" for o in BUCKET_OF}
    devices = t["devices"]
    for test in t["tests"][: view.TESTS_SHOWN]:
        outcomes = test["outcomes"]
        durations = test.get("durations", {})
        causes = test.get("causes", {})
        tags = {BUCKET_OF.get(o, o) for o in outcomes.values()}
        if any(d >= SLOW_S for d in durations.values()):
            tags.add("slow")
        nodeid = _e(test["nodeid"])
        # html.escape only writes lower-case entities, so lowering after escaping is the same
        row = [f"<tr data-id='{nodeid.lower()}' data-outcomes='{_e(' '.join(sorted(tags)))}'>"]
        row.append(f"<td>{nodeid}</td>")  # set as code by the style: 13 bytes a row less at 20,000 rows
        for d in devices:
            o = outcomes.get(d)
            if o is None:
                row.append("<td class='o absent'>—</td>")
                continue
            secs = durations.get(d)
            small = "" if secs is None else f"<small>{_seconds(secs)}</small>"
            why = causes.get(d)
            if why:
                # a failed cell says why, in words and in full on hover (#20): written once, in
                # its title, which the style shows under the outcome too (#42: the page's size)
                row.append(f"<td class='o {_e(o)}' title='{_e(why)}'>{_e(o)}{small}</td>")
                continue
            row.append(f"{cell.get(o) or f'<td class=o>{_e(o)}'}{small}</td>")
        row.append("</tr>")
        out.append("".join(row))
    out.append("</tbody></table></div>")
    if len(t["tests"]) > view.TESTS_SHOWN:
        out.append(
            f"<p class='muted'>… {len(t['tests']) - view.TESTS_SHOWN} more tests (every one is in triage.json)</p>"
        )
    out.append("</section>")
    return "".join(out)


def _skips(t: Triage) -> str:
    out = [
        f"<section id='skips'><h2>Device skips ({len(t['skips'])}: {_e(counted(t['skips']))})</h2>"
        "<p class='answers'>Which tests are disabled on a device, and whether their issue allows re-enabling.</p>"
        "<div class='scroll'><table><thead><tr><th>test</th><th>mode</th>"
        "<th>rows</th><th>issue</th><th>reason</th></tr></thead><tbody>"
    ]
    for sk in t["skips"]:
        if sk["by_design"] and not sk["issue"]:
            issue_html = "<span class='muted'>by design: needs none</span>"
        elif not sk["issue"]:
            issue_html = "<span class='failed'>no issue</span>"
        else:
            state = sk["issue_state"] or "state unknown"
            # #41: the rule triage's count and `skips check` use
            attention = " — needs attention" if needs_attention(sk) else ""
            extra = " — can be re-enabled" if state == "closed" else attention
            issue_html = f"{_link(sk['issue'], sk['issue'])} <span class='muted'>({_e(state)}{extra})</span>"
        out.append(
            f"<tr><td><code>{_e(sk['nodeid'])}</code></td><td>{_e(sk['mode'])}</td><td>{_e(', '.join(sk['rows']))}</td>"
            f"<td>{issue_html}</td><td>{_e(sk['reason'])}</td></tr>"
        )
    out.append("</tbody></table></div></section>")
    return "".join(out)


def _rows(t: Triage) -> str:
    h = t["history"]
    parts = [
        "<section id='rows'><h2>Rows</h2>"
        "<p class='answers'>Is each row green, and is it getting better or worse.</p><div class='cards'>"
    ]
    parts += [_card(r, h, t.get("backstop")) for r in t["rows"]]
    parts.append("</div>")
    parts += [f"<p class='error'>⚠ unreadable row {_e(p['row'])}: {_e(p['problem'])}</p>" for p in t["problems"]]
    parts.append("</section>")
    return "".join(parts)


def _history(piece: Callable[[HistoryView], str]) -> Callable[[Triage], str]:
    def drawn(t: Triage) -> str:
        return piece(t["history"]) if t["history"] is not None else ""

    return drawn


def _verdicts(t: Triage) -> str:
    return html_section(t["verdicts"]) if t["verdicts"] is not None else ""


def _commits(t: Triage) -> str:
    return commits_section(t, t["history"]) if t["history"] is not None else ""


# each section's piece, by its id in view.SECTIONS (the trends are in the row cards)
PIECES: Mapping[str, Callable[[Triage], str]] = {
    "rows": _rows,
    "verdicts": _verdicts,
    "commits": _commits,
    "changes": _changes,
    "groups": group_views.html_section,
    "failures": _failures,
    "crashes": _crashes,
    "crash-history": _history(_crash_history),
    "flaky": _history(_flaky),
    "durations": _durations,
    "matrix-section": _matrix,
    "skips": _skips,
}


def render(t: Triage) -> str:
    h = t["history"]
    sections = view.sections(t, PIECES.__contains__)
    parts: list[str] = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>device-matrix triage</title><style>{_asset('triage.css')}</style></head><body>"
        f"<header><h1>device-matrix triage</h1><div class='muted'>generated {_e(t['generated_at'])}"
        + (f" · trends over the last {len(h['runs'])} run(s)" if h else " · no history")
        + "</div><nav>"
        + "".join(f"<a href='#{s.id}'>{_e(s.title)}</a>" for s in sections)
        + "</nav></header><main>"
    ]
    add = parts.append
    for s in sections:
        add(PIECES[s.id](t))
    add(f"<script type='application/json' id='triage-data'>{_json_for_script(t)}</script>")
    add(f"<script>{_asset('triage.js')}</script></main></body></html>")
    return "".join(parts)


def _json_for_script(t: Triage) -> str:
    """The summary numbers as JSON, safe inside a <script> element."""
    data = {
        "rows": [
            {"row": r["row"], "status": r["status"], "label": r["label"], "counts": r["counts"]} for r in t["rows"]
        ]
    }
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
