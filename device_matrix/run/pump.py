"""Copy a child's output into the run log, redacted, and note where each test began.

The child writes into a pipe; this thread reads it, removes the plugin's start markers
(``\\x1edm:<seq>\\x1f``, written with one ``os.write`` right before each test), redacts
every line, and appends to the log. So no secret reaches the disk, and the log offset
of each test's first byte is exact even when the process dies a moment later.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from device_matrix.redact import Redactor

MARKER_RE = re.compile(rb"\x1edm:(\d+)\x1f")
MARKER_START = b"\x1edm:"
READ_SIZE = 65536
MAX_LINE = 1 << 20  # a line longer than this is written in pieces (redaction per piece)


def marker(seq: int) -> bytes:
    return b"\x1edm:%d\x1f" % seq


class OutputPump:
    def __init__(self, read_fd: int, log_path: Path, redactor: Redactor) -> None:
        self.fd = read_fd
        self.log = log_path.open("ab")
        self.redactor = redactor
        self.offsets: dict[int, int] = {}
        self.start = self.log.tell()
        self._pending = b""
        self._thread = threading.Thread(target=self._run, name="device-matrix-output", daemon=True)
        self._stop = False

    def begin(self) -> None:
        self._thread.start()

    def _emit(self, data: bytes) -> None:
        if not data:
            return
        text = data.decode("utf-8", "replace")
        self.log.write(self.redactor.text(text).encode("utf-8"))

    def _feed(self, chunk: bytes, final: bool = False) -> None:
        buf = self._pending + chunk
        pos = 0
        while True:
            m = MARKER_RE.search(buf, pos)
            if m is None:
                break
            self._emit(buf[pos : m.start()])
            self.log.flush()
            self.offsets[int(m.group(1))] = self.log.tell()
            pos = m.end()
        rest = buf[pos:]
        if final:
            self._emit(rest)
            self._pending = b""
            return
        # keep a possible half marker and the last partial line for the next read
        cut = rest.rfind(MARKER_START)
        keep_from = cut if cut != -1 else len(rest)
        nl = rest.rfind(b"\n", 0, keep_from)
        if nl == -1 and keep_from == len(rest) and len(rest) > MAX_LINE:
            nl = len(rest) - 1
        self._emit(rest[: nl + 1])
        self._pending = rest[nl + 1 :]

    def _run(self) -> None:
        try:
            while not self._stop:
                chunk = os.read(self.fd, READ_SIZE)
                if not chunk:
                    break
                self._feed(chunk)
                self.log.flush()
        except OSError:
            pass
        finally:
            self._feed(b"", final=True)
            self.log.flush()

    def finish(self, timeout: float = 5.0) -> None:
        """Wait for the pipe to drain (every writer gone), at most ``timeout`` seconds."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            # a grandchild still holds the pipe open: stop reading, keep what we have
            self._stop = True
            try:
                os.close(self.fd)
            except OSError:
                pass
            self._thread.join(1.0)
        else:
            try:
                os.close(self.fd)
            except OSError:
                pass
        self.log.close()
