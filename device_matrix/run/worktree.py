"""What code a run ran: a digest of its commit and working tree, which ``--resume`` compares (#41).

A resume keeps the outcomes of the run it continues: sound only when both ran the same code.
The record's ``source`` names the commit, not the edits on top of it, so each run records a
digest of both (``worktree``): in git, the commit, the diff against it and every untracked
file git does not ignore; outside git, every file of the project. The run's own files (the
results folder, ``__pycache__``, folders whose name starts with a dot) are left out: they
change with every run. None where no digest can be had (git failed, a project too big to
read): a resume then runs the row whole.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from device_matrix.records.source import git

# outside git every file is read: a project past this is not digested (the row runs whole)
MAX_FILES = 20_000
MAX_BYTES = 512 << 20
_CHUNK = 1 << 20


def digest(root: Path, results: Path) -> str | None:
    """The digest of the code under ``root`` (``results`` left out), or None when unknown."""
    top = (git(root, "rev-parse", "--show-toplevel")[0] or "").strip()
    if top:
        return _of_git(Path(top), results)
    return _of_files(root, _walk(root, results))


def _left_out(path: Path, results: Path) -> bool:
    return path == results or results in path.parents or "__pycache__" in path.parts


def _of_git(top: Path, results: Path) -> str | None:
    commit, _ = git(top, "rev-parse", "HEAD")
    diff, _ = git(top, "diff", "HEAD", "--binary", "--no-color", "--no-ext-diff")
    untracked, _ = git(top, "ls-files", "-z", "--others", "--exclude-standard")
    if commit is None or diff is None or untracked is None:
        return None
    resolved = results.resolve()
    files = [top / name for name in untracked.split("\0") if name]
    h = hashlib.sha256(f"git\0{commit.strip()}\0".encode())
    h.update(diff.encode("utf-8", "surrogateescape"))
    rest = _of_files(top, (f for f in files if not _left_out(f.resolve(), resolved)))
    if rest is None:
        return None
    h.update(rest.encode())
    return h.hexdigest()


def _walk(root: Path, results: Path) -> Iterator[Path]:
    resolved = results.resolve()
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and not _left_out((here / d).resolve(), resolved)
            and not (here / d / "pyvenv.cfg").exists()  # a virtual environment is not the project's code
        )
        yield from (here / name for name in sorted(names))


def _of_files(root: Path, files: Iterator[Path] | list[Path]) -> str | None:
    """sha256 of each file's name (under ``root``) and bytes; None past the bounds or unreadable."""
    h = hashlib.sha256(b"files\0")
    count = size = 0
    for path in files:
        count += 1
        if count > MAX_FILES:
            return None
        h.update(f"{path.relative_to(root)}\0".encode("utf-8", "surrogateescape"))
        if not path.is_file():
            h.update(b"other\0")  # a dangling link, a socket, a fifo (never opened): its name counts
            continue
        try:
            with path.open("rb") as fh:
                while chunk := fh.read(_CHUNK):
                    size += len(chunk)
                    if size > MAX_BYTES:
                        return None
                    h.update(chunk)
        except OSError:
            h.update(b"\0unreadable")
        h.update(b"\0")
    return h.hexdigest()
