"""What the pytest plugin and the script launcher share: the journal writer, the
faulthandler file, and journaled directory changes."""

from __future__ import annotations

import ctypes
import faulthandler
import fcntl
import json
import os
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from device_matrix.wanted import escape_ident, escape_nodeids

# the journal's descriptor is moved this high, out of the range a test's own files get
JOURNAL_FD_MIN = 1000


# one encoder for every event: json.dumps with options builds a new one each call
_ENCODE = json.JSONEncoder(default=str, separators=(",", ":")).encode
# a JSON string literal, quotes included, as the encoder writes it (ASCII, escaped)
_string: Callable[[str], str] = json.encoder.encode_basestring_ascii


# what a forked copy of the test process says on fd 2 as it is ended (the runner reads it)
FORKED_COPY_NOTE = (
    "device-matrix: a process forked by {nodeid} returned into the test runner instead of ending "
    "with os._exit(); it was ended before it could run other tests"
)
FORKED_COPY_EXIT = 1
# the name in the note when no test runs but a module is imported (a fork at import time)
FORKED_AT_IMPORT = "{nodeid} (while imported)"


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
        self._held = b""
        self.importing = ""  # the module (or directory) being collected: what a fork at import names
        self._copy_note: bytes | None = None  # set in a forked copy: see end_forked_copies

    def write(self, event: str, **fields: Any) -> None:
        if self._fd < 0:
            self._closed(event)
            return
        self._n += 1
        self._send((_ENCODE({"e": event, "n": self._n, **escape_nodeids(fields)}) + "\n").encode())

    # The events of every test, formatted by hand: the general encoder costs about five
    # times as much, paid several times per test (bench/overhead.py).

    def start(self, nodeid: str, t: float, meta: dict[str, Any], seq: int, loc: tuple[str, int | None]) -> None:
        if self._fd < 0:
            self._closed("start")
            return
        self._n += 1
        line = "null" if loc[1] is None else str(int(loc[1]))
        body = _ENCODE(meta) if meta else "{}"
        self._send(
            f'{{"e":"start","n":{self._n},"nodeid":{_string(escape_ident(nodeid))},"t":{t!r},"meta":{body},'
            f'"seq":{seq},"loc":[{_string(loc[0])},{line}]}}\n'.encode()
        )

    def finish(self, nodeid: str, t: float) -> None:
        if self._fd < 0:
            self._closed("finish")
            return
        self._n += 1
        self._send(f'{{"e":"finish","n":{self._n},"nodeid":{_string(escape_ident(nodeid))},"t":{t!r}}}\n'.encode())

    def passed(self, when: str, duration: float, *, hold: bool = False) -> None:
        """A phase of the running test passed with nothing to report: the common case, short.

        ``hold`` keeps the event for the next write (one system call for both): only for
        a point where no test code runs before that write.
        """
        if self._fd < 0:
            self._closed("pass")
            return
        self._n += 1
        data = b'{"e":"pass","n":%d,"when":"%s","duration":%.6f}\n' % (self._n, when.encode(), duration)
        if hold:
            self._held += data
        else:
            self._send(data)

    def _send(self, data: bytes) -> None:
        if self._held:
            data, self._held = self._held + data, b""
        try:
            os.write(self._fd, data)
        except OSError:
            self._fd = -1

    def _closed(self, event: str) -> None:
        """An event after the journal closed: dropped; in a forked copy, the copy's end."""
        if self._copy_note is None or event == "cwd":
            return
        try:
            os.write(2, self._copy_note)
        except OSError:
            pass
        os._exit(FORKED_COPY_EXIT)

    @property
    def in_copy(self) -> bool:
        """Whether this process is a forked copy of the one that writes the journal."""
        return self._copy_note is not None

    def become_copy(self, note: str) -> None:
        """In a forked copy: close the journal here; the next event ends the process."""
        fd, self._fd, self._held = self._fd, -1, b""
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        self._copy_note = note.encode("utf-8", "replace")

    def close(self) -> None:
        if self._held and self._fd >= 0:
            self._send(b"")
        if self._fd >= 0:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = -1


def _pytest_current() -> str | None:
    # "nodeid (call)", as pytest sets it while a test runs
    return os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0] or None


def end_forked_copies(journal: JournalWriter, running: Callable[[], str | None] = _pytest_current) -> None:
    """A copy of this process made by ``os.fork()`` never writes ``journal``.

    A test that forks and whose copy returns from the test (no ``os._exit()``) would run
    the rest of the session a second time, with the same journal: its events would break
    the real process's record. In the copy the journal's descriptor is closed at once (a
    long-lived fork does not hold the runner's reader open either), and its next event,
    that is its next pytest hook, ends it with a note naming the test that forked. A
    directory change (``multiprocessing`` work in a fork) is only not journaled. Nothing
    runs in the process that writes the journal: the cost per event is nil. ``running``
    names the test that forked (pytest's own variable by default).
    """

    def in_the_copy() -> None:
        current = running()
        if not current and journal.importing:
            current = FORKED_AT_IMPORT.format(nodeid=journal.importing)
        journal.become_copy(FORKED_COPY_NOTE.format(nodeid=current or "no running test") + "\n")

    os.register_at_fork(after_in_child=in_the_copy)


