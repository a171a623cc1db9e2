"""A gang: ``world_size`` ranks of one worker started together, recorded as one test.

A row's ``[[gangs]]`` entry names a worker module; the gangs run in every full run of
their row, after its tests: without Ray as ``world_size`` processes on this host (one per
device slot when the row has slots), under ``--executor ray`` as Ray tasks placed by one
placement group (device_matrix.spread.ray). Each rank runs ``python -X faulthandler -m MODULE
ARGS`` with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``
and ``MASTER_PORT`` (the launcher contract torchrun keeps). The gang is one test in the
row's record, ``gang::NAME``: passed when every rank exits 0; a rank killed by a signal or
past ``test_timeout`` is diagnosed from its own output exactly as a crashed test is; each
rank's output is kept (``gangs/NAME/rankR.log``). A rank runs like a test's process: its own
session, its output in a file (a daemon that keeps the rank's stdout open holds nothing
up), and what it leaves behind is ended with it (#23).

A gang's ``xfail`` takes ``xfail_device``'s arguments; ``raises`` restricts it to ranks
that end with one of those exceptions (the last traceback of each failing rank), so any
other failure, and every crash, stays a failure. It is strict unless ``strict = false``.
"""

from __future__ import annotations

import contextlib
import re
import shlex
import signal
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from device_matrix import diagnostics
from device_matrix.config import Config, Gang, Row
from device_matrix.diagnostics.parse import clean_lines
from device_matrix.errors import EnvironmentProblem
from device_matrix.executors.base import Child, Executor, LaunchSpec
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.merge import GANGS_DIR
from device_matrix.records.schema import AttemptRecord, CrashRecord, Outcome, RowStatus, RunRecord, SkipInfo
from device_matrix.records.summary import row_status
from device_matrix.redact import Redactor, remember_secrets
from device_matrix.run.attempt import Interrupted
from device_matrix.run.crashes import attempt_record, crash_record
from device_matrix.run.plan import image_ran_in, in_rows_image
from device_matrix.run.selection import selecting_options
from device_matrix.run.state import RunState, now_iso
from device_matrix.spread.slots import slot_env
from device_matrix.wire import ENV_ATTEMPT

ABORT_GRACE = 10.0  # seconds a rank past its timeout has to dump its stacks (SIGABRT) before SIGKILL
_EXCEPTION_RE = re.compile(r"([A-Za-z_][\w.]*)(?::\s.*)?")

Note = Callable[[str, str], None]


def nodeid(gang: Gang) -> str:
    return f"gang::{gang.name}"


def gang_folder(part: Path, gang: Gang) -> Path:
    """Where the gang's record and rank logs go, in the folder of the run (or shard) that keeps it."""
    return part / GANGS_DIR / gang.name


def selected(row: Row, *, tests: Sequence[str], suites: Sequence[str] | None, pytest_args: Sequence[str]) -> str | None:
    """Why a run that selects tests leaves the row's gangs out (None: the whole row runs, gangs too).

    A gang belongs to the row, not to a suite or a test: ``--test``, ``--suite`` and
    pytest's own selections (``-k``, ``-m``, ``--deselect``, nodeids) ask for less than the row.
    """
    if not row.gangs:
        return None
    if tests:
        return "--test names tests"
    if suites:
        return "--suite names suites"
    chosen = selecting_options(pytest_args)
    if chosen:
        return f"pytest's {chosen[0][0]} selects tests"
    for arg in pytest_args:
        if not arg.startswith("-") and ("::" in arg or arg.endswith(".py")):
            return f"{arg} names tests"
    return None


def refuse_unsatisfiable_here(row: Row, gangs: Sequence[Gang]) -> None:
    """A gang needs a device slot per rank on this host (a CPU row: as many processes as it asks)."""
    if row.pjrt_device == "CPU" and not row.slots:
        return
    for gang in gangs:
        if gang.world_size > row.slots:
            raise EnvironmentProblem(
                f"gang {gang.name!r} of row {row.name!r} needs {gang.world_size} device slots at once, "
                f"and the row has {row.slots} on this host",
                tip="Set the row's `slots` and `slot_env` (one device per rank), lower the gang's world_size, "
                "or run the row with --executor ray.",
            )


