"""Triage: the model, what changed, Markdown size, Actions output, and the HTML in a browser."""

from __future__ import annotations

import html as htmlmod
import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from device_matrix.cli.triage import run_triage
from device_matrix.output import ANNOTATION_CAP, Output
from device_matrix.report import html, markdown
from device_matrix.report.history import History
from device_matrix.report.model import build
from tests import records as R
from tests.conftest import SCRATCH


def _records() -> list[dict[str, Any]]:
    cpu = R.record(
        "cpu",
        [
            R.test("s/t.py::test_ok"),
            R.test("s/t.py::test_bad", "failed", message="AssertionError: 1 != 2\nmore"),
            R.test("s/t.py::test_seg", "crashed", crash_id="cpu-1"),
            R.test("s/t.py::test_skip", "skipped", skip=R.skip_info(None)),
            R.test("s/t.py::test_closed", "xfailed", skip=R.skip_info("ledger:1", mode="xfail")),
        ],
        [R.crash("cpu", "s/t.py::test_seg", "aaaa")],
    )
    tpu = R.record(
        "tpu",
        [R.test("s/t.py::test_ok"), R.test("s/t.py::test_seg", "crashed", crash_id="tpu-1")],
        [R.crash("tpu", "s/t.py::test_seg", "aaaa")],
    )
    neuron = R.record("neuron", [], status="unavailable", reason="NEURON device not found (no /dev/neuron*)")
    return [cpu, tpu, neuron]


def write_results(root: Path, records: list[dict[str, Any]]) -> Path:
    for rec in records:
        d = root / rec["row"]
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps(rec))
    return root


def test_model_merges_rows_and_links_issue_states() -> None:
    links = {"issues": {"ledger:1": {"state": "closed"}}, "links": {}}
    t = build(_records(), [("cuda", "results/cuda/run.json: truncated")], links)  # type: ignore[arg-type]
    assert t["devices"] == ["cpu", "tpu", "neuron"]
    (crash,) = t["crashes"]
    assert crash["rows"] == ["cpu", "tpu"] and crash["nodeids"] == ["s/t.py::test_seg"]
    assert [f["nodeid"] for f in t["failures"]] == ["s/t.py::test_bad"]
    skips = {s["nodeid"]: s for s in t["skips"]}
    assert skips["s/t.py::test_skip"]["issue"] is None
    assert skips["s/t.py::test_closed"]["issue_state"] == "closed"
    assert t["problems"] == [{"row": "cuda", "problem": "results/cuda/run.json: truncated"}]
    md = markdown.render(t)
    assert "can be re-enabled" in md and "cites no issue" in md
    assert "NEURON device not found" in md and "truncated" in md


def test_history_reports_what_changed(tmp_path: Path) -> None:
    h = History.open(tmp_path / "h.sqlite")
    first = build(_records(), [], {})  # type: ignore[arg-type]
    assert h.compare(first)["previous"] is None
    h.record(first, "run 1")
    recs = _records()
    recs[0]["tests"][1]["outcome"] = "passed"  # fixed
    recs[0]["tests"][0]["outcome"] = "failed"  # new failure
    recs[1]["crashes"][0]["classification"] = "flaky"
    recs[1]["crashes"].append(R.crash("tpu", "s/t.py::test_ok", "bbbb", index=2))
    second = build(recs, [], {})  # type: ignore[arg-type]
    ch = h.compare(second)
    assert ch["previous"] == "run 1"
    assert ch["new_failures"] == [["s/t.py::test_ok", "cpu"]]
    assert ch["fixed"] == [["s/t.py::test_bad", "cpu"]]
    assert ch["new_crashes"] == ["bbbb"]
    assert ch["newly_flaky"] == ["aaaa"]


def test_markdown_is_truncated_under_the_step_summary_cap() -> None:
    many = [R.test(f"s/t.py::test_{i}_" + "x" * 200, "failed", message="boom " * 50) for i in range(3000)]
    t = build([R.record("cpu", many)], [], {})  # type: ignore[arg-type]
    md = markdown.render(t, limit=100_000)
    assert len(md.encode()) <= 100_000
    assert "and 2950 more" in md
    huge = markdown.truncate("line\n" * 100_000, 50_000)
    assert len(huge.encode()) <= 50_000 and "truncated" in huge


