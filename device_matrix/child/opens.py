"""The files a test reads, as the test map records them (#40): which of the repository's files
an ``open``, a listing or a probe of a path (``exists()``) names, and which of the project's
functions did it. Standard library only: bench/selection.py's replay loads this file by its path into the
pytest it replays, which must not import a device_matrix package (the replayed one may be
another version of it)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import sysconfig
import threading
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

# folders inside a project that hold no code of its own
NOT_PROJECT = ("site-packages", "dist-packages", "__pypackages__")
LISTING = frozenset({"os.listdir", "os.scandir"})  # audit events of a folder listed
# a folder listed: ``data/`` for its names (``os.listdir``), ``data//`` for its entries
# (``os.scandir``: each name's type, and ``stat()`` its size and time, which change with its contents)
LISTED_SUFFIX = {"os.listdir": "/", "os.scandir": "//"}
# audit events of a file opened by native code that tells its path (sqlite3 opens its own)
NATIVE_OPENS = frozenset({"sqlite3.connect"})
# audit events of a program started: what it opens the recording cannot see (a forked copy
# of the test's own process, ``os.fork``, is recorded as the test itself)
STARTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.exec", "os.spawn"})
_COMPREHENSIONS = frozenset({"<genexpr>", "<listcomp>", "<setcomp>", "<dictcomp>"})
# the code of the import system, as frames name it (frozen into the interpreter)
_IMPORT_SYSTEM = ("<frozen importlib.", "<frozen zipimport>")
_STDLIB = f"{sysconfig.get_paths()['stdlib']}{os.sep}"
_LINECACHE = f"{_STDLIB}linecache.py"  # the source of code shown (tracebacks, warnings)
_OWN = f"{Path(__file__).resolve().parent.parent}{os.sep}"  # the recording's own code (this package)
# what a probe of a path calls (``exists()``, ``is_file()``, ``os.path.isdir``, ``glob`` of
# a literal name, ``readlink()`` and ``resolve()`` asking a link where it leads): no audit
# event says it, so the recording wraps these of ``os``
PROBES = ("stat", "lstat", "access", "readlink")
PROBE = "probe"  # the event a path asked about is told as
_TELLING = threading.local()  # whether this thread is telling of a read now


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
    inside = f"{root}{os.sep}"
    while frame is not None:
        # a function of the project's, not a generator's (its caller is the function it is in)
        if _project_code(frame.f_code.co_filename, inside) and frame.f_code.co_name not in _COMPREHENSIONS:
            rel = relative(frame.f_code.co_filename, root)
            if rel is not None:
                return rel, frame.f_code
        frame = frame.f_back  # type: ignore[assignment]
    return None


def _project_code(name: str, inside: str) -> bool:
    """Whether a frame's file ``name`` is the project's: under its root (``inside``, with its
    separator: a sibling folder whose name starts the same is not), neither the recording's
    own nor an installed package's."""
    return name.startswith(inside) and not name.startswith(_OWN) and not any(f"/{n}/" in name for n in NOT_PROJECT)


def _nearest(frame: FrameType | None, *past: str) -> FrameType | None:
    """The first frame from ``frame`` up whose file starts with none of ``past``."""
    while frame is not None and frame.f_code.co_filename.startswith(past):
        frame = frame.f_back
    return frame


def marked(rel: str, event: str, *recording: str) -> str:
    """A path read as the map keeps it: a folder listed by ``event`` marked as one
    (:data:`LISTED_SUFFIX`), a file as it is. The entries ``os.scandir`` gives the standard
    library's walkers (``os.walk``, ``glob``, ``pathlib``, ``shutil``) reach their caller as
    names alone: a listing of names. ``recording``: the files of the recording's own code
    besides this package's."""
    if event == "os.scandir" and _by_stdlib(recording):
        event = "os.listdir"
    return f"{rel}{LISTED_SUFFIX.get(event, '')}"


def _by_stdlib(recording: tuple[str, ...]) -> bool:
    """Whether the code nearest on the stack, past the recording's own, is the standard library's."""
    frame = _nearest(sys._getframe(1), _OWN, *recording)
    return frame is not None and frame.f_code.co_filename.startswith((_STDLIB, "<frozen "))


def once(tell: Callable[..., None], *args: Any) -> None:
    """``tell(*args)`` unless this thread is telling of a read now: what telling does (a link
    resolved by ``os.lstat``) is none of what the test reads."""
    if getattr(_TELLING, "now", False):
        return
    _TELLING.now = True
    try:
        tell(*args)
    finally:
        _TELLING.now = False


