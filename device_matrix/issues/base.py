"""One tracker interface, two backends (the embedded ledger, GitHub), and safe bodies."""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Literal, Protocol

from device_matrix.errors import TrackerError
from device_matrix.markup import neutralize as neutralize  # noqa: PLC0414 - a body's rule, named here too
from device_matrix.redact import Redactor

IssueState = Literal["open", "closed"]
# What a cited issue turned out to be: "missing" (404, or never existed), "deleted" (410),
# "unknown" (this tracker cannot look it up, e.g. a GitHub issue from the offline ledger).
CitedState = Literal["open", "closed", "missing", "deleted", "unknown"]
FINGERPRINT_MARKER = "<!-- device-matrix:fingerprint={} -->"
# Only the marker that ends the body counts: the same text quoted in a skip reason or in
# crash output (fenced, earlier in the body) must not make the issue look like another
# finding's issue (#11: two new issues every run).
FINGERPRINT_END_RE = re.compile(r"<!-- device-matrix:fingerprint=([A-Za-z0-9:_-]+) -->\s*\Z")
SEEN_MARKER = "<!-- device-matrix:seen={} run={} -->"
# the block of our markers that ends a body: kept whole when a long body is clipped
_MARKER_TAIL_RE = re.compile(
    r"(?:<!-- device-matrix:seen=[A-Za-z0-9:_-]+ run=[0-9a-f]+ -->\n)*" + FINGERPRINT_END_RE.pattern
)
TITLE_LIMIT = 256  # GitHub's limit on issue titles
BODY_LIMIT = 65_536  # GitHub's limit on issue and comment bodies (characters)


class AmbiguousWrite(TrackerError):
    """A write whose outcome is unknown (5xx, reset, timeout): it may have been applied."""


@dataclass
class Issue:
    key: str  # canonical reference: "ledger:3" or "owner/name#12"
    number: int
    title: str
    body: str
    state: IssueState
    url: str | None = None
    labels: list[str] = field(default_factory=list)
    locked: bool = False

    @property
    def fingerprint(self) -> str | None:
        m = FINGERPRINT_END_RE.search(self.body or "")
        return m.group(1) if m else None


@dataclass(frozen=True)
class Cited:
    """A cited issue as the tracker saw it; a missing or deleted one is a state, not an error."""

    ref: str
    state: CitedState
    locked: bool = False
    title: str = ""
    url: str | None = None


class Tracker(Protocol):
    name: str

    def transaction(self) -> AbstractContextManager[None]:
        """Hold the tracker for one sync: concurrent syncs of the ledger run one after another."""

    def find(self, fingerprints: Collection[str]) -> dict[str, list[Issue]]:
        """Issues whose body ends with the marker of each fingerprint, whatever their labels."""

    def recheck(self, fingerprint: str) -> Issue | None:
        """A fresh look for ``fingerprint`` right before filing (another sync may have filed it)."""

    def lookup(self, refs: Sequence[str]) -> dict[str, Cited]:
        """The state of each cited issue, in any repository this tracker can read."""

    def create(self, title: str, body: str, labels: Sequence[str]) -> Issue: ...

    def settle(self, issue: Issue) -> Issue:
        """After filing ``issue``: the issue to link. Where a concurrent sync filed the same
        fingerprint first, ``issue`` is closed as its duplicate and the first one returned."""

    def comment(self, issue: Issue, body: str) -> None: ...

    def comments(self, issue: Issue) -> list[str]: ...

    def reopen(self, issue: Issue) -> Issue: ...


def pick(issues: Sequence[Issue]) -> Issue:
    """The issue a finding links to: the oldest open one, else the newest closed one."""
    open_ = sorted((i for i in issues if i.state == "open"), key=lambda i: i.number)
    if open_:
        return open_[0]
    return max(issues, key=lambda i: i.number)


# --- safe bodies --------------------------------------------------------------------------


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
    # keep the hidden markers that end the body: they are how the issue and the runs it
    # already names are found again
    marker = _MARKER_TAIL_RE.search(body)
    tail = "\n" + marker.group(0).strip() if marker else ""
    return body[: limit - len(note) - len(tail) - 10] + note + tail


def safe_body(
    sections: Sequence[tuple[str, str | None, bool]],
    fingerprint: str,
    redactor: Redactor,
    markers: Sequence[str] = (),
) -> str:
    """Assemble a body: (heading, text, is_code) sections, redacted, fenced, then our own
    hidden ``markers`` and last the fingerprint marker."""
    parts = []
    for heading, text, is_code in sections:
        if not text:
            continue
        clean = redactor.text(text)
        parts.append(f"### {heading}\n\n" + (code_block(clean) if is_code else neutralize(clean)))
    parts.append("\n".join([*markers, FINGERPRINT_MARKER.format(fingerprint)]))
    return clip_body("\n\n".join(parts))
