"""A self-contained HTML report: no network at view time, everything inline."""

from __future__ import annotations

import json
from html import escape

from device_matrix.report.model import Triage

CSS = """
:root { --ok:#1a7f37; --bad:#cf222e; --crash:#8250df; --skip:#9a6700; --muted:#6e7781; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
       color: #1f2328; background: #f6f8fa; }
header { background: #24292f; color: #fff; padding: 14px 24px; }
header h1 { margin: 0; font-size: 20px; }
main { padding: 16px 24px; max-width: 1400px; }
section { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; margin: 0 0 16px; padding: 12px 16px; }
h2 { font-size: 16px; margin: 4px 0 10px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 12px; min-width: 180px; }
.card b { font-size: 15px; }
.status-passed { border-left: 5px solid var(--ok); }
.status-failed, .status-error { border-left: 5px solid var(--bad); }
.status-crashed { border-left: 5px solid var(--crash); }
.status-unavailable { border-left: 5px solid var(--muted); }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #eaeef2; padding: 3px 6px; text-align: left; vertical-align: top; }
th { position: sticky; top: 0; background: #f6f8fa; }
td.o { text-align: center; width: 90px; font-size: 12px; }
.passed { color: var(--ok); } .failed, .error, .xpassed { color: var(--bad); font-weight: 600; }
.crashed, .timeout { color: var(--crash); font-weight: 700; } .skipped, .xfailed { color: var(--skip); }
.not_run, .absent { color: var(--muted); }
code, pre { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; max-height: 360px; white-space: pre; }
.muted { color: var(--muted); }
.controls { margin: 0 0 8px; display: flex; gap: 12px; align-items: center; }
.controls input[type=search] { width: 360px; padding: 4px 6px; }
details { margin: 6px 0; }
summary { cursor: pointer; }
.tag { display: inline-block; padding: 0 6px; border-radius: 10px; background: #eaeef2; font-size: 12px; }
"""

JS = """
(function () {
  var q = document.getElementById('filter'), only = document.getElementById('only-problems');
  var rows = Array.prototype.slice.call(document.querySelectorAll('#matrix tbody tr'));
  var counter = document.getElementById('shown');
  function apply() {
    var text = (q.value || '').toLowerCase(), shown = 0;
    rows.forEach(function (tr) {
      var ok = tr.getAttribute('data-id').indexOf(text) !== -1 &&
               (!only.checked || tr.getAttribute('data-bad') === '1');
      tr.style.display = ok ? '' : 'none';
      if (ok) shown++;
    });
    counter.textContent = shown;
  }
  q.addEventListener('input', apply);
  only.addEventListener('change', apply);
  apply();
})();
"""

BAD = {"failed", "error", "xpassed", "crashed", "timeout", "not_run"}


def _e(text: object) -> str:
    return escape(str(text if text is not None else ""), quote=True)


