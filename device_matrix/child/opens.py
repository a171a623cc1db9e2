"""The files a test opens, as the test map records them (#40): which of the project's files
that are not Python an ``open`` or a listing names, and which of the project's functions did
it. Standard library only: bench/selection.py's replay loads this file by its path into the
pytest it replays, which must not import a device_matrix package (the replayed one may be
another version of it)."""

from __future__ import annotations

import os
import sys
import urllib.parse
from pathlib import Path
from types import CodeType
from typing import Any

# folders inside a project that hold no code of its own
NOT_PROJECT = ("site-packages", "dist-packages", "__pypackages__")
LISTING = frozenset({"os.listdir", "os.scandir"})  # audit events of a folder listed
# audit events of a file opened by native code that tells its path (sqlite3 opens its own)
NATIVE_OPENS = frozenset({"sqlite3.connect"})
# audit events of a program started: what it opens the recording cannot see (a forked copy
# of the test's own process, ``os.fork``, is recorded as the test itself)
STARTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn"})
_COMPREHENSIONS = frozenset({"<genexpr>", "<listcomp>", "<setcomp>", "<dictcomp>"})


def opener(root: Path) -> str | None:
    """The project's code on the stack that is nearest the open (a conftest's, a module's,
    a test's), as "path:first line" of its function's code, "" when it is a module's own
    code (at its import); None when no code of the project is on it."""
    found = opener_code(root)
    return named(*found) if found is not None else None


def named(rel: str, code: CodeType) -> str:
    """A function of the project's file ``rel`` as "path:first line" of its code; "" for a
    module's own code."""
    return "" if code.co_name == "<module>" else f"{rel}:{code.co_firstlineno}"


def opener_code(root: Path) -> tuple[str, CodeType] | None:
    """:func:`opener`'s code and its file, relative to the project root (None: no code of the
    project is on the stack)."""
    frame = sys._getframe(1)
    inside, own = f"{root}{os.sep}", f"{Path(__file__).resolve().parent.parent}{os.sep}"
    while frame is not None:
        name = frame.f_code.co_filename
        # a function of the project's (a sibling folder whose name starts the same is not),
        # not a generator's (its caller is the function it is in)
        mine = name.startswith(inside) and not name.startswith(own) and frame.f_code.co_name not in _COMPREHENSIONS
        if mine and not any(f"/{n}/" in name for n in NOT_PROJECT):
            rel = relative(name, root)
            if rel is not None:
                return rel, frame.f_code
        frame = frame.f_back  # type: ignore[assignment]
    return None


def by_coverage() -> bool:
    """Whether coverage.py's own code is on the stack: the recording's (a forked copy's
    coverage lists the source folders as it saves at its end), no test's."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__")
        if isinstance(name, str) and (name == "coverage" or name.startswith("coverage.")):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


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


def native_path(database: Any) -> Any:
    """The file a native open names: sqlite3's database, a path or a ``file:`` URI (its query
    and its host left out); None for one in memory."""
    if isinstance(database, bytes):
        database = os.fsdecode(database)
    if not isinstance(database, str):
        return database
    if database in ("", ":memory:") or database.startswith("file::memory:"):
        return None
    if database.startswith("file:"):
        parsed = urllib.parse.urlsplit(database)
        database = urllib.parse.unquote(parsed.path)
        if "memory" in urllib.parse.parse_qs(parsed.query).get("mode", ()):
            return None
    return database


def started(event: str, args: tuple[Any, ...]) -> str:
    """What an audit event of :data:`STARTS` started, as a short command line."""
    if event == "os.system":
        command: Any = args[0] if args else ""
    else:
        # Popen: (executable, args, cwd, env); posix_spawn and exec: (path, argv, env); spawn: (mode, path, args, env)
        command = args[2] if event == "os.spawn" and len(args) > 2 else args[1] if len(args) > 1 else ""
        command = command if command is not None else args[0]
    if isinstance(command, (list, tuple)):
        command = " ".join(os.fsdecode(c) if isinstance(c, (str, bytes, os.PathLike)) else str(c) for c in command)
    elif isinstance(command, (bytes, os.PathLike)):
        command = os.fsdecode(command)
    text = " ".join(str(command).split())
    return text if len(text) <= 80 else text[:77] + "..."
