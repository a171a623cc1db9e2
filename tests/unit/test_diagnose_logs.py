"""Diagnosis of logs as CI really produces them (issue 10).

Every sample under tests/fixtures/recorded/ was printed by a real process (see the README
there). The prefixed and interleaved variants are made here, by the transformations
below, from those samples: no stack is edited by hand.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from device_matrix.diagnostics import diagnose, diagnose_output, has_native_evidence
from device_matrix.diagnostics import fingerprint as fp
from device_matrix.diagnostics.parse import (
    MARKER_RE,
    clean_lines,
    parse_fatal_lines,
    parse_faulthandler,
    parse_native_stacks,
    parse_terminate,
)
from device_matrix.records.schema import CrashDiagnosis
from device_matrix.redact import Redactor

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"

# sample -> the return code its process ended with
CRASHES = {
    "tsl_segfault.txt": -11,
    "absl_tpu_segfault.txt": -11,
    "check_failure_abort.txt": -6,
    "xla_rendezvous_abort.txt": -6,
    "terminate_abort.txt": -6,
    "terminate_runtime_error.txt": -6,
    "terminate_out_of_range.txt": -6,
    "torch_xla_null_read.txt": -11,
    "torch_xla_worker_thread_segfault.txt": -11,
    "worker_thread_segfault.txt": -11,
    "pytest_progress_segfault.txt": -11,
    "sigtrap_int3.txt": -5,
    "sigxcpu_cpu_limit.txt": -24,
    "sigquit_from_outside.txt": -3,
}


def text(name: str) -> str:
    return (RECORDED / name).read_text()


def run_diag(output: str, rc: int | None, **kw: int) -> CrashDiagnosis:
    return diagnose(returncode=rc, fault_text="", output_text=output, redactor=Redactor({}), **kw)


# --- what log collectors do to a process's output ------------------------------------------


def actions_timestamps(output: str, seed: int = 0) -> str:
    """A GitHub Actions raw log: every line starts with the time it arrived."""
    rng = random.Random(seed)
    lines = output.splitlines()
    return "\n".join(
        f"2025-05-06T12:{rng.randrange(60):02d}:{rng.randrange(60):02d}.{rng.randrange(10**7):07d}Z {line}"
        for line in lines
    )


def rank_prefix(output: str, rank: int = 0) -> str:
    """torchrun --tee: every line of a worker starts with ``[rankN]:``."""
    return "\n".join(f"[rank{rank}]:{line}" for line in output.splitlines())


def container_prefix(output: str, name: str = "trainer-1") -> str:
    """docker compose logs: the container's name, padded, and a bar."""
    return "\n".join(f"{name:<12}| {line}" for line in output.splitlines())


def after_unterminated(output: str, before: str) -> str:
    """``before`` printed with no newline (progress dots, a partial message), then the crash."""
    return before + output


def coloured(output: str) -> str:
    """A terminal (or CI with colour forced): every line in red, progress dots in green."""
    return "\x1b[32m.\x1b[0m\x1b[32m.\x1b[0m" + "\n".join(f"\x1b[31m{line}\x1b[0m" for line in output.splitlines())


def glued_markers(output: str) -> str:
    """Each line that starts a crash report printed right after the line before it."""
    lines = output.splitlines()
    out = lines[:1]
    for line in lines[1:]:
        if MARKER_RE.match(line):
            out[-1] += line
        else:
            out.append(line)
    return "\n".join(out)


TRANSFORMS = {
    "actions": actions_timestamps,
    "rank": rank_prefix,
    "container": container_prefix,
    "progress_dots": lambda out: after_unterminated(out, "tests/test_a.py ....sx.F"),
    "no_newline": lambda out: after_unterminated(out, "step 1/10 ok..."),
    "actions_over_rank": lambda out: actions_timestamps(rank_prefix(out, 3), seed=7),
    "coloured": coloured,
    "glued": glued_markers,
}


def parsed(output: str) -> tuple[object, ...]:
    lines = clean_lines(output)
    return (
        parse_native_stacks(lines),
        parse_fatal_lines(lines),
        parse_terminate(lines),
        parse_faulthandler(lines),
    )


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("sample", sorted(CRASHES))
def test_prefixes_change_neither_parse_nor_fingerprint(sample: str, transform: str) -> None:
    original = text(sample)
    shaped = TRANSFORMS[transform](original)
    assert shaped != original
    assert parsed(shaped) == parsed(original)
    a = run_diag(original, CRASHES[sample])
    b = run_diag(shaped, CRASHES[sample])
    assert (b["fingerprint"], b["fingerprint_basis"]) == (a["fingerprint"], a["fingerprint_basis"])


