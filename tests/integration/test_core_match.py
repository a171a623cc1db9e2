"""gdb's stack of a real core is recorded from the files the process ran, never from others."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from device_matrix.diagnostics import core as core_files
from device_matrix.diagnostics import diagnose, read_core
from device_matrix.executors.container import COPY_FILES
from device_matrix.redact import Redactor

CRASH = "import ctypes; ctypes.string_at(0)"


def real_core(folder: Path) -> Path:
    """The core of a Python process that died in strlen, written into ``folder``."""
    try:
        pattern = Path("/proc/sys/kernel/core_pattern").read_text().strip()
    except OSError:
        pattern = "|"
    if pattern.startswith("|") or "/" in pattern or shutil.which("gdb") is None:
        pytest.skip(f"cores go elsewhere here (core_pattern {pattern!r}), or gdb is not installed")
    subprocess.run(
        [sys.executable, "-c", f"import resource; resource.setrlimit(resource.RLIMIT_CORE, (-1, -1)); {CRASH}"],
        cwd=folder,
        capture_output=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    cores = core_files.new_cores([folder], since=0)
    assert cores, "the process left no core"
    return cores[0]


def copied(core: Path, root: Path, swap: dict[str, str]) -> Path:
    """The files ``core`` maps, copied under ``root`` by the copy a container's are made with
    (here on this host's files); ``swap``: a file put in place of another afterwards."""
    files = core_files.mapped_files(core)
    subprocess.run(
        [sys.executable, "-c", COPY_FILES, str(root), *files],
        capture_output=True,
        timeout=60,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    for path, other in swap.items():
        shutil.copyfile(other, root / path.lstrip("/"))
    return root


def test_a_library_of_another_build_leaves_no_frames_and_says_which(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    core = real_core(work)
    executable = core_files.executable_of(core)
    assert executable == os.path.realpath(sys.executable)
    libc = next(p for p in core_files.mapped_files(core) if "/libc.so" in p)
    # another library the process mapped (_ctypes' own, at least), in libc's place
    other = next(p for p in core_files.mapped_files(core) if ".so" in p and p != libc and "/ld-linux" not in p)

    def read(root: Path) -> dict[str, object]:
        diag = diagnose(returncode=-11, fault_text="", output_text="", redactor=Redactor({}))
        read_core(diag, core, executable="/bin/true", redactor=Redactor({}), keep=True, sysroot=root)
        return dict(diag)

    same = read(copied(core, tmp_path / "same", {}))
    assert same.get("gdb_frames_missing") is None, same.get("gdb_frames_missing")
    frames = same["gdb_frames"]
    assert isinstance(frames, list) and frames and "strlen" in frames[0], frames
    swapped = read(copied(core, tmp_path / "swapped", {libc: other}))
    assert swapped["gdb_frames"] == [] and swapped["gdb_backtrace"] is None
    missing = str(swapped.get("gdb_frames_missing"))
    assert missing.startswith("gdb's stack is not recorded, it would not be the process's: ")
    assert f"{libc} is another build" in missing
