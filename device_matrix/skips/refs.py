"""Issue references: in markers (``issue=``) and inside free text (a skip message)."""

from __future__ import annotations

import re

ISSUE_URL_RE = re.compile(r"https?://[^\s/]+/([\w.-]+)/([\w.-]+)/(?:issues|pull)/(\d+)")
ISSUE_REF_RE = re.compile(r"^(?:([\w.-]+/[\w.-]+))?#(\d+)$")
LEDGER_REF_RE = re.compile(r"^ledger:(\d+)$")
TEXT_REF_RE = re.compile(r"(?<![\w./-])([A-Za-z0-9][\w.-]*)/([\w.-]+)#(\d+)\b")


def normalize_issue(ref: str | None) -> str | None:
    """Return a canonical issue reference, or None when ``ref`` names no issue.

    Canonical forms: ``owner/name#N`` (GitHub, full URL or owner/name#N given), ``#N``
    (GitHub, repository from the tracker config) and ``ledger:N``.
    """
    if not ref:
        return None
    text = ref.strip()
    m = ISSUE_URL_RE.search(text)
    if m:
        return f"{m.group(1)}/{m.group(2)}#{m.group(3)}"
    m = ISSUE_REF_RE.match(text)
    if m:
        return f"{m.group(1)}#{m.group(2)}" if m.group(1) else f"#{m.group(2)}"
    m = LEDGER_REF_RE.match(text)
    if m:
        return f"ledger:{int(m.group(1))}"
    return None


def find_issue_in_text(text: str | None) -> str | None:
    """An issue cited inside free text (a unittest skip message): URL first, then ledger:N,
    then ``owner/name#N``.

    The run-time recorder and the static scan both use this, so a message cites an issue
    for ``skips check`` exactly when it does in run.json.
    """
    if not text:
        return None
    m = ISSUE_URL_RE.search(text)
    if m:
        return f"{m.group(1)}/{m.group(2)}#{m.group(3)}"
    m = re.search(r"\bledger:(\d+)\b", text)
    if m:
        return f"ledger:{int(m.group(1))}"
    # GitHub's own short form in prose: "pytorch/pytorch#91199" (#24)
    m = TEXT_REF_RE.search(text)
    if m:
        return f"{m.group(1)}/{m.group(2)}#{m.group(3)}"
    return None