@settings(max_examples=60, deadline=None)
@given(
    sample=st.sampled_from(sorted(CRASHES)),
    layers=st.lists(st.sampled_from(["actions", "rank", "container", "coloured", "glued"]), max_size=3),
    before=st.text(alphabet=".sFEx okstep/0123456789", max_size=40),
    seed=st.integers(0, 1000),
)
def test_property_any_prefixes_and_unterminated_text(sample: str, layers: list[str], before: str, seed: int) -> None:
    original = text(sample)
    shaped = after_unterminated(original, before)
    for layer in layers:
        shaped = actions_timestamps(shaped, seed) if layer == "actions" else TRANSFORMS[layer](shaped)
    assert parsed(shaped) == parsed(original)
    assert run_diag(shaped, CRASHES[sample])["fingerprint"] == run_diag(original, CRASHES[sample])["fingerprint"]


def test_marker_after_text_without_newline_keeps_the_native_stack() -> None:
    # the shape from the issue: the basis was ['SIGSEGV'] alone
    out = text("tsl_segfault.txt")
    shaped = after_unterminated(out[out.index("*** Received signal") :], "step 1/10 ok...")
    assert shaped.startswith("step 1/10 ok...*** Received signal 11 ***")
    d = run_diag(shaped, None)
    assert d["signal_name"] == "SIGSEGV"
    assert d["fingerprint_basis"][1] == "torch_xla::XLATensor::GetIrValue() const"


def test_progress_dots_in_a_real_pytest_log() -> None:
    out = text("pytest_progress_segfault.txt")
    assert "test_shards.py ...Fatal Python error: Segmentation fault" in out
    (dump,) = parse_faulthandler(out)
    assert dump.fatal_error == "Segmentation fault"
    d = run_diag(out, -11)
    # pytest's own frames (and runpy's) are the same under every test
    assert d["fingerprint_basis"] == ["SIGSEGV", "__init__.py:string_at", "test_shards.py:test_null_read"]


def test_torch_xla_no_newline_before_faulthandler() -> None:
    out = text("torch_xla_null_read.txt")
    assert "step 1/10 ok [2.0, 2.0]...Fatal Python error" in out
    d = run_diag(out, -11)
    assert d["fatal_error"] == "Segmentation fault"
    assert d["fingerprint_basis"] == [
        "SIGSEGV",
        "__init__.py:string_at",
        "crash.py:test_string_at_null",
        "crash.py:<module>",
    ]


# --- one fingerprint across hosts, reruns and processes ---------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("tsl_segfault.txt", "tsl_segfault_other_host.txt"),
        ("terminate_runtime_error.txt", "terminate_runtime_error_other_host.txt"),
        ("worker_thread_segfault.txt", "torch_xla_worker_thread_segfault.txt"),
    ],
)
def test_two_hosts_one_fingerprint(a: str, b: str) -> None:
    # different addresses, pids, temporary folders and interpreter paths
    assert text(a) != text(b)
    assert run_diag(text(a), -6)["fingerprint"] == run_diag(text(b), 134)["fingerprint"]


def test_original_and_rerun_share_a_fingerprint() -> None:
    crash = text("tsl_segfault.txt")
    # the original attempt: earlier tests passed, one of them had a worker die loudly
    earlier = "collected 12 items\n\ntests/test_a.py ....\n" + text("xla_rendezvous_abort.txt") + "\ntests/test_b.py "
    original = earlier + crash
    rerun = "collected 1 item\n\ntests/test_b.py " + crash
    first = run_diag(original, -11, start=len(earlier))
    again = run_diag(rerun, -11, start=len("collected 1 item\n\n"))
    assert first["fingerprint"] == again["fingerprint"]
    assert first["fingerprint"] == run_diag(crash, -11)["fingerprint"]
    # read from the attempt's start, the earlier worker's fatal line would join the basis
    assert run_diag(original, -11)["fingerprint"] != first["fingerprint"]


