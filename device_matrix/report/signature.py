"""What makes two failures the same failure (#32): a message with what differs from run to
run masked, and the innermost frame of a traceback in the project's own code.

The verdicts compare a failure on a pull request with the same test's on its base by the
masked message (report/verdicts.py, through history.signature); the failure groups
(report/groups.py) gather a run's failures by the masked message and the frame.

Masked, in this order (each rule runs on what the ones before it left):

- paths under a temporary folder (``/tmp``, ``/var/tmp``, ``/dev/shm``, macOS's
  ``/var/folders`` and ``/private/var/folders``, pytest's ``pytest-of-<user>``, Windows'
  ``\\Temp\\``), as ``<tmp>``: each run gets another;
- other absolute paths, as ``<path>``: a checkout or a cache sits elsewhere on each machine;
- UUIDs, as ``<uuid>``;
- hex hashes (8 hex digits or more, a digit among them: a hash that happens to have no
  letter is masked alike), as ``<hex>``;
- pointer-like numbers (``0x7f3a…``), as ``N`` (as the history's signatures always masked them);
- every other number (ports, counts, line numbers, sizes, a device's ordinal in ``cuda:1``), as
  ``N``, except (#42) a number by its role:

  - a number that says what happened is the cause, and kept: the value of an exit status or
    code (``exit status 137``, ``exited with code 3``, ``returncode=2``), a signal
    (``signal 9``, ``<Signals.SIGKILL: 9>``), an errno (``[Errno 2]``) and an HTTP status
    (``HTTP Error 503``, ``status code 429``, ``404 Client Error``): a child that exited 1
    and one killed at 137 are two failures;
  - a number inside a name (a letter or ``_`` just before it: ``float16``, ``bfloat16``,
    ``int8``, ``sm_80``, ``layer3``) is part of the name: ``float16`` and ``float64`` are
    two dtypes.
"""

from __future__ import annotations

import re
from collections.abc import Collection

_UUID_RE = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
# a path ends where a quote, a bracket, a comma, a semicolon, a colon or a space does
_PATH_CHARS = r"[^\s'\"()\[\]{}<>,;:]"
_TEMP_RE = re.compile(
    rf"(?:/private)?/var/folders/{_PATH_CHARS}*"
    rf"|(?<![\w.])/(?:tmp|var/tmp|dev/shm)(?:/{_PATH_CHARS}*)?"
    rf"|{_PATH_CHARS}*pytest-of-{_PATH_CHARS}*"
    r"|[A-Za-z]:\\[^\s'\"]*\\Temp\\[^\s'\"]*",
    re.IGNORECASE,
)
_ABSOLUTE_RE = re.compile(rf"(?<![\w.<>:/])/{_PATH_CHARS}+/{_PATH_CHARS}+")
_HEX_RE = re.compile(r"\b(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{8,}\b")
_POINTER_RE = re.compile(r"\b0x[0-9a-fA-F]+\b")
# a number that begins no name: nothing of a word (letter, digit, "_") just before it
_NUMBER_RE = re.compile(r"(?<!\w)\d+(?:\.\d+)?")
# #42: the numbers that say what happened, by the word that gives the number its role
_MEANING_RE = re.compile(
    r"(?:\b(?:exit|return)(?:ed)?(?:[\s_-]*(?:status|code)|\s+with(?:\s+(?:status|code))?)"
    r"|\b(?:exitcode|returncode|errno|signal)|\bstatus(?:[\s_-]*code)?|\bHTTP(?:[\s_-]*(?:error|status))?"
    r"|(?-i:\bSIG[A-Z0-9]+))[\s:=]*-?(?P<number>\d+)"
    r"|\b(?P<http>[1-5]\d\d)(?=\s+(?:client|server)\s+error)",
    re.IGNORECASE,
)

# a frame of pytest's long traceback: "pkg/lib.py:3: FileNotFoundError", "tests/test_a.py:7: "
_FRAME_RE = re.compile(r"^([^\s/\\:<>][^:\n]*\.py):(\d+): ", re.MULTILINE)
_NOT_THE_PROJECTS = ("site-packages", "dist-packages", "<frozen", ".venv", "/lib/python")
# any frame of it, an installed package's and the interpreter's too: "/usr/lib/python3.11/shutil.py:419: "
_ANY_FRAME_RE = re.compile(r"^([^\s:<>][^:\n]*\.py):(\d+): ", re.MULTILINE)
# where an installed module's own name begins in its path
_INSTALLED_RE = re.compile(r".*(?:/site-packages/|/dist-packages/|/lib/python\d[\d.]*/)")


def mask(text: str) -> str:
    """``text`` with what differs between two runs of the same failure masked."""
    text = _TEMP_RE.sub("<tmp>", text)
    text = _ABSOLUTE_RE.sub("<path>", text)
    text = _UUID_RE.sub("<uuid>", text)
    text = _HEX_RE.sub("<hex>", text)
    text = _POINTER_RE.sub("N", text)
    kept = {m.start("number") if m.group("number") else m.start("http") for m in _MEANING_RE.finditer(text)}
    return _NUMBER_RE.sub(lambda m: m.group() if m.start() in kept else "N", text)


def innermost_frame(traceback: str | None) -> str | None:
    """The deepest frame of a pytest traceback in the project's own code, as
    ``path:line`` (relative to the project: an absolute path is the interpreter's, a
    virtual environment's or an installed package's), or None."""
    if not traceback:
        return None
    frames = [
        f"{m.group(1)}:{m.group(2)}"
        for m in _FRAME_RE.finditer(traceback)
        if not any(word in m.group(1) for word in _NOT_THE_PROJECTS)
    ]
    return frames[-1] if frames else None


def cause_site(traceback: str | None, test_file: str | None, tests: Collection[str] = ()) -> str | None:
    """Where a failure's cause lies, for its group's signature: the innermost frame in the
    project's own code (:func:`innermost_frame`), except where that frame is test code (the
    failing test's own file, or any file of ``tests``, the run's test files) and the exception
    was raised deeper, in an installed package or the interpreter's library: then that module,
    by its name and without a line (which differs between versions), so that tests which each
    call the library from their own lines, for one cause, are one group (#32: torchprime's 14
    tests that could not reach the hub); and a helper in one test file that tests of several
    files call is one cause, whichever file the failing test is in (#42)."""
    own = innermost_frame(traceback)
    if own is None or traceback is None or test_file is None:
        return own
    path = own.rpartition(":")[0]
    if path != test_file and path not in tests:
        return own
    frames = [m.group(1) for m in _ANY_FRAME_RE.finditer(traceback)]
    raised = frames[-1] if frames else None
    if raised is None or not any(word in raised for word in _NOT_THE_PROJECTS):
        return own  # raised by the test's own code: its own line
    return _INSTALLED_RE.sub("", raised)