def test_actions_annotations_groups_and_summary(tmp_path: Path) -> None:
    recs = _records()
    recs[0]["tests"] += [R.test(f"s/u.py::test_{i}", "failed") for i in range(30)]
    results = write_results(tmp_path / "results", recs)
    (results / "cuda").mkdir()
    (results / "cuda" / "run.json").write_text('{"schema": "device-matrix/run", "vers')
    summary = tmp_path / "summary.md"
    stream = io.StringIO()
    out = Output(stream, environ={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    run_triage(results, tmp_path / "out", tmp_path / "h.sqlite", "run 7", out)
    text = stream.getvalue()
    assert text.count("::error ") == ANNOTATION_CAP
    assert "::group::cpu: crashed" in text and "::endgroup::" in text
    assert "::warning title=row cuda::" in text
    assert summary.read_text().startswith("# device-matrix triage")
    for name in ("triage.md", "triage.html", "triage.json"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    data = json.loads((tmp_path / "out" / "triage.json").read_text())
    assert data["schema"] == "device-matrix/triage" and data["version"] == 2
    assert data["problems"][0]["row"] == "cuda"


def test_html_escapes_everything() -> None:
    recs = _records()
    recs[0]["tests"].append(
        R.test(
            "s/t.py::test_x[<script>alert(1)</script>]",
            "failed",
            message="<img src=x onerror=alert(1)>",
        )
    )
    page = html.render(build(recs, [], {}))  # type: ignore[arg-type]
    assert "<script>alert(1)</script>" not in page and "<img src=x" not in page
    assert "http" not in re.sub(r"href='[^']*'", "", page).split("<main>")[0]  # nothing fetched


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


CHROME_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]


@pytest.fixture
def browser(tmp_path: Path) -> list[str]:
    exe = _chromium()
    if exe is None:
        if os.environ.get("DEVICE_MATRIX_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium is required here (DEVICE_MATRIX_REQUIRE_BROWSER=1) but not installed")
        pytest.skip("no chromium on this machine; CI installs it and sets DEVICE_MATRIX_REQUIRE_BROWSER=1")
    return [exe, *CHROME_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]


def test_html_report_renders_in_a_real_browser(browser: list[str], tmp_path: Path) -> None:
    recs = []
    for row in ("cpu", "tpu", "cuda", "neuron"):
        tests = [
            R.test(f"suites/s{i % 7}/test_m.py::test_{i}", "failed" if i % 97 == 0 else "passed") for i in range(400)
        ]
        recs.append(R.record(row, tests))
    page = tmp_path / "triage.html"
    page.write_text(html.render(build(recs, [], {})))  # type: ignore[arg-type]
    dom = subprocess.run(
        [*browser, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    # the script ran: it filled in the number of rows shown
    assert re.search(r"<span id=\"shown\">400</span>", dom), dom[:500]
    assert dom.count("<tr data-id=") == 400
    assert dom.count('class="o failed"') == 4 * 5


ROWS = ("cpu", "tpu", "cuda", "neuron")


def _history_run(i: int, runs: int) -> list[dict[str, Any]]:
    """One run of a small matrix whose history has every section: trends, a flaky test, a
    crash that stopped, a timeout, xfails, a test that got slower."""
    out = []
    for row in ROWS[:3]:
        tests, crashes = [], []
        for k in range(60):
            nodeid = f"suites/s{k % 6}/test_m.py::test_{k}"
            if k == 1 and row == "tpu" and i < runs // 2:
                crashes.append(R.crash(row, nodeid, "seg1", index=len(crashes) + 1))
                tests.append(R.test(nodeid, "crashed", crash_id=crashes[-1]["id"]))
            elif k == 2 and row == "cuda" and i == runs - 1:
                crashes.append(R.crash(row, nodeid, "hang", index=len(crashes) + 1, signal="SIGTERM", kind="timeout"))
                tests.append(R.test(nodeid, "timeout", crash_id=crashes[-1]["id"], duration=300.4))
            elif k == 3:
                tests.append(R.test(nodeid, "failed" if (i + len(row)) % 3 == 0 else "passed", duration=0.4))
            elif k < 10 and row == "cpu":
                tests.append(R.test(nodeid, "xfailed"))
            elif k == 11 and row == "cpu":
                tests.append(R.test(nodeid, "skipped", skip=R.skip_info(None)))
            elif k == 12:
                tests.append(R.test(nodeid, duration=4.0 if i == runs - 1 else 1.2))
            else:
                tests.append(R.test(nodeid, "failed" if k == 20 and i > runs - 4 else "passed", duration=0.05))
        rec = R.record(row, tests, crashes, run_url=f"https://ci.example/runs/{100 + i}")
        rec["duration"] = 40.0 + 3 * i + 10 * ROWS.index(row)
        out.append(rec)
    out.append(R.record("neuron", [], status="unavailable", reason="NEURON device not found (no /dev/neuron*)"))
    return out


PROBE = """<script>
(function () {
  var out = {width: window.innerWidth, scroll: document.documentElement.scrollWidth, charts: {}, filters: []};
  out.initial = +document.getElementById('shown').textContent;
  document.querySelectorAll('svg.trend').forEach(function (svg) {
    var runs = [];
    svg.querySelectorAll('g.run').forEach(function (g) {
      var bars = [];
      g.querySelectorAll('rect').forEach(function (r) {
        bars.push({outcome: r.getAttribute('data-outcome'), count: +r.getAttribute('data-count'),
                   height: r.getBBox().height, title: r.querySelector('title').textContent});
      });
      runs.push({run: g.getAttribute('data-run'), duration: g.getAttribute('data-duration'), bars: bars});
    });
    out.charts[svg.getAttribute('data-row')] = {runs: runs, box: svg.viewBox.baseVal.height,
                                                 shownWidth: svg.getBoundingClientRect().width};
  });
  var q = document.getElementById('filter'), only = document.getElementById('only-problems');
  var outcome = document.getElementById('outcome');
  var rows = Array.prototype.slice.call(document.querySelectorAll('#matrix tbody tr'));
  [['s3', false, ''], ['', true, ''], ['', false, 'failed'], ['', false, 'timeout'], ['', false, 'slow'],
   ['test_1', false, 'xfailed']].forEach(function (f) {
    q.value = f[0]; q.dispatchEvent(new Event('input'));
    only.checked = f[1]; only.dispatchEvent(new Event('change'));
    outcome.value = f[2]; outcome.dispatchEvent(new Event('change'));
    out.filters.push({shown: +document.getElementById('shown').textContent,
      visible: rows.filter(function (r) { return r.getBoundingClientRect().height > 0; })
                   .map(function (r) { return r.getAttribute('data-id'); })});
  });
  var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script></body>"""


def _probe(browser: list[str], page: Path, *, width: int, fragment: str = "") -> dict[str, Any]:
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text().replace("</body>", PROBE))
    dom = subprocess.run(
        [*browser, f"--window-size={width},900", "--dump-dom", probed.as_uri() + fragment],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    m = re.search(r"<pre id=\"probe\">(.*?)</pre>", dom, re.S)
    assert m, dom[-2000:]
    result: dict[str, Any] = json.loads(htmlmod.unescape(m.group(1)))
    return result


def _screenshot(browser: list[str], page: Path, shot: Path, size: str) -> None:
    shot.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [*browser, f"--screenshot={shot}", f"--window-size={size}", "--hide-scrollbars", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shot.exists() and shot.stat().st_size > 20_000, proc.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Uncaught" not in proc.stderr


# where the browser test leaves its screenshots (outside the checkout: #31)
ARTIFACTS = Path(os.environ.get("DEVICE_MATRIX_TEST_ARTIFACTS", SCRATCH / "test-artifacts"))


def test_trend_charts_filters_and_narrow_screen_in_a_real_browser(browser: list[str], tmp_path: Path) -> None:
    runs = 12
    h = History.open(tmp_path / "h.sqlite")
    for i in range(runs):
        t = build(_history_run(i, runs), [], {})  # type: ignore[arg-type]
        t["changes"] = h.compare(t)
        h.record(t, f"#{100 + i}")
    t["history"] = h.view(t)
    h.close()
    history = t["history"]
    assert history["flaky"] and history["slower"] and any(c["state"] == "stopped" for c in history["crashes"])
    page = tmp_path / "triage.html"
    page.write_text(html.render(t))

    wide = _probe(browser, page, width=1400)
    # every row with a history has its chart, and each bar carries the history's numbers
    # a row that never had a test (neuron, unavailable here) says so instead of an empty chart
    drawn_rows = sorted(r for r, pts in history["trends"].items() if any(sum(p["counts"].values()) for p in pts))
    assert drawn_rows == ["cpu", "cuda", "tpu"]
    assert sorted(wide["charts"]) == drawn_rows
    assert "no tests in the last 12 run(s)" in page.read_text()
    for row in drawn_rows:
        points = history["trends"][row]
        chart = wide["charts"][row]
        assert [r["run"] for r in chart["runs"]] == [p["run"] for p in points]
        # one scale per chart: the tallest run fills the chart, a bar's height is its count's
        # share of it (drawn to 0.01 of a unit)
        scale = html.BARS_H / max(sum(p["counts"].values()) for p in points)
        for drawn, point in zip(chart["runs"], points, strict=True):
            assert {b["outcome"]: b["count"] for b in drawn["bars"]} == {k: v for k, v in point["counts"].items() if v}
            assert float(drawn["duration"]) == point["duration"]
            for b in drawn["bars"]:
                assert b["title"] == f"{point['run']}: {b['count']} {b['outcome'].replace('_', ' ')}"
                assert abs(b["height"] - b["count"] * scale) <= 0.006, (row, point["run"], b)
    # the filters, driven through their own events, show what the data says they should
    tests = t["tests"]

    def ids(pred: Any) -> list[str]:
        return [x["nodeid"].lower() for x in tests if pred(x)]

    expected = [
        ids(lambda x: "s3" in x["nodeid"]),
        ids(lambda x: any(o not in ("passed", "skipped", "xfailed") for o in x["outcomes"].values())),
        ids(lambda x: bool({"failed", "error", "xpassed"} & set(x["outcomes"].values()))),
        ids(lambda x: "timeout" in x["outcomes"].values()),
        ids(lambda x: any(d >= 1.0 for d in x["durations"].values())),
        ids(lambda x: "test_1" in x["nodeid"] and "xfailed" in x["outcomes"].values()),
    ]
    assert [f["visible"] for f in wide["filters"]] == expected
    assert [f["shown"] for f in wide["filters"]] == [len(e) for e in expected]
    assert all(expected), expected
    assert wide["initial"] == len(tests)

    # a narrow screen: nothing wider than the screen, the charts shrink with it; a filter
    # given in the address is applied on load
    narrow = _probe(browser, page, width=390, fragment="#outcome=timeout")
    assert narrow["scroll"] <= narrow["width"], narrow["scroll"]
    assert all(c["shownWidth"] <= narrow["width"] for c in narrow["charts"].values())
    assert narrow["initial"] == len(expected[3])

    _screenshot(browser, page, ARTIFACTS / "triage.png", "1280,1600")
    _screenshot(browser, page, ARTIFACTS / "triage-narrow.png", "390,1200")
    if os.environ.get("DEVICE_MATRIX_UPDATE_SCREENSHOT") == "1":
        docs = Path(__file__).parents[2] / "docs" / "triage.png"
        _screenshot(browser, page, docs, "1100,1300")


def test_a_nodeid_from_a_file_name_that_is_not_utf8_reaches_every_report(tmp_path: Path) -> None:
    nodeid = "s/caf\udce9.py::test_a"  # what pytest makes of the Latin-1 byte 0xe9
    crash = R.crash("cpu", nodeid, "eeee")
    results = write_results(tmp_path / "results", [R.record("cpu", [R.test(nodeid, "crashed")], [crash])])
    summary = tmp_path / "summary.md"
    out = Output(io.StringIO(), environ={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)})
    for label in ("run 1", "run 2"):  # the second run reads the history the first wrote
        run_triage(results, tmp_path / "out", tmp_path / "h.sqlite", label, out)
    assert "s/caf\\udce9.py::test_a" in summary.read_text("utf-8")
    assert "s/caf\\udce9.py::test_a" in (tmp_path / "out" / "triage.md").read_text("utf-8")
    assert json.loads((tmp_path / "out" / "triage.json").read_text())["tests"][0]["nodeid"] == nodeid
