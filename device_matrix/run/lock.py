"""One run per results folder and row at a time: the row's lock.

The lock is an ``flock`` on ``<folder>/.lock``, which holds the pid of the run that
took it, so a second run is told who holds the folder. A test may delete the folder
while the run goes on: :meth:`RowLock.held` tells, and the run takes the lock again.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from device_matrix.errors import EnvironmentProblem

LOCK_FILE = ".lock"


class RowLock:
    """One run per results folder and row at a time; the second is told who holds it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / LOCK_FILE
        self.fd = -1

    def take(self) -> None:
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise EnvironmentProblem(
                f"results folder {self.folder}: {exc.strerror or exc}",
                tip="Make the results folder writable, or pick another one with --results.",
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise EnvironmentProblem(
                f"{self.folder} is in use by another device-matrix run (pid {holder})",
                tip="Wait for that run to end, or give this one another --results folder.",
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.release()
        self.fd = fd

    def held(self) -> bool:
        """Whether the lock file is still the one this run holds (a test may delete it)."""
        return self.fd >= 0 and identity(self.path) == identity_fd(self.fd)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@contextlib.contextmanager
def row_lock(folder: Path) -> Iterator[RowLock]:
    """``folder``'s lock, held for the block."""
    lock = RowLock(folder)
    lock.take()
    try:
        yield lock
    finally:
        lock.release()


def identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of ``path``, None when it is gone: a folder deleted and made again differs."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def identity_fd(fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino
