"""What makes two failures the same failure (#32): a message with what differs from run to
run masked, and the innermost frame of a traceback in the project's own code.

The verdicts compare a failure on a pull request with the same test's on its base by the
masked message (report/verdicts.py, through history.signature); the failure groups
(report/groups.py) gather a run's failures by the masked message and the frame.

Masked: what :func:`device_matrix.diagnostics.masking.mask` masks (a crash's fingerprint masks
its fatal line and exception by the same rules, #42).
"""

from __future__ import annotations

import re
from collections.abc import Collection

from device_matrix.diagnostics.masking import mask

__all__ = ["cause_site", "innermost_frame", "mask"]

# a frame of pytest's long traceback: "pkg/lib.py:3: FileNotFoundError", "tests/test_a.py:7: "
_FRAME_RE = re.compile(r"^([^\s/\\:<>][^:\n]*\.py):(\d+): ", re.MULTILINE)
_NOT_THE_PROJECTS = ("site-packages", "dist-packages", "<frozen", ".venv", "/lib/python")
# any frame of it, an installed package's and the interpreter's too: "/usr/lib/python3.11/shutil.py:419: "
_ANY_FRAME_RE = re.compile(r"^([^\s:<>][^:\n]*\.py):(\d+): ", re.MULTILINE)
# where an installed module's own name begins in its path
_INSTALLED_RE = re.compile(r".*(?:/site-packages/|/dist-packages/|/lib/python\d[\d.]*/)")


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
