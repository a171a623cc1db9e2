"""Markdown text made inert, for the issue tracker's bodies and the reports alike (#31: a
rule of the text both write, below both).

Outside code, an ``@name`` would notify a person, ``#12`` link another issue and ``<!--``
open a comment that hides the rest of a page: each is broken with a character a reader
does not see, or escaped.
"""

from __future__ import annotations

import re

_MENTION_RE = re.compile(r"(?<![\w`])@(?=[A-Za-z0-9])")
_ISSUE_LINK_RE = re.compile(r"(?<![\w&])#(?=\d)")


def neutralize(text: str) -> str:
    """Stop @mentions, #N cross-links and hidden HTML comments outside code blocks."""
    text = _MENTION_RE.sub("@\u200b", text)
    text = text.replace("<!--", "&lt;!--")
    return _ISSUE_LINK_RE.sub("#\u200b", text)
