"""The journal writer shared by the pytest plugin and the script launcher."""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Any

# the journal's descriptor is moved this high, out of the range a test's own files get
JOURNAL_FD_MIN = 1000


# one encoder for every event: json.dumps with options builds a new one each call
_ENCODE = json.JSONEncoder(default=str, separators=(",", ":")).encode


class JournalWriter:
    """Events into the runner's FIFO, one ``os.write`` each, numbered 1, 2, 3...

    The FIFO's name is removed once it is open: a test cannot find it, truncate it or
    delete it. A write that fails (the runner is gone, a test closed the descriptor)
    ends the journal; the runner reads a journal without its ``end`` as a death.
    """

    def __init__(self, path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            self._fd = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, JOURNAL_FD_MIN)
        except OSError:
            self._fd = os.dup(fd)
        finally:
            os.close(fd)
        if stat.S_ISFIFO(os.fstat(self._fd).st_mode):
            try:
                path.unlink()
            except OSError:
                pass
        self._n = 0

    def write(self, event: str, **fields: Any) -> None:
        if self._fd < 0:
            return
        self._n += 1
        data = (_ENCODE({"e": event, "n": self._n, **fields}) + "\n").encode()
        try:
            os.write(self._fd, data)
        except OSError:
            self._fd = -1

    def close(self) -> None:
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1
