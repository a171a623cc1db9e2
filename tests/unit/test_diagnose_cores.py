"""gdb's crashing thread, bounded backtraces, cores of descendants, repro commands."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

from device_matrix.diagnostics import core as core_files
from device_matrix.diagnostics import diagnose, read_core
from device_matrix.diagnostics.repro import container_repro_command, repro_command
from device_matrix.redact import Redactor
from device_matrix.run.crashes import CoreReader

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"
GDB = (RECORDED / "worker_thread_segfault_gdb.txt").read_text()


def test_the_thread_that_received_the_signal_leads() -> None:
    # gdb prints thread 6 (the main thread, in pthread_join) first; thread 1 crashed
    _, threads = core_files.gdb_threads(GDB)
    assert [t.number for t in threads] == [6, 5, 4, 3, 2, 1]
    lead = core_files.crashing_thread(GDB)
    assert lead is not None and lead.number == 1
    assert core_files.gdb_frames(GDB)[:3] == [
        "dm_fixture::read_shard_header",
        "dm_fixture::load_shard",
        "dm_fixture::shard_loader_main",
    ]


def test_without_a_signal_frame_gdbs_current_thread_leads() -> None:
    # the same core read as if no handler had run: the kernel's thread is gdb's current
    lines = [line for line in GDB.splitlines() if "<signal handler called>" not in line]
    lead = core_files.crashing_thread("\n".join(lines))
    assert lead is not None and lead.number == 1


def test_function_names_keep_template_arguments() -> None:
    frames = core_files.gdb_frames(GDB)
    assert "std::__invoke<void (*)(int), int>" in frames


def test_a_cut_backtrace_keeps_the_crashing_thread() -> None:
    lead = core_files.crashing_thread(GDB)
    assert lead is not None
    block = "\n".join(lead.lines)
    limit = len(block) + 400
    assert len(GDB) > 4 * limit  # the others would not fit
    bounded = core_files.bound_backtrace(GDB, limit)
    assert len(bounded) <= limit + 200
    assert block in bounded
    assert bounded.index("Thread 1 (") < bounded.index("more thread(s) left out")
    assert "Program terminated with signal SIGSEGV" in bounded
    # with room, every thread is kept, the crashing one first
    full = core_files.bound_backtrace(GDB, 10 * len(GDB))
    heads = [line.split(" (", 1)[0] for line in full.splitlines() if line.startswith("Thread ")]
    assert heads == ["Thread 1", "Thread 6", "Thread 5", "Thread 4", "Thread 3", "Thread 2"]


def test_read_core_records_the_crashing_thread(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    core = tmp_path / "core"
    core.write_bytes(core_files.ELF_MAGIC + b"\0" * 64)
    monkeypatch.setattr(core_files, "gdb_backtrace", lambda executable, path, sysroot=None: GDB)
    diag = diagnose(
        returncode=-11,
        fault_text="",
        output_text=(RECORDED / "worker_thread_segfault.txt").read_text(),
        redactor=Redactor({}),
    )
    before = diag["fingerprint"]
    read_core(diag, core, executable=sys.executable, redactor=Redactor({}))
    assert diag["gdb_frames"][0] == "dm_fixture::read_shard_header"
    assert diag["gdb_backtrace"] is not None and diag["gdb_backtrace"].index("Thread 1 (") < 400
    assert diag["fingerprint"] == before  # gdb's view never changes the fingerprint
    assert not core.exists()


def _core(path: Path, e_type: int = 4, size: int = 64) -> Path:
    """An ELF file with the header of a core (``e_type`` 4) or of something else."""
    path.write_bytes(core_files.ELF_MAGIC + b"\0" * 12 + e_type.to_bytes(2, "little") + b"\0" * size)
    return path


def test_new_cores_are_elf_cores_written_since_the_attempt_began(tmp_path: Path) -> None:
    work, test_dir = tmp_path / "work", tmp_path / "test"
    work.mkdir()
    test_dir.mkdir()
    older = _core(work / "core.1")
    os.utime(older, (1_000_000, 1_000_000))  # left by an earlier run
    first = _core(work / "core")
    os.utime(first, (2_000_000, 2_000_000))
    second = _core(test_dir / "core.4242")
    os.utime(second, (2_000_005, 2_000_005))
    (test_dir / "core.py").write_text("print('a module named core')\n")
    _core(test_dir / "core.exe", e_type=2)  # an executable, not a core
    (test_dir / "core.dir").mkdir()
    found = core_files.new_cores([work, test_dir, tmp_path / "gone"], since=2_000_000)
    assert found == [second.resolve(), first.resolve()]  # newest first
    assert core_files.is_core(first) and not core_files.is_core(test_dir / "core.exe")
    assert not core_files.is_core(tmp_path / "missing")


def test_the_reader_reads_the_first_core_and_removes_the_others(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first, other = _core(tmp_path / "core.1"), _core(tmp_path / "core.2")
    read: list[int] = []  # the files gdb read, by inode: the reader reads a core under a name of its own

    def fake_gdb(executable: str, path: Path, sysroot: Path | None = None) -> str:
        read.append(path.stat().st_ino)
        return GDB

    monkeypatch.setattr(core_files, "gdb_backtrace", fake_gdb)
    diag = diagnose(returncode=-11, fault_text="", output_text="", redactor=Redactor({}))
    reader = CoreReader(interpreter=sys.executable, redactor=Redactor({}), use_gdb=True, keep=False)
    written = first.stat().st_ino
    reader.attach(diag, [first, other])
    assert not other.exists()  # a descendant's core: removed at once, unread
    reader.close()
    assert read == [written]
    assert diag["gdb_frames"][0] == "dm_fixture::read_shard_header"
    assert diag["core_file"] == f"{first} (deleted after reading)" and not first.exists()
    # cores of an attempt that crashed nothing of ours are removed unread
    stray = _core(tmp_path / "core.3")
    reader = CoreReader(interpreter=sys.executable, redactor=Redactor({}), use_gdb=True, keep=False)
    reader.attach(None, [stray])
    reader.close()
    assert not stray.exists() and read == [written]


def test_the_reader_keeps_cores_when_asked(tmp_path: Path) -> None:
    first, other, stray = _core(tmp_path / "core.1"), _core(tmp_path / "core.2"), _core(tmp_path / "core.3")
    diag = diagnose(returncode=-6, fault_text="", output_text="", redactor=Redactor({}))
    reader = CoreReader(interpreter=sys.executable, redactor=Redactor({}), use_gdb=False, keep=True)
    reader.attach(diag, [first, other])
    reader.attach(None, [stray])
    reader.close()
    assert first.exists() and other.exists() and stray.exists()
    assert diag["core_file"] == str(first) and diag["gdb_backtrace"] is None


def test_repro_names_the_interpreter_and_folder() -> None:
    cmd = repro_command(
        ["suites/mlp/test_mlp.py::test_step"],
        python="/opt/venvs/xla 2.9/bin/python",
        workdir="/srv/project",
        env={"PJRT_DEVICE": "CPU", "DEVICE_MATRIX_DEVICE": "cpu"},
        nox_session="cpu",
    )
    first, second = cmd.splitlines()
    assert first.startswith("cd /srv/project && DEVICE_MATRIX_DEVICE=cpu PJRT_DEVICE=CPU ")
    argv = shlex.split(first.split(" && ", 1)[1])
    assert argv[2:] == [
        "/opt/venvs/xla 2.9/bin/python",
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "suites/mlp/test_mlp.py::test_step",
    ]
    assert second == "# or: nox -s cpu -- --test suites/mlp/test_mlp.py::test_step"


def test_repro_in_a_container() -> None:
    launcher = [
        "podman",
        "run",
        "--rm",
        "--init",
        "--ulimit",
        "nofile=1024:1024",
        "-v",
        "/srv/project:/srv/project",
        "-w",
        "/srv/project",
        "-e",
        "HF_TOKEN",
        "-e",
        "PJRT_DEVICE=TPU",
        "ghcr.io/org/xla:tpu",
        "python3",
    ]
    cmd = container_repro_command(["suites/mlp"], launcher=launcher, nox_session="tpu")
    first, second = cmd.splitlines()
    assert shlex.split(first) == [*launcher, "-m", "pytest", "-p", "no:cacheprovider", "suites/mlp"]
    assert second == "# or: nox -s tpu -- --test suites/mlp"


def _core_with_files(names: list[bytes]) -> bytes:
    """A 64-bit little-endian ELF core holding one other note, then an NT_FILE note."""
    import struct

    def note(kind: int, desc: bytes) -> bytes:
        pad = b"\0" * (-len(desc) % 4)
        return struct.pack("<III", 5, len(desc), kind) + b"CORE\0\0\0\0" + desc + pad

    desc = struct.pack("<QQ", len(names), 4096) + b"".join(struct.pack("<QQQ", k, k + 1, 0) for k in range(len(names)))
    notes = note(1, b"\0" * 336) + note(core_files.NT_FILE, desc + b"".join(n + b"\0" for n in names))
    ident = b"\x7fELF\x02\x01\x01" + b"\0" * 9
    header = ident + struct.pack("<HHIQQQIHHHHHH", 4, 62, 1, 0, 64, 0, 0, 64, 56, 1, 64, 0, 0)
    phdr = struct.pack("<IIQQQQQQ", core_files.PT_NOTE, 4, 120, 0, 0, len(notes), 0, 4)
    return header + phdr + notes


def test_mapped_files_are_read_from_the_cores_file_note(tmp_path: Path) -> None:
    core = tmp_path / "core"
    core.write_bytes(
        _core_with_files([b"/usr/bin/python3.11", b"/lib/libgone.so (deleted)", b"/dev/zero", b"/usr/lib/libc.so.6"])
    )
    assert core_files.mapped_files(core) == ["/usr/bin/python3.11", "/usr/lib/libc.so.6"]
    # not a core of this kind, or cut short: nothing, not an error
    (tmp_path / "text").write_text("core dumped\n")
    assert core_files.mapped_files(tmp_path / "text") == []
    (tmp_path / "cut").write_bytes(core.read_bytes()[:130])
    assert core_files.mapped_files(tmp_path / "cut") == []
    assert core_files.mapped_files(tmp_path / "missing") == []
