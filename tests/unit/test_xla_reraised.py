"""#29: a crash under XLA's own fatal-signal handler (TSL's, ``XLA_DUMP_FATAL_STACK=1``),
which re-raises every fatal signal as SIGABRT: the signal is the one received, the Python
stack survives the handler installed after faulthandler's, and the fingerprint is never
made of the interpreter's frames."""

from __future__ import annotations

import signal
from pathlib import Path

from device_matrix import diagnostics
from device_matrix.diagnostics import fingerprint as fp
from device_matrix.records.schema import RerunRecord
from device_matrix.redact import Redactor
from device_matrix.run import crashes

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"


def _diagnose(name: str, fault_text: str = "") -> dict[str, object]:
    text = (RECORDED / name).read_text()
    return dict(
        diagnostics.diagnose(returncode=-signal.SIGABRT, fault_text=fault_text, output_text=text, redactor=Redactor({}))
    )


def test_a_segfault_xla_re_raised_as_abort_is_recorded_as_the_segfault() -> None:
    d = _diagnose("tsl_reraised_segfault.txt")
    assert d["signal_name"] == "SIGSEGV" and d["signal"] == signal.SIGSEGV
    assert d["exit_code"] == -signal.SIGABRT  # what the process's end said stays in the record
    assert "invalid memory access" in str(d["hint"]) and "raised SIGABRT" in str(d["hint"])


def test_interpreter_frames_alone_are_no_fingerprint() -> None:
    # TSL's stack of a ctypes fault and of os.abort() holds only the interpreter's and
    # libffi's frames: the same in every project, so no basis of its own
    for name, head in (("tsl_reraised_segfault.txt", "SIGSEGV"), ("tsl_reraised_abort.txt", "SIGABRT")):
        d = _diagnose(name)
        assert d["fingerprint_basis"] == [head, fp.NO_FRAMES], d["fingerprint_basis"]


FAULT = """Fatal Python error: Segmentation fault

Current thread 0x00007f4ac0c2b740 (most recent call first):
  File "/p/tests/test_crash.py", line 7 in segfault_helper
  File "/p/tests/test_crash.py", line 22 in test_a_segfault
  File "/venv/lib/python3.11/site-packages/_pytest/python.py", line 157 in pytest_pyfunc_call
"""


def test_with_a_python_stack_the_fingerprint_is_the_helpers_frame() -> None:
    d = _diagnose("tsl_reraised_segfault.txt", FAULT)
    assert d["signal_name"] == "SIGSEGV"
    assert d["fingerprint_basis"] == ["SIGSEGV", "test_crash.py:segfault_helper", "test_crash.py:test_a_segfault"]
    assert "line 7 in segfault_helper" in str(d["python_stack"])


def _rerun(
    outcome: str, fingerprint: str | None, signal_name: str | None, basis: list[str] | None = None
) -> RerunRecord:
    rerun = RerunRecord(
        outcome=outcome,  # type: ignore[typeddict-item]
        returncode=-6,
        signal_name=signal_name,
        fingerprint=fingerprint,
        duration=1.0,
    )
    if basis is not None:
        rerun["fingerprint_basis"] = basis
    return rerun


def test_a_rerun_is_the_same_crash_only_with_the_same_signal_and_fingerprint() -> None:
    d = _diagnose("tsl_reraised_segfault.txt", FAULT)
    crash = crashes.crash_record(
        "cpu-1",
        kind="crash",
        phase="test",
        nodeid="t.py::t",
        when="call",
        attempt=1,
        diagnosis=d,
        repro="",  # type: ignore[arg-type]
    )
    assert crashes.same_crash(crash, _rerun("crashed", str(d["fingerprint"]), "SIGSEGV"))
    assert not crashes.same_crash(crash, _rerun("crashed", "0" * 16, "SIGSEGV"))
    assert not crashes.same_crash(crash, _rerun("crashed", str(d["fingerprint"]), "SIGABRT"))
    assert not crashes.same_crash(crash, _rerun("passed", None, None))


KEEP_FIRST = """
import os, signal, sys
from device_matrix.child.journal import arm_faulthandler

stacks = arm_faulthandler(sys.argv[1])

def other(signum, frame):
    # a handler installed after faulthandler's, as XLA's is when its runtime starts
    print("the other handler ran", flush=True)
    os._exit(0)

signal.signal(signal.SIGSEGV, other)
print("put back:", stacks.keep_first(), stacks.keep_first(), flush=True)

def helper():
    os.kill(os.getpid(), signal.SIGSEGV)

helper()
"""


def test_a_rerun_that_could_not_read_the_python_stack_is_the_same_crash() -> None:
    # #39 item 2: the run read the helper's frame, the rerun alone started XLA in the crashing
    # test and had no stack: it saw less, it is not another crash; frames both have must agree
    d = _diagnose("tsl_reraised_segfault.txt", FAULT)
    crash = crashes.crash_record(
        "cpu-1",
        kind="crash",
        phase="test",
        nodeid="t.py::t",
        when="call",
        attempt=1,
        diagnosis=d,  # type: ignore[arg-type]
        repro="",
    )
    blind = _diagnose("tsl_reraised_segfault.txt")
    assert blind["fingerprint"] != d["fingerprint"]
    basis = blind["fingerprint_basis"]
    assert isinstance(basis, list)
    seen_less = _rerun("crashed", str(blind["fingerprint"]), "SIGSEGV", basis)
    assert crashes.same_crash(crash, seen_less)
    other = ["SIGSEGV", "test_crash.py:other_helper", "test_crash.py:test_a_segfault"]
    assert not crashes.same_crash(crash, _rerun("crashed", "0" * 16, "SIGSEGV", other))
    assert not crashes.same_crash(
        crash, _rerun("crashed", str(blind["fingerprint"]), "SIGABRT", ["SIGABRT", fp.NO_FRAMES])
    )
