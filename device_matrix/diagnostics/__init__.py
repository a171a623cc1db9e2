"""Turn a dead child into a diagnosis: signal, stacks, fatal lines, fingerprint."""

from __future__ import annotations

import signal as _signal
from pathlib import Path

from device_matrix.diagnostics import core as core_files
from device_matrix.diagnostics import fingerprint as fp
from device_matrix.diagnostics.parse import (
    FaulthandlerDump,
    clean_lines,
    format_python_stack,
    last_lines,
    parse_fatal_lines,
    parse_faulthandler,
    parse_native_stacks,
    parse_terminate,
)
from device_matrix.records.schema import CrashDiagnosis, PythonStackSource
from device_matrix.redact import Redactor

SIGNAL_HINTS: dict[str, str] = {
    "SIGSEGV": "invalid memory access in native code (a null or dangling pointer)",
    "SIGABRT": "abort(): a failed CHECK or LOG(FATAL) in XLA, std::terminate, or a C assert",
    "SIGBUS": "bad memory access: a truncated memory-mapped file, or /dev/shm too small in a container",
    "SIGFPE": "arithmetic fault in native code (integer division by zero)",
    "SIGILL": "illegal instruction: a binary built for a newer CPU (AVX-512...) or a corrupted build",
    "SIGKILL": "killed from outside: usually the kernel's OOM killer (see `dmesg`), or a timeout",
    "SIGTERM": "asked to stop from outside (a CI timeout or a cancelled job)",
    "SIGTRAP": "a breakpoint or __builtin_trap() in native code",
    "SIGXCPU": "the CPU-time limit (ulimit -t, RLIMIT_CPU) ran out",
    "SIGQUIT": "asked to quit from outside (kill -QUIT, or Ctrl-\\ on a terminal); this also writes a core",
}


