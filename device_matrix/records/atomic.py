"""Atomic writes: a reader sees the old file or the whole new one, never half."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so a reader sees the old file or the whole new one, never half.

    A temporary file renamed over the target: atomic against the death of this process
    or of a reader's. No fsync: the threat here is a dying row, not a power cut, and an
    fsync per file costs more than the rest of writing the results.
    """
    # compact: the C encoder; with indent= json falls back to pure Python (10x slower)
    write_text_atomic(path, json.dumps(data, separators=(",", ":"), default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write text through a temporary file renamed over ``path`` (see write_json_atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