@pytest.mark.parametrize("preceding", ["", "x" * 5000, "..........\n" * 30, "warning: slow\nstep 3/10 ok..."])
def test_same_crash_after_any_preceding_output(preceding: str) -> None:
    crash = text("terminate_runtime_error.txt")
    assert run_diag(preceding + crash, -6)["fingerprint"] == run_diag(crash, -6)["fingerprint"]


def test_worker_crash_matches_the_same_crash_in_the_tests_own_process() -> None:
    worker = text("pytest_worker_terminate.txt")
    assert "BrokenProcessPool" in worker
    d = diagnose_output(worker, redactor=Redactor({}))
    assert d is not None
    own = run_diag(text("terminate_runtime_error.txt"), -6)
    assert d["signal_name"] == own["signal_name"] == "SIGABRT"
    assert d["exit_code"] is None
    assert d["fingerprint"] == own["fingerprint"]
    assert d["terminate"] is not None and "shard_7.bin" in d["terminate"]


def test_worker_crash_is_found_behind_any_prefix() -> None:
    worker = text("pytest_worker_terminate.txt")
    direct = diagnose_output(worker, redactor=Redactor({}))
    shaped = diagnose_output(rank_prefix(actions_timestamps(worker), 1), redactor=Redactor({}))
    assert direct is not None and shaped is not None
    assert shaped["fingerprint"] == direct["fingerprint"]


@pytest.mark.parametrize(
    "sample",
    ["xla_rendezvous_abort.txt", "tsl_segfault.txt", "absl_tpu_segfault.txt", "check_failure_abort.txt"],
)
def test_worker_crash_formats(sample: str) -> None:
    out = "E   concurrent.futures.process.BrokenProcessPool: A process in the pool died\n" + text(sample)
    d = diagnose_output(out, redactor=Redactor({}))
    assert d is not None
    assert d["fingerprint"] == run_diag(text(sample), CRASHES[sample])["fingerprint"]


@pytest.mark.parametrize(
    "output",
    [
        "E   AssertionError: assert 1 == 2\n1 failed in 0.1s\n",
        text("faulthandler_hang.txt"),  # a hang dump: no crash
        text("sigtrap_int3.txt"),  # a registered-signal dump: no sign of how it ended
    ],
)
def test_ordinary_failures_have_no_worker_diagnosis(output: str) -> None:
    assert not has_native_evidence(output)
    assert diagnose_output(output, redactor=Redactor({})) is None


# --- C++ exceptions ------------------------------------------------------------------------


def test_exception_type_and_what_are_in_the_basis() -> None:
    d = run_diag(text("terminate_runtime_error.txt"), -6)
    assert d["fingerprint_basis"] == [
        "SIGABRT",
        "throw std::runtime_error",
        "what cannot open checkpoint shard_N.bin: error N at offset <hex>",
    ]


def test_unrelated_terminates_no_longer_merge() -> None:
    runtime = run_diag(text("terminate_runtime_error.txt"), -6)
    out_of_range = run_diag(text("terminate_out_of_range.txt"), -6)
    nrt = run_diag(text("terminate_abort.txt"), -6)
    assert len({runtime["fingerprint"], out_of_range["fingerprint"], nrt["fingerprint"]}) == 3
    # same type, different what(): still two issues
    assert runtime["fingerprint_basis"][1] == nrt["fingerprint_basis"][1] == "throw std::runtime_error"


def test_exception_type_keeps_its_namespace() -> None:
    # a type is split from what() at ": ", never at the first colon or the first space
    _, basis = fp.compute("SIGABRT", exception=("std::runtime_error", "x: y"))
    assert basis == ["SIGABRT", "throw std::runtime_error", "what x: y"]


# --- signals other than SIGSEGV and SIGABRT ------------------------------------------------


@pytest.mark.parametrize(
    ("sample", "rc", "name", "frame"),
    [
        ("sigtrap_int3.txt", -5, "SIGTRAP", "crash.py:test_barrier_check"),
        ("sigxcpu_cpu_limit.txt", -24, "SIGXCPU", "crash.py:spin_on_loss"),
        ("sigquit_from_outside.txt", -3, "SIGQUIT", "crash.py:wait_for_peer"),
    ],
)
def test_signals_use_the_stack_not_the_name_alone(sample: str, rc: int, name: str, frame: str) -> None:
    d = run_diag(text(sample), rc)
    assert d["signal_name"] == name
    assert d["fingerprint_basis"][0] == name
    assert d["fingerprint_basis"][1] == frame


