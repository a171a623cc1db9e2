"""A crash fingerprint: the signal and the top frames, normalised.

Stable across runs and hosts: addresses, offsets, line numbers, hex, temporary paths,
ABI tags and template/argument lists are stripped, so the same crash on two rows or two
days hashes the same. Frames of the signal-handling machinery itself (the handler that
printed the stack, ``raise``, ``abort``...) are skipped: they are the same in every crash.

A fatal line and an exception's ``what()`` are masked as a failure's message is
(:mod:`device_matrix.diagnostics.masking`, #42): what varies from run to run (a pid, an
address, a time, a temporary path, an id or a hash) is masked, a digit of a name
(``sm_80``, ``frame_1``, ``float16``) is kept. Before, every digit was masked: the
fingerprint a crash had then is :func:`former_fingerprint`, by which its issue is found.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import TypedDict

from device_matrix.diagnostics.masking import TEMP_RE, mask_values

TOP_FRAMES = 5

# Frames that belong to whoever reported the crash, not to the crash.
MACHINERY_RE = re.compile(
    r"(CurrentStackTrace|StacktraceHandler|StackTrace::|FailureSignalHandler|WriteFailureInfo|"
    r"ExecuteFailureCallbacks|__restore_rt|^killpg$|^raise$|^abort$|^gsignal$|^__GI_raise|"
    r"^__GI_abort|^__pthread_kill|^pthread_kill|__libc_start|^_start$|LogMessage|"
    r"^\(unknown\)$|^\(\)$|^\?\?$|^$|__cxa_throw|__gxx_personality|std::terminate|"
    r"__gnu_cxx::__verbose_terminate_handler|_Unwind_|"
    # the interpreter's own frames between a test and the native call: in every crash
    r"^_?Py[A-Z][A-Za-z]*_|^_PyEval|^cfunction_|^method_vectorcall|^slot_tp_"
    # #29: its entry points and ctypes' call into C: in every crash of every project, so an
    # abort or a ctypes fault would all hash alike on them
    r"|^Py_(?:RunMain|BytesMain|Main|Exit|FinalizeEx)$|^main$|^ffi_call)"
)

# Python frames of the test runner, and of the pools that start workers: the same under
# every test, and a forked worker's stack holds its parent's frames below its own.
PYTHON_MACHINERY_RE = re.compile(
    r"[/\\](_pytest|pytest|pluggy|device_matrix|multiprocessing|concurrent[/\\]futures)[/\\]"
    # #29: pytest's plugins (pytest_forked/, pytest_timeout.py) run every test alike
    r"|[/\\]pytest_\w+(?:[/\\]|\.py$)"
    # #39: so do the runners of a unittest script (unittest's, absltest's and the absl app
    # it runs in) and the py library's ForkedFunc, in which pytest-forked before 1.7 runs each test
    r"|[/\\](?:unittest|absl[/\\]testing|py[/\\]_process)[/\\]|[/\\]absl[/\\]app\.py$"
    r"|^<frozen runpy>$|[/\\]runpy\.py$"
)

_HEX = re.compile(r"0x[0-9a-fA-F]+")
_OFFSET = re.compile(r"\+0x[0-9a-fA-F]+|\+\d+")
_ABI = re.compile(r"\[abi:[^\]]+\]")
# an absolute or ./relative path: keep its last part, the folders differ between hosts
_PATH = re.compile(r"(?<![\w.])(?:\.{1,2})?(?:/[^\s/:'\"`()\[\]]+)+/([^\s/:'\"`()\[\]]+)")
_DIGITS = re.compile(r"\d+")

# Said in the basis when the process printed nothing but its end: deterministic, and
# visibly not a stack, so such crashes are known to be told apart by the signal alone.
NOTHING_PRINTED = "(no stack, fatal line or exception was printed)"
# #29: a stack was printed, but only of the machinery every crash passes through (the
# interpreter, the signal handlers) and no Python stack: nothing tells this crash apart
NO_FRAMES = "(no frames to fingerprint)"
# a basis made of these alone holds no evidence that tells one crash from another
NO_EVIDENCE = frozenset({NO_FRAMES, NOTHING_PRINTED})


def _strip_brackets(text: str, open_ch: str, close_ch: str) -> str:
    out = []
    depth = 0
    for ch in text:
        if ch == open_ch:
            depth += 1
            if depth == 1:
                out.append(open_ch + close_ch)
            continue
        if ch == close_ch and depth:
            depth -= 1
            continue
        if depth == 0:
            out.append(ch)
    return "".join(out)


def normalize_native(frame: str) -> str:
    text = _ABI.sub("", frame)
    text = _OFFSET.sub("", text)
    text = _HEX.sub("", text)
    text = _strip_brackets(text, "<", ">")
    text = _strip_brackets(text, "(", ")")
    # "in libfoo.so" / module paths: keep the base name only
    text = re.sub(r"\S*/([^/\s]+)", r"\1", text)
    return " ".join(text.split())


def normalize_python(file: str, function: str) -> str:
    # the file's base name only: folders differ between hosts, checkouts and temp dirs
    base = file.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{base}:{function}"


def normalize_message(text: str) -> str:
    """A message without what changes between runs and hosts: the folders of a path,
    addresses, ids, hashes and numbers, but a number's digits in a name. A file under a
    temporary folder keeps its name with every digit masked (``shard_N.bin``): a run may
    number it (a name of random letters, as ``tempfile`` makes, is beyond any rule)."""
    text = TEMP_RE.sub(lambda m: _DIGITS.sub("N", m.group().rstrip("/").rsplit("/", 1)[-1]), text)
    return " ".join(mask_values(_HEX.sub("<hex>", _PATH.sub(r"\1", text))).split())[:200]


def _every_digit_masked(text: str) -> str:
    """A message as it was normalised before #42: every digit masked, a name's too."""
    text = _PATH.sub(r"\1", text)
    text = _HEX.sub("<hex>", text)
    text = _DIGITS.sub("N", text)
    return " ".join(text.split())[:200]


