"""What differs between two runs of one failure or one crash, masked (#32, #42).

A failure group's signature (report/signature.py) masks a message with :func:`mask`; a
crash's fingerprint (diagnostics/fingerprint.py) masks its fatal line and its exception's
``what()`` with :func:`mask_values`, keeping the last part of a path that is not a
temporary one.

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

_UUID_RE = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
# a path ends where a quote, a bracket, a comma, a semicolon, a colon or a space does
_PATH_CHARS = r"[^\s'\"()\[\]{}<>,;:]"
TEMP_RE = re.compile(
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


def mask(text: str) -> str:
    """``text`` with what differs between two runs of the same failure masked."""
    text = TEMP_RE.sub("<tmp>", text)
    return mask_values(_ABSOLUTE_RE.sub("<path>", text))


def mask_values(text: str) -> str:
    """``text`` with the values that differ between runs masked (UUIDs, hashes, pointers,
    numbers but those with a role), its paths as they are."""
    text = _UUID_RE.sub("<uuid>", text)
    text = _HEX_RE.sub("<hex>", text)
    text = _POINTER_RE.sub("N", text)
    kept = {m.start("number") if m.group("number") else m.start("http") for m in _MEANING_RE.finditer(text)}
    return _NUMBER_RE.sub(lambda m: m.group() if m.start() in kept else "N", text)
