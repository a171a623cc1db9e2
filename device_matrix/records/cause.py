"""The cause of a failure, read from its report's text when the child did not say (#20).

The pytest plugin journals each failure's exception line(s) and place. A test that ran
elsewhere has only its report's text: a unittest file run as a script (a Python
traceback), a record written before causes were recorded (pytest's ``E`` lines), a row
whose ``--tb`` style shows neither. What a reader needs first is the exception, not the
first line of the traceback (``def test_x():``).
"""

from __future__ import annotations

import re

CAUSE_LIMIT = 4000  # characters of a cause kept: an assertion's diff, not a megabyte of repr
CAUSE_LINES = 40

_E_LINE = re.compile(r"^E(?: |$)")
_TRACEBACK = "Traceback (most recent call last):"
# `File "/p/tests/test_x.py", line 12, in test_x` (Python) and `tests/test_x.py:12: in test_x`
# or `tests/test_x.py:12: AssertionError` (pytest's long and short styles)
_PLACES = (
    re.compile(r'File "(?P<path>[^"\n]+)", line (?P<line>\d+)'),
    re.compile(r"^(?P<path>[^\s:][^:\n]*):(?P<line>\d+):(?: |$)", re.M),
)


def clip(text: str) -> str:
    lines = text.splitlines()
    if len(lines) > CAUSE_LINES:
        lines = [*lines[:CAUSE_LINES], f"... ({len(lines) - CAUSE_LINES} more lines)"]
    kept = "\n".join(lines)
    return kept if len(kept) <= CAUSE_LIMIT else kept[:CAUSE_LIMIT] + "..."


def cause_from_text(text: str | None) -> str | None:
    """The exception line(s) in a report's text: pytest's last ``E`` block, else the end of
    the last Python traceback, else the first line that says anything."""
    if not text or not text.strip():
        return None
    lines = text.splitlines()
    blocks: list[list[str]] = []
    previous = False
    for line in lines:
        here = bool(_E_LINE.match(line))
        if here:
            if not previous:
                blocks.append([])
            blocks[-1].append(line[1:])
        previous = here
    if blocks:
        block = blocks[-1]
        indent = min((len(x) - len(x.lstrip()) for x in block if x.strip()), default=0)
        return clip("\n".join(x[indent:] for x in block).strip("\n"))
    if _TRACEBACK in lines:
        last = len(lines) - 1 - lines[::-1].index(_TRACEBACK)
        tail = [x for x in lines[last + 1 :] if x.strip()]
        # the frames and their source lines are indented; the exception is not
        exception = [x for x in tail if not x.startswith(" ")]
        if exception:
            return clip("\n".join(exception))
    first = next(line.strip() for line in lines if line.strip())
    return clip(first)


def line_in_file(text: str | None, file: str) -> int | None:
    """The deepest line of ``file`` (relative to the project root) that ``text`` names."""
    if not text:
        return None
    found: list[tuple[int, int]] = []
    for pattern in _PLACES:
        for m in pattern.finditer(text):
            path = m.group("path").replace("\\", "/")
            if path == file or path.endswith("/" + file):
                found.append((m.start(), int(m.group("line"))))
    return max(found)[1] if found else None
