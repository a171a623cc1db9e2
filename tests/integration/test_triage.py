"""The tests of this concept that start a process; the rest are in tests/unit/test_triage.py (#41)."""

from __future__ import annotations

import html as htmlmod
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from device_matrix.report import html
from device_matrix.report.history import History
from device_matrix.report.model import build
from tests import records as R
from tests.unit.test_triage import ARTIFACTS, CHROME_FLAGS, PROBE, ROWS


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


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