def wrap_probes(tell: Callable[[Any], None]) -> None:
    """``os.stat``, ``os.lstat``, ``os.access`` and ``os.readlink`` (:data:`PROBES`) wrapped to
    ``tell`` the path each asks about, as an open is told: ``exists()``, ``is_file()``,
    ``os.path.isdir``, ``Path.readlink()`` call them, and no audit event says it. The import
    system calls its own, unwrapped; a path relative to a descriptor (``dir_fd``) is not told."""
    for name in PROBES:
        original = getattr(os, name)

        def probe(path: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if kwargs.get("dir_fd") is None:
                with contextlib.suppress(Exception):  # never the caller's failure
                    once(tell, path)
            return _original(path, *args, **kwargs)

        functools.update_wrapper(probe, original)
        setattr(os, name, probe)
        # what ``os`` says each supports (shutil asks ``os.stat in os.supports_follow_symlinks``)
        for supports in (os.supports_dir_fd, os.supports_fd, os.supports_follow_symlinks, os.supports_effective_ids):
            if original in supports:
                supports.add(probe)


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


def coverage_tracer() -> bool:
    """Whether a line tracer being installed (``sys.settrace``) is coverage's own: coverage's
    code installs it, or threading's start of a thread installs the hook coverage gave it
    (``threading.settrace``). The code nearest past the recording's own says which."""
    frame = _nearest(sys._getframe(1), _OWN)
    if frame is None:
        return False
    if frame.f_code.co_filename == threading.__file__:
        return type(getattr(threading.gettrace(), "__self__", None)).__module__.startswith("coverage")
    name = frame.f_globals.get("__name__")
    return isinstance(name, str) and (name == "coverage" or name.startswith("coverage."))


def read_paths(path: Any, root: Path, maps: Path, top: Path | None = None) -> list[str]:
    """A path opened, listed or asked about, relative to the project root (POSIX; ``../``
    above it): as it was named and, where a link leads elsewhere, where it leads; each one
    of the repository's files (under ``top``, its work tree's top; the root when None), not
    the map's own nor a folder of installed packages or bytecode. A hidden folder's file
    (``.ci/``, ``.github/``) is one: a change git shows may be one a test read."""
    if isinstance(path, int):
        # a descriptor (``os.fwalk``, ``os.scandir(fd)``): the path it names now, where Linux tells it
        try:
            path = Path(f"/proc/self/fd/{path}").readlink()
        except OSError:
            return []
        if not path.is_absolute():
            return []  # a pipe, a socket (``pipe:[4121]``): no file
    try:
        # as named: its links kept (``resolve()`` would follow them)
        named = os.path.abspath(os.fsdecode(path) if path is not None else ".")  # noqa: PTH100
    except (TypeError, ValueError):
        return []
    found: list[str] = []
    for full in dict.fromkeys([named, os.path.realpath(named)]):
        rel = _within(full, root, top or root)
        if rel is None or Path(full).is_relative_to(maps):
            continue
        parts = rel.split("/")
        if rel not in (".", "..") and not any(p in NOT_PROJECT or p == "__pycache__" for p in parts):
            found.append(rel)
    return found


def relative(path: str, root: Path) -> str | None:
    """``path`` relative to the project root, POSIX; None outside it."""
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def _within(full: str, root: Path, top: Path) -> str | None:
    """``full`` (absolute, normalized) relative to ``root`` when it is under ``top``; None outside."""
    if full != str(top) and not full.startswith(f"{top}{os.sep}"):
        return None
    return Path(os.path.relpath(full, root)).as_posix()


def tools_own(found: list[str], event: str, root: Path, *recording: str) -> bool:
    """Whether a read (``found``: its paths, :func:`read_paths`) is a tool's own, no test's:
    coverage's, pytest's question of a path (:func:`by_pytest`), pytest's display of source
    in a report (:func:`shown`), or the import system's
    read of a module's source or listing of a folder to find one (:func:`by_import`), which
    the coverage of what the import ran follows. ``recording``: as :func:`by_pytest`'s."""
    if by_coverage() or (event == PROBE and by_pytest(*recording)) or (event == "open" and shown(*recording)):
        return True
    return (event in LISTING or any(r.endswith((".py", ".pyc")) for r in found)) and by_import(root)


def shown(*recording: str) -> bool:
    """Whether a read is of source pytest shows in a report (#40): linecache's read of the
    file of a frame of a traceback (a failure's, a skip's), with pytest the code nearest past
    the standard library. The lines it shows are of code that ran, which the map follows by
    its lines; the project's own code reading source (``inspect.getsource`` in a test) is
    nearer than any pytest, and still reads. ``recording``: as :func:`by_pytest`'s."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != _LINECACHE:
        frame = frame.f_back  # type: ignore[assignment]
    return frame is not None and by_pytest(*recording)


def by_import(root: Path) -> bool:
    """Whether the import system is the code nearest an open or a listing on the stack, before
    any of the project's (a module's source read to import it, a folder listed to find one,
    pytest's rewrite of a test module's asserts): no test reads those as data. A module's own
    code that reads a file as it is imported is the project's, nearer."""
    frame = sys._getframe(1)
    inside = f"{root}{os.sep}"
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_IMPORT_SYSTEM):
            return True
        if _project_code(name, inside):
            return False
        frame = frame.f_back  # type: ignore[assignment]
    return False


def by_pytest(*recording: str) -> bool:
    """Whether the code nearest a read on the stack, past the standard library's and the
    recording's own, is pytest's (or pluggy's): pytest asking where a test is for its report
    (``item.location``), collecting a test file or a doctest, not what a test reads. A
    plugin's own code (a fixture that checks for a data folder, ``pytest-dotenv`` reading
    ``.env``) is nearer than the pytest that called it, and is no pytest's. ``recording``:
    the files of the recording's own code besides this package's."""
    frame = _nearest(sys._getframe(1), _OWN, _STDLIB, "<frozen ", *recording)
    module = frame.f_globals.get("__name__") if frame is not None else None
    return isinstance(module, str) and module.split(".", 1)[0] in ("_pytest", "pluggy")


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