def significant_native(frames: Sequence[str]) -> list[str]:
    out = []
    for frame in frames:
        norm = normalize_native(frame)
        core = norm.split(" ", 1)[0] if norm else norm
        if MACHINERY_RE.search(norm) or MACHINERY_RE.search(core):
            continue
        out.append(norm)
    return out


def compute(
    signal_name: str | None,
    *,
    native_frames: Sequence[str] = (),
    fatal_message: str | None = None,
    exception: tuple[str, str | None] | None = None,
    python_frames: Sequence[tuple[str, str]] = (),
    exit_code: int | None = None,
    message: Callable[[str], str] = normalize_message,
) -> tuple[str, list[str]]:
    """Return ``(fingerprint, the normalised parts it was computed from)``.

    The basis is the signal (or exit code), then every kind of evidence the process
    printed itself: the fatal log line, the uncaught C++ exception's type and ``what()``,
    and the top native frames. Python frames are used only when there is no native
    evidence at all: the same native crash reached from two tests (or from a worker
    process and from the test's own) must hash the same. When nothing was printed the
    basis says so, rather than hashing the signal name as if it were a stack. ``message``
    normalises the fatal line and ``what()``.
    """
    head = signal_name or (f"exit {exit_code}" if exit_code is not None else "unknown")
    parts: list[str] = []
    if fatal_message:
        parts.append(message(fatal_message))
    if exception is not None:
        type_name, what = exception
        parts.append(f"throw {type_name}")
        if what:
            parts.append(f"what {message(what)}")
    parts.extend(significant_native(native_frames)[:TOP_FRAMES])
    if not parts and python_frames:
        own = [(f, fn) for f, fn in python_frames if not PYTHON_MACHINERY_RE.search(f)]
        parts = [normalize_python(f, fn) for f, fn in (own or list(python_frames))[:TOP_FRAMES]]
    basis = [head, *(parts or [NO_FRAMES if native_frames else NOTHING_PRINTED])]
    digest = hashlib.sha256("\n".join(basis).encode()).hexdigest()[:16]
    return digest, basis


class Evidence(TypedDict, total=False):
    """What :func:`compute` reads of a crash besides its signal (its keyword arguments)."""

    native_frames: Sequence[str]
    fatal_message: str | None
    exception: tuple[str, str | None] | None
    python_frames: Sequence[tuple[str, str]]
    exit_code: int | None


def former_fingerprint(signal_name: str | None, evidence: Evidence) -> str | None:
    """The fingerprint :func:`compute` gave this crash before #42 (every digit of its fatal
    line and ``what()`` masked), where it differs from today's: its issue may be filed under it."""
    former = compute(signal_name, **evidence, message=_every_digit_masked)[0]
    return None if former == compute(signal_name, **evidence)[0] else former


def same_crash(basis: Sequence[str], other: Sequence[str]) -> bool:
    """Whether two attempts crashed the same way, judged on what both of them could show (#39).

    The head (the signal, the exit status, a timeout) must be the same. Then the evidence:
    an attempt whose basis holds none (:data:`NO_EVIDENCE`: its Python stack could not be
    had, nothing was printed) saw less of the crash, it did not see another one, so it
    agrees with any basis of the same head; two attempts that both hold evidence agree
    only when it is the same. Every other part of a basis (a fatal line, an exception, a
    native frame) is printed by the process itself, the same in every attempt.
    """
    if not basis or not other or basis[0] != other[0]:
        return False
    mine, theirs = list(basis[1:]), list(other[1:])
    if set(mine) <= NO_EVIDENCE or set(theirs) <= NO_EVIDENCE:
        return True
    return mine == theirs
