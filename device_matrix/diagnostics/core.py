"""Core files: enable them for the child only, then read a backtrace with gdb.

The host's ``core_pattern`` decides where a core goes; with the common ``core`` (or
``core.%p``) it lands in the child's working directory, which the runner makes a
folder of its own. System settings are never changed: only the child's RLIMIT_CORE.
"""

from __future__ import annotations

import re
import resource
import shutil
import struct
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

ELF_MAGIC = b"\x7fELF"
GDB_TIMEOUT = 120.0


def raise_core_limit(limit_bytes: int) -> None:
    """``preexec_fn`` body: let this (child) process write a core up to ``limit_bytes``."""
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    want = limit_bytes if hard == resource.RLIM_INFINITY else min(limit_bytes, hard)
    resource.setrlimit(resource.RLIMIT_CORE, (want, hard))


def core_pattern() -> str | None:
    try:
        return Path("/proc/sys/kernel/core_pattern").read_text().strip()
    except OSError:
        return None


def find_core(workdir: Path, pid: int | None = None) -> Path | None:
    """A core file the child left in ``workdir`` (``core`` or ``core.<pid>``)."""
    candidates = []
    if pid is not None:
        candidates.append(workdir / f"core.{pid}")
    candidates.append(workdir / "core")
    candidates.extend(sorted(workdir.glob("core.*")))
    for path in candidates:
        try:
            with path.open("rb") as fh:
                if fh.read(4) == ELF_MAGIC:
                    return path
        except OSError:
            continue
    return None


PT_NOTE = 4
NT_FILE = 0x46494C45  # "FILE": the files mapped into the process, by the kernel
NOTES_LIMIT = 64 << 20  # bytes of notes read from one core (they are kilobytes)


def mapped_files(core: Path) -> list[str]:
    """The files the crashed process had mapped (its executable, its shared libraries),
    from the core's NT_FILE note; [] when the core is not a 64-bit little-endian ELF core.

    Only the headers and the notes are read, never the memory: cores run to gigabytes.
    """
    found: dict[str, None] = {}
    try:
        with core.open("rb") as fh:
            head = fh.read(64)
            if head[:4] != ELF_MAGIC or head[4] != 2 or head[5] != 1:  # ELFCLASS64, little-endian
                return []
            (phoff,) = struct.unpack_from("<Q", head, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
            for k in range(phnum):
                p_type, _, offset, _, _, size = struct.unpack_from("<IIQQQQ", table, k * phentsize)
                if p_type != PT_NOTE or size > NOTES_LIMIT:
                    continue
                fh.seek(offset)
                for name in _file_note_names(fh.read(size)):
                    found[name] = None
    except (OSError, struct.error, IndexError):
        return list(found)
    return [n for n in found if n.startswith("/") and not n.startswith(("/dev/", "/memfd:", "/SYSV"))]


def _file_note_names(notes: bytes) -> list[str]:
    names: list[str] = []
    pos = 0
    while pos + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, pos)
        pos += 12 + ((namesz + 3) & ~3)
        desc = notes[pos : pos + descsz]
        pos += (descsz + 3) & ~3
        if kind == NT_FILE and len(desc) >= 16:
            (count,) = struct.unpack_from("<Q", desc, 0)
            strings = desc[16 + 24 * count :].split(b"\0")[:count]
            names += [b.decode("utf-8", "surrogateescape") for b in strings if not b.endswith(b" (deleted)")]
    return names


def gdb_backtrace(
    executable: str, core: Path, timeout: float = GDB_TIMEOUT, *, sysroot: Path | None = None
) -> str | None:
    """Every thread's backtrace from a core, or None when gdb is missing or fails.

    With ``sysroot`` (a core of a container's process), the executable and the shared
    libraries are read from that folder at their paths in the image, and the folder is
    left out of the text: the image's paths are the ones that mean something.
    """
    gdb = shutil.which("gdb")
    if gdb is None:
        return None
    if sysroot is not None:
        executable = str(sysroot / executable.lstrip("/"))
    argv = [
        gdb,
        "-batch",
        "-nx",
        "-q",
        *(["-iex", f"set sysroot {sysroot}"] if sysroot is not None else []),
        "-ex",
        "set pagination off",
        "-ex",
        "set print thread-events off",
        "-ex",
        "thread apply all bt 40",
        executable,
        str(core),
    ]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = proc.stdout.strip()
    if sysroot is not None:
        text = text.replace(str(sysroot), "")
    return text or None


GDB_FRAME_PREFIX = "#"
GDB_THREAD_RE = re.compile(r"^Thread (\d+) \(")
GDB_CURRENT_RE = re.compile(r"^\[Current thread is (\d+) ")
SIGNAL_FRAME = "<signal handler called>"
BACKTRACE_LIMIT = 20_000


@dataclass
class GdbThread:
    number: int
    lines: list[str]  # its "Thread N (...)" header and frames, as printed

    @property
    def received_signal(self) -> bool:
        return any(SIGNAL_FRAME in line for line in self.lines)

    @property
    def frames(self) -> list[str]:
        """Function names, most recent first, below the signal handler's frames."""
        frames: list[str] = []
        for line in self.lines[1:]:
            s = line.strip()
            if not s.startswith(GDB_FRAME_PREFIX):
                continue
            body = s.split(None, 1)[1] if " " in s else ""
            if SIGNAL_FRAME in body:
                # what is above is the handler's own work (faulthandler re-raising)
                frames = []
                continue
            # "0x00007f.. in func (args) at file.c:12" or "func (args) at ..."
            if body.startswith("0x") and " in " in body:
                body = body.split(" in ", 1)[1]
            frames.append(_function_name(body))
        return frames


