"""What the pytest plugin and the script launcher share: the journal writer, the
faulthandler file, and journaled directory changes."""

from __future__ import annotations

import faulthandler
import fcntl
import json
import os
import signal
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

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
        self._send((_ENCODE({"e": event, "n": self._n, **fields}) + "\n").encode())

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
            f'{{"e":"start","n":{self._n},"nodeid":{_string(nodeid)},"t":{t!r},"meta":{body},'
            f'"seq":{seq},"loc":[{_string(loc[0])},{line}]}}\n'.encode()
        )

    def finish(self, nodeid: str, t: float) -> None:
        if self._fd < 0:
            self._closed("finish")
            return
        self._n += 1
        self._send(f'{{"e":"finish","n":{self._n},"nodeid":{_string(nodeid)},"t":{t!r}}}\n'.encode())

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


def arm_faulthandler(path: str) -> IO[str]:
    """Fatal-signal and hang stacks into our own file, open until exit.

    Our own file, not stderr: a crash's Python stack must not depend on how output is
    captured, and a crash at interpreter exit is diagnosed too.
    """
    fault_file = Path(path).open("a", encoding="utf-8")  # noqa: SIM115 - open until exit
    faulthandler.enable(file=fault_file, all_threads=True)
    # SIGUSR1: the runner asks for every thread's stack before ending a hung test
    faulthandler.register(signal.SIGUSR1, file=fault_file, all_threads=True)
    # fatal signals faulthandler.enable() leaves alone: their stack too, then the default action
    for sig in (signal.SIGTRAP, signal.SIGXCPU, signal.SIGQUIT):
        faulthandler.register(sig, file=fault_file, all_threads=True, chain=True)
    return fault_file
