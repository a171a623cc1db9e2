"""The files a test opens, as the test map records them (#40): which of the project's files
that are not Python an ``open`` or a listing names, and which of the project's functions did
it. Standard library only: bench/selection.py's replay loads this file by its path into the
pytest it replays, which must not import a device_matrix package (the replayed one may be
another version of it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

# folders inside a project that hold no code of its own
NOT_PROJECT = ("site-packages", "dist-packages", "__pypackages__")
LISTING = frozenset({"os.listdir", "os.scandir"})  # audit events of a folder listed
_COMPREHENSIONS = frozenset({"<genexpr>", "<listcomp>", "<setcomp>", "<dictcomp>"})


def opener(root: Path) -> str | None:
    """The project's code on the stack that is nearest the open (a conftest's, a module's,
    a test's), as "path:first line" of its function's code, "" when it is a module's own
    code (at its import); None when no code of the project is on it."""
    frame = sys._getframe(1)
    own = str(Path(__file__).resolve().parent.parent)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(str(root)) and not name.startswith(own) and not any(f"/{n}/" in name for n in NOT_PROJECT):
            code = frame.f_code
            if code.co_name not in _COMPREHENSIONS:  # a generator's caller is the function it is in
                rel = relative(name, root)
                return "" if rel is None or code.co_name == "<module>" else f"{rel}:{code.co_firstlineno}"
        frame = frame.f_back  # type: ignore[assignment]
    return None


def read_path(path: Any, root: Path, maps: Path) -> str | None:
    """A path opened or listed, relative to the project root, when it is one of the project's
    files that are not Python (None: outside it, its own code, a hidden folder, the map's)."""
    if isinstance(path, int):
        return None  # a descriptor: its path was seen when it was opened
    try:
        full = Path(os.fsdecode(path) if path is not None else ".").absolute()
    except (TypeError, ValueError):
        return None
    rel = relative(str(full), root)
    if rel is None or full.is_relative_to(maps) or full.suffix in (".py", ".pyc"):
        return None
    parts = rel.split("/")
    if rel == "." or any(p.startswith(".") or p in NOT_PROJECT or p == "__pycache__" for p in parts):
        return None
    return rel


def relative(path: str, root: Path) -> str | None:
    """``path`` relative to the project root, POSIX; None outside it."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None
