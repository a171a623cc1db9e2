"""#39: a crash's Python stack read from its core file (pystack): what is read, and what is said.

The part of these tests that starts no process; the rest is in tests/integration/test_core_stack.py (#41)."""

from __future__ import annotations

import functools
import re
import signal
import struct
from pathlib import Path
from typing import Any

import pytest

from device_matrix import diagnostics
from device_matrix.diagnostics import core as core_files
from device_matrix.diagnostics import fingerprint as fp
from device_matrix.diagnostics.parse import parse_pystack
from device_matrix.redact import Redactor
from device_matrix.run import crashes

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"


PYSTACK = (RECORDED / "pystack_core.txt").read_text()


CRASHED, WAITER = 27364, 27410  # the threads of that core: the main one crashed


def test_pystack_threads_become_a_dump_with_the_crashing_thread_current() -> None:
    dump = parse_pystack(PYSTACK, CRASHED)
    assert dump is not None
    current = dump.current
    assert current is not None and current.thread == hex(CRASHED)
    # most recent call first, as faulthandler lists them
    assert [(Path(f.file).name, f.line, f.function) for f in current.frames] == [
        ("__init__.py", 519, "string_at"),
        ("t.py", 7, "segfault_helper"),
        ("t.py", 10, "test_x"),
        ("t.py", 11, "<module>"),
    ]
    assert len(dump.threads) == 2
    # without the core's word, the thread that held the GIL; a thread named by the core wins
    unnamed = parse_pystack(PYSTACK)
    assert unnamed is not None and unnamed.current is not None and unnamed.current.thread == hex(CRASHED)
    other = parse_pystack(PYSTACK, WAITER)
    assert other is not None and other.current is not None and other.current.thread == hex(WAITER)


def test_pystack_text_without_a_python_thread_is_no_stack() -> None:
    assert parse_pystack("Core file information:\nThe process died due receiving signal SIGABRT\n") is None


def _core_with_thread(path: Path, tid: int, pid: int | None = None, ppid: int = 1) -> Path:
    """A minimal 64-bit ELF core: one PT_NOTE holding an NT_PRSTATUS with ``tid`` and an
    NT_PRPSINFO with ``pid`` (``tid``'s by default) and its parent's ``ppid``."""
    prstatus = bytearray(336)
    struct.pack_into("<I", prstatus, core_files.PRSTATUS_PID, tid)
    prpsinfo = bytearray(136)
    struct.pack_into("<I", prpsinfo, core_files.PRPSINFO_PID, tid if pid is None else pid)
    struct.pack_into("<I", prpsinfo, core_files.PRPSINFO_PPID, ppid)
    name = b"CORE\0\0\0\0"
    note = b"".join(
        struct.pack("<III", 5, len(desc), kind) + name + bytes(desc)
        for kind, desc in ((core_files.NT_PRSTATUS, prstatus), (core_files.NT_PRPSINFO, prpsinfo))
    )
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<H", header, 16, core_files.ET_CORE)
    struct.pack_into("<Q", header, 0x20, 64)  # program headers right after the header
    struct.pack_into("<HH", header, 0x36, 56, 1)
    phdr = struct.pack("<IIQQQQQQ", core_files.PT_NOTE, 0, 64 + 56, 0, 0, len(note), 0, 0)
    path.write_bytes(bytes(header) + phdr + note)
    return path


def test_the_crashing_thread_is_the_cores_first_prstatus(tmp_path: Path) -> None:
    core = _core_with_thread(tmp_path / "core", CRASHED)
    assert core_files.is_core(core)
    assert core_files.crashed_thread(core) == CRASHED
    assert core_files.crashed_thread(tmp_path / "missing") is None
    assert core_files.process_id(_core_with_thread(tmp_path / "core.2", WAITER, pid=CRASHED)) == CRASHED


def test_a_core_says_its_processs_parent(tmp_path: Path) -> None:
    # a forked copy's core is its parent's copy's: the id the plugin and the runner check
    core = _core_with_thread(tmp_path / "core", CRASHED, ppid=WAITER)
    assert (core_files.process_id(core), core_files.parent_id(core)) == (CRASHED, WAITER)
    assert core_files.parent_id(tmp_path / "missing") is None


def test_a_crash_reads_its_own_processs_core_never_a_descendants(tmp_path: Path) -> None:
    # newest first: a worker the test started died after the process, or the process left none
    worker = _core_with_thread(tmp_path / "core.worker", 4242)
    own = _core_with_thread(tmp_path / "core", CRASHED)
    assert crashes.own_core([worker, own], CRASHED) == own
    assert crashes.own_core([worker], CRASHED) is None
    assert crashes.own_core([worker, own], None) == worker  # the process did not say its id
    assert crashes.own_core([], CRASHED) is None