def signal_from_returncode(returncode: int | None) -> int | None:
    """The signal that ended a child: negative return codes, or 128+N from a shell or engine."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if 128 < returncode < 128 + 65:
        try:
            _signal.Signals(returncode - 128)
        except ValueError:
            return None
        return returncode - 128
    return None


def signal_name(signum: int | None) -> str | None:
    if signum is None:
        return None
    try:
        return _signal.Signals(signum).name
    except ValueError:
        return f"SIG{signum}"


def _signal_from_fatal_error(text: str | None) -> str | None:
    if not text:
        return None
    table = {
        "Segmentation fault": "SIGSEGV",
        "Aborted": "SIGABRT",
        "Bus error": "SIGBUS",
        "Floating-point exception": "SIGFPE",
        "Floating point exception": "SIGFPE",
        "Illegal instruction": "SIGILL",
        "Trace/breakpoint trap": "SIGTRAP",
    }
    return table.get(text)


# A failed test whose output holds a native crash of a process it started (xmp.spawn,
# multiprocessing, a subprocess): filed and deduplicated like a crash, under this kind.
WORKER_CRASH = "worker_crash"

# Evidence that a process died of abort(): the fatal log line, a CHECK's trace, or an
# uncaught C++ exception, each printed just before abort() raises SIGABRT.
_ABORT_EVIDENCE = "SIGABRT"


def output_slice(output_text: str, start: int = 0, end: int | None = None) -> str:
    """One test's part of an attempt's output: ``output_text[start:end]``.

    A rerun must be diagnosed from its own test's start, like the original: output of
    earlier tests (their warnings, dumps, even crashes of their workers) is not this
    crash's evidence, and would give the rerun a fingerprint of its own (issue 10).
    """
    return output_text[start:end]


def diagnose(
    *,
    returncode: int | None,
    fault_text: str,
    output_text: str,
    redactor: Redactor,
    timed_out: bool = False,
    start: int = 0,
    end: int | None = None,
    core_stack: FaulthandlerDump | None = None,
) -> CrashDiagnosis:
    """Everything we can say about one abnormal end.

    ``fault_text`` is the faulthandler file of the attempt; ``output_text`` the child's
    output, of which ``[start:end]`` (characters) is the crashing test's part. Any log
    shape is accepted: see :func:`parse.clean_lines`. ``core_stack``: the Python stacks
    read from the process's core (:func:`parse.parse_pystack`), used where neither the
    file nor the output holds one (#39).
    """
    lines = clean_lines(output_slice(output_text, start, end))
    return _diagnose(
        returncode=returncode,
        fault_lines=clean_lines(fault_text),
        lines=lines,
        redactor=redactor,
        timed_out=timed_out,
        core_stack=core_stack,
    )


def has_native_evidence(text: str | list[str]) -> bool:
    """Whether ``text`` shows a process dying in native code (any process, any format)."""
    lines = clean_lines(text) if isinstance(text, str) else text
    return bool(
        parse_native_stacks(lines)
        or parse_fatal_lines(lines)
        or parse_terminate(lines)
        or any(_signal_from_fatal_error(d.fatal_error) for d in parse_faulthandler(lines))
    )


def diagnose_output(
    text: str,
    *,
    redactor: Redactor,
    start: int = 0,
    end: int | None = None,
) -> CrashDiagnosis | None:
    """The crash of a process a failed test started, from the test's output; else None.

    The test itself ended normally (a failure such as ``BrokenProcessPool``), so there is
    no return code: the signal comes from what the dying process printed. The
    fingerprint is the one the same crash gets in the test's own process. The runner
    records it as a crash of kind :data:`WORKER_CRASH`.
    """
    lines = clean_lines(output_slice(text, start, end))
    if not has_native_evidence(lines):
        return None
    return _diagnose(returncode=None, fault_lines=[], lines=lines, redactor=redactor, timed_out=False)


def _python_stacks(
    fault_lines: list[str], lines: list[str], core_stack: FaulthandlerDump | None, *, timed_out: bool
) -> tuple[FaulthandlerDump | None, FaulthandlerDump | None, PythonStackSource | None]:
    """The fatal dump, the dump whose stacks are the crash's, and where that one came from.

    A core's stacks (#39) serve only where neither the fault file nor the output holds one:
    a handler of the process took the signal before faulthandler could write.
    """
    written = parse_faulthandler(fault_lines)
    dumps: list[FaulthandlerDump] = written + parse_faulthandler(lines)
    if core_stack is not None and not any(d.threads for d in dumps):
        dumps.append(core_stack)
    fatal_dump = next((d for d in reversed(dumps) if d.fatal_error), None)
    hang_dump = next((d for d in reversed(dumps) if not d.fatal_error), None) if timed_out else None
    chosen = fatal_dump or hang_dump or (dumps[-1] if dumps else None)
    source: PythonStackSource | None = None
    if chosen is not None and chosen.threads:
        source = "core" if chosen is core_stack else "faulthandler" if any(d is chosen for d in written) else "output"
    return fatal_dump, chosen, source


def _diagnose(
    *,
    returncode: int | None,
    fault_lines: list[str],
    lines: list[str],
    redactor: Redactor,
    timed_out: bool,
    core_stack: FaulthandlerDump | None = None,
) -> CrashDiagnosis:
    signum = signal_from_returncode(returncode)
    fatal_dump, chosen, source = _python_stacks(fault_lines, lines, core_stack, timed_out=timed_out)
    natives = parse_native_stacks(lines)
    native = natives[-1] if natives else None
    fatals = parse_fatal_lines(lines)
    terminate = parse_terminate(lines)
    received = _signal_from_fatal_error(fatal_dump.fatal_error if fatal_dump else None) or (
        native.signal_name or signal_name(native.signal) if native else None
    )
    name = (
        signal_name(signum)
        or received
        or (_ABORT_EVIDENCE if fatals or terminate or any(n.format == "check_failure" for n in natives) else None)
    )
    reraised = None
    if name == "SIGABRT" and received not in (None, "SIGABRT"):
        # #29: XLA's handler (XLA_DUMP_FATAL_STACK=1) ends every fatal signal with abort();
        # its banner and faulthandler's line name the signal the process received
        reraised, name = name, received
        signum = _signal.Signals[received].value if received in _signal.Signals.__members__ else signum

    # The fingerprint uses only what the process printed itself, never gdb's view:
    # a host without gdb or core files must fingerprint the same crash the same way.
    native_frames = list(native.frames) if native else []
    current = chosen.current if chosen else None
    py_frames = [(f.file, f.function) for f in current.frames] if current else []
    fatal_message = None
    if fatals:
        last = fatals[-1]
        fatal_message = f"{last.file.rsplit('/', 1)[-1]}] {last.message}"
    kind_name = "SIGKILL" if timed_out and name is None else name
    head = "timeout" if timed_out else kind_name
    evidence = fp.Evidence(
        native_frames=native_frames,
        fatal_message=fatal_message,
        exception=(terminate.type, terminate.what) if terminate else None,
        python_frames=py_frames,
        exit_code=returncode if signum is None else None,
    )
    fingerprint, basis = fp.compute(head, **evidence)
    # the thread to blame first, then the others as printed
    threads = ([current] if current else []) + [t for t in (chosen.threads if chosen else []) if t is not current]
    python_stacks = [format_python_stack(t) for t in threads]
    return CrashDiagnosis(
        signal=signum,
        signal_name=name,
        hint=(
            "hung past its timeout: every thread's stack was dumped, then the process group ended"
            if timed_out
            else _hint(name, reraised)
        ),
        exit_code=returncode,
        fatal_error=fatal_dump.fatal_error if fatal_dump else None,
        python_stack=redactor.text("\n\n".join(python_stacks)) if python_stacks else None,
        python_stack_source=source,
        python_stack_missing=None,  # why none was had: the runner knows (no core, no pystack)
        native_stack=redactor.text("\n".join(native.raw)) if native else None,
        native_format=native.format if native else None,
        fatal_lines=[redactor.text(f.raw) for f in fatals[-5:]],
        terminate=redactor.text(str(terminate)) if terminate else None,
        gdb_backtrace=None,  # filled in by read_core, off the critical path
        core_file=None,
        gdb_frames=[],
        last_output=[redactor.text(x) for x in last_lines(lines, 40)],
        fingerprint=fingerprint,
        fingerprint_basis=basis,
        former_fingerprint=fp.former_fingerprint(head, evidence),
    )


def _hint(name: str | None, reraised: str | None) -> str | None:
    hint = SIGNAL_HINTS.get(name or "")
    if reraised is None:
        return hint
    return f"{hint}; a signal handler in the process (XLA's) then raised {reraised}"


MISMATCHES_SHOWN = 3


def read_core(
    diagnosis: CrashDiagnosis,
    core: Path,
    *,
    executable: str,
    redactor: Redactor,
    unread: str | None = None,
    keep: bool = False,
    sysroot: Path | None = None,
) -> None:
    """Add gdb's backtrace of ``core`` to ``diagnosis``, then delete the core unless ``keep``.

    Slow (gdb loads every shared library's symbols), so the runner calls it in the
    background while the run resumes. ``sysroot``: where the executable and libraries
    of a container's process are, at their paths in the image. ``unread``: why gdb is not
    run at all. gdb's stack is recorded only when the files it reads are the ones the
    process ran (:func:`_gdb_view`); otherwise ``gdb_frames_missing`` says why there is none.
    """
    why = unread if unread is not None else _gdb_view(diagnosis, core, executable, redactor, sysroot)
    if why is not None:
        diagnosis["gdb_frames_missing"] = redactor.text(why)
    diagnosis["core_file"] = str(core)
    if not keep:
        # cores of XLA processes run to gigabytes; the backtrace is what we keep
        core.unlink(missing_ok=True)
        diagnosis["core_file"] = f"{core} (deleted after reading)"


def _gdb_view(
    diagnosis: CrashDiagnosis, core: Path, executable: str, redactor: Redactor, sysroot: Path | None
) -> str | None:
    """gdb's backtrace into ``diagnosis``; or, where it would not be evidence, why not.

    gdb is given the executable the core names. Verified before it runs: the core is whole,
    and each file the process mapped is there and the same build (the build-ids the core
    holds); after: gdb itself said nothing of files that do not match (:data:`core.GDB_DOUBTS`).
    A stack unwound through other code than the process ran is not recorded.
    """
    executable = core_files.executable_of(core) or executable
    problems = core_files.mismatches(core, executable, sysroot)
    if not problems:
        text = core_files.gdb_backtrace(executable, core, sysroot=sysroot)
        if not text:
            return "gdb is not installed, or printed nothing for the core"
        problems = [f"gdb: {line}" for line in core_files.gdb_doubts(text)]
        if not problems:
            diagnosis["gdb_backtrace"] = redactor.text(core_files.bound_backtrace(text))
            diagnosis["gdb_frames"] = core_files.gdb_frames(text)[:10]
            return None
    more = len(problems) - MISMATCHES_SHOWN
    listed = "; ".join(problems[:MISMATCHES_SHOWN]) + (f"; and {more} more" if more > 0 else "")
    return f"gdb's stack is not recorded, it would not be the process's: {listed}"
