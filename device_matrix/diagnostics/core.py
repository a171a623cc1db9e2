"""Core files: enable them for the child only, then read a backtrace with gdb.

The host's ``core_pattern`` decides where a core goes; with the common ``core`` (or
``core.%p``) it lands in the child's working directory, which the runner makes a
folder of its own. System settings are never changed: only the child's RLIMIT_CORE.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
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


def gdb_backtrace(executable: str, core: Path, timeout: float = GDB_TIMEOUT) -> str | None:
    """Every thread's backtrace from a core, or None when gdb is missing or fails."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return None
    argv = [
        gdb,
        "-batch",
        "-nx",
        "-q",
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
    return text or None


GDB_FRAME_PREFIX = "#"


def gdb_frames(backtrace: str) -> list[str]:
    """Function names of the crashing thread, most recent first.

    gdb prints the crashing thread first after its ``Thread N`` header; frames above a
    ``<signal handler called>`` line are the handler's own (faulthandler re-raising), so
    only the frames below the last such line are kept.
    """
    lines = backtrace.splitlines()
    threads = [i for i, line in enumerate(lines) if line.startswith("Thread ")]
    start = threads[0] + 1 if threads else 0
    frames: list[str] = []
    for line in lines[start:]:
        s = line.strip()
        if s.startswith("Thread "):
            break
        if not s.startswith(GDB_FRAME_PREFIX):
            continue
        body = s.split(None, 1)[1] if " " in s else ""
        if "<signal handler called>" in body:
            frames = []
            continue
        # "0x00007f.. in func (args) at file.c:12" or "func (args) at ..."
        if body.startswith("0x") and " in " in body:
            body = body.split(" in ", 1)[1]
        frames.append(body.split(" (", 1)[0].strip())
    return frames
