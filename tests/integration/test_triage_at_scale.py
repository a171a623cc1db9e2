"""The tests of this concept that start a process; the rest are in tests/unit/test_triage_at_scale.py (#41)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from device_matrix.report import html
from device_matrix.report.model import build
from tests.unit.test_triage_at_scale import CHROMIUM, CHROMIUM_ARGS, LOAD_TIMING, MB, MEASURE, _failing


def _browser() -> Any:
    required = os.environ.get("DEVICE_MATRIX_REQUIRE_BROWSER") == "1"
    try:
        from playwright.sync_api import sync_playwright  # optional: the test extra has it
    except ImportError:
        if required:
            pytest.fail("playwright is required here (DEVICE_MATRIX_REQUIRE_BROWSER=1): pip install '.[test]'")
        pytest.skip("no playwright here; the test extra installs it")
    exe = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if exe is None:
        if required:
            pytest.fail("chromium is required here (DEVICE_MATRIX_REQUIRE_BROWSER=1) but not installed")
        pytest.skip("no chromium on this machine; CI installs it and sets DEVICE_MATRIX_REQUIRE_BROWSER=1")
    return sync_playwright, exe


def test_the_failures_and_groups_tables_read_at_1280_px_in_a_real_browser(tmp_path: Path) -> None:
    sync_playwright, exe = _browser()
    recs = [_failing(300, row="cpu"), _failing(40, row="tpu")]
    long_cause = "RuntimeError: " + "a cause that goes on and on, " * 40
    recs[0]["tests"][0]["cause"] = long_cause
    recs[0]["tests"][1]["nodeid"] = (
        "tests/" + "deeply/nested/" * 12 + "test_x.py::TestVeryLongClassName::test_" + "y" * 80
    )
    page = tmp_path / "triage.html"
    page.write_text(html.render(build(recs, [], {})), encoding="utf-8")  # type: ignore[arg-type]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            tab.goto(page.as_uri())
            got = tab.evaluate(MEASURE)
        finally:
            browser.close()
    assert got["page"] <= got["viewport"], json.dumps(got)
    assert got["widest"] <= got["viewport"], json.dumps(got)
    for table, columns in got["tables"].items():
        assert len(columns) == 5, table
        assert min(columns) >= 12, f"{table}: a column narrower than 12 characters: {columns}"


def test_the_page_of_20000_failures_opens_in_a_real_browser_in_under_3_s(tmp_path: Path) -> None:
    sync_playwright, exe = _browser()
    page = tmp_path / "triage.html"
    page.write_text(html.render(build([_failing(20_000)], [], {})), encoding="utf-8")  # type: ignore[list-item]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page(viewport={"width": 1280, "height": 900})
            tab.goto(page.as_uri(), wait_until="load")
            got = tab.evaluate(LOAD_TIMING)
        finally:
            browser.close()
    size = page.stat().st_size / MB
    assert got["load"] < 3000, (
        f"triage.html of 20,000 failures ({size:.1f} MB) took {got['load']:.0f} ms to load in chromium "
        f"(DOMContentLoaded at {got['dom']:.0f} ms); the target is under 3000 ms"
    )