TSL_SEGFAULT = (RECORDED / "tsl_reraised_segfault.txt").read_text()


FAULT = """Fatal Python error: Segmentation fault

Current thread 0x00007f4ac0c2b740 (most recent call first):
  File "/p/tests/test_crash.py", line 7 in segfault_helper
  File "/p/tests/test_crash.py", line 22 in test_a_segfault
"""


def _diagnose(fault_text: str = "", output: str = TSL_SEGFAULT, **kw: Any) -> dict[str, Any]:
    return dict(
        diagnostics.diagnose(
            returncode=-signal.SIGABRT, fault_text=fault_text, output_text=output, redactor=Redactor({}), **kw
        )
    )


def test_the_cores_stack_names_the_helper_and_says_where_it_came_from() -> None:
    # XLA's handler printed only its native stack: without the core, nothing tells crashes apart
    assert _diagnose()["fingerprint_basis"] == ["SIGSEGV", fp.NO_FRAMES]
    assert _diagnose()["python_stack_source"] is None
    d = _diagnose(core_stack=parse_pystack(PYSTACK, CRASHED))
    assert d["signal_name"] == "SIGSEGV" and d["python_stack_source"] == "core"
    assert re.search(r't\.py", line 7 in segfault_helper', d["python_stack"]), d["python_stack"]
    assert d["fingerprint_basis"] == [
        "SIGSEGV",
        "__init__.py:string_at",
        "t.py:segfault_helper",
        "t.py:test_x",
        "t.py:<module>",
    ]


def test_a_stack_the_process_wrote_itself_comes_before_the_cores() -> None:
    core_stack = parse_pystack(PYSTACK, CRASHED)
    d = _diagnose(FAULT, core_stack=core_stack)
    assert d["python_stack_source"] == "faulthandler"
    assert d["fingerprint_basis"] == ["SIGSEGV", "test_crash.py:segfault_helper", "test_crash.py:test_a_segfault"]
    # absltest's own faulthandler writes into the output
    d = _diagnose(output=FAULT + TSL_SEGFAULT, core_stack=core_stack)
    assert d["python_stack_source"] == "output"


def test_when_no_stack_can_be_had_the_record_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def without_core_stack(core: Path | None) -> dict[str, Any]:
        return dict(
            crashes.with_core_stack(
                lambda core_stack: diagnostics.diagnose(
                    returncode=-signal.SIGABRT,
                    fault_text="",
                    output_text=TSL_SEGFAULT,
                    redactor=Redactor({}),
                    core_stack=core_stack,
                ),
                core,
                Redactor({}),
            )
        )

    assert without_core_stack(None)["python_stack_missing"] == crashes.NO_CORE
    core = _core_with_thread(tmp_path / "core", CRASHED)
    monkeypatch.setattr(core_files, "pystack_command", lambda: None)
    missing = without_core_stack(core)["python_stack_missing"]
    assert "pystack is not installed" in missing and "pip install pystack" in missing
    monkeypatch.setattr(core_files, "pystack_core", lambda core: (PYSTACK, None))
    d = without_core_stack(core)
    assert d["python_stack_source"] == "core" and d["python_stack_missing"] is None
    assert "t.py:segfault_helper" in d["fingerprint_basis"]


def test_the_terminal_says_why_a_crash_has_no_python_stack(tmp_path: Path) -> None:
    import io

    from device_matrix.cli import print_summary
    from device_matrix.config import load
    from device_matrix.output import Output
    from tests import records as R

    crash = R.crash("cpu", "t.py::test_x", "f" * 16, signal="SIGSEGV")
    crash["diagnosis"]["python_stack_missing"] = (
        "pystack is not installed where the runner runs (pip install pystack; Linux on x86_64 and aarch64)"
    )
    record = R.record("cpu", [R.test("t.py::test_x", "crashed", crash_id=crash["id"])], [crash])
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\n")
    stream = io.StringIO()
    print_summary(Output(stream, environ={}, tty=False), [record], load(tmp_path))  # type: ignore[list-item]
    assert "      no Python stack: pystack is not installed where the runner runs" in stream.getvalue()


def test_a_process_ended_by_a_signal_that_writes_no_core_is_said_so() -> None:
    def missing(returncode: int | None) -> str | None:
        made = functools.partial(
            diagnostics.diagnose, returncode=returncode, fault_text="", output_text="", redactor=Redactor({})
        )
        return crashes.with_core_stack(made, None, Redactor({}))["python_stack_missing"]

    assert missing(-signal.SIGKILL) == "no core file: the process was ended by SIGKILL, which writes none"
    assert missing(1) == "no core file: the process exited, it was not ended by a signal"
    assert missing(-signal.SIGSEGV) == crashes.NO_CORE
