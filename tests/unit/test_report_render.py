"""Hostile text in the reports (issue 11): code spans that hold, no live @mentions, links only to http(s)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from device_matrix.report import html, markdown
from device_matrix.report.html import safe_href
from device_matrix.report.model import build
from tests import records as R

NASTY = "s/t.py::test_x[` @octocat ``x```]"


def code_spans(text: str) -> list[str]:
    """The code spans of one Markdown line, by CommonMark's rule.

    A run of N backticks opens a span that ends at the next run of exactly N backticks; the
    content has one leading and trailing space stripped when both are there. Outside a span
    a backslash makes the backtick after it a literal one.
    """
    spans, i = [], 0
    while i < len(text):
        m = re.compile(r"`+").search(text, i)
        if not m:
            break
        backslashes = len(m.string[: m.start()]) - len(m.string[: m.start()].rstrip("\\"))
        if backslashes % 2:
            i = m.start() + 1
            continue
        fence = m.group(0)
        close = re.compile(rf"(?<!`){fence}(?!`)").search(text, m.end())
        if not close:
            i = m.end()
            continue
        body = text[m.end() : close.start()]
        if len(body) > 2 and body[0] == " " and body[-1] == " ":
            body = body[1:-1]
        spans.append(body)
        i = close.end()
    return spans


def outside_code(text: str) -> str:
    for span in code_spans(text):
        text = text.replace(span, "")
    return text


@pytest.mark.parametrize("text", [NASTY, "`", "``a``", "a`", "`a", "plain", "x | y", "```"])
def test_code_span_holds_any_backticks(text: str) -> None:
    span = markdown.code(text)
    assert code_spans(span) == [text]


def test_code_span_in_a_table_escapes_the_pipe() -> None:
    assert markdown.code("a|b", in_table=True) == "`a\\|b`"


def _hostile() -> list[dict[str, Any]]:
    crash = R.crash("cpu", NASTY, "ffff")
    return [
        R.record(
            "cpu",
            [
                R.test(NASTY, "crashed", crash_id=crash["id"]),
                R.test("s/t.py::test_bad", "failed", message="ping @octocat and #12, see <img src=x>"),
                R.test(NASTY + "2", "skipped", skip=R.skip_info(None)),
            ],
            [crash],
            reason="@octocat said so",
        )
    ]


def test_markdown_has_no_live_mention_and_every_nodeid_in_one_span() -> None:
    t = build(_hostile(), [("@evil-row", "@octocat broke it")], {})  # type: ignore[arg-type]
    md = markdown.render(t)
    for line in md.splitlines():
        if "test_x[" in line:
            assert any(NASTY in s for s in code_spans(line)), line
        plain = outside_code(line)
        assert "@octocat" not in plain, line
        assert "@evil-row" not in plain, line
        assert "<img" not in plain, line
    assert "@\u200boctocat" in md and "#\u200b12" in md


JS_URL = "javascript:alert(document.domain)"


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://github.com/o/r/actions/runs/1", True),
        ("http://ci.example/run/2", True),
        (JS_URL, False),
        ("  JavaScript:alert(1)", False),
        ("data:text/html,<script>alert(1)</script>", False),
        ("//evil.example/x", False),
        ("/relative", False),
        ("https://", False),
        ("vbscript:msgbox", False),
        ("http://[::1", False),
    ],
)
def test_only_http_links(url: str, ok: bool) -> None:
    assert (safe_href(url) is not None) is ok


def test_a_javascript_run_url_is_not_a_link() -> None:
    recs = _hostile()
    recs[0]["run_url"] = JS_URL
    recs[0]["crashes"][0]["issue"] = "javascript:alert(2)"
    good = R.record("tpu", [R.test("s/t.py::test_a")], run_url="https://ci.example/runs/7")
    page = html.render(build([*recs, good], [], {}))  # type: ignore[arg-type]
    hrefs = re.findall(r"href='([^']*)'", page)
    assert "https://ci.example/runs/7" in hrefs
    assert all(h.startswith(("https://", "http://", "#")) for h in hrefs), hrefs
    assert "javascript:" not in page.lower().replace("javascript:alert(2)", "")  # shown as text only
    assert "javascript:alert(2)</a>" not in page


def test_html_escapes_nodeids_everywhere() -> None:
    recs = _hostile()
    recs[0]["tests"].append(R.test("s/t.py::test_y[<script>alert(1)</script>'\"]", "failed", duration=5.0))
    page = html.render(build(recs, [], {}))  # type: ignore[arg-type]
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&#x27;&quot;" in page


BROKEN = "line one | piped\nline two\r\n| third `x|y`"


def _cells(line: str) -> int:
    """The cells of a Markdown table line: its pipes that no backslash escapes, less one."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_a_newline_or_a_pipe_in_run_text_stays_in_its_table_cell() -> None:
    crash = R.crash("cpu", "s/t.py::test_c", "ffff")
    crash["diagnosis"]["hint"] = BROKEN
    crash["issue"] = BROKEN
    tests = [
        R.test("s/t.py::test_c", "crashed", crash_id=crash["id"]),
        R.test(f"s/t.py::test_f[{BROKEN}]", "failed", message=f"AssertionError: {BROKEN}"),
        R.test("s/t.py::test_s", "skipped", skip=R.skip_info(BROKEN)),
        R.test("s/t.py::test_slow", "passed", duration=50.0),
    ]
    tests[2]["skip"]["reason"] = BROKEN
    record = R.record("cpu", tests, [crash], reason=BROKEN)
    record["environment"]["packages"]["torch"] = BROKEN
    md = markdown.render(build([record], [("gpu", BROKEN)], {}))  # type: ignore[arg-type]
    lines = md.splitlines()
    tables = 0
    for k, line in enumerate(lines):
        if re.fullmatch(r"\|(?:-+:?|-*:?-+:?)(?:\|-*:?-+:?)*\|", line.replace("--:", "---")):
            tables += 1
            width = _cells(lines[k - 1])
            body = lines[k + 1 :]
            rows = body[: next((n for n, b in enumerate(body) if not b.startswith("|")), len(body))]
            assert rows and all(_cells(r) == width for r in rows), (lines[k - 1], rows)
            after = body[len(rows)] if len(rows) < len(body) else ""
            assert not after.strip() or after.startswith(("#", "…", ">", "-")), after  # no cell's rest below
    assert tables >= 3