def render(t: Triage) -> str:
    parts: list[str] = []
    add = parts.append
    add("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>")
    add("<meta name='viewport' content='width=device-width, initial-scale=1'>")
    add("<title>device-matrix triage</title>")
    add(f"<style>{CSS}</style></head><body>")
    add(
        "<header><h1>device-matrix triage</h1>"
        f"<div class='muted'>generated {_e(t['generated_at'])}</div></header><main>"
    )

    add("<section id='rows'><h2>Rows</h2><div class='cards'>")
    for r in t["rows"]:
        s = r["summary"]
        versions = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        add(
            f"<div class='card status-{_e(r['status'])}' data-row='{_e(r['row'])}'><b>{_e(r['row'])}</b> "
            f"<span class='{_e(r['status'])}'>{_e(r['status'])}</span><br>"
            f"{s.get('passed', 0)} passed · {s.get('failed', 0) + s.get('error', 0)} failed · "
            f"{s.get('crashed', 0) + s.get('timeout', 0)} crashed · "
            f"{s.get('skipped', 0) + s.get('xfailed', 0)} skipped<br>"
            f"<span class='muted'>{_e(r['mode'])} · {r['duration']:.0f}s · {_e(versions)}</span>"
        )
        if r["reason"]:
            add(f"<br><span class='muted'>{_e(r['reason'])}</span>")
        if r["run_url"]:
            add(f"<br><a href='{_e(r['run_url'])}'>CI run</a>")
        add("</div>")
    add("</div>")
    for p in t["problems"]:
        add(f"<p class='error'>⚠ {_e(p['row'])}: {_e(p['problem'])}</p>")
    add("</section>")

    ch = t["changes"]
    if ch["previous"] is not None:
        add(f"<section id='changes'><h2>What changed since {_e(ch['previous'])}</h2><ul>")
        for nodeid, row in ch["new_failures"]:
            add(f"<li class='failed'>new failure on {_e(row)}: <code>{_e(nodeid)}</code></li>")
        for nodeid, row in ch["fixed"]:
            add(f"<li class='passed'>fixed on {_e(row)}: <code>{_e(nodeid)}</code></li>")
        for fp in ch["new_crashes"]:
            add(f"<li class='crashed'>new crash <code>{_e(fp)}</code></li>")
        for fp in ch["newly_flaky"]:
            add(f"<li>newly flaky crash <code>{_e(fp)}</code></li>")
        if not any((ch["new_failures"], ch["fixed"], ch["new_crashes"], ch["newly_flaky"])):
            add("<li class='muted'>nothing changed</li>")
        add("</ul></section>")

    add(f"<section id='crashes'><h2>Crashes ({len(t['crashes'])})</h2>")
    for c in t["crashes"]:
        issue = f"{_e(c['issue'])} ({_e(c['issue_state'] or 'state unknown')})" if c["issue"] else "<b>no issue yet</b>"
        add(
            f"<details class='crash' data-fingerprint='{_e(c['fingerprint'])}'><summary>"
            f"<span class='crashed'>{_e(c['signal'] or c['kind'])}</span> "
            f"<code>{_e(', '.join(c['nodeids'][:3]))}</code> on {_e(', '.join(c['rows']))} · "
            f"{_e(c['classification'])} · "
            f"<span class='tag'>{_e(c['fingerprint'])}</span> · {issue}</summary>"
        )
        if c["hint"]:
            add(f"<p class='muted'>{_e(c['hint'])}</p>")
        if c["fatal"]:
            add(f"<p><b>Fatal:</b> <code>{_e(c['fatal'])}</code></p>")
        add(f"<p><b>Reproduce:</b></p><pre>{_e(c['repro'])}</pre>")
        if c["python_stack"]:
            add(f"<p><b>Python stack</b></p><pre>{_e(c['python_stack'])}</pre>")
        if c["native_stack"]:
            add(f"<p><b>Native stack</b></p><pre>{_e(c['native_stack'])}</pre>")
        if c["gdb_frames"]:
            add(f"<p><b>gdb (top frames)</b></p><pre>{_e(chr(10).join(c['gdb_frames']))}</pre>")
        add("</details>")
    if not t["crashes"]:
        add("<p class='muted'>none</p>")
    add("</section>")

    add(f"<section id='matrix-section'><h2>Tests by device ({len(t['tests'])} tests)</h2>")
    add(
        "<div class='controls'><input type='search' id='filter' placeholder='filter by test id' aria-label='filter'>"
        "<label><input type='checkbox' id='only-problems'> only problems</label>"
        "<span class='muted'><span id='shown'>0</span> shown</span></div>"
    )
    add("<table id='matrix'><thead><tr><th>test</th>")
    for d in t["devices"]:
        add(f"<th class='o'>{_e(d)}</th>")
    add("</tr></thead><tbody>")
    for test in t["tests"]:
        outcomes = test["outcomes"]
        bad = "1" if any(o in BAD for o in outcomes.values()) else "0"
        add(f"<tr data-id='{_e(test['nodeid'].lower())}' data-bad='{bad}'><td><code>{_e(test['nodeid'])}</code></td>")
        for d in t["devices"]:
            o = outcomes.get(d)
            add(f"<td class='o {_e(o or 'absent')}'>{_e(o or '—')}</td>")
        add("</tr>")
    add("</tbody></table></section>")

    add(
        f"<section id='skips'><h2>Device skips ({len(t['skips'])})</h2><table><thead><tr><th>test</th><th>mode</th>"
        "<th>rows</th><th>issue</th><th>reason</th></tr></thead><tbody>"
    )
    for sk in t["skips"]:
        if not sk["issue"]:
            issue_html = "<span class='failed'>no issue</span>"
        else:
            state = sk["issue_state"] or "state unknown"
            extra = " — can be re-enabled" if state == "closed" else ""
            issue_html = f"{_e(sk['issue'])} <span class='muted'>({_e(state)}{extra})</span>"
        add(
            f"<tr><td><code>{_e(sk['nodeid'])}</code></td><td>{_e(sk['mode'])}</td><td>{_e(', '.join(sk['rows']))}</td>"
            f"<td>{issue_html}</td><td>{_e(sk['reason'])}</td></tr>"
        )
    add("</tbody></table></section>")
    add(f"<script type='application/json' id='triage-data'>{_json_for_script(t)}</script>")
    add(f"<script>{JS}</script></main></body></html>")
    return "".join(parts)


def _json_for_script(t: Triage) -> str:
    """The summary numbers as JSON, safe inside a <script> element."""
    data = {"rows": [{"row": r["row"], "status": r["status"], "summary": r["summary"]} for r in t["rows"]]}
    return json.dumps(data).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
