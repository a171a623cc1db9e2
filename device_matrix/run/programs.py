"""A program: a ``scripts`` entry of ``kind = "program"``, one test whose outcome is its process's.

A training script with flags (``scripts/train.py --steps 3``) has no unittest in it: its
test is the whole process. The launcher collects and starts that test before the
script's ``__main__`` runs (:mod:`device_matrix.child.script`), and nothing in the process
finishes it, so whatever the process does until it is gone (its ``__main__``, its exit
handlers, the threads it joins) is the test. When the process exits by itself,
:func:`conclude` finishes the test in the attempt's fold with its exit status: 0 passed,
any other status failed, with the status and the last lines of the output as the cause.
A death by a signal, a hang past ``test_timeout`` and a journal that broke are left to the
policy: the running test is the one the crash or the timeout hits, as for any test.
"""

from __future__ import annotations

from typing import Any

from device_matrix.records.cause import cause_from_text
from device_matrix.run.attempt import AttemptResult

MESSAGE_LINES = 20  # of the output, in the failed test's message
CAUSE_LINES = 5  # of the output, after the cause's first line
_TRACEBACK = "Traceback (most recent call last):"


def conclude(attempt: AttemptResult, output: str) -> list[dict[str, Any]]:
    """Finish the program's test with the exit status of a process that exited by itself;
    the events added to the fold (none when it did not exit by itself)."""
    fold = attempt.fold
    nodeid = fold.running
    if (
        nodeid is None
        or fold.ended
        or fold.broken is not None
        or attempt.overrun is not None
        or attempt.ended_by_runner
        or attempt.signal is not None
    ):
        return []
    test = fold.tests[nodeid]
    ended = attempt.started_at + attempt.duration
    seconds = max(0.0, ended - (test.started_at or attempt.started_at))
    returncode = attempt.returncode
    longrepr = cause = None
    outcome = "passed"
    if returncode != 0:
        outcome = "failed"
        lines = [line for line in output.splitlines() if line.strip()]
        tail = lines[-MESSAGE_LINES:]
        said = "\n".join(tail)
        exception = cause_from_text(said) if _TRACEBACK in tail else None
        head = f"exit status {returncode}" + (f": {exception.splitlines()[0]}" if exception else "")
        cause = "\n".join([head, *tail[-CAUSE_LINES:]])
        shown = f"the last lines of its output:\n{said}" if tail else "it printed nothing"
        longrepr = f"the program exited with status {returncode}; {shown}"
    events = [
        fold.append("report", nodeid=nodeid, when="setup", outcome="passed", duration=0.0),
        fold.append(
            "report", nodeid=nodeid, when="call", outcome=outcome, duration=seconds, longrepr=longrepr, cause=cause
        ),
        fold.append("report", nodeid=nodeid, when="teardown", outcome="passed", duration=0.0),
        fold.append("finish", nodeid=nodeid, t=ended),
        # the launcher's session ends with the process; its status is the test's, never pytest's
        fold.append("end", exitstatus=returncode, t=ended),
    ]
    return [event for event in events if event is not None]
