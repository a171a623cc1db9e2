"""Where the embedded ledger lives (#42): the project's state folder, beside the run
history, whatever ``--results`` says.

It lived in the results folder, which people delete before a clean run, and each
``--results`` named another, empty tracker. A ledger found where it used to be (the
configured results folder, or the one a command was given) is moved once, and said so:

- none in the project's state folder yet: moved (a link, else a copy, then the old one
  removed: never a moment when neither holds it);
- one there already: the old one is removed when it holds nothing more than the seed
  file's issues, or exactly what the project's holds (a move cut off before its end);
  the project's is replaced when it holds nothing more than the seed's; when both hold
  issues or comments of their own, nothing is moved and the command is refused, both kept.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

from device_matrix.config import Config, make_state_dir
from device_matrix.errors import TrackerError

LEDGER_FILE = "ledger.sqlite"
Held = tuple[tuple[tuple[object, ...], ...], tuple[tuple[object, ...], ...]]


def _to_stderr(text: str) -> None:
    sys.stderr.write(f"note: {text}\n")


def ledger_file(cfg: Config, *, results: Path | None = None, note: Callable[[str], None] | None = None) -> Path:
    """The project's ledger (it may not exist yet), with a ledger of the configured results
    folder or of ``results`` moved there first (``note`` is told what was moved)."""
    home = cfg.state_dir / LEDGER_FILE
    folders = {str(f.resolve()): f for f in (cfg.results_dir, results) if f is not None}
    for folder in folders.values():
        try:
            said = adopt(folder / LEDGER_FILE, home)
        except TrackerError:
            if (folder / LEDGER_FILE).exists():
                raise
            said = None  # gone meanwhile: another command (a shard of the same run) moved it
        if said is not None:
            (note or _to_stderr)(said)
    return home


def _held(path: Path) -> Held:
    """What a ledger holds beyond its seed: the issues filed in it, and every comment."""
    db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        issues = db.execute("SELECT id, title, body, state, labels FROM issues WHERE seeded = 0 ORDER BY id").fetchall()
        comments = db.execute("SELECT issue_id, body FROM comments ORDER BY rowid").fetchall()
    finally:
        db.close()
    return tuple(map(tuple, issues)), tuple(map(tuple, comments))


def _refused(old: Path, home: Path, why: str) -> TrackerError:
    return TrackerError(
        f"{old} and {home}: {why}; the issue ledger is the project's ({home}), so nothing was moved",
        tip=f"Keep one: move {old} aside (its issues stay readable with sqlite3), or copy the issues a "
        "skip cites into the seed file (device-matrix-issues.toml) first; then run again.",
    )


def adopt(old: Path, home: Path) -> str | None:
    """Move the ledger ``old`` to ``home`` when it is another file; what was done, said."""
    if not old.is_file() or old.resolve() == home.resolve():
        return None
    if home.exists() and old.samefile(home):
        old.unlink()  # a second name of the project's ledger, left by a move cut off before its end
        return None
    cut = [s for s in ("-journal", "-wal") if old.with_name(old.name + s).exists()]
    if cut:
        raise TrackerError(
            f"{old}: a write to it was cut off or is under way ({old.name}{cut[0]} beside it), so it is not "
            f"moved to {home}",
            tip=f"Run again when the other command has ended; a write that was cut off is rolled back by "
            f"opening {old} once (sqlite3 {old} 'SELECT 1').",
        )
    if not home.exists():
        _move(old, home, replace=False)
        return f"the issue ledger moved from {old} to {home}: it is the project's, whatever --results names"
    try:
        theirs, ours = _held(old), _held(home)
    except sqlite3.Error as exc:
        raise _refused(old, home, f"both are there and one cannot be read ({exc})") from None
    if not any(theirs) or theirs == ours:
        old.unlink()
        what = "a copy of it" if any(theirs) else "nothing beyond the seed file's issues"
        return f"removed {old}: it held {what}; the issue ledger is {home}"
    if any(ours):
        raise _refused(old, home, "both hold issues or comments of their own")
    _move(old, home, replace=True)
    return f"the issue ledger moved from {old} to {home} (which held nothing beyond the seed file's issues)"


def _move(old: Path, home: Path, *, replace: bool) -> None:
    """``old`` becomes ``home``: both are there until ``home`` is whole, then ``old`` goes."""
    try:
        make_state_dir(home.parent)
        part = home.with_name(f".{home.name}.moving-{os.getpid()}")
        try:
            try:
                os.link(old, part)
            except OSError:  # another file system, or one without hard links
                shutil.copyfile(old, part)
            if replace:
                part.replace(home)
            else:
                os.link(part, home)  # never over a ledger made meanwhile
        finally:
            part.unlink(missing_ok=True)
        old.unlink()
    except FileExistsError:
        raise _refused(old, home, "the project's ledger was made while this one was moved") from None
    except OSError as exc:
        raise TrackerError(
            f"{old}: cannot move the issue ledger to {home} ({exc.strerror or exc})",
            tip=f"Make {home.parent} writable (or move {old} there by hand), then run again.",
        ) from None
