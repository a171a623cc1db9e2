"""Core files: enable them for the child only, find the ones it left, read a backtrace with gdb.

The host's ``core_pattern`` decides where a core goes; with the common ``core`` (or
``core.%p``) it lands in the working directory of the process that died: the project
root, or a folder a test moved to. System settings are never changed: only the child's
RLIMIT_CORE, which every process it starts inherits.
"""

from __future__ import annotations

import importlib.util
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

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


# a core a crash took for itself (:func:`claim`): the name ``core`` is the next crash's
CLAIMED_PREFIX = "core.device-matrix-"


def claim(core: Path) -> Path:
    """``core`` under a name of its own, in its folder: a later crash's core (a rerun's, in
    the same folder) can neither replace it while it is read nor be deleted in its place.
    ``core`` itself when it cannot be renamed."""
    claimed = core.with_name(f"{CLAIMED_PREFIX}{time.time_ns()}")
    try:
        core.rename(claimed)
    except OSError:
        return core
    return claimed


def give_back(claimed: Path, name: Path) -> Path:
    """A kept core back under the name it was written with, unless another core took that
    name meanwhile (a rerun's): the path that names it now."""
    if claimed == name:
        return name
    try:
        name.hardlink_to(claimed)  # never over another core: link fails where the name is taken
    except OSError:
        return claimed
    claimed.unlink()
    return name


def new_cores(folders: Iterable[Path], since: float) -> list[Path]:
    """Core files (``core*``) written directly inside ``folders`` since ``since`` (wall clock), newest first."""
    found: dict[Path, float] = {}
    for folder in folders:
        try:
            entries = list(folder.glob("core*"))
        except OSError:
            continue
        for path in entries:
            if path.name.startswith(CLAIMED_PREFIX):
                continue  # a crash's, being read or kept: never another attempt's
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            if mtime >= since - 1 and path.is_file() and is_core(path):
                found[path.resolve()] = mtime
    return sorted(found, key=lambda p: found[p], reverse=True)


PT_LOAD = 1
PT_NOTE = 4
NT_PRSTATUS = 1  # one per thread, the thread that received the signal first
NT_AUXV = 6  # the process's auxiliary vector: AT_PHDR is where its executable's headers are
AT_PHDR = 3
NT_FILE = 0x46494C45  # "FILE": the files mapped into the process, by the kernel
NT_GNU_BUILD_ID = 3  # in an executable or a library: the build's id, named "GNU"
NOTES_LIMIT = 64 << 20  # bytes of notes read from one core (they are kilobytes)
PRSTATUS_PID = 32  # offset of pr_pid (the thread's id) in a 64-bit struct elf_prstatus
PRSTATUS_CURSIG = 12  # and of pr_cursig, the signal that stopped it (a short)
NT_PRPSINFO = 3  # the process: its state, ids and command line
PRPSINFO_PID = 24  # offset of pr_pid (the process's id) in a 64-bit struct elf_prpsinfo
PRPSINFO_PPID = 28  # and of pr_ppid, its parent's
# what an ELF file's headers are read through: (offset, size) -> the bytes there, b"" past its end
Reader = Callable[[int, int], bytes]


@dataclass(frozen=True)
class Segment:
    """A program header: for a core, a part of the process's memory (PT_LOAD) or notes."""

    kind: int
    offset: int  # where its bytes are in the file
    address: int
    size: int  # its bytes in the file (p_filesz)


@dataclass(frozen=True)
class Mapping:
    """A file mapped into the process, from the core's NT_FILE note."""

    start: int
    end: int
    offset: int  # the file's offset mapped at ``start``, in bytes
    path: str


