"""Parsers and fingerprints on recorded outputs of every format we read."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_matrix.diagnostics import diagnose, signal_from_returncode, signal_name
from device_matrix.diagnostics import fingerprint as fp
from device_matrix.diagnostics.core import gdb_frames
from device_matrix.diagnostics.parse import (
    parse_fatal_lines,
    parse_faulthandler,
    parse_native_stacks,
    parse_terminate,
)
from device_matrix.redact import Redactor

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"


def text(name: str) -> str:
    return (RECORDED / name).read_text()


def test_tsl_stack_prefers_demangled_frames() -> None:
    (stack,) = parse_native_stacks(text("tsl_segfault.txt"))
    assert stack.format == "tsl" and stack.signal == 11
    assert stack.frames[0] == "tsl::CurrentStackTrace[abi:cxx11]()"
    assert "torch_xla::XLATensor::GetIrValue() const" in stack.frames
    assert stack.raw[0] == "*** Received signal 11 ***"
    assert stack.raw[-1] == "*** End stack trace ***"


def test_tsl_mangled_only_block_is_read() -> None:
    mangled_only = text("tsl_segfault.txt").split("*** Begin stack trace ***")[0]
    (stack,) = parse_native_stacks(mangled_only)
    assert "_ZN9torch_xla9XLATensor10GetIrValueEv" in stack.frames
    assert "(libc.so.6)" in stack.frames  # a frame without a symbol keeps its module


def test_absl_signal_stack() -> None:
    (stack,) = parse_native_stacks(text("absl_tpu_segfault.txt"))
    assert stack.format == "absl" and stack.signal_name == "SIGSEGV"
    assert stack.frames[0] == "tpu::TpuCompilationCacheInterface::Lookup()"
    assert "xla::PjRtStreamExecutorClient::Compile()" in stack.frames


def test_check_failure_and_fatal_line() -> None:
    out = text("check_failure_abort.txt")
    stacks = parse_native_stacks(out)
    assert [s.format for s in stacks] == ["check_failure", "absl"]
    assert "torch_xla::runtime::PjRtComputationClient::ExecuteComputation()" in stacks[0].frames
    (fatal,) = parse_fatal_lines(out)
    assert fatal.file == "pjrt_computation_client.cc" and fatal.line == 741
    assert fatal.message.startswith("Check failed: status.ok() INTERNAL: Mismatched shapes")


def test_xla_fatal_line_with_date_prefix_from_a_real_abort() -> None:
    out = text("xla_rendezvous_abort.txt")
    (fatal,) = parse_fatal_lines(out)
    assert fatal.file == "external/xla/xla/service/rendezvous.cc"
    assert "Termination timeout" in fatal.message
    (dump,) = parse_faulthandler(out)
    assert dump.fatal_error == "Aborted"
    assert len(dump.threads) == 5
    assert not any(t.current for t in dump.threads)  # the aborting thread had no Python frame
    assert dump.threads[0].frames[1].function == "fn"


def test_terminate_message() -> None:
    exc = parse_terminate(text("terminate_abort.txt"))
    assert exc is not None
    assert exc.type == "std::runtime_error"
    assert exc.what is not None and exc.what.startswith("NRT: nrt_load failed")
    assert str(exc).startswith("std::runtime_error: NRT: nrt_load failed")


def test_faulthandler_hang_dump_without_header() -> None:
    (dump,) = parse_faulthandler(text("faulthandler_hang.txt"))
    assert dump.fatal_error is None
    assert dump.current is not None
    assert dump.current.frames[0].function == "test_multiprocess_all_reduce_after_rendezvous"
    assert dump.current.frames[0].line == 101


def test_gdb_frames_start_below_the_signal_handler() -> None:
    frames = gdb_frames(text("gdb_backtrace.txt"))
    assert frames[:2] == ["__strlen_evex", "string_at"]


def test_same_crash_on_two_hosts_has_one_fingerprint() -> None:
    a = diagnose(returncode=-11, fault_text="", output_text=text("tsl_segfault.txt"), redactor=Redactor({}))
    b = diagnose(
        returncode=139,
        fault_text="",
        output_text=text("tsl_segfault_other_host.txt"),
        redactor=Redactor({}),
    )
    assert a["signal_name"] == b["signal_name"] == "SIGSEGV"
    assert a["fingerprint"] == b["fingerprint"]
    assert a["fingerprint_basis"][1].startswith("torch_xla::XLATensor::GetIrValue")
    # the handler's own frames are not part of it
    assert not any("CurrentStackTrace" in p or "gsignal" in p for p in a["fingerprint_basis"])


def test_different_crashes_differ() -> None:
    a = diagnose(returncode=-11, fault_text="", output_text=text("tsl_segfault.txt"), redactor=Redactor({}))
    c = diagnose(
        returncode=-11,
        fault_text="",
        output_text=text("absl_tpu_segfault.txt"),
        redactor=Redactor({}),
    )
    assert a["fingerprint"] != c["fingerprint"]


def test_fatal_line_fingerprint_ignores_numbers() -> None:
    out = text("xla_rendezvous_abort.txt")
    other = out.replace("op_id=0", "op_id=3").replace("19:00:02.050050", "01:02:03.000000")
    a = diagnose(returncode=-6, fault_text="", output_text=out, redactor=Redactor({}))
    b = diagnose(returncode=-6, fault_text="", output_text=other, redactor=Redactor({}))
    assert a["fingerprint"] == b["fingerprint"]
    assert a["signal_name"] == "SIGABRT"
    assert a["fatal_lines"] and "rendezvous.cc:127" in a["fatal_lines"][0]


def test_python_only_fingerprint_skips_runner_frames() -> None:
    _, basis = fp.compute(
        "SIGSEGV",
        python_frames=[
            ("/usr/lib/python3.11/ctypes/__init__.py", "string_at"),
            ("/tmp/pytest-of-x/p0/suites/test_a.py", "test_c_dies"),
            ("/venv/lib/python3.11/site-packages/_pytest/python.py", "pytest_pyfunc_call"),
        ],
    )
    assert basis == ["SIGSEGV", "__init__.py:string_at", "test_a.py:test_c_dies"]


@pytest.mark.parametrize(
    ("rc", "name"),
    [(-11, "SIGSEGV"), (139, "SIGSEGV"), (134, "SIGABRT"), (-9, "SIGKILL"), (1, None), (0, None)],
)
def test_signal_from_return_codes(rc: int, name: str | None) -> None:
    assert signal_name(signal_from_returncode(rc)) == name


def test_sigkill_hint_points_at_the_oom_killer() -> None:
    d = diagnose(returncode=-9, fault_text="", output_text="", redactor=Redactor({}))
    assert d["signal_name"] == "SIGKILL" and "OOM" in (d["hint"] or "")
    assert d["python_stack"] is None


def test_secrets_in_crash_output_are_redacted() -> None:
    token = "ghp_" + "a1B2c3D4e5" * 4
    out = text("terminate_abort.txt") + f"\nGITHUB_TOKEN={token}\nAuthorization: Bearer {token}\n"
    d = diagnose(returncode=-6, fault_text="", output_text=out, redactor=Redactor({}))
    joined = "\n".join(d["last_output"])
    assert token not in joined
    assert "[redacted]" in joined