def follow_chdir(journal: JournalWriter) -> None:
    """Journal every directory change: a core file lands where the process was."""
    chdir = os.chdir

    def journaled_chdir(path: Any) -> None:
        chdir(path)
        journal.write("cwd", path=str(Path.cwd()))

    os.chdir = journaled_chdir


class FatalStacks:
    """faulthandler kept first on the fatal signals, over whatever the test's process installs.

    #29: XLA's own handler (TSL's, with ``XLA_DUMP_FATAL_STACK=1``, installed when the
    runtime starts) replaces faulthandler's and re-raises every fatal signal as SIGABRT:
    the Python stack of a crash was lost. :meth:`keep_first`, called between the phases of
    every test, puts faulthandler back in front of such a handler and chains to it, so a
    crash writes the Python stack here, then the other handler still prints its banner
    and native stack. A handler put back to the default (``faulthandler.disable()``) is
    left alone. Where the C library cannot be asked (not Linux), it does nothing.
    """

    # the fatal signals faulthandler.enable() handles, as TSL's handler takes them too
    SIGNALS = (signal.SIGSEGV, signal.SIGFPE, signal.SIGABRT, signal.SIGBUS, signal.SIGILL)
    # bytes of a struct sigaction, with room to spare (glibc's is 152 on 64-bit Linux);
    # only its first field, the handler's address, is read: the rest is copied as it is
    _SIZE = 512

    def __init__(self, file: IO[str]) -> None:
        self.file = file
        self._fd = file.fileno()
        self._sigaction: Callable[[int, Any, Any], int] | None = None
        self._now: Any = None
        self._address: Any = None
        if sys.platform.startswith("linux"):
            try:
                self._sigaction = ctypes.CDLL(None, use_errno=True).sigaction
                self._buffer = ctypes.create_string_buffer
            except (OSError, AttributeError):
                self._sigaction = None
        faulthandler.enable(file=file, all_threads=True)
        # one buffer, and a view of its first field, for the look between phases: it runs
        # several times per test
        self._now = self._read(signal.SIGSEGV)
        self._address = ctypes.c_size_t.from_buffer(self._now) if self._now is not None else None
        self._ours = self._handler(signal.SIGSEGV)

    def _read(self, sig: int) -> Any:
        buf = self._buffer(self._SIZE)
        if self._sigaction is None or self._sigaction(sig, None, buf) != 0:
            return None
        return buf

    def _handler(self, sig: int) -> int | None:
        if self._address is None or self._sigaction is None or self._sigaction(sig, None, self._now) != 0:
            return None
        return int(self._address.value)

    def size(self) -> int:
        """How much the fault file holds now (a forked copy appends to it too)."""
        try:
            return os.lseek(self._fd, 0, os.SEEK_END)
        except OSError:
            return 0

    def read_from(self, offset: int, limit: int = 1 << 20) -> str:
        """What was written into the fault file since ``offset`` (at most ``limit`` bytes)."""
        try:
            with Path(self.file.name).open("rb") as fh:  # ours is open for appending only
                fh.seek(offset)
                return fh.read(limit).decode("utf-8", "replace")
        except OSError:
            return ""

    def keep_first(self) -> bool:
        """faulthandler in front again if another handler took its place; whether it was."""
        if self._sigaction is None:
            return False
        now = self._handler(signal.SIGSEGV)
        if now is None or now == self._ours or now in (int(signal.SIG_DFL), int(signal.SIG_IGN)):
            return False
        taken = {sig: self._read(sig) for sig in self.SIGNALS}
        faulthandler.disable()  # puts back what it found when enabled: the other's must stay
        for sig, action in taken.items():
            if action is not None:
                self._sigaction(sig, action, None)
        # faulthandler keeps the other handler as the one it calls after the dump
        faulthandler.enable(file=self.file, all_threads=True)
        self._ours = self._handler(signal.SIGSEGV)
        return True


def arm_faulthandler(path: str) -> FatalStacks:
    """Fatal-signal and hang stacks into our own file, open until exit.

    Our own file, not stderr: a crash's Python stack must not depend on how output is
    captured, and a crash at interpreter exit is diagnosed too.
    """
    fault_file = Path(path).open("a", encoding="utf-8")  # noqa: SIM115 - open until exit
    stacks = FatalStacks(fault_file)
    # SIGUSR1: the runner asks for every thread's stack before ending a hung test
    faulthandler.register(signal.SIGUSR1, file=fault_file, all_threads=True)
    # fatal signals faulthandler.enable() leaves alone: their stack too, then the default action
    for sig in (signal.SIGTRAP, signal.SIGXCPU, signal.SIGQUIT):
        faulthandler.register(sig, file=fault_file, all_threads=True, chain=True)
    return stacks