# --- the record ------------------------------------------------------------------------


@dataclass
class RankResult:
    rank: int
    env: dict[str, str]
    node: str = ""
    host: str = ""
    ip: str = ""
    returncode: int | None = None
    timed_out: bool = False
    duration: float = 0.0
    output: str = ""
    lost: str | None = None  # why no result came back (the node died, the task was cancelled)


def last_exception(output: str) -> str | None:
    """The type of the last uncaught Python exception in ``output`` (its traceback's last line)."""
    lines = clean_lines(output)  # torch.distributed prefixes a rank's traceback with [rankN]:
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("Traceback (most recent call last):")]
    if not starts:
        return None
    header = lines[starts[-1]]
    indent = len(header) - len(header.lstrip())  # what a prefix left; the frames are indented further
    for line in lines[starts[-1] + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            match = _EXCEPTION_RE.fullmatch(line.strip())
            return match[1] if match else None
    return None


def _raised(name: str | None, allowed: Sequence[str]) -> bool:
    return name is not None and any(name == a or name.rsplit(".", 1)[-1] == a.rsplit(".", 1)[-1] for a in allowed)


def expected_failure(gang: Gang, row: Row) -> SkipInfo | None:
    """The gang's xfail, when it applies to this row."""
    xfail = gang.xfail
    if xfail is None:
        return None
    names = {row.name.lower(), row.pjrt_device.lower()}
    devices = [str(d) for d in xfail["devices"]]
    if not any(d.lower() in names or d == "*" for d in devices):
        return None
    from device_matrix.skips.refs import normalize_issue

    return SkipInfo(
        mode="xfail",
        devices=devices,
        issue=normalize_issue(str(xfail["issue"])),
        reason=str(xfail.get("reason", "")),
        source="marker",
        expires=None,
        file=None,
        line=None,
    )


def repro(gang: Gang, rank: RankResult) -> str:
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(rank.env.items()))
    return f"{assigns} {shlex.join(['python', '-X', 'faulthandler', '-m', gang.module, *gang.args])}"


