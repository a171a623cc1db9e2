"""What a shard's record says when its runner did not write it (#23).

A shard that has not started yet, was cut off by the driver's interrupt, or whose results
never came back gets a record here: its tests not_run, and why. A shard whose runner died
under it (:func:`runner_died`) gets the record of who died and what stands, from what its
folder still holds: the record so far, the attempts' journals, the output.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from device_matrix import diagnostics
from device_matrix.errors import ResultsError
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.merge import without_gangs
from device_matrix.records.outcomes import CRASHING_OUTCOMES
from device_matrix.records.schema import (
    AttemptRecord,
    CrashRecord,
    RowStatus,
    RunRecord,
    TestRecord,
    load_run,
    summarize,
)
from device_matrix.records.summary import row_status
from device_matrix.redact import Redactor
from device_matrix.run.attempt import Interrupted
from device_matrix.run.crashes import attempt_record, crash_record
from device_matrix.run.journal import Fold
from device_matrix.run.state import RunState, now_iso
from device_matrix.spread.door import RowRun, repro_for, shard_run
from device_matrix.spread.split import Shard, Split, shard_folder


def not_run_record(
    run: RowRun,
    *,
    status: RowStatus,
    reason: str,
    tests: Sequence[str] = (),
    why: str = "",
    redactor: Redactor | None = None,
) -> RunRecord:
    """A record of ``run`` whose ``tests`` did not run (why), written by no runner."""
    state = RunState(redactor or Redactor())
    state.expect(list(tests))
    state.mark_not_run(f"not run: {why}")
    record = state.to_record(
        row=run.row.name,
        pjrt_device=run.row.pjrt_device,
        status=status,
        reason=reason,
        mode=run.plan.mode,
        image=run.plan.image,
        suites=list(run.options.suites or run.row.suites),
        started_at=now_iso(),
        duration=0.0,
        run_url=run.options.run_url,
        runner_pid=os.getpid(),
        source=run.options.source,
    )
    # #41: the code the run was given, which a resume of it compares (the driver decided it)
    record["worktree"] = run.options.worktree
    return record


def placeholder(run: RowRun, split: Split, shard: Shard, status: RowStatus, why: str) -> None:
    """A shard's record before its runner (or node) writes one, or instead: its tests not_run, why."""
    this = shard_run(run, shard, plan_id=split.id)
    folder = shard_folder(run.cfg, run.row.name, shard.index)
    record = not_run_record(this, status=status, reason=why, tests=split.part_of(shard.index) or [], why=why)
    record["command"] = list(this.options.command)
    record["spread"] = split.ref(shard.index)
    write_json_atomic(folder / "run.json", record)
    split.write_shard_file(folder, shard.index)


def cut_off(run: RowRun, split: Split, shard: Shard, exc: Interrupted) -> None:
    """A shard that never started (or never came back) when the driver was interrupted."""
    why = f"device-matrix was interrupted ({exc}) before shard {shard} came back; `--resume` runs it"
    placeholder(run, split, shard, "interrupted", why)


def lost(run: RowRun, split: Split, shard: Shard, why: str) -> None:
    """A shard whose results never came back (its nodes died, its task overran): not_run, why."""
    placeholder(run, split, shard, "error", why)


# --- who died: a shard whose runner went without its record -------------------------------------


def needs_salvage(folder: Path) -> bool:
    """A shard's folder whose record is not final: its runner died before writing one."""
    try:
        return load_run(folder / "run.json")["status"] == "running"
    except ResultsError:
        return True


def describe_exit(returncode: int | None) -> str:
    signum = diagnostics.signal_from_returncode(returncode) if returncode is not None and returncode < 0 else None
    if signum is not None:
        return f"its runner was killed by {diagnostics.signal_name(signum)}"
    return f"its runner exited {returncode} without its record"


@dataclass
class _Left:
    """What a dead runner's shard folder still holds: its record so far, its attempts, its journal."""

    base: RunRecord | None
    crashes: list[CrashRecord]
    attempts: list[AttemptRecord]
    running: str | None  # the test its newest journal shows running
    last: str | None  # the last test that journal shows finished

    @property
    def known(self) -> dict[str, TestRecord]:
        return {t["nodeid"]: t for t in self.base["tests"]} if self.base is not None else {}

    @property
    def drained(self) -> bool:
        """Its runner wrote its ``interrupted`` record: it read its journal to the end."""
        return self.base is not None and self.base["status"] == "interrupted"


def _left_in(folder: Path, returncode: int | None) -> _Left:
    try:
        base: RunRecord | None = without_gangs(load_run(folder / "run.json"))
    except ResultsError:
        base = None
    crashes = list(base["crashes"]) if base is not None else []
    attempts = _attempts_on_disk(folder, list(base["attempts"]) if base is not None else [], returncode)
    running, last = _journal_state(folder)
    return _Left(base, crashes, attempts, running, last)


