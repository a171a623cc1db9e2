"""Every line the runner writes into a row's ``output.log``, each with its reader (#31).

``output.log`` is the children's output as they printed it (redacted), and around each
attempt the runner's own lines: a header with the command, then after the child's output
faulthandler's dump and how the process ended. A crash is told once: the line that ends
the attempt whose process died names the crash record (its id, headline and fingerprint),
so a log read without its record (downloaded, pasted) names the crash the record has,
with a fingerprint that may rest on evidence the log does not hold (the faulthandler file,
a core) (#24). A crash of a process that lived on (a plugin's forked copy) has a line of
its own. ``diagnose`` reads these lines back with the readers beside them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from device_matrix import diagnostics
from device_matrix.records.schema import CrashRecord, TestRecord
from device_matrix.records.summary import crash_headline, failed_before
from device_matrix.redact import Redactor

# --- the header of an attempt -------------------------------------------------------------

_HEADER = "\n=== device-matrix attempt {index} ({purpose}): {command}\n"


def attempt_header(index: int, purpose: str, command: str) -> str:
    """The line an attempt's output begins with: its number, purpose and command."""
    return _HEADER.format(index=index, purpose=purpose, command=command)


def attempt_start(text: str, index: int, before: int) -> int:
    """Where attempt ``index``'s header begins in ``text``, before ``before`` (0: not found)."""
    return max(text.rfind(f"=== device-matrix attempt {index} (", 0, before), 0)


# --- the end of an attempt ----------------------------------------------------------------

# faulthandler's dump in output.log: its last bytes (every thread's stack can be long)
DUMP_IN_LOG = 256 * 1024
_DUMP_CUT = "[device-matrix: the last {size} bytes of {name} follow]\n"
_ENDED_BY_RUNNER = "=== device-matrix attempt {index} was ended by the runner (returncode {rc})"
_ENDED_BY_SIGNAL = "=== device-matrix attempt {index} ended by {name} (returncode {rc})"
_EXITED = "=== device-matrix attempt {index} exited with {rc}"
# the crash, at the end of the line of the attempt it ended (a death, a timeout, a hang at exit),
# with its test's nodeid last (#42: a log read without its record names the test; older logs lack it)
_ITS_CRASH = ": {id}: {headline}; fingerprint {fingerprint}{test}"
_TEST = "; test {nodeid}"
_FAILED_BEFORE = "\n=== device-matrix: {id}: before it ended, {failure}"
_TEST_RE = r"(?:; test (?P<nodeid>.+))?"
# the line of a signal's end (the runner's own kill is never in this form: it is no crash)
ATTEMPT_END_RE = re.compile(
    r"^=== device-matrix attempt (?P<attempt>\d+) ended by SIG[A-Z0-9]+ \(returncode (?P<rc>-?\d+)\)(?:: .*)?$"
)
# any end line that names the crash recorded for its attempt (no ":" before the crash's own)
_ATTEMPT_CRASH_RE = re.compile(
    r"^=== device-matrix attempt (?P<attempt>\d+) [^:]*: (?P<id>\S+): (?P<headline>.*?); "
    rf"fingerprint (?P<fingerprint>[0-9a-f]+){_TEST_RE}$",
    re.MULTILINE,
)


class Ended(Protocol):
    """What the end of an attempt is told from (an :class:`~device_matrix.run.attempt.AttemptResult`)."""

    @property
    def index(self) -> int: ...
    @property
    def returncode(self) -> int: ...
    @property
    def fault(self) -> Path: ...
    @property
    def cut(self) -> int: ...
    @property
    def ended_by_runner(self) -> bool: ...


def _dump(fault: Path) -> str:
    """faulthandler's dump, as a plain pytest prints it on stderr (the child writes it to its file)."""
    try:
        data = fault.read_bytes()
    except OSError:
        return ""
    text = ""
    if len(data) > DUMP_IN_LOG:
        data = data[-DUMP_IN_LOG:]
        text = _DUMP_CUT.format(size=len(data), name=fault.name)
    text += data.decode("utf-8", "replace")
    return text if not text or text.endswith("\n") else text + "\n"


