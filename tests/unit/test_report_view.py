"""One view of the report (#31): the Markdown and the HTML report draw the same sections in
one order, and list "what changed" to one limit."""

from __future__ import annotations

import re

from device_matrix.report import html, markdown, view
from device_matrix.report.model import Triage, build, no_changes
from tests import records as R


def _triage(appeared: int) -> Triage:
    tests = [R.test(f"t.py::test_{i}") for i in range(appeared)] + [R.test("t.py::test_bad", "failed", message="E")]
    t = build([R.record("cpu", tests)], [], {})  # type: ignore[list-item]
    t["changes"] = no_changes("run 1")
    t["changes"]["appeared"] = [[f"t.py::test_{i}", "cpu"] for i in range(appeared)]  # type: ignore[misc]
    return t


def test_both_reports_cut_what_changed_at_one_limit() -> None:
    # the HTML report listed 200 new tests and the Markdown 20
    n = view.CHANGES_LISTED + 7
    t = _triage(n)
    md, page = markdown.render(t), html.render(t)
    assert "… 7 more (new test; see triage.json)" in md
    assert "… 7 more (new test; see triage.json)" in page
    listed = f"t.py::test_{view.CHANGES_LISTED - 1}"
    cut = f"t.py::test_{view.CHANGES_LISTED}"
    changes_md = md[md.index("## What changed") :]
    changes_md = changes_md[: changes_md.index("\n## ")]
    changes_html = page[page.index("<section id='changes'>") :]
    changes_html = changes_html[: changes_html.index("</section>")]
    for section in (changes_md, changes_html):
        assert listed in section and cut not in section


def test_both_reports_draw_their_sections_in_the_one_order() -> None:
    t = _triage(3)
    order = [s.id for s in view.SECTIONS]
    ids = re.findall(r"<section id='([^']+)'", html.render(t))
    assert ids == sorted(ids, key=order.index)
    assert ids == [s.id for s in view.sections(t, html.PIECES.__contains__)]
    titles = {"## What changed": "changes", "## Failures": "failures", "## Device skips": "skips"}
    md = markdown.render(t)
    drawn = sorted((md.index(head), sid) for head, sid in titles.items() if head in md)
    assert [sid for _, sid in drawn] == [sid for sid in order if sid in titles.values()]
    assert len(drawn) == 3
