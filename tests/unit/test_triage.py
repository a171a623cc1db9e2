"""Triage: the model, what changed, Markdown size, Actions output, and the HTML in a browser."""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

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


ROWS = ("cpu", "tpu", "cuda", "neuron")


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


# where the browser test leaves its screenshots (outside the checkout: #31)
ARTIFACTS = Path(os.environ.get("DEVICE_MATRIX_TEST_ARTIFACTS", SCRATCH / "test-artifacts"))


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