def runner_died(run: RowRun, split: Split, shard: Shard, *, how: str, returncode: int | None) -> bool:
    """The record of a shard whose runner ended under it (#23): who died, and what stands.

    A runner that got to write its ``interrupted`` record (its worker's death sends it
    SIGTERM) had read its journal to the end: the test that was running is a crash of that
    test, diagnosed from the output that came back. A runner killed outright read only
    part of it: no test is named that may not be the one, the crash is of the shard's
    session, and the last test its journal shows finished is said. The tests the shard's
    record has keep their outcomes; the rest of its part are not_run. Returns whether
    something is left to run (a resume of the shard continues it).
    """
    this = shard_run(run, shard, plan_id=split.id)
    folder = shard_folder(run.cfg, run.row.name, shard.index)
    left = _left_in(folder, returncode)
    known = left.known
    culprit = left.running if left.drained else None
    if culprit is not None and culprit in known and known[culprit]["outcome"] in CRASHING_OUTCOMES:
        culprit = None  # its crash is recorded already: a rerun of it was cut off
    why = f"not run: shard {shard}'s runner ended ({how}) before this test ran"
    tests: dict[str, TestRecord] = {}
    for nodeid in dict.fromkeys([*(split.part_of(shard.index) or []), *known]):
        test = known.get(nodeid)
        if test is None or test["outcome"] == "not_run":
            test = TestRecord(
                nodeid=nodeid, outcome="not_run", duration=0.0, message=why, skip=None, crash=None, attempt=0
            )
        tests[nodeid] = test
    redactor = Redactor()
    if culprit is not None or not left.drained:
        crash = _crash_of(this, culprit, left, folder=folder, how=how, returncode=returncode, redactor=redactor)
        left.crashes.append(crash)
        if culprit is not None:
            tests[culprit] = _crashed(culprit, crash, how)
    listed = list(tests.values())
    named = f" while {culprit} ran" if culprit else ""
    record = RunRecord(
        **{
            **not_run_record(this, status="error", reason=f"shard {shard}: {how}{named}", redactor=redactor),
            "tests": listed,
            "crashes": left.crashes,
            "attempts": left.attempts,
            "summary": summarize(listed),
            "status": row_status([t["outcome"] for t in listed], left.crashes),
            "command": list(this.options.command),
            "spread": split.ref(shard.index),
            "environment": dict(left.base["environment"]) if left.base is not None else {},
            # the code its runner ran, as it recorded it, so that a resume keeps what stands
            "worktree": left.base.get("worktree") if left.base is not None else this.options.worktree,
        }
    )
    write_json_atomic(folder / "run.json", record)
    rerun = any(c["kind"] == "crash" and c["phase"] == "test" and not c["reruns"] for c in left.crashes)
    return rerun or any(t["outcome"] == "not_run" for t in listed)


def _crashed(nodeid: str, crash: CrashRecord, how: str) -> TestRecord:
    return TestRecord(
        nodeid=nodeid,
        outcome="crashed",
        duration=0.0,
        message=f"crashed: {how} while it ran",
        skip=None,
        crash=crash["id"],
        attempt=crash["attempt"],
    )


def _attempts_on_disk(folder: Path, attempts: list[AttemptRecord], returncode: int | None) -> list[AttemptRecord]:
    """The record's attempts, and those its runner started without recording them (their journals)."""
    known = {a["index"] for a in attempts}
    for journal in sorted((folder / "attempts").glob("*/journal.jsonl")):
        name = journal.parent.name
        index = int(name) if name.isascii() and name.isdigit() else 0
        if index and index not in known:
            attempts.append(
                attempt_record(
                    index=index,
                    purpose="run",
                    returncode=returncode,
                    duration=0.0,
                    selected=None,
                    finished=0,
                    journal=str(journal.relative_to(folder)),
                    log="output.log",
                )
            )
    return sorted(attempts, key=lambda a: a["index"])


def _crash_of(
    run: RowRun,
    nodeid: str | None,
    left: _Left,
    *,
    folder: Path,
    how: str,
    returncode: int | None,
    redactor: Redactor,
) -> CrashRecord:
    """The crash of the dead runner's test (``nodeid``), or of its shard's session."""
    diagnosis = diagnostics.diagnose(
        returncode=returncode, fault_text="", output_text=_tail(folder / "output.log"), redactor=redactor
    )
    diagnosis["hint"] = (
        f"{how} while this test ran: the device-matrix runner of its shard went with it"
        if nodeid is not None
        else f"{how}: the test it ran is not known (the last its journal shows finished: {left.last or 'none'})"
    )
    return crash_record(
        f"{run.row.name}-{len(left.crashes) + 1}",
        kind="crash",
        phase="test" if nodeid is not None else "session",
        nodeid=nodeid,
        when=None,
        attempt=max((a["index"] for a in left.attempts), default=0),
        diagnosis=diagnosis,
        repro=repro_for(run, nodeid) if nodeid is not None else shlex.join(run.options.command),
    )


def _journal_state(folder: Path) -> tuple[str | None, str | None]:
    """What the newest attempt's journal copy says: the test running, the last one finished."""
    journals = sorted((folder / "attempts").glob("*/journal.jsonl"))
    if not journals:
        return None, None
    fold = Fold()
    with contextlib.suppress(OSError), journals[-1].open("rb") as fh:
        for line in fh:
            fold.feed(line)
    finished = fold.finished_ids()
    return fold.running, finished[-1] if finished else None


def _tail(path: Path, lines: int = 200) -> str:
    try:
        text = path.read_text("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
