"""Parsers for what a dying XLA process leaves in its output.

Formats understood (each has recorded samples in tests/fixtures/recorded/):

* CPython ``faulthandler``: ``Fatal Python error: Segmentation fault`` and one block per
  thread, ``File "...", line N in func``; also the ``Timeout (0:00:05)!`` hang dumps.
* TSL's stack trace handler (torch_xla builds): ``*** Received signal 11 ***``, a
  ``BEGIN MANGLED STACK TRACE`` block of ``lib.so(symbol+0x1f)[0x7f..]`` lines and a
  ``Begin stack trace`` block of demangled frames.
* absl's failure signal handler (libtpu): ``*** SIGSEGV (@0x..) ... received by PID ...``
  then ``PC: @ 0x.. (unknown) func`` and ``@ 0x.. 976 func`` frames.
* absl/glog fatal logs: ``F0531 07:47:31.003927 10044 file.cc:123] Check failed: ...``,
  XLA's ``2026-11-29 19:00:02.050050: F external/xla/...cc:127] ...``, and the
  ``*** Check failure stack trace: ***`` frames that follow.
* libstdc++: ``terminate called after throwing an instance of 'T'`` / ``what():  ...``.
* pystack's reading of a core (``pystack core CORE``): ``Traceback for thread N ...`` and
  ``(Python) File "...", line N, in func``, oldest call first (#39).

Real logs wrap these: GitHub Actions puts a timestamp before every line, torchrun and
multi-process workers ``[rank0]:``, container logs the container's name, and a crash is
often printed right after text with no newline (progress dots, ``step 1/10 ok...``).
:func:`clean_lines` undoes all of that first, so every parser reads the same lines from
every shape of log (issue 10).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# --- line prefixes and markers inside a line ---------------------------------------------

# "2025-05-06T12:34:56.1234567Z " (GitHub Actions raw logs), "[rank3]:" / "[default0]:"
# (torchrun, torch's distributed workers), "trainer-1  | " (docker compose, kubectl).
LINE_PREFIX_RE = re.compile(
    r"^(?:\ufeff)?(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z(?: |$)"
    r"|\[(?:rank|default)\d+\]:"
    r"|[A-Za-z0-9][A-Za-z0-9_.-]*\s+\| ?)"
)

# Where a crash report starts. Anything before one of these on the same line is output
# that had no newline yet (progress characters, a partial message): split it off.
MARKER_RE = re.compile(
    r"\*\*\* Received signal \d+ \*\*\*"
    r"|\*\*\* BEGIN MANGLED STACK TRACE \*\*\*"
    r"|\*\*\* SIG[A-Z]+(?: \(@[^)]*\))?.*received by PID"
    r"|\*\*\* Check failure stack trace: \*\*\*"
    r"|Fatal Python error: "
    r"|terminate called after throwing an instance of "
    r"|(?:Current thread|Thread) 0x[0-9a-fA-F]+(?: \[[^\]]*\])? \(most recent call first\):"
    r"|Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: F \S+:\d+\]"
    r"|F\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\]"
)


# colour and cursor codes: pytest colours its progress characters, CI keeps the codes
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_prefixes(line: str) -> str:
    """``line`` without the prefixes log collectors put before it (any number, any order)."""
    while True:
        m = LINE_PREFIX_RE.match(line)
        if m is None or m.end() == 0:
            return line
        line = line[m.end() :]


def clean_lines(text: str) -> list[str]:
    """The lines of ``text`` as the crashing process printed them.

    Terminal colour codes and collector prefixes are stripped from every line, and a
    crash marker found inside a line starts a line of its own.
    """
    out: list[str] = []
    for raw in text.splitlines():
        line = strip_prefixes(ANSI_RE.sub("", raw) if "\x1b" in raw else raw)
        # every marker after the line's start begins a line: two reports can be glued too
        while (m := MARKER_RE.search(line, 1)) is not None:
            out.append(line[: m.start()])
            line = line[m.start() :]
        out.append(line)
    return out


def _lines(text: str | Iterable[str]) -> list[str]:
    return clean_lines(text) if isinstance(text, str) else list(text)


# --- Python stacks (faulthandler) -------------------------------------------------------

FH_FATAL_RE = re.compile(r"^Fatal Python error: (.+)$")
FH_TIMEOUT_RE = re.compile(r"^Timeout \((\d+:\d\d:\d\d(?:\.\d+)?)\)!$")
FH_THREAD_RE = re.compile(r"^(Current thread|Thread) (0x[0-9a-fA-F]+)(?: \[[^\]]*\])? \(most recent call first\):$")
FH_FRAME_RE = re.compile(r'^\s+File "(.+)", line (\d+|\?\?\?) in (.+)$')
FH_GARBAGE_RE = re.compile(r"^\s+<(?:no Python frame|Garbage-collecting)>$")


@dataclass
class PyFrame:
    file: str
    line: int | None
    function: str


@dataclass
class ThreadStack:
    thread: str
    current: bool
    frames: list[PyFrame] = field(default_factory=list)


@dataclass
class FaulthandlerDump:
    fatal_error: str | None = None  # "Segmentation fault", "Aborted", ...
    timeout: str | None = None  # "0:00:05" for a dump_traceback_later
    threads: list[ThreadStack] = field(default_factory=list)

    @property
    def current(self) -> ThreadStack | None:
        """The thread to blame: faulthandler's "Current thread", else the first busy one.

        A signal in a thread without Python state (an XLA worker, a loader written in
        C++) leaves no "Current thread"; the first thread listed is then often a pool
        idling in ``threading.wait``, which says nothing about the crash (issue 10).
        """
        for t in self.threads:
            if t.current:
                return t
        busy = [t for t in self.threads if not is_idle(t)]
        candidates = busy or self.threads
        return candidates[0] if candidates else None


# Top frames of threads that only wait for work: the same in every crash of a program.
IDLE_TOP_FRAMES = frozenset(
    {
        ("threading.py", "wait"),
        ("threading.py", "_wait_for_tstate_lock"),
        ("threading.py", "join"),
        ("queue.py", "get"),
        ("selectors.py", "select"),
        ("connection.py", "poll"),
        ("connection.py", "wait"),
        ("connection.py", "_recv"),
        ("thread.py", "_worker"),
        ("socket.py", "accept"),
    }
)


def is_idle(stack: ThreadStack) -> bool:
    if not stack.frames:
        return True
    top = stack.frames[0]
    return (top.file.replace("\\", "/").rsplit("/", 1)[-1], top.function) in IDLE_TOP_FRAMES


def parse_faulthandler(text: str | Iterable[str]) -> list[FaulthandlerDump]:
    """Every faulthandler dump in ``text``, in order (a hang dump, then a fatal one...)."""
    dumps: list[FaulthandlerDump] = []
    current: FaulthandlerDump | None = None
    thread: ThreadStack | None = None
    for line in _lines(text):
        m = FH_FATAL_RE.match(line)
        if m:
            current = FaulthandlerDump(fatal_error=m.group(1).strip())
            dumps.append(current)
            thread = None
            continue
        m = FH_TIMEOUT_RE.match(line)
        if m:
            current = FaulthandlerDump(timeout=m.group(1))
            dumps.append(current)
            thread = None
            continue
        m = FH_THREAD_RE.match(line)
        if m:
            if current is None or (thread is not None and thread.current and m.group(1) == "Current thread"):
                # a dump with no header (faulthandler.dump_traceback via a signal)
                current = FaulthandlerDump()
                dumps.append(current)
            thread = ThreadStack(thread=m.group(2), current=m.group(1) == "Current thread")
            current.threads.append(thread)
            continue
        m = FH_FRAME_RE.match(line)
        if m and thread is not None:
            lineno = int(m.group(2)) if m.group(2).isdigit() else None
            thread.frames.append(PyFrame(m.group(1), lineno, m.group(3).strip()))
            continue
        if FH_GARBAGE_RE.match(line):
            continue
        if thread is not None and line.strip() == "":
            continue
        if thread is not None and not line.startswith(" "):
            thread = None
    return dumps


# pystack's view of a core (#39): "Traceback for thread 123 [Has the GIL] (most recent call
# last):", then per frame '(Python) File "f.py", line 3, in func' and its source line
PYSTACK_THREAD_RE = re.compile(
    r"^Traceback for thread (\d+)(?: \([^)]*\))?(?P<marks>(?: \[[^\]]*\])*) \(most recent call last\):$"
)
PYSTACK_FRAME_RE = re.compile(r'^\s+(?:\(Python\) )?File "(.+)", line (\d+), in (.+)$')
PYSTACK_GIL = "[Has the GIL]"


def parse_pystack(text: str, crashed: int | None = None) -> FaulthandlerDump | None:
    """The Python stacks pystack read from a core, as a faulthandler dump (most recent call
    first); None when it holds none.

    The thread to blame is ``crashed`` (the thread the kernel stopped on the signal, from the
    core's notes), else the one that held the GIL: faulthandler's "Current thread".
    """
    threads: list[tuple[int, bool, list[PyFrame]]] = []
    for line in clean_lines(text):
        m = PYSTACK_THREAD_RE.match(line)
        if m:
            threads.append((int(m.group(1)), PYSTACK_GIL in m.group("marks"), []))
            continue
        m = PYSTACK_FRAME_RE.match(line)
        if m and threads:
            threads[-1][2].append(PyFrame(m.group(1), int(m.group(2)), m.group(3).strip()))
    if not any(frames for _, _, frames in threads):
        return None
    blamed = crashed if crashed in {tid for tid, _, _ in threads} else None
    if blamed is None:
        blamed = next((tid for tid, gil, _ in threads if gil), None)
    return FaulthandlerDump(
        threads=[ThreadStack(hex(tid), tid == blamed, frames[::-1]) for tid, _, frames in threads],
    )


def format_python_stack(stack: ThreadStack) -> str:
    head = f"{'Current thread' if stack.current else 'Thread'} {stack.thread} (most recent call first):"
    lines = [head] + [
        f'  File "{f.file}", line {f.line if f.line is not None else "???"} in {f.function}' for f in stack.frames
    ]
    return "\n".join(lines)


# --- native stacks ----------------------------------------------------------------------

TSL_SIGNAL_RE = re.compile(r"^\*\*\* Received signal (\d+) \*\*\*$")
TSL_MANGLED_BEGIN = "*** BEGIN MANGLED STACK TRACE ***"
TSL_MANGLED_END = "*** END MANGLED STACK TRACE ***"
TSL_BEGIN = "*** Begin stack trace ***"
TSL_END = "*** End stack trace ***"
MANGLED_FRAME_RE = re.compile(
    r"^(?P<module>[^()\s][^()]*)\((?P<symbol>[^)+]*)(?:\+0x[0-9a-fA-F]+)?\)\s*\[0x[0-9a-fA-F]+\]$"
)
ABSL_SIGNAL_RE = re.compile(r"^\*\*\* (SIG[A-Z]+)(?: \(@[^)]*\))?.*received by PID (\d+) \(TID (\d+)\).*\*\*\*$")
# "@ 0x7f.. 976 func" (signal handler: with a frame size) or "@ 0x7f.. func" (check failure)
ABSL_FRAME_RE = re.compile(r"^\s*(?:PC: )?@\s+0x[0-9a-fA-F]+\s+(?:(?:\(unknown\)|\d+)\s+)?(.*)$")
CHECK_TRACE = "*** Check failure stack trace: ***"

FATAL_LINE_RE = re.compile(
    r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: F |F\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ )"
    r"(?P<file>[^\s:]+\.(?:cc|cpp|cxx|h|hpp|c)):(?P<line>\d+)\] (?P<message>.*)$"
)
TERMINATE_RE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
WHAT_RE = re.compile(r"^\s*what\(\):\s*(.*)$")


@dataclass
class NativeStack:
    format: str  # "tsl" | "absl" | "check_failure"
    signal: int | None
    signal_name: str | None
    frames: list[str]  # demangled function names where known, most recent first
    raw: list[str]  # the block as printed


@dataclass
class FatalLine:
    file: str
    line: int
    message: str
    raw: str


def _demangled_from_tsl(line: str) -> str:
    # the demangled block indents each frame with a tab
    return line.strip()


def parse_native_stacks(text: str | Iterable[str]) -> list[NativeStack]:
    stacks: list[NativeStack] = []
    frames: list[str]
    lines = _lines(text)
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i].rstrip()
        m = TSL_SIGNAL_RE.match(line.strip())
        if m:
            sig = int(m.group(1))
            raw = [line]
            mangled: list[str] = []
            demangled: list[str] = []
            i += 1
            mode = None
            while i < n:
                cur = lines[i].rstrip()
                s = cur.strip()
                if s == TSL_MANGLED_BEGIN:
                    mode = "mangled"
                elif s in (TSL_MANGLED_END, TSL_END):
                    mode = None
                    raw.append(cur)
                    if s == TSL_END:
                        i += 1
                        break
                    i += 1
                    continue
                elif s == TSL_BEGIN:
                    mode = "demangled"
                elif mode == "mangled":
                    fm = MANGLED_FRAME_RE.match(s)
                    if fm:
                        sym = fm.group("symbol")
                        mangled.append(sym or f"({fm.group('module').rsplit('/', 1)[-1]})")
                    elif s:
                        mode = None
                        break
                elif mode == "demangled":
                    if s:
                        demangled.append(_demangled_from_tsl(cur))
                elif s and not s.startswith("***"):
                    break
                raw.append(cur)
                i += 1
            stacks.append(NativeStack("tsl", sig, None, demangled or mangled, raw))
            continue
        m = ABSL_SIGNAL_RE.match(line.strip())
        if m or line.strip() == CHECK_TRACE:
            fmt = "absl" if m else "check_failure"
            name = m.group(1) if m else None
            raw = [line]
            frames = []
            i += 1
            while i < n:
                cur = lines[i].rstrip()
                fm = ABSL_FRAME_RE.match(cur)
                if fm:
                    frames.append(fm.group(1).strip())
                    raw.append(cur)
                    i += 1
                    continue
                s = cur.strip()
                if s.startswith("https://symbolize") or "RAW:" in s or s == "":
                    raw.append(cur)
                    i += 1
                    if s == "" and i < n and not ABSL_FRAME_RE.match(lines[i]):
                        break
                    continue
                break
            stacks.append(NativeStack(fmt, None, name, frames, raw))
            continue
        i += 1
    return stacks


def parse_fatal_lines(text: str | Iterable[str]) -> list[FatalLine]:
    out = []
    for line in _lines(text):
        m = FATAL_LINE_RE.match(line.strip())
        if m:
            out.append(FatalLine(m.group("file"), int(m.group("line")), m.group("message").strip(), line.strip()))
    return out


@dataclass
class Terminate:
    """An uncaught C++ exception, as libstdc++'s verbose terminate handler prints it."""

    type: str  # "std::runtime_error"
    what: str | None  # its what(), when the type has one

    def __str__(self) -> str:
        return f"{self.type}: {self.what}" if self.what is not None else self.type


def parse_terminate(text: str | Iterable[str]) -> Terminate | None:
    """The last uncaught C++ exception in ``text`` (the one that ended the process)."""
    lines = _lines(text)
    found = None
    for i, line in enumerate(lines):
        m = TERMINATE_RE.search(line)
        if m:
            what = None
            for follow in lines[i + 1 : i + 3]:
                wm = WHAT_RE.match(follow)
                if wm:
                    what = wm.group(1).strip()
                    break
            found = Terminate(m.group(1), what)
    return found


def last_lines(text: str | Iterable[str], count: int = 40) -> list[str]:
    lines = [line.rstrip() for line in _lines(text)]
    while lines and not lines[-1]:
        lines.pop()
    return lines[-count:]
