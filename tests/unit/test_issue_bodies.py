"""What an issue says and how it is found, pinned exactly: its title, its safe body, its markers, which is picked."""

from __future__ import annotations

import pytest

from device_matrix.issues.base import (
    BODY_LIMIT,
    FINGERPRINT_MARKER,
    SEEN_MARKER,
    TITLE_LIMIT,
    Issue,
    clip_body,
    clip_title,
    code_block,
    neutralize,
    pick,
    safe_body,
)
from device_matrix.redact import REDACTED, Redactor


def _issue(number: int, state: str, body: str = "") -> Issue:
    return Issue(f"ledger:{number}", number, f"t{number}", body, state)  # type: ignore[arg-type]


def test_pick_the_oldest_open_issue_else_the_newest_closed_one() -> None:
    assert pick([_issue(5, "closed"), _issue(7, "open"), _issue(3, "open"), _issue(9, "closed")]).number == 3
    assert pick([_issue(2, "closed"), _issue(8, "closed"), _issue(4, "closed")]).number == 8
    assert pick([_issue(6, "open")]).number == 6


def test_an_issue_fingerprint_is_the_marker_that_ends_its_body() -> None:
    marker = FINGERPRINT_MARKER.format("abc:1_2-3")
    assert _issue(1, "open", f"text\n{marker}\n  \n").fingerprint == "abc:1_2-3"
    assert _issue(1, "open", f"{marker}\nlater text").fingerprint is None
    assert _issue(1, "open", "").fingerprint is None


def test_neutralize_mentions_links_and_comments_but_not_code_or_emails() -> None:
    assert neutralize("@alice see #12 <!-- x -->") == "@\u200balice see #\u200b12 &lt;!-- x -->"
    assert neutralize("mail a@b.c, `@x`, #tag, &#39;, issue#3") == "mail a@b.c, `@x`, #tag, &#39;, issue#3"
    assert neutralize("@ alone, # 1") == "@ alone, # 1"


@pytest.mark.parametrize(
    ("text", "fence"),
    [("plain", "```"), ("a ` b", "```"), ("a ``` b", "````"), ("x ````` y ``", "``````")],
)
def test_a_code_block_fence_is_longer_than_any_backtick_run_inside(text: str, fence: str) -> None:
    assert code_block(text) == f"{fence}\n{text}\n{fence}"
    assert code_block(text, "text") == f"{fence}text\n{text}\n{fence}"


def test_titles_are_one_line_within_the_limit() -> None:
    assert clip_title("  a\n b\tc  ") == "a b c"
    exact = "x" * TITLE_LIMIT
    assert clip_title(exact) == exact
    clipped = clip_title("y" * (TITLE_LIMIT + 1))
    assert clipped == "y" * (TITLE_LIMIT - 1) + "…" and len(clipped) == TITLE_LIMIT


def test_a_long_body_is_clipped_and_keeps_its_markers() -> None:
    assert clip_body("z" * 100, limit=100) == "z" * 100
    tail = SEEN_MARKER.format("fp1", "0a1b") + "\n" + FINGERPRINT_MARKER.format("fp1")
    body = "b" * 500 + "\n" + tail
    out = clip_body(body, limit=300)
    assert out.startswith("b" * 100)
    assert out.endswith("_(truncated by device-matrix: the full text is in the run's artifacts)_\n\n" + tail)
    # the cut leaves a margin of 10 characters under the limit
    assert len(out) == 300 - 10
    plain = clip_body("c" * 500, limit=300)
    assert plain.endswith("_(truncated by device-matrix: the full text is in the run's artifacts)_\n")
    assert len(plain) == 300 - 10


def test_a_safe_body_is_redacted_fenced_neutralized_and_ends_with_its_markers() -> None:
    redactor = Redactor({"GH_TOKEN": "secret-token-value"})
    body = safe_body(
        [
            ("Summary", "cc @bob about #4", False),
            ("Empty", "", False),
            ("Missing", None, False),
            ("Log", "token secret-token-value\n```", True),
        ],
        "fp9",
        redactor,
        markers=[SEEN_MARKER.format("fp9", "beef")],
    )
    assert body == (
        "### Summary\n\ncc @\u200bbob about #\u200b4\n\n"
        f"### Log\n\n````\ntoken {REDACTED}\n```\n````\n\n"
        f"{SEEN_MARKER.format('fp9', 'beef')}\n{FINGERPRINT_MARKER.format('fp9')}"
    )
    assert _issue(1, "open", body).fingerprint == "fp9"


def test_a_safe_body_is_clipped_to_the_body_limit() -> None:
    body = safe_body([("Log", "x" * (BODY_LIMIT * 2), True)], "fp", Redactor({}))
    assert len(body) <= BODY_LIMIT and body.endswith(FINGERPRINT_MARKER.format("fp"))