@pytest.mark.parametrize(("rc", "name"), [(-5, "SIGTRAP"), (-24, "SIGXCPU"), (-3, "SIGQUIT"), (139, "SIGSEGV")])
def test_nothing_but_a_signal_says_so(rc: int, name: str) -> None:
    a = run_diag("collected 1 item\n\ntests/test_a.py ", rc)
    b = run_diag("", rc)
    assert a["fingerprint_basis"] == [name, fp.NOTHING_PRINTED]
    assert a["fingerprint"] == b["fingerprint"]


def test_exit_code_head_when_no_signal() -> None:
    d = run_diag("", 3)
    assert d["fingerprint_basis"] == ["exit 3", fp.NOTHING_PRINTED]
    assert run_diag("", 4)["fingerprint"] != d["fingerprint"]


def test_worker_thread_segfault_without_current_thread_blames_the_busy_thread() -> None:
    out = text("worker_thread_segfault.txt")
    (dump,) = parse_faulthandler(out)
    assert not any(t.current for t in dump.threads)
    assert dump.threads[0].frames[0].function == "wait"  # an idle thread is printed first
    d = run_diag(out, -11)
    assert d["fingerprint_basis"] == ["SIGSEGV", "crash.py:test_loader_thread_crash", "crash.py:<module>"]
    assert d["python_stack"] is not None
    assert "test_loader_thread_crash" in d["python_stack"].split("\n\n")[0]
    assert d["python_stack"].count("(most recent call first)") == 3  # every thread is kept


def test_real_torchrun_rank_prefixes() -> None:
    out = text("torchrun_rank_terminate.txt")
    assert "[default1]:terminate called after throwing" in out
    d = diagnose_output(out, redactor=Redactor({}))
    assert d is not None
    assert d["fatal_error"] == "Aborted"
    assert d["python_stack"] is not None and "test_restore_on_rank" in d["python_stack"]
    # the worker under torchrun and the test's own process: one crash, one fingerprint
    assert d["fingerprint"] == run_diag(text("terminate_runtime_error.txt"), -6)["fingerprint"]


@pytest.mark.parametrize(
    ("raw", "lines"),
    [
        ("2025-05-06T12:34:56.1234567Z", [""]),  # Actions stamps empty lines too
        (
            "2025-05-06T12:34:56Z [rank3]:[W1130 00:18:30.106 26164 run.py:803] slow",
            ["[W1130 00:18:30.106 26164 run.py:803] slow"],
        ),
        ('trainer-1    | [default0]:  File "a.py", line 3 in f', ['  File "a.py", line 3 in f']),
        ("step 1/10 ok...*** Received signal 11 ***", ["step 1/10 ok...", "*** Received signal 11 ***"]),
        (
            ".F0506 12:34:56.789012 123 a.cc:9] Check failed: x",
            [".", "F0506 12:34:56.789012 123 a.cc:9] Check failed: x"],
        ),
        ("E   assert a | b", ["E   assert a | b"]),  # not a container prefix
        ("web | *** Received signal 6 ***", ["*** Received signal 6 ***"]),  # the longest name: one space
    ],
)
def test_clean_lines(raw: str, lines: list[str]) -> None:
    assert clean_lines(raw) == lines


def test_python_frames_skip_the_pool_that_started_a_worker() -> None:
    # a forked pool worker's stack: its function, the pool's plumbing, then the test
    (dump,) = parse_faulthandler(text("pytest_worker_terminate.txt"))
    assert dump.current is not None
    frames = [(f.file, f.function) for f in dump.current.frames]
    assert "_process_worker" in [fn for _, fn in frames]
    _, basis = fp.compute("SIGABRT", python_frames=frames)
    assert basis == ["SIGABRT", "test_shards.py:_restore", "test_shards.py:test_restore_in_worker"]


def test_a_check_failure_trace_alone_means_abort() -> None:
    out = text("check_failure_abort.txt")
    trace = out[out.index("*** Check failure stack trace: ***") :]
    trace = trace[: trace.index("*** SIGABRT")]  # the check's own trace, without abort's handler
    d = diagnose_output(trace, redactor=Redactor({}))
    assert d is not None and d["signal_name"] == "SIGABRT"
    assert d["fatal_lines"] == []