def _function_name(body: str) -> str:
    """``ns::f<void (*)(int)> (x=1) at f.cc:3`` -> ``ns::f<void (*)(int)>``: cut at the arguments."""
    depth = 0
    for i, ch in enumerate(body):
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == "(" and depth == 0 and i > 0 and body[i - 1] == " ":
            return body[: i - 1].strip()
    return body.strip()


def gdb_threads(backtrace: str) -> tuple[list[str], list[GdbThread]]:
    """The lines before the first thread (gdb's notes on the core), and every thread."""
    preamble: list[str] = []
    threads: list[GdbThread] = []
    for line in backtrace.splitlines():
        m = GDB_THREAD_RE.match(line)
        if m:
            threads.append(GdbThread(int(m.group(1)), [line]))
        elif threads:
            if line.strip():
                threads[-1].lines.append(line)
        else:
            preamble.append(line)
    return preamble, threads


def crashing_thread(backtrace: str) -> GdbThread | None:
    """The thread that received the signal.

    ``thread apply all bt`` prints threads from the highest number down, so the first
    one printed is rarely the crashing one: it is the thread whose stack holds the
    signal handler's frame, or failing that the one gdb names as current (for a core,
    the thread the kernel stopped on the signal).
    """
    preamble, threads = gdb_threads(backtrace)
    current = next((int(m.group(1)) for m in map(GDB_CURRENT_RE.match, preamble) if m), None)
    with_signal = [t for t in threads if t.received_signal]
    for group in (with_signal, threads):
        for t in group:
            if t.number == current:
                return t
    if with_signal:
        return with_signal[0]
    return threads[0] if threads else None


def gdb_frames(backtrace: str) -> list[str]:
    """Function names of the crashing thread, most recent first."""
    thread = crashing_thread(backtrace)
    return thread.frames if thread else []


def bound_backtrace(backtrace: str, limit: int = BACKTRACE_LIMIT) -> str:
    """Every thread's backtrace, the crashing thread first, within ``limit`` characters.

    A size limit cuts the other threads first: the crashing thread is the evidence,
    and it is often the last one gdb prints (issue 10).
    """
    preamble, threads = gdb_threads(backtrace)
    lead = crashing_thread(backtrace)
    if lead is None:
        return backtrace[:limit]
    notes = [line for line in preamble if line.startswith(("Core was generated", "Program terminated", "[Current"))]
    blocks = ["\n".join(notes)] if notes else []
    blocks.append("\n".join(lead.lines)[:limit])
    used = sum(len(b) + 2 for b in blocks)
    others = [t for t in threads if t.number != lead.number]
    for i, t in enumerate(others):
        block = "\n".join(t.lines)
        if used + len(block) + 2 > limit:
            blocks.append(f"[{len(others) - i} more thread(s) left out: over {limit} characters]")
            break
        blocks.append(block)
        used += len(block) + 2
    return "\n\n".join(blocks)


# --- cores of the processes a test started ------------------------------------------------


@dataclass
class CoreReport:
    path: Path
    size: int
    backtrace: str | None  # bounded, crashing thread first; None when not read
    frames: list[str]  # the crashing thread's function names
    removed: bool


def find_cores(folders: Iterable[Path], patterns: Sequence[str] = ("core", "core.*")) -> list[Path]:
    """Core files (ELF, by their first bytes) directly inside ``folders``, oldest first.

    A test's workers inherit the raised core limit and write their cores into their
    own working directory: the runner passes the attempt's folder and the test's.
    """
    found: dict[Path, float] = {}
    for folder in folders:
        for pattern in patterns:
            for path in folder.glob(pattern):
                try:
                    with path.open("rb") as fh:
                        if fh.read(4) != ELF_MAGIC:
                            continue
                    found[path.resolve()] = path.stat().st_mtime
                except OSError:
                    continue
    return sorted(found, key=lambda p: (found[p], str(p)))


def sweep_cores(
    folders: Iterable[Path],
    *,
    executable: str,
    read_limit: int,
    use_gdb: bool = True,
    keep: bool = False,
    backtrace_limit: int = BACKTRACE_LIMIT,
) -> list[CoreReport]:
    """Read (with gdb, where present) and remove every core left in ``folders``.

    Cores over ``read_limit`` bytes are removed unread: gdb on a gigabyte core of an XLA
    worker takes minutes, and the worker's own output already holds its crash.
    """
    reports: list[CoreReport] = []
    for path in find_cores(folders):
        try:
            size = path.stat().st_size
        except OSError:
            continue
        text = gdb_backtrace(executable, path) if use_gdb and size <= read_limit else None
        removed = False
        if not keep:
            path.unlink(missing_ok=True)
            removed = True
        reports.append(
            CoreReport(
                path=path,
                size=size,
                backtrace=bound_backtrace(text, backtrace_limit) if text else None,
                frames=gdb_frames(text)[:10] if text else [],
                removed=removed,
            )
        )
    return reports
