"""Atomic writes: a reader sees the old file or the whole new one, never half.

JSON goes through redaction here, value by value before it is encoded
(:meth:`~device_matrix.redact.Redactor.data`): whatever a record holds (a nodeid built from
a parametrize id, an assertion message, a skip reason), no secret of this environment
reaches the disk, and the file parses (#22). Text (XML, Markdown, HTML) is built by its
writer from values redacted so; no rule ever runs over an encoded file.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, TypeVar

from device_matrix.redact import Redactor

_T = TypeVar("_T")


def write_json_atomic(path: Path, data: Any, redactor: Redactor | None = None) -> None:
    """Write JSON, redacted, so a reader sees the old file or the whole new one, never half.

    A temporary file renamed over the target: atomic against the death of this process
    or of a reader's. No fsync: the threat here is a dying row, not a power cut, and an
    fsync per file costs more than the rest of writing the results.
    """
    write_text_atomic(path, redacted_json(data, redactor)[1] + "\n")


def redacted_json(data: _T, redactor: Redactor | None = None) -> tuple[_T, str]:
    """``data`` redacted value by value, and its JSON text (compact: the C encoder; with
    indent= json falls back to pure Python, 10x slower)."""
    redactor = redactor or Redactor()
    text = json.dumps(data, separators=(",", ":"), default=str)
    if redactor.clean_json(text):  # most records hold nothing any rule could match
        return data, text
    clean: _T = redactor.data(json.loads(text))
    return clean, json.dumps(clean, separators=(",", ":"))


def write_text_atomic(path: Path, text: str) -> None:
    """Write text through a temporary file renamed over ``path`` (see :func:`write_json_atomic`).

    ``text`` is written as it is: built from redacted values (records/junit.py, the triage).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
    try:
        # a lone surrogate (a nodeid from a file name that is not UTF-8) is written as its
        # escape: the file stays valid UTF-8, and the record is written at all
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def create_json_atomic(path: Path, data: Any, redactor: Redactor | None = None) -> bool:
    """Write JSON, redacted, only where ``path`` does not exist yet; whether this wrote it.

    Of two processes that both found no file, one writes it whole and the other learns so
    (a link is made, never replaced): the first shard to split a row decides its split (#23).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(redacted_json(data, redactor)[1] + "\n")
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        Path(tmp).unlink(missing_ok=True)
    return True


def _create_beside(path: Path) -> tuple[int, str]:
    """A new temporary file beside ``path``, with the mode the umask gives a new file.

    Not ``mkstemp``: its 0600 would make every results file private whatever the umask,
    unreadable to an artifact upload run as another user or a colleague's triage (#20).
    """
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666), str(tmp)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def storable_text(text: str) -> str:
    """``text`` as UTF-8 takes it: a lone surrogate (a nodeid from a file name that is not
    UTF-8) becomes its escape, as in every file written here. For stores that refuse
    anything else, such as SQLite; keys are made with it on both sides of a lookup."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
