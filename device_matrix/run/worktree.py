"""What code a run ran: a digest of its commit and working tree, which ``--resume`` compares (#41).

A resume keeps the outcomes of the run it continues: sound only when both ran the same code.
The record's ``source`` names the commit, not the edits on top of it, so each run records a
digest of both (``worktree``): in git, the commit, the diff against it and every untracked
file git does not ignore; outside git, every file of the project. device-matrix's own
folders in the project (:attr:`Config.own_folders`: the results folder, the state folder
``.device-matrix/`` with its ledger, history and reruns) are left out, tracked, ignored or
not: every run and every ``issues`` or ``triage`` command writes there. So are
``__pycache__`` and, outside git, folders whose name starts with a dot and virtual
environments. A folder of device-matrix's that is the project or holds it is not left out
(the project's code would go with it). None where no digest can be had (git failed, a
project too big to read): a resume then runs the row whole.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from device_matrix.records.source import git

# outside git every file is read: a project past this is not digested (the row runs whole)
MAX_FILES = 20_000
MAX_BYTES = 512 << 20
_CHUNK = 1 << 20


def digest(root: Path, left_out: Sequence[Path], *, head: str | None = None) -> str | None:
    """The digest of the code under ``root``, the folders ``left_out`` left out, or None when
    unknown. ``head``: the commit git's HEAD names where the run already asked git (its
    source, #41): asked again here only when not given."""
    top = (git(root, "rev-parse", "--show-toplevel")[0] or "").strip()
    if top:
        return _of_git(Path(top).resolve(), _inside(Path(top), left_out), head)
    return _of_files(root, _walk(root, _inside(root, left_out)))


def _inside(top: Path, folders: Sequence[Path]) -> list[Path]:
    """``folders`` (resolved) that are inside ``top``: one that is it or holds it is not left
    out (the project's code is in it), nor is one elsewhere (nothing of it is read)."""
    here = top.resolve()
    return [f for f in (folder.resolve() for folder in folders) if here in f.parents]


def _left_out(path: Path, folders: Sequence[Path]) -> bool:
    return "__pycache__" in path.parts or any(path == f or f in path.parents for f in folders)


def pathspecs(top: Path, folders: Sequence[Path]) -> list[str]:
    """What git is given to leave ``folders`` (inside ``top``, both resolved) out: the names
    literally, never read as patterns."""
    return ["--", ".", *(f":(exclude,literal){f.relative_to(top)}" for f in folders)]


def _of_git(top: Path, folders: Sequence[Path], head: str | None) -> str | None:
    commit = head or (git(top, "rev-parse", "HEAD")[0] or "").strip()
    if not commit:
        return None  # no commit yet
    # git leaves the folders out, of the diff (a history.sqlite committed by mistake) as of the rest
    specs = pathspecs(top, folders)
    diff, _ = git(top, "diff", commit, "--binary", "--no-color", "--no-ext-diff", *specs)
    untracked, _ = git(top, "ls-files", "-z", "--others", "--exclude-standard", *specs)
    if diff is None or untracked is None:
        return None
    files = [top / name for name in untracked.split("\0") if name]
    h = hashlib.sha256(f"git\0{commit}\0".encode())
    h.update(diff.encode("utf-8", "surrogateescape"))
    rest = _of_files(top, (f for f in files if not _left_out(f, ())))  # __pycache__: git left the folders out
    if rest is None:
        return None
    h.update(rest.encode())
    return h.hexdigest()


def _walk(root: Path, folders: Sequence[Path]) -> Iterator[Path]:
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and not _left_out((here / d).resolve(), folders)
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