def attempt_end(ended: Ended, *, crash: CrashRecord | None = None, tests: Sequence[TestRecord] = ()) -> str:
    """How the attempt ended, after its output: faulthandler's dump (unless its output was
    cut) and the exit status, with the crash recorded for it, so that output.log alone says
    what happened and ``diagnose`` finds the crash in it (#20, #24)."""
    text = "" if ended.cut else _dump(ended.fault)
    rc, i = ended.returncode, ended.index
    name = diagnostics.signal_name(diagnostics.signal_from_returncode(rc))
    if ended.ended_by_runner:
        line = _ENDED_BY_RUNNER.format(index=i, rc=rc)
    elif name:
        line = _ENDED_BY_SIGNAL.format(index=i, name=name, rc=rc)
    else:
        line = _EXITED.format(index=i, rc=rc)
    if crash is not None:
        line += _ITS_CRASH.format(
            id=crash["id"],
            headline=crash_headline(crash, tests),
            fingerprint=crash["diagnosis"]["fingerprint"],
            test=_TEST.format(nodeid=crash["nodeid"]) if crash["nodeid"] else "",
        )
        # the test's own failure before the crash, told after the line that ends the attempt
        line += "".join(_FAILED_BEFORE.format(id=crash["id"], failure=f) for f in failed_before(crash))
    return f"{text}{line}\n"


def returncode_in(line: str) -> int | None:
    """The exit status an attempt's end line says a signal ended its process with."""
    m = ATTEMPT_END_RE.match(line)
    return int(m["rc"]) if m else None


# --- a crash of a process that lived on -------------------------------------------------------

_RECORDED_CRASH = "=== device-matrix: {id} in attempt {attempt}: {headline}; fingerprint {fingerprint}{test}\n"
_RECORDED_CRASH_RE = re.compile(
    r"=== device-matrix: (?P<id>\S+) in attempt (?P<attempt>\d+): (?P<headline>.*?); "
    rf"fingerprint (?P<fingerprint>[0-9a-f]+){_TEST_RE}$",
    re.MULTILINE,
)


def crash_line(crash: CrashRecord, tests: Sequence[TestRecord] = ()) -> str:
    """The line of a crash whose process went on (a plugin's forked copy died, #29)."""
    return _RECORDED_CRASH.format(
        id=crash["id"],
        attempt=crash["attempt"],
        headline=crash_headline(crash, tests),
        fingerprint=crash["diagnosis"]["fingerprint"],
        test=_TEST.format(nodeid=crash["nodeid"]) if crash["nodeid"] else "",
    )


# any line in the form of an attempt's end, and the header that begins the next attempt
_ANY_END_RE = re.compile(
    r"^=== device-matrix attempt (?P<attempt>\d+) (?:was ended by the runner|ended by SIG|exited with )", re.MULTILINE
)
_ANY_HEADER_RE = re.compile(r"^=== device-matrix attempt \d+ \(", re.MULTILINE)


def _runners_end(text: str, m: re.Match[str]) -> bool:
    """Whether ``m`` is the line the runner ended its attempt with: the runner writes it once,
    after all of the attempt's output, so no line in the form of that attempt's end follows
    it before the next attempt begins. An earlier one is the test's output imitating it (#41)."""
    header = _ANY_HEADER_RE.search(text, m.end())
    stop = header.start() if header else len(text)
    return not any(e["attempt"] == m["attempt"] for e in _ANY_END_RE.finditer(text, m.end(), stop))


def recorded_crashes(text: str) -> list[re.Match[str]]:
    """The crashes a row's output.log says its runner recorded, in order: each match has
    ``id``, ``attempt``, ``headline``, ``fingerprint`` and ``nodeid`` (None in a log written
    before it was told), and its place in ``text`` (#42: where its attempt's output ends).
    An end line that another end line of its attempt follows was printed by a test (#41)."""
    ends = [m for m in _ATTEMPT_CRASH_RE.finditer(text) if _runners_end(text, m)]
    found = [*_RECORDED_CRASH_RE.finditer(text), *ends]
    return sorted(found, key=lambda m: m.start())


def append(log: Path, text: str, redactor: Redactor) -> None:
    """``text`` at the end of the log, redacted (an unwritable log raises OSError)."""
    with log.open("a", encoding="utf-8", errors="backslashreplace") as fh:
        fh.write(redactor.text(text))


def append_quietly(log: Path, text: str, redactor: Redactor) -> None:
    """The same, where a log that cannot be written is told by the attempt's own error."""
    with contextlib.suppress(OSError):
        append(log, text, redactor)
