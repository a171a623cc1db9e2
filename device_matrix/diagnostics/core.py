"""Core files: enable them for the child only, find the ones it left, read a backtrace with gdb.

The host's ``core_pattern`` decides where a core goes; with the common ``core`` (or
``core.%p``) it lands in the working directory of the process that died: the project
root, or a folder a test moved to. System settings are never changed: only the child's
RLIMIT_CORE, which every process it starts inherits.
"""

from __future__ import annotations

import importlib.util
import re
import resource
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ELF_MAGIC = b"\x7fELF"
ET_CORE = 4  # e_type of an ELF core file (an executable or a library is not one)
GDB_TIMEOUT = 120.0


def raise_core_limit(limit_bytes: int) -> None:
    """``preexec_fn`` body: let this (child) process write a core up to ``limit_bytes``."""
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    want = limit_bytes if hard == resource.RLIM_INFINITY else min(limit_bytes, hard)
    resource.setrlimit(resource.RLIMIT_CORE, (want, hard))


def is_core(path: Path) -> bool:
    """Whether ``path`` is an ELF core file, by its header (a module named ``core.py`` is not)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(18)
    except OSError:
        return False
    return head[:4] == ELF_MAGIC and int.from_bytes(head[16:18], "little") == ET_CORE


def new_cores(folders: Iterable[Path], since: float) -> list[Path]:
    """Core files (``core*``) written directly inside ``folders`` since ``since`` (wall clock), newest first."""
    found: dict[Path, float] = {}
    for folder in folders:
        try:
            entries = list(folder.glob("core*"))
        except OSError:
            continue
        for path in entries:
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            if mtime >= since - 1 and path.is_file() and is_core(path):
                found[path.resolve()] = mtime
    return sorted(found, key=lambda p: found[p], reverse=True)


PT_NOTE = 4
NT_PRSTATUS = 1  # one per thread, the thread that received the signal first
NT_FILE = 0x46494C45  # "FILE": the files mapped into the process, by the kernel
NOTES_LIMIT = 64 << 20  # bytes of notes read from one core (they are kilobytes)
PRSTATUS_PID = 32  # offset of pr_pid (the thread's id) in a 64-bit struct elf_prstatus
NT_PRPSINFO = 3  # the process: its state, ids and command line
PRPSINFO_PID = 24  # offset of pr_pid (the process's id) in a 64-bit struct elf_prpsinfo


def _notes(core: Path) -> list[tuple[int, bytes]]:
    """``(type, descriptor)`` of every note of a 64-bit little-endian ELF core, in order;
    [] for any other file. Only the headers and the notes are read, never the memory:
    cores run to gigabytes."""
    found: list[tuple[int, bytes]] = []
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
                found += _split_notes(fh.read(size))
    except (OSError, struct.error, IndexError):
        return found  # a cut or foreign file: the notes read before it broke
    return found


def _split_notes(notes: bytes) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    pos = 0
    while pos + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, pos)
        pos += 12 + ((namesz + 3) & ~3)
        out.append((kind, notes[pos : pos + descsz]))
        pos += (descsz + 3) & ~3
    return out


def mapped_files(core: Path) -> list[str]:
    """The files the crashed process had mapped (its executable, its shared libraries),
    from the core's NT_FILE note; [] when the core is not a 64-bit little-endian ELF core."""
    found: dict[str, None] = {}
    for kind, desc in _notes(core):
        if kind == NT_FILE and len(desc) >= 16:
            (count,) = struct.unpack_from("<Q", desc, 0)
            strings = desc[16 + 24 * count :].split(b"\0")[:count]
            for b in strings:
                if not b.endswith(b" (deleted)"):
                    found[b.decode("utf-8", "surrogateescape")] = None
    return [n for n in found if n.startswith("/") and not n.startswith(("/dev/", "/memfd:", "/SYSV"))]


def crashed_thread(core: Path) -> int | None:
    """The id of the thread the kernel stopped on the fatal signal: the core's first
    NT_PRSTATUS note; None when the core has none."""
    for kind, desc in _notes(core):
        if kind == NT_PRSTATUS and len(desc) >= PRSTATUS_PID + 4:
            return int.from_bytes(desc[PRSTATUS_PID : PRSTATUS_PID + 4], "little")
    return None


def process_id(core: Path) -> int | None:
    """The id of the process that left ``core`` (its NT_PRPSINFO note); None when unknown."""
    for kind, desc in _notes(core):
        if kind == NT_PRPSINFO and len(desc) >= PRPSINFO_PID + 4:
            return int.from_bytes(desc[PRPSINFO_PID : PRPSINFO_PID + 4], "little")
    return None


PYSTACK_TIMEOUT = 120.0


def pystack_command() -> list[str] | None:
    """How to run pystack here: the runner's own (``python -m pystack``), else one on PATH."""
    if importlib.util.find_spec("pystack") is not None:
        return [sys.executable, "-m", "pystack"]
    found = shutil.which("pystack")
    return [found] if found else None


def pystack_core(core: Path, timeout: float = PYSTACK_TIMEOUT) -> tuple[str | None, str | None]:
    """``(pystack's text, None)``: every Python thread's stack read from ``core`` (#39); or
    ``(None, why not)``. pystack reads the interpreter's memory (no debug symbols needed)
    and finds the executable in the core itself: the test's interpreter, not the runner's."""
    command = pystack_command()
    if command is None:
        return None, "pystack is not installed where the runner runs (pip install pystack; Linux on x86_64 and aarch64)"
    argv = [*command, "core", "--no-color", str(core)]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return None, f"pystack read the core for over {timeout:.0f} s"
    except OSError as exc:
        return None, f"pystack could not start: {exc}"
    if proc.returncode != 0 or not proc.stdout.strip():
        said = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return None, f"pystack could not read the core: {said[:300]}"
    return proc.stdout, None


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
