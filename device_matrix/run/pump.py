"""Copy a child's output into the run log, redacted, and note where each test began.

The child writes into a pipe; this thread reads it, removes the plugin's start markers
(``\\x1edm:<seq>\\x1f``, written with one ``os.write`` right before each test), redacts
every line, and appends to the log. So no secret reaches the disk, and the log offset
of each test's first byte is exact even when the process dies a moment later.

The pipe is always drained, whatever happens to the log: a log that cannot be written
(a full disk) or that reached ``max_bytes`` must never block the child, which would
then look hung. What could not be written is counted and said at the end of the log.

Nothing is written that a later read could complete into a secret (#22): a line is
written whole (a long one cut where no secret spans, with room after the cut to see one
end), a private key block whose end has not come yet waits for it, and the output of a
child in an environment of its own waits until it has named its secrets (``hold``).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from pathlib import Path
from typing import BinaryIO

from device_matrix.redact import Redactor, unterminated_block
from device_matrix.wire import MARKER_RE, MARKER_START

READ_SIZE = 65536
# A read shorter than this means the writer trickles (a test at a time); the reader then
# waits a moment, so that its next read takes many writes at once, not a wake-up and a
# turn of the GIL each, which the child pays for in time on a machine of two cores
SMALL_READ = 4096
BATCH_WAIT = 0.005  # seconds
MAX_LINE = 1 << 20  # a longer line is written in pieces (split where no secret spans)
SPLIT_WINDOW = 4096  # bytes each side of a cut searched for a secret: a cut waits for them all
MAX_HOLD = 4 << 20  # bytes held back for a secret's end (a key block, a child's secrets); then written
TAIL_KEEP = 256 << 10  # after the cap, the last bytes kept for the end of the log


class OutputPump:
    def __init__(
        self,
        read_fd: int,
        log_path: Path,
        redactor: Redactor,
        *,
        max_bytes: int | None = None,
        hold: threading.Event | None = None,
    ) -> None:
        self.fd = read_fd
        self.log: BinaryIO = log_path.open("ab")
        self.redactor = redactor
        self.offsets: dict[int, int] = {}
        self.start = self.log.tell()
        self.max_bytes = max_bytes
        self.error: OSError | None = None  # the first write error (ENOSPC, EFBIG, EIO)
        self.cut = 0  # bytes of output not in the log (over the cap)
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self._written = 0
        self._pending = b""
        self._hold = hold  # set: the child named its secrets (see attempt._JournalReader)
        self._held: list[bytes] = []
        self._held_size = 0
        self._thread = threading.Thread(target=self._run, name="device-matrix-output", daemon=True)
        self._stop = False

    def begin(self) -> None:
        self._thread.start()

    def position(self) -> int:
        """The log offset the next byte goes to (the tail's place once over the cap)."""
        return self.start + self._written

    def _write(self, data: bytes) -> None:
        if self.error is not None:
            return
        try:
            self.log.write(data)
            self.log.flush()
        except OSError as exc:
            self.error = exc
            return
        self._written += len(data)

    def _emit(self, data: bytes) -> None:
        if not data:
            return
        if self._hold is not None:
            if not self._hold.is_set() and self._held_size + len(data) <= MAX_HOLD:
                self._held.append(data)
                self._held_size += len(data)
                return
            self._release()
        out = self.redactor.text(data.decode("utf-8", "replace")).encode("utf-8")
        if self.max_bytes is not None and self._written + len(out) > self.max_bytes:
            if not self.cut:
                # what fits, up to a line end; then only a tail, written with a note at the end
                room = out.rfind(b"\n", 0, max(0, self.max_bytes - self._written)) + 1
                self._write(out[:room])
                out = out[room:]
            self.cut += len(out)
            self._tail.append(out)
            self._tail_size += len(out)
            while self._tail_size - len(self._tail[0]) >= TAIL_KEEP:
                self._tail_size -= len(self._tail.popleft())
            return
        self._write(out)

    def _release(self) -> None:
        """Write what waited for the child's secrets, redacted with what is known now."""
        self._hold = None
        held, self._held, self._held_size = b"".join(self._held), [], 0
        self._emit(held)

    def _split_point(self, rest: bytes) -> int:
        """Where to cut a line longer than MAX_LINE: never inside a secret."""
        cut = MAX_LINE
        window_from = max(0, cut - SPLIT_WINDOW)
        spans = self.redactor.spans(rest[window_from : cut + SPLIT_WINDOW].decode("utf-8", "replace"))
        for start, end in reversed(spans):  # latest first: a cut moved back is checked again
            # spans are character offsets of a decoded window; bytes and chars agree
            # for the ASCII a token is made of, and a cut earlier than needed is harmless
            if window_from + start < cut < window_from + end:
                cut = window_from + start
        return max(cut, 1)

    def _feed(self, chunk: bytes, final: bool = False) -> None:
        buf = self._pending + chunk
        pos = 0
        while True:
            m = MARKER_RE.search(buf, pos)
            if m is None:
                break
            self._emit(buf[pos : m.start()])
            if self._hold is not None:
                self._release()  # a test starts: its offset is a place in the log as written
            self.offsets[int(m.group(1))] = self.position()
            pos = m.end()
        rest = buf[pos:]
        if final:
            self._emit(rest)
            if self._hold is not None:
                self._release()
            self._pending = b""
            return
        # keep a possible half marker and the last partial line for the next read; the
        # marker's start followed by anything but digits is output (kept, it would be
        # rescanned on every read)
        cut = rest.rfind(MARKER_START)
        if cut != -1 and not rest[cut + len(MARKER_START) :].isdigit() and cut + len(MARKER_START) != len(rest):
            cut = -1
        keep_from = cut if cut != -1 else len(rest)
        nl = rest.rfind(b"\n", 0, keep_from)
        if nl == -1 and keep_from == len(rest) and len(rest) >= MAX_LINE + SPLIT_WINDOW:
            nl = self._split_point(rest) - 1
        block = unterminated_block(rest[: nl + 1])
        if block is not None and len(rest) - block <= MAX_HOLD:
            nl = block - 1  # a private key whose end is still to come: written with its end
        self._emit(rest[: nl + 1])
        self._pending = rest[nl + 1 :]

    def _run(self) -> None:
        try:
            while not self._stop:
                chunk = os.read(self.fd, READ_SIZE)
                if not chunk:
                    break
                self._feed(chunk)
                if len(chunk) < SMALL_READ:
                    time.sleep(BATCH_WAIT)  # a chatty child gets full reads and no wait
        except OSError:
            pass
        finally:
            self._feed(b"", final=True)

    def finish(self, timeout: float = 5.0) -> None:
        """Wait for the pipe to drain (every writer gone), at most ``timeout`` seconds."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        if self._thread.is_alive():
            # something still holds the pipe open: stop reading, keep what we have
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
        if self.cut:
            tail = b"".join(self._tail)
            note = (
                f"\n[device-matrix: output over the {self.max_bytes} byte cap of this log: "
                f"{self.cut - len(tail)} bytes left out; its last {len(tail)} bytes follow]\n"
            )
            self._write(note.encode() + tail)
        try:
            self.log.close()
        except OSError as exc:
            self.error = self.error or exc