@dataclass
class _Told:
    """What the ranks' ends say of the gang: its crashes, its problems, the failing ranks' attempts."""

    crashes: list[CrashRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    exceptions: list[str | None] = field(default_factory=list)
    failing: list[int] = field(default_factory=list)  # the attempts of ranks that did not exit 0


def _attempt_of(r: RankResult) -> AttemptRecord:
    """A rank is one attempt of the gang's test, its log ``rankR.log``."""
    signum = diagnostics.signal_from_returncode(r.returncode)
    return attempt_record(
        index=r.rank + 1,
        purpose="run",
        returncode=r.returncode,
        duration=r.duration,
        selected=1,
        finished=0 if r.lost or r.timed_out or signum else 1,
        journal="",
        log=f"rank{r.rank}.log",
    )


def _told(row: Row, gang: Gang, ranks: Sequence[RankResult], redactor: Redactor) -> _Told:
    """Each rank's end: lost, a crash (diagnosed from its own output as a crashed test is), or an exit."""
    told = _Told()
    deaths: list[str] = []  # ranks killed by a signal: the cause, before the ranks that waited on them
    for r in ranks:
        where = f"rank {r.rank} on {r.host or '?'} ({r.ip or '?'})"
        if r.lost is not None or r.returncode != 0:
            told.failing.append(r.rank + 1)
        if r.lost is not None:
            told.problems.append(f"{where}: {r.lost}")
            continue
        if r.timed_out or diagnostics.signal_from_returncode(r.returncode) is not None:
            crash = _crash_of(row, gang, r, f"{row.name}-{len(told.crashes) + 1}", redactor)
            told.crashes.append(crash)
            diagnosis = crash["diagnosis"]
            what = "timed out" if r.timed_out else (diagnosis["signal_name"] or f"exit {r.returncode}")
            (told.problems if r.timed_out else deaths).append(
                f"{where}: {what} ({diagnosis['hint'] or diagnosis['fingerprint']})"
            )
        elif r.returncode != 0:
            name = last_exception(r.output)
            told.exceptions.append(name)
            told.problems.append(f"{where}: exit {r.returncode}" + (f" ({name})" if name else ""))
    told.problems[:0] = deaths
    return told


def _crash_of(row: Row, gang: Gang, r: RankResult, crash_id: str, redactor: Redactor) -> CrashRecord:
    """A rank killed by a signal or past ``test_timeout``: the crash of the gang's test."""
    diagnosis = diagnostics.diagnose(
        returncode=r.returncode, fault_text="", output_text=r.output, redactor=redactor, timed_out=r.timed_out
    )
    # a gang is not rerun: one run says nothing of flakiness (the crash stays unclassified)
    return crash_record(
        crash_id,
        kind="timeout" if r.timed_out else "crash",
        phase="test",
        nodeid=nodeid(gang),
        when="call",
        attempt=r.rank + 1,
        diagnosis=diagnosis,
        repro=redactor.text(repro(gang, r)),
        deadline=row.test_timeout if r.timed_out else None,
    )


def _outcome(
    gang: Gang, row: Row, ranks: Sequence[RankResult], told: _Told, why_not_run: str | None
) -> tuple[Outcome, str | None]:
    """The gang's test's outcome and message, from what its ranks told."""
    xfail = expected_failure(gang, row)
    if why_not_run is not None:
        return "not_run", f"not run: {why_not_run}"
    if told.crashes:
        outcome: Outcome = "timeout" if all(c["kind"] == "timeout" for c in told.crashes) else "crashed"
        return outcome, f"{outcome}: " + "; ".join(told.problems)
    if told.problems:
        allowed = list((gang.xfail or {}).get("raises", ()))
        if (
            xfail is not None
            and not any(r.lost for r in ranks)
            and (not allowed or all(_raised(name, allowed) for name in told.exceptions))
        ):
            return "xfailed", f"{xfail['reason']} ({'; '.join(told.problems)})"
        return "failed", "; ".join(told.problems)
    if xfail is not None:
        strict = bool((gang.xfail or {}).get("strict", True))
        if strict:
            return "failed", f"[XPASS(strict)] {xfail['reason']}"
        return "xpassed", xfail["reason"]
    return "passed", None


def _environment(gang: Gang, ranks: Sequence[RankResult], master: tuple[str, int] | None) -> dict[str, Any]:
    """``environment.gang``: the gang, its master, and where each rank ran and how it ended."""
    return {
        "gang": {
            "name": gang.name,
            "module": gang.module,
            "world_size": gang.world_size,
            "master": f"{master[0]}:{master[1]}" if master else None,
            "ranks": [
                {"rank": r.rank, "node": r.node, "host": r.host, "ip": r.ip, "returncode": r.returncode, "lost": r.lost}
                for r in ranks
            ],
        }
    }


def gang_record(
    row: Row,
    mode: str,
    gang: Gang,
    ranks: Sequence[RankResult],
    *,
    started_at: str,
    duration: float,
    master: tuple[str, int] | None,
    redactor: Redactor,
    why_not_run: str | None = None,
    status: RowStatus = "error",
) -> RunRecord:
    """The gang as one test: outcome, per-rank crashes diagnosed, one attempt (and log) per rank."""
    test = nodeid(gang)
    state = RunState(redactor)
    state.expect([test])
    state.attempts.extend(_attempt_of(r) for r in ranks)
    told = _told(row, gang, ranks, redactor)
    # a rank that died is the gang's crash; ranks in a collective with it hang until their
    # timeout, which is what followed, not the cause
    cause = next((c for c in told.crashes if c["kind"] == "crash"), told.crashes[0] if told.crashes else None)
    xfail = expected_failure(gang, row)
    outcome, message = _outcome(gang, row, ranks, told, why_not_run)
    state.put(
        test,
        outcome,
        duration=max((r.duration for r in ranks), default=0.0),
        message=message,
        crash=cause["id"] if cause else None,
        # the attempt (and log) of the rank that decided the outcome
        attempt=cause["attempt"] if cause else (told.failing[0] if told.failing else 1),
        skip=dict(xfail) if xfail is not None else None,
    )
    state.crashes.extend(told.crashes)
    state.environment = _environment(gang, ranks, master)
    if why_not_run is None:
        status = row_status([outcome], told.crashes)
    return state.to_record(
        row=row.name,
        pjrt_device=row.pjrt_device,
        status=status,
        reason=why_not_run,
        mode=mode,
        image=image_ran_in(row, mode, in_image=in_rows_image(row)),
        suites=list(row.suites),
        started_at=started_at,
        duration=duration,
        run_url=None,
        runner_pid=None,
    )


def write_gang(folder: Path, record: RunRecord, ranks: Sequence[RankResult], redactor: Redactor) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for r in ranks:
        (folder / f"rank{r.rank}.log").write_text(redactor.text(r.output), "utf-8")
    write_json_atomic(folder / "run.json", record, redactor)


def finish_gang(
    folder: Path,
    row: Row,
    mode: str,
    gang: Gang,
    ranks: Sequence[RankResult],
    *,
    started_at: str,
    t0: float,
    master: tuple[str, int] | None,
    redactor: Redactor,
    why_not_run: str | None = None,
    status: RowStatus = "error",
) -> RunRecord:
    """The record of a gang whose ranks ended (or were cut off), written with their logs:
    the one ending of a gang here and on Ray."""
    record = gang_record(
        row,
        mode,
        gang,
        ranks,
        started_at=started_at,
        duration=time.monotonic() - t0,
        master=master,
        redactor=redactor,
        why_not_run=why_not_run,
        status=status,
    )
    write_gang(folder, record, ranks, redactor)
    return record


def outcome_line(gang: Gang, record: RunRecord) -> str:
    """What the terminal says of a gang that ran: its test's outcome and message."""
    test = record["tests"][0]
    return f"gang {gang.name}: {test['outcome']}" + (f" - {test['message']}" if test["message"] else "")


def pending_record(row: Row, mode: str, gang: Gang, *, status: RowStatus, why: str) -> RunRecord:
    """The record of a gang that has not run (yet): its test not_run, why, and the row's status."""
    return gang_record(
        row,
        mode,
        gang,
        [],
        started_at=now_iso(),
        duration=0.0,
        master=None,
        redactor=Redactor(),
        why_not_run=why,
        status=status,
    )


# --- the ranks, here ---------------------------------------------------------------------


def rank_env(
    row: Row, gang: Gang, *, rank: int, world: int, local: tuple[int, int], master: tuple[str, int]
) -> dict[str, str]:
    env = {"PJRT_DEVICE": row.env.get("PJRT_DEVICE", row.pjrt_device), **row.env, **gang.env}
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(local[0]),
        LOCAL_WORLD_SIZE=str(local[1]),
        MASTER_ADDR=master[0],
        MASTER_PORT=str(master[1]),
    )
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_here(
    executor: Executor,
    cfg: Config,
    row: Row,
    mode: str,
    gang: Gang,
    *,
    folder: Path,
    note: Note,
) -> RunRecord:
    """Run one gang as ``world_size`` processes on this host; write and return its record.

    Rank R gets device slot R's variables when the row has ``slot_env``. An interrupt ends
    every rank and writes the gang's record as ``interrupted`` before it goes on up.
    """
    started_at, t0 = now_iso(), time.monotonic()
    world = gang.world_size
    master = ("127.0.0.1", free_port())
    ranks = []
    for r in range(world):
        env = rank_env(row, gang, rank=r, world=world, local=(r, world), master=master)
        if row.slot_env:
            env.update(slot_env(row, r))
        # a rank's secrets (the row's, the gang's, its slot's) are scrubbed from its log,
        # the gang's record and the row's last_output, as a test's are (#22)
        remember_secrets(env)
        ranks.append(RankResult(rank=r, env=env, host=socket.gethostname(), ip=master[0]))
    redactor = Redactor()
    folder.mkdir(parents=True, exist_ok=True)
    note(row.name, f"gang {gang.name}: {world} ranks started here, master {master[0]}:{master[1]}")
    try:
        with tempfile.TemporaryDirectory(prefix=".ranks-", dir=folder) as tmp:
            run_ranks(executor, cfg.project_root, gang, ranks, Path(tmp), timeout=row.test_timeout, redactor=redactor)
    except Interrupted as exc:
        finish_gang(
            folder,
            row,
            mode,
            gang,
            ranks,
            started_at=started_at,
            t0=t0,
            master=master,
            redactor=redactor,
            why_not_run=f"interrupted by {exc} while it ran; `--resume` runs it again",
            status="interrupted",
        )
        raise
    record = finish_gang(folder, row, mode, gang, ranks, started_at=started_at, t0=t0, master=master, redactor=redactor)
    note(row.name, outcome_line(gang, record))
    return record


