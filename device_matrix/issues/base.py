"""One tracker interface, two backends (the embedded ledger, GitHub), and safe bodies."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from device_matrix.redact import Redactor

IssueState = Literal["open", "closed"]
FINGERPRINT_MARKER = "<!-- device-matrix:fingerprint={} -->"
FINGERPRINT_RE = re.compile(r"<!-- device-matrix:fingerprint=([A-Za-z0-9:_-]+) -->")
TITLE_LIMIT = 256  # GitHub's limit on issue titles
BODY_LIMIT = 65_536  # GitHub's limit on issue and comment bodies (characters)


@dataclass
class Issue:
    key: str  # canonical reference: "ledger:3" or "owner/name#12"
    number: int
    title: str
    body: str
    state: IssueState
    url: str | None = None
    labels: list[str] = field(default_factory=list)

    @property
    def fingerprint(self) -> str | None:
        m = FINGERPRINT_RE.search(self.body or "")
        return m.group(1) if m else None


class Tracker(Protocol):
    name: str

    def list_issues(self) -> list[Issue]:
        """Every issue the tool may have filed (all states), for fingerprint lookup."""

    def get(self, ref: str) -> Issue | None:
        """One issue by canonical reference; None when it does not exist (or is elsewhere)."""

    def create(self, title: str, body: str, labels: Sequence[str]) -> Issue: ...

    def comment(self, issue: Issue, body: str) -> None: ...


# --- safe bodies --------------------------------------------------------------------------

_MENTION_RE = re.compile(r"(?<![\w`])@(?=[A-Za-z0-9])")
_ISSUE_LINK_RE = re.compile(r"(?<![\w&])#(?=\d)")


def neutralize(text: str) -> str:
    """Stop @mentions and #N cross-links outside code blocks from pinging people or issues."""
    text = _MENTION_RE.sub("@\u200b", text)
    return _ISSUE_LINK_RE.sub("#\u200b", text)


def code_block(text: str, lang: str = "") -> str:
    """Fence ``text`` so nothing inside can close the block early."""
    longest = max((len(m.group(0)) for m in re.finditer(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def clip_title(title: str) -> str:
    title = " ".join(title.split())
    return title if len(title) <= TITLE_LIMIT else title[: TITLE_LIMIT - 1] + "…"


def clip_body(body: str, limit: int = BODY_LIMIT) -> str:
    if len(body) <= limit:
        return body
    note = "\n\n_(truncated by device-matrix: the full text is in the run's artifacts)_\n"
    # keep the hidden marker, which sits at the very end
    marker = FINGERPRINT_RE.search(body)
    tail = "\n" + marker.group(0) if marker else ""
    return body[: limit - len(note) - len(tail) - 10] + note + tail


def safe_body(sections: Sequence[tuple[str, str | None, bool]], fingerprint: str, redactor: Redactor) -> str:
    """Assemble a body: (heading, text, is_code) sections, redacted, fenced, marked."""
    parts = []
    for heading, text, is_code in sections:
        if not text:
            continue
        clean = redactor.text(text)
        parts.append(f"### {heading}\n\n" + (code_block(clean) if is_code else neutralize(clean)))
    parts.append(FINGERPRINT_MARKER.format(fingerprint))
    return clip_body("\n\n".join(parts))