def _segments(read: Reader) -> list[Segment]:
    """The program headers of a 64-bit little-endian ELF file; [] for any other file."""
    head = read(0, 64)
    if len(head) < 64 or head[:4] != ELF_MAGIC or head[4] != 2 or head[5] != 1:  # ELFCLASS64, little-endian
        return []
    (phoff,) = struct.unpack_from("<Q", head, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", head, 0x36)
    table = read(phoff, phentsize * phnum)
    out = []
    for k in range(min(phnum, len(table) // max(phentsize, 1))):
        p_type, _, offset, address, _, size = struct.unpack_from("<IIQQQQ", table, k * phentsize)
        out.append(Segment(p_type, offset, address, size))
    return out


def _notes_of(read: Reader, segments: list[Segment]) -> list[tuple[int, bytes, bytes]]:
    """``(type, name, descriptor)`` of every note of ``segments``, in order."""
    found: list[tuple[int, bytes, bytes]] = []
    for s in segments:
        if s.kind == PT_NOTE and s.size <= NOTES_LIMIT:
            found += _split_notes(read(s.offset, s.size))
    return found


def _file_reader(fh: BinaryIO) -> Reader:
    def read(offset: int, size: int) -> bytes:
        fh.seek(offset)
        return fh.read(size)

    return read


def _notes(core: Path) -> list[tuple[int, bytes]]:
    """``(type, descriptor)`` of every note of a 64-bit little-endian ELF core, in order;
    [] for any other file. Only the headers and the notes are read, never the memory:
    cores run to gigabytes."""
    try:
        with core.open("rb") as fh:
            read = _file_reader(fh)
            return [(kind, desc) for kind, _, desc in _notes_of(read, _segments(read))]
    except (OSError, struct.error, IndexError):
        return []  # a cut or foreign file


def _split_notes(notes: bytes) -> list[tuple[int, bytes, bytes]]:
    out: list[tuple[int, bytes, bytes]] = []
    pos = 0
    while pos + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, pos)
        name = notes[pos + 12 : pos + 12 + namesz].rstrip(b"\0")
        pos += 12 + ((namesz + 3) & ~3)
        out.append((kind, name, notes[pos : pos + descsz]))
        pos += (descsz + 3) & ~3
    return out


def _mappings(notes: list[tuple[int, bytes]]) -> list[Mapping]:
    out: list[Mapping] = []
    for kind, desc in notes:
        if kind == NT_FILE and len(desc) >= 16:
            count, page = struct.unpack_from("<QQ", desc, 0)
            strings = desc[16 + 24 * count :].split(b"\0")[:count]
            for k, name in enumerate(strings):
                start, end, offset = struct.unpack_from("<QQQ", desc, 16 + 24 * k)
                out.append(Mapping(start, end, offset * page, name.decode("utf-8", "surrogateescape")))
    return out


def mapped_files(core: Path) -> list[str]:
    """The files the crashed process had mapped (its executable, its shared libraries),
    from the core's NT_FILE note; [] when the core is not a 64-bit little-endian ELF core."""
    found = dict.fromkeys(m.path for m in _mappings(_notes(core)) if not m.path.endswith(" (deleted)"))
    return [n for n in found if _a_file(n)]


def _a_file(name: str) -> bool:
    """Whether a mapping's name is a file's path (not a device, a memfd or SysV memory)."""
    return name.startswith("/") and not name.startswith(("/dev/", "/memfd:", "/SYSV"))


def executable_of(core: Path) -> str | None:
    """The file the core's process was running (the mapping that holds its program headers,
    AT_PHDR of its auxiliary vector): what gdb must be given; None when the core does not say."""
    notes = _notes(core)
    for kind, desc in notes:
        if kind != NT_AUXV:
            continue
        for k in range(0, len(desc) - 15, 16):
            key, value = struct.unpack_from("<QQ", desc, k)
            if key == AT_PHDR:
                return next((m.path for m in _mappings(notes) if m.start <= value < m.end), None)
    return None


def _build_id(read: Reader) -> bytes | None:
    """The GNU build-id in an ELF file's notes; None where it names none or is no ELF file."""
    try:
        notes = _notes_of(read, _segments(read))
    except struct.error:
        return None
    return next((desc for kind, name, desc in notes if kind == NT_GNU_BUILD_ID and name == b"GNU"), None)


def _memory(read: Reader, segments: list[Segment], base: int) -> Reader:
    """The process's memory from ``base`` on, as the core holds it (b"" where it holds none)."""

    def at(offset: int, size: int) -> bytes:
        address = base + offset
        for s in segments:
            if s.kind == PT_LOAD and s.address <= address < s.address + s.size:
                return read(s.offset + address - s.address, min(size, s.address + s.size - address))
        return b""

    return at


def _mapped_ids(core: Path) -> tuple[dict[str, bytes | None], str | None]:
    """The build-id of each ELF file the process mapped, as the first page the core holds of
    it says (None: the core does not say); or why the core itself cannot be believed."""
    ids: dict[str, bytes | None] = {}
    with core.open("rb") as fh:
        read = _file_reader(fh)
        segments = _segments(read)
        size = os.fstat(fh.fileno()).st_size
        needed = max((s.offset + s.size for s in segments if s.kind in (PT_LOAD, PT_NOTE)), default=0)
        if size < needed:
            return ids, f"the core is incomplete ({size} of its {needed} bytes: cut, or read while it was written)"
        notes = [(kind, desc) for kind, _, desc in _notes_of(read, segments)]
        for m in _mappings(notes):
            path = m.path.removesuffix(" (deleted)")  # gdb reads what is at the path now
            if m.offset == 0 and path not in ids and _a_file(path):
                ids[path] = _build_id(_memory(read, segments, m.start))
    return ids, None


def _differs(path: str, wanted: bytes, root: Path | None) -> str | None:
    local = root / path.lstrip("/") if root is not None else Path(path)
    try:
        with local.open("rb") as fh:
            found = _build_id(_file_reader(fh))
    except OSError:
        return f"{path} is missing"
    if found == wanted:
        return None
    return f"{path} is another build (build-id {found.hex() if found else 'none'}, the process ran {wanted.hex()})"


def mismatches(core: Path, executable: str, root: Path | None = None) -> list[str]:
    """Why gdb's reading of ``core`` with these files cannot be believed: the core is
    incomplete, the executable is not the one the process ran, or a file the process mapped is
    missing or another build (by the GNU build-id the core holds in the first page of each
    mapped ELF file). ``root``: where the files are (a container's image's), else at their
    own paths. [] when nothing says they differ: a file whose build-id the core does not
    hold is taken as it is."""
    try:
        ids, broken = _mapped_ids(core)
    except (OSError, struct.error) as exc:
        return [f"the core cannot be read: {exc}"]
    if broken is not None:
        return [broken]
    ran = executable if root is not None else os.path.realpath(executable)
    problems = [] if not ids or ran in ids else [f"{executable} is not the executable the process ran"]
    problems += [p for path, wanted in ids.items() if wanted is not None and (p := _differs(path, wanted, root))]
    return problems


def crashed_thread(core: Path) -> int | None:
    """The id of the thread the kernel stopped on the fatal signal: the core's first
    NT_PRSTATUS note; None when the core has none."""
    for kind, desc in _notes(core):
        if kind == NT_PRSTATUS and len(desc) >= PRSTATUS_PID + 4:
            return int.from_bytes(desc[PRSTATUS_PID : PRSTATUS_PID + 4], "little")
    return None


def signal_of(core: Path) -> int | None:
    """The signal that ended the process that left ``core`` (its first NT_PRSTATUS note's
    pr_cursig); None when the core does not say."""
    for kind, desc in _notes(core):
        if kind == NT_PRSTATUS and len(desc) >= PRSTATUS_CURSIG + 2:
            return int.from_bytes(desc[PRSTATUS_CURSIG : PRSTATUS_CURSIG + 2], "little") or None
    return None


def process_id(core: Path) -> int | None:
    """The id of the process that left ``core`` (its NT_PRPSINFO note); None when unknown."""
    return _prpsinfo(core, PRPSINFO_PID)


def parent_id(core: Path) -> int | None:
    """The id of the parent of the process that left ``core``; None when unknown."""
    return _prpsinfo(core, PRPSINFO_PPID)


def _prpsinfo(core: Path, offset: int) -> int | None:
    for kind, desc in _notes(core):
        if kind == NT_PRPSINFO and len(desc) >= offset + 4:
            return int.from_bytes(desc[offset : offset + 4], "little")
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
    """Every thread's backtrace from a core, with gdb's warnings, or None when gdb is missing or fails.

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
    if not proc.stdout.strip():
        return None
    # its warnings first, as a terminal shows them: they say whether the files matched the core (gdb_doubts)
    text = "\n".join(part for part in (proc.stderr.strip(), proc.stdout.strip()) if part)
    if sysroot is not None:
        text = text.replace(str(sysroot), "")
    return text or None


GDB_FRAME_PREFIX = "#"
# what gdb says when the files it was given are not the ones the core's process mapped, or
# the core is not whole: its stacks are then unwound through the wrong code (frames such
# as ``initgroups@plt`` under a ``??``), and are not evidence
GDB_DOUBTS = (
    "may not match specified executable",
    "does not match core file",
    "is truncated",
    "extending past end of file",
    "Can't open file",
    "Could not load shared library symbols",
    "Error reading shared library list",
    "Failed to read a valid object file",
    "Couldn't read general-purpose registers",
)


def gdb_doubts(backtrace: str) -> list[str]:
    """gdb's lines that say its stacks cannot be believed (:data:`GDB_DOUBTS`); a frame's
    own text (its arguments) is never one."""
    lines = (line.strip() for line in backtrace.splitlines())
    return [line for line in lines if not line.startswith(GDB_FRAME_PREFIX) and any(d in line for d in GDB_DOUBTS)]


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