def run_ranks(
    executor: Executor,
    project_root: Path,
    gang: Gang,
    ranks: Sequence[RankResult],
    tmp: Path,
    *,
    timeout: float,
    redactor: Redactor,
    poll: float = 0.05,
) -> None:
    """Start every rank at once, wait for each to end (at most ``timeout``), fill in ``ranks``.

    A rank is ended like a test's process (its group, then what carries its token); one
    past ``timeout`` gets SIGABRT first, so faulthandler dumps its stacks. Its output
    goes to a file in ``tmp``, never a pipe: a daemon that keeps it open waits for nothing.
    """
    children: dict[int, Child] = {}
    started: dict[int, float] = {}
    ended: dict[int, float] = {}
    aborted: dict[int, float] = {}
    logs = {r.rank: (tmp / f"rank{r.rank}.out").open("wb") for r in ranks}
    try:
        for r in ranks:
            token = f"gang-{gang.name}-{r.rank}-{time.monotonic_ns()}"
            spec = LaunchSpec(
                pytest_args=list(gang.args),
                env={**r.env, ENV_ATTEMPT: token},
                workdir=project_root,
                project_root=project_root,
                core_limit=None,
                token=token,
                module=gang.module,
            )
            children[r.rank] = executor.launch(spec, logs[r.rank])
            started[r.rank] = time.monotonic()
        deadline = time.monotonic() + timeout
        while len(ended) < len(children):
            now = time.monotonic()
            for rank, child in children.items():
                if rank in ended:
                    continue
                if child.poll() is not None:
                    ended[rank] = now
                    child.end()  # its leftovers go now: a daemon it started holds nothing up
                elif now > deadline and rank not in aborted:
                    aborted[rank] = now
                    child.send(signal.SIGABRT)  # faulthandler dumps every thread's stack, then it dies
                elif rank in aborted and now - aborted[rank] > ABORT_GRACE:
                    child.end()
            time.sleep(poll)
    finally:
        for child in children.values():
            with contextlib.suppress(Exception):
                child.end()  # nothing of a rank outlives it (#23): its group, its token, its orphans
        for fh in logs.values():
            fh.close()
        now = time.monotonic()
        for r in ranks:
            child_ = children.get(r.rank)
            r.returncode = child_.poll() if child_ is not None and r.rank in ended else None
            r.timed_out = r.rank in aborted
            r.duration = ended.get(r.rank, now) - started.get(r.rank, now)
            r.output = (tmp / f"rank{r.rank}.out").read_text("utf-8", "replace")
