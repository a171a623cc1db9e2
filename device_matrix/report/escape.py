"""Run text (nodeids, messages, reasons, row and branch names) as every report writes it:
inert in Markdown (:func:`cell`, :func:`code`) and in HTML (:func:`html_text`).

In one place so the views of each report (the tables, the verdicts) escape it alike.
"""

from __future__ import annotations

import re
from html import escape

from device_matrix.markup import neutralize


def html_text(text: object) -> str:
    """Text in HTML, an attribute's value included: nothing in it is markup."""
    return escape(str(text if text is not None else ""), quote=True)


def cell(text: str | None) -> str:
    """Run text outside code: one line, no table break, no HTML, no code span, no @mention or #N link."""
    flat = (text or "").replace("\r", " ").replace("\n", " ").replace("\\", "\\\\").replace("`", "\\`")
    return neutralize(flat.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;"))


def code(text: str, *, in_table: bool = False) -> str:
    """A code span that no backtick inside ``text`` can close.

    CommonMark: a span opened by N backticks ends only at a run of exactly N, so the fence
    is one longer than the longest run inside; a space pads content that starts or ends
    with a backtick. Inside a table a pipe ends the cell even in code, so it is escaped.
    """
    flat = " ".join(text.split())
    if not flat:
        return "(empty)"
    longest = max((len(m) for m in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat[0] == "`" or flat[-1] == "`" else ""
    span = f"{fence}{pad}{flat}{pad}{fence}"
    return span.replace("|", "\\|") if in_table else span
