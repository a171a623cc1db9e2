"""A row card's chart: its run labels never drawn over each other (#30)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from device_matrix.report.html import CHART_W, trend_svg

CHAR_PX = 12 * 0.6  # the chart's 12 px font: an average character is at least 0.6 em wide
_TEXT_RE = re.compile(r"<text x='([\d.]+)' y='([\d.]+)'( text-anchor='end')?>([^<]*)</text>")


def _point(run: str) -> dict[str, Any]:
    return {"run": run, "counts": {"passed": 3}, "duration": 12.0, "label": "passed"}


def _labels(svg: str, runs: list[str]) -> list[tuple[float, float, float]]:
    """(left, right, y) of each text that names a run."""
    out = []
    for x, y, end, text in _TEXT_RE.findall(svg):
        if text in runs:
            width = len(text) * CHAR_PX
            left = float(x) - width if end else float(x)
            out.append((left, left + width, float(y)))
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 30])
def test_the_run_labels_of_a_chart_never_overlap(n: int) -> None:
    runs = [f"2026-12-01T20:{i:02d}:00+00:00" for i in range(n)]
    svg = trend_svg("cpu", [_point(r) for r in runs])  # type: ignore[misc]
    labels = _labels(svg, runs)
    assert len(labels) == min(n, 2)  # the oldest and the newest run, once each
    for k, (left, right, y) in enumerate(labels):
        assert left >= 0 and right <= CHART_W + 64
        for left2, right2, y2 in labels[k + 1 :]:
            assert y != y2 or right <= left2 or right2 <= left, svg
    height = float(re.search(r"viewBox='0 0 [\d.]+ ([\d.]+)'", svg)[1])  # type: ignore[index]
    assert all(y <= height for _, _, y in labels)
