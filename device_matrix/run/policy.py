"""What to do after an attempt: a pure function of what happened and where the run is.

No processes, no files: :func:`decide` maps an :class:`Observation` to a
:class:`Decision` (the crash to record, if any, and the next step), and the tests read
it as a table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from device_matrix.records.schema import CrashPhase, RowStatus

Next = Literal["done", "resume", "collect_again", "stop"]


@dataclass(frozen=True)
class Observation:
    """One finished attempt, as the policy needs to see it."""

    abnormal: bool  # did not run its session to the end and exit by itself
    signal: int | None
    returncode: int
    overrun: Literal["startup", "collecting", "test", "between", "exit", "run"] | None
    broken: bool  # the journal stopped making sense
    session_started: bool
    collected: bool  # the child finished collecting
    ended: bool  # pytest_sessionfinish ran
    running: str | None  # the test that started and did not finish
    collect_culprit: tuple[str, str] | None  # (nodeid, path) of the module being imported
    remaining: int  # collected tests that have no outcome yet
    restarts: int
    max_restarts: int


@dataclass(frozen=True)
class CrashAt:
    phase: CrashPhase
    nodeid: str | None
    kind: Literal["crash", "timeout"]


@dataclass(frozen=True)
class Decision:
    crash: CrashAt | None
    next: Next
    status: RowStatus | None = None  # with "stop"
    reason: str | None = None  # why it stopped or ended so; for "collect_again", the module to leave out


def decide(o: Observation) -> Decision:
    if not o.abnormal:
        return Decision(None, "done")
    kind: Literal["crash", "timeout"] = "timeout" if o.overrun is not None else "crash"
    if o.overrun == "run":
        crash = CrashAt("test", o.running, "timeout") if o.running else None
        return Decision(crash, "stop", "crashed", "the row exceeded its run_timeout")
    if o.running is not None:
        crash = CrashAt("test", o.running, kind)
    elif not o.session_started:
        if o.signal is None and o.overrun is None and not o.broken:
            return Decision(None, "stop", "error", f"pytest could not start (exit {o.returncode})")
        what = "hung while starting" if o.overrun else "died before pytest started"
        return Decision(CrashAt("startup", None, kind), "stop", "crashed", f"the test process {what}")
    elif not o.collected:
        crash = CrashAt("collection", o.collect_culprit[0] if o.collect_culprit else None, kind)
        if o.collect_culprit is None or o.restarts >= o.max_restarts:
            what = "hung" if o.overrun else "died"
            return Decision(crash, "stop", "crashed", f"the test process {what} while collecting tests")
        return Decision(crash, "collect_again", reason=o.collect_culprit[1])
    else:
        # between tests, or after the session ended (atexit handlers, static destructors)
        crash = CrashAt("exit" if o.ended else "session", None, kind)
    if o.ended:
        what = "hung" if o.overrun else "died"
        return Decision(crash, "done", reason=f"the test process {what} at exit, after its session ended")
    if o.remaining == 0:
        # #41: a test that was running when it died (or hung) was the last one: during it, not after
        what = "hung" if o.overrun else "died"
        when = "during" if o.running is not None else "after"
        return Decision(crash, "done", reason=f"the test process {what} {when} its last test")
    if o.restarts >= o.max_restarts:
        return Decision(crash, "stop", "crashed", f"stopped after {o.restarts} restarts (max_restarts)")
    return Decision(crash, "resume")
