"""The temp folder of a task on a Ray node goes in every ending of the task (#23).

A task's own ``finally`` removes its folder when the task returns or raises; when its
worker is killed (the task cancelled, a test that kills it, the node's raylet lost) no
``finally`` runs, and Ray ends the worker's children with it. This small process, started
by the task in a session of its own and at once no child of the worker's (it forks and its
first process exits; the worker is no subreaper, so init adopts it), waits
for the worker to go, then for the process the task ran (``FOLDER/.child``: it gets
SIGTERM when its worker dies, and writes what it knows), marks ``FOLDER/.ended``, gives the
driver ``hold`` seconds to fetch what is there, and removes the folder. It stops at once
when the folder is gone: the task removed it itself.

    python -m device_matrix.spread.janitor WORKER_PID FOLDER [HOLD]

Standard library only: it starts in milliseconds and needs nothing of the project.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from pathlib import Path

POLL = 0.2
CHILD_GRACE = 60.0  # seconds the task's process has to end after its worker went, before SIGKILL
ENDED = ".ended"
CHILD = ".child"


def _start(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks after boot); None when there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    if fields[0] == "Z":
        return None  # a zombie is gone: it only waits to be reaped
    return int(fields[19])


def _alive(pid: int, start: int | None) -> bool:
    return start is not None and _start(pid) == start


def watch(worker: int, folder: Path, hold: float, *, poll: float = POLL) -> None:
    worker_start = _start(worker)
    while folder.exists() and _alive(worker, worker_start):
        time.sleep(poll)
    if not folder.exists():
        return
    child, child_start = 0, None
    try:
        child = int((folder / CHILD).read_text().strip())
        child_start = _start(child)
    except (OSError, ValueError):
        pass
    end = time.monotonic() + CHILD_GRACE
    while _alive(child, child_start) and time.monotonic() < end:
        time.sleep(poll)
    if _alive(child, child_start):
        try:
            os.killpg(child, signal.SIGKILL)  # the task's process leads a session of its own
        except (ProcessLookupError, PermissionError):
            pass
    try:
        (folder / ENDED).write_text("")
    except OSError:
        return  # the folder went meanwhile
    end = time.monotonic() + hold
    while folder.exists() and time.monotonic() < end:
        time.sleep(poll)
    shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    worker, folder = int(argv[0]), Path(argv[1])
    hold = float(argv[2]) if len(argv) > 2 else 120.0
    # not a child of the worker any more: Ray ends a worker's children with it
    if os.fork() > 0:
        return 0
    watch(worker, folder, hold)
    return 0


if __name__ == "__main__":  # pragma: no cover - run as its own process by device_matrix.spread.ray
    sys.exit(main(sys.argv[1:]))
