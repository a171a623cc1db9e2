"""Spread a row: one driver, two schedulers (#23).

A row runs whole (``run``), as one shard of a split (``run --shard K/N``), or as every
shard of a split (``run --shards N``, on this host's device slots or on a Ray cluster).
What those share happens here, once: the split and its plan, the ``running`` record
written before anything is collected, resume, clearing what an earlier run left,
scheduling the shards, running the row's gangs in every full run of it, merging, and
what the record says when a shard's runner died under it. Where the shards of a split
run is a :class:`Scheduler`: the device slots of this host (:class:`Slots`, below) or the
nodes of a Ray cluster (``device_matrix.run.ray.RayNodes``).

The runner is used through one door, the section right below, and only through its
public steps (device_matrix.run.runner): collect the row, open a part's run and write its
``running`` record before anything is collected, finish it over a selection of nodeids,
run a part whole, the row's executor and repro command. A shard that collects runs one
flow: opened, prepared, collected, split, finished.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from device_matrix import diagnostics
from device_matrix.config import Config, Gang, Row
from device_matrix.errors import DeviceMatrixError, ResultsError, UsageProblem
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.merge import (
    GANGS_DIR,
    SHARDS_DIR,
    Merged,
    is_spread,
    load_gangs,
    load_spread,
    merge,
    read_report,
    with_gangs,
    without_gangs,
    write_merged,
    write_reports,
)
from device_matrix.records.outcomes import CRASHING_OUTCOMES, UNFINISHED_STATUSES
from device_matrix.records.schema import (
    AttemptRecord,
    CrashRecord,
    PlanFile,
    RowStatus,
    RunRecord,
    SpreadRef,
    TestRecord,
    load_plan,
    load_run,
    summarize,
)
from device_matrix.records.summary import row_status
from device_matrix.redact import Redactor
from device_matrix.run import gang as gangs
from device_matrix.run import runner
from device_matrix.run.attempt import Interrupted
from device_matrix.run.context import Run, RunListener, RunOptions, Verdict
from device_matrix.run.executors.base import Executor, PopenChild, spawn
from device_matrix.run.journal import Fold
from device_matrix.run.plan import RowPlan
from device_matrix.run.runner import Collection
from device_matrix.run.shards import (
    Shard,
    check_count,
    claim_plan,
    fit_collection,
    gangs_of,
    make_plan,
    part_of,
    plan_path,
    recorded_durations,
    shard_folder,
    write_plan,
    write_shard_file,
)
from device_matrix.run.state import RunState, now_iso

SHARD_GRACE = 30.0  # seconds a shard's runner has, after SIGTERM, to end its tests and write its record
MAX_RUNS = 3  # a shard whose runner dies under it runs at most this often (each death names its test)
POLL = 0.05


@dataclass(frozen=True)
class RowRun:
    """One row's run as the spread sees it: the project, where the row runs, the run's options."""

    cfg: Config
    plan: RowPlan
    options: RunOptions

    @property
    def row(self) -> Row:
        return self.plan.row

    @property
    def folder(self) -> Path:
        return self.cfg.results_dir / self.plan.row.name

    def but(self, **changes: Any) -> RowRun:
        """The same run with some of its options replaced."""
        return replace(self, options=replace(self.options, **changes))


# --- the runner, through one door ------------------------------------------------------------
# Every use of the runner by the spread is in this section (#23): the runner's public steps
# (device_matrix.run.runner) over a run of the row with the spread's options.


def _run(run: RowRun, listener: RunListener | None = None) -> Run:
    return Run(run.cfg, run.plan, run.options, listener or _Silent())


def collect(run: RowRun | Run) -> Collection:
    """The row's tests, from ``--collect-only`` passes of the runner's own child.

    A module whose import kills or hangs the process is left out and collection tried
    again, as a whole run does (the shard's own run records that crash). Needs no lock and
    writes no record: a driver collects before any shard runs, a Ray node on its own.
    """
    return runner.collect(run if isinstance(run, Run) else _run(run))


@contextlib.contextmanager
def started(run: RowRun, listener: RunListener, why: str) -> Iterator[Run]:
    """A part's run, its folder locked, with its ``running`` record (saying ``why``) written
    before anything is collected: what an earlier run left is cleared, as a run does.

    What cannot run is refused and recorded first; an interrupt inside writes the
    ``interrupted`` record of what is known, then goes on up.
    """
    with runner.opened(run.cfg, run.plan, run.options, listener) as opened:
        runner.prepare(opened, Verdict("running", why))
        yield opened


def refused(opened: Run, exc: DeviceMatrixError) -> None:
    """The record of a started part that stops before its tests run (a wrong split, a refusal)."""
    runner.write_record(opened, Verdict("error", f"refused: {exc.message} (exit {exc.exit_code})"))


def finish(opened: Run, spread_: SpreadRef, select: Sequence[str]) -> RunRecord:
    """The started part's tests (``select``), its record naming its place in the split."""
    opened.options = replace(opened.options, spread=spread_)
    return runner.finish(opened, runner.RUNNING, select=select)


def run_part(run: RowRun, listener: RunListener) -> RunRecord:
    """The runner over the part the run's options describe (folder, selection, command, slot)."""
    return runner.run_row(run.cfg, run.plan, run.options, listener)


def executor_for(run: RowRun) -> Executor:
    """Where the row's processes run (a container's image checked first: #21)."""
    return _run(run).executor


def repro_for(run: RowRun, nodeid: str) -> str:
    """The command that reruns ``nodeid`` as the row runs it (a container's own command)."""
    opened = _run(run)
    if run.plan.mode == "container":
        with contextlib.suppress(DeviceMatrixError):
            opened.executor  # noqa: B018 - the container's command is known once its image is checked
    return opened.repro.of(nodeid, [nodeid.split("::", 1)[0]])


class _Silent:
    """A listener that tells no one (the door's own small uses of the runner)."""

    def row_group(self, title: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def test_running(self, row: str, nodeid: str) -> None:
        pass

    def test_done(self, row: str, nodeid: str, outcome: str, *, duration: float, done: int, total: int | None) -> None:
        pass

    def crash(self, row: str, nodeid: str | None, *, outcome: str, phase: str, what: str, fingerprint: str) -> None:
        pass

    def note(self, row: str, text: str) -> None:
        pass


# --- gangs: in every full run of their row ------------------------------------------------------


def full_run_gangs(run: RowRun, listener: RunListener) -> tuple[Gang, ...]:
    """The row's gangs when this run is a full run of it; otherwise none, and it says so."""
    row, options = run.row, run.options
    if not row.gangs or run.plan.mode == "unavailable":
        return ()
    # the row's own pytest_args are part of the whole row: only this command line selects
    left_out = gangs.selected(row, tests=options.tests, suites=options.suites, pytest_args=options.pytest_args)
    if left_out is not None:
        names = ", ".join(entry.name for entry in row.gangs)
        listener.note(row.name, f"gang(s) {names} not run: {left_out}, and a gang belongs to the whole row")
        return ()
    return row.gangs


def _pending_gangs(run: RowRun, part: Path, todo: Sequence[Gang]) -> None:
    """Each gang's record says it has yet to run: a run killed before them leaves no gap."""
    for entry in todo:
        folder = gangs.gang_folder(part, entry)
        shutil.rmtree(folder, ignore_errors=True)
        why = "it runs after the row's tests (or its run was killed)"
        record = gangs.pending_record(run.row, run.plan.mode, entry, status="running", why=why)
        write_json_atomic(folder / "run.json", record)


def _cut_gangs(run: RowRun, part: Path, todo: Sequence[Gang], status: RowStatus, why: str) -> None:
    """Gangs that will not run now: their records say why (interrupted, or the run failed before them)."""
    for entry in todo:
        path = gangs.gang_folder(part, entry) / "run.json"
        with contextlib.suppress(ResultsError):
            if load_run(path)["status"] != "running":
                continue  # it ran to its end, or wrote why it did not: its record stands
        write_json_atomic(path, gangs.pending_record(run.row, run.plan.mode, entry, status=status, why=why))


def _gangs_to_resume(part: Path, todo: Sequence[Gang]) -> list[Gang]:
    """The gangs of an interrupted run that did not run to their end."""
    left = []
    for entry in todo:
        try:
            status = load_run(gangs.gang_folder(part, entry) / "run.json")["status"]
        except ResultsError:
            status = "running"
        if status in UNFINISHED_STATUSES:
            left.append(entry)
    return left


def _fold_gangs(part: Path) -> RunRecord:
    """The part's run.json with its gangs folded in, written back; its junit.xml and report.json too.

    Only where its runner wrote them (a run that ended): a CI job reads those, and they hold
    the gangs run.json holds (#23).
    """
    record = with_gangs(load_run(part / "run.json"), load_gangs(part, ""))
    own = read_report(part / "report.json")
    if own is not None:
        write_reports(part, record, [own])
    write_json_atomic(part / "run.json", record)
    return record


def _strip_gangs(part: Path) -> None:
    """Before a resume: the runner continues its own record, not the gangs folded into it."""
    path = part / "run.json"
    with contextlib.suppress(ResultsError):
        record = load_run(path)
        bare = without_gangs(record)
        if bare is not record:
            write_json_atomic(path, bare)


@contextlib.contextmanager
def _gangs_after(run: RowRun, part: Path, todo: Sequence[Gang], *, resume: bool) -> Iterator[None]:
    """Around a part's run: its gangs' records say they wait; an end before them says why."""
    if resume:
        _strip_gangs(part)
    elif todo:
        _pending_gangs(run, part, todo)
    try:
        yield
    except BaseException as exc:
        if todo:
            if isinstance(exc, Interrupted):
                _cut_gangs(run, part, todo, "interrupted", f"interrupted by {exc} before it ran; `--resume` runs it")
            else:
                _cut_gangs(run, part, todo, "error", f"the row's run ended before its gangs ({exc})")
            with contextlib.suppress(ResultsError, OSError):
                _fold_gangs(part)
        raise


def _run_gangs_here(run: RowRun, part: Path, todo: Sequence[Gang], listener: RunListener) -> RunRecord:
    """The gangs one after another on this host, after the part's tests; the part's record with them."""
    _fold_gangs(part)  # the part's tests, and gangs still to run
    executor = executor_for(run)
    for entry in todo:
        folder = gangs.gang_folder(part, entry)
        gangs.run_here(executor, run.cfg, run.row, run.plan.mode, entry, folder=folder, note=listener.note)
    return _fold_gangs(part)


# --- a whole run ----------------------------------------------------------------------------------


def run_whole(cfg: Config, plan: RowPlan, options: RunOptions, listener: RunListener) -> RunRecord:
    """The row in one piece, then its gangs here; the shards of an earlier split go."""
    run = RowRun(cfg, plan, options)
    folder = run.folder
    todo = full_run_gangs(run, listener)
    gangs.refuse_unsatisfiable_here(run.row, todo)  # before anything is written
    if options.resume:
        refuse_whole_resume_of_spread(folder)
        todo = tuple(_gangs_to_resume(folder, todo))
    else:
        shutil.rmtree(folder / SHARDS_DIR, ignore_errors=True)
        shutil.rmtree(folder / GANGS_DIR, ignore_errors=True)
    with _gangs_after(run, folder, todo, resume=options.resume):
        record = run_part(run, listener)
        if todo:
            return _run_gangs_here(run, folder, todo, listener)
    return _fold_gangs(folder) if (folder / GANGS_DIR).is_dir() else record


def refuse_whole_resume_of_spread(folder: Path) -> None:
    """`run --resume` of a row last run as shards: the shards resume, not a whole run over them (#23)."""
    try:
        record = load_run(folder / "run.json")
    except ResultsError:
        return  # the runner says what there is to resume
    if not is_spread(record) or ("spread" in record and record["spread"]["shard"] is not None):
        return
    of = record["spread"]["of"] if "spread" in record else len(record["environment"].get("shards", [])) or 1
    raise UsageProblem(
        f"{folder / 'run.json'} is the record of row {record['row']!r} run as {of} shards, not of a whole run",
        tip=f"Resume the shards: `device-matrix run --device {record['row']} --shards {of} --resume` (with the "
        "--executor ray --address it ran with, if it ran on Ray), or run the row whole without --resume.",
    )


# --- one shard ------------------------------------------------------------------------------------


def shard_run(run: RowRun, shard: Shard, *, plan_id: str | None, slot: int | None = None) -> RowRun:
    """The run of shard ``shard``: its folder, the command that runs it again, its place in the split."""
    command = ["device-matrix", "run", "--device", run.row.name, "--shard", str(shard)]
    return run.but(
        results_subdir=f"{SHARDS_DIR}/{shard.index}",
        command=command if slot is None else [*command, "--slot", str(slot)],
        spread=SpreadRef(plan=plan_id, shard=shard.index, of=shard.count),
    )


def run_shard(
    cfg: Config,
    plan: RowPlan,
    options: RunOptions,
    listener: RunListener,
    shard: Shard,
    *,
    given_plan: Path | None = None,
    durations_from: Sequence[Path] = (),
    slot: int | None = None,
) -> RunRecord:
    """Run shard ``K/N`` of the row into ``results/<row>/shards/K/``.

    The split is the row's ``shards/plan.json`` (``given_plan``: a driver's child), made
    here when this is the first shard to start. The shard's record says ``running`` before
    anything is collected; a shard cut off continues with ``--resume``, and one that never
    got as far as its split starts again.
    """
    run = RowRun(cfg, plan, options)
    folder = shard_folder(cfg, run.row.name, shard.index)
    if plan.mode == "unavailable":
        return run_part(shard_run(run, shard, plan_id=None, slot=slot), listener)
    is_child = given_plan is not None
    existing = _read_plan(given_plan or plan_path(cfg, run.row.name), shard)
    todo = () if is_child else full_run_gangs(run, listener)  # a driver runs its gangs itself
    # before anything is written: the gangs this shard keeps (a new split gives them to shard 1)
    mine = gangs_of(existing, shard.index) if existing is not None else [g.name for g in todo if shard.index == 1]
    gangs.refuse_unsatisfiable_here(run.row, [g for g in todo if g.name in mine])
    if options.resume and existing is not None:
        _same_split(folder, existing, shard)
        this = shard_run(run, shard, plan_id=existing["plan"], slot=slot)
        return _run_shard_part(this, existing, shard, folder=folder, todo=todo, listener=listener, resume=True)
    if options.resume:
        _something_to_resume(folder, f"--shard {shard}")
        listener.note(run.row.name, f"shard {shard}: no split to continue: running the shard from its start")
    this = shard_run(run.but(resume=False), shard, plan_id=None, slot=slot)
    if is_child and existing is not None:
        return _run_shard_part(this, existing, shard, folder=folder, todo=todo, listener=listener, resume=False)
    # one flow: the shard's record says it runs before anything is collected (#23), then the
    # split it collected (or read), its part, and the gangs the split gave it
    with contextlib.ExitStack() as after_tests:
        with started(this, listener, "collecting the row's tests (or the shard's runner was killed)") as opened:
            try:
                split_plan, collected = _split_here(
                    this, opened, existing, shard, todo=todo, durations_from=durations_from
                )
            except DeviceMatrixError as exc:
                refused(opened, exc)
                raise
            write_shard_file(folder, split_plan, shard.index)
            kept = tuple(g for g in todo if g.name in gangs_of(split_plan, shard.index))
            ref = SpreadRef(plan=split_plan["plan"], shard=shard.index, of=shard.count)
            after_tests.enter_context(_gangs_after(this.but(spread=ref), folder, kept, resume=False))
            # collection failed: the shard's run selects nothing, and records why as a whole run would
            record = finish(opened, ref, part_of(split_plan, shard.index, collected) or [])
        if kept:  # after the runner let go of the shard's folder: an interrupt now is the gangs'
            return _run_gangs_here(this, folder, kept, listener)
    return record


def _split_here(
    run: RowRun,
    opened: Run,
    existing: PlanFile | None,
    shard: Shard,
    *,
    todo: Sequence[Gang],
    durations_from: Sequence[Path],
) -> tuple[PlanFile, Sequence[str] | None]:
    """The split this shard runs: the row's plan, held against the collection here, or a new
    one made of it (this is the first shard to start) and written; and the collection."""
    found = collect(opened)
    flag = f"--shard {shard}"
    if existing is not None:
        fit_collection(existing, found.nodeids, plan_path(run.cfg, run.row.name), flag)
        return existing, found.nodeids
    check_count(shard.count, found.nodeids, flag=flag)
    durations = recorded_durations(durations_from or [run.cfg.results_dir], run.row.name)
    split_plan = make_plan(
        run.row.name, shard.count, found.nodeids, durations, gangs=[g.name for g in todo], reason=found.problem
    )
    path = plan_path(run.cfg, run.row.name)
    if not claim_plan(path, split_plan):
        # another shard of the row split it while this one collected: its split decides
        decided = _read_plan(path, shard)
        if decided is not None:
            fit_collection(decided, found.nodeids, path, flag)
            return decided, found.nodeids
        write_plan(path, split_plan)  # removed again since: this split is the row's
    return split_plan, found.nodeids


def _run_shard_part(
    run: RowRun,
    split_plan: PlanFile,
    shard: Shard,
    *,
    folder: Path,
    todo: Sequence[Gang],
    listener: RunListener,
    resume: bool,
) -> RunRecord:
    """The shard's part of the split (as the plan names it) through the runner, then the
    gangs the split gave it: a driver's child, or a resumed shard."""
    if not resume:
        write_shard_file(folder, split_plan, shard.index)
    this = run.but(spread=SpreadRef(plan=split_plan["plan"], shard=shard.index, of=shard.count))
    # a driver's child keeps no gang (todo is empty): its driver runs them and merges them
    kept = tuple(g for g in todo if g.name in gangs_of(split_plan, shard.index))
    owned = tuple(_gangs_to_resume(folder, kept)) if resume else kept
    part = part_of(split_plan, shard.index)
    with _gangs_after(this, folder, owned, resume=resume):
        # collection failed: the shard's run selects nothing, and records why as a whole run would
        record = run_part(this.but(select=part if part is not None else []), listener)
        if owned:
            return _run_gangs_here(this, folder, owned, listener)
    return _fold_gangs(folder) if kept else record


def _same_split(folder: Path, split_plan: PlanFile, shard: Shard) -> None:
    """A resume continues a record of this split, never one of another (its tests would mix)."""
    with contextlib.suppress(ResultsError):
        named = load_run(folder / "run.json").get("spread", {}).get("plan")
        if named is not None and named != split_plan["plan"]:
            raise UsageProblem(
                f"--shard {shard} --resume: the shard's record is of another split (plan {named}, "
                f"not {split_plan['plan']})",
                tip=f"Run --shard {shard} without --resume.",
            )


def _something_to_resume(folder: Path, flag: str) -> None:
    """``--resume`` where no run of it left a record is a mistake, as for a whole run."""
    if not (folder / "run.json").exists():
        raise ResultsError(
            f"nothing to resume: {folder / 'run.json'} is missing", tip=f"Run the row with {flag} first."
        )


def _read_plan(path: Path, shard: Shard) -> PlanFile | None:
    if not path.exists():
        return None
    split_plan = load_plan(path)
    if split_plan["of"] != shard.count:
        raise UsageProblem(
            f"--shard {shard}: the split in {path} has {split_plan['of']} shards",
            tip=f"Run --shard K/{split_plan['of']}, or remove {path} to split the row again.",
        )
    return split_plan


# --- every shard of a split: the driver ----------------------------------------------------------


@dataclass(frozen=True)
class Job:
    shard: Shard
    resume: bool  # continue the shard's interrupted record


class Scheduler(Protocol):
    """Where the shards of a split run: this host's device slots, or the nodes of a Ray cluster."""

    def where(self) -> str:
        """For the notes: "here, 2 at once", "on the Ray cluster at HOST:PORT (3 nodes...)"."""

    def refuse_unsatisfiable(self, todo: Sequence[Gang]) -> None:
        """Refuse, before anything runs, what this scheduler can never run."""

    def collect(self) -> Collection:
        """The row's tests, collected where the shards will run."""

    def run(self, jobs: Sequence[Job], split_plan: PlanFile) -> None:
        """Run each job; each shard's files end in ``shards/K/``. An interrupt goes on up
        once every shard cut off has written (or been given) its ``interrupted`` record."""

    def run_gang(self, entry: Gang, folder: Path) -> None:
        """Run one gang; its record ends in ``folder``."""


@dataclass(frozen=True)
class Resume:
    plan: PlanFile  # the split the interrupted run made
    jobs: list[Job]  # the shards to run: cut off (resume) or never started


def resume_state(folder: Path, count: int | None) -> Resume | None:
    """What ``--shards N --resume`` continues: every shard cut off, none that finished.

    None: the interrupted run never got as far as a split (run it all again).
    """
    spread_ = load_spread(folder)
    plan = spread_.plan or next((p.plan for p in spread_.parts if p.plan is not None), None)
    if plan is None:
        return None
    if count is not None and count != plan["of"]:
        raise UsageProblem(
            f"--shards {count} --resume: the run it continues had {plan['of']} shards",
            tip=f"Resume with --shards {plan['of']}, or run the row again without --resume.",
        )
    records = {p.index: p.record for p in spread_.parts}
    jobs = []
    for k in range(1, plan["of"] + 1):
        record = records.get(k)
        if record is None:
            jobs.append(Job(Shard(k, plan["of"]), resume=False))
        elif record["status"] in UNFINISHED_STATUSES:
            jobs.append(Job(Shard(k, plan["of"]), resume=True))
    return Resume(plan, jobs)


def spread(
    cfg: Config,
    plan: RowPlan,
    options: RunOptions,
    listener: RunListener,
    scheduler: Scheduler,
    *,
    count: int,
    command: Sequence[str],
    durations_from: Sequence[Path] = (),
) -> RunRecord:
    """Every shard of the row's split through ``scheduler``, its gangs after, merged into one record."""
    run = RowRun(cfg, plan, options)
    row, folder = run.row, run.folder
    if plan.mode == "unavailable":
        return run_part(run, listener)  # nothing to split: the record says why
    todo = full_run_gangs(run, listener)
    scheduler.refuse_unsatisfiable(todo)
    state = resume_state(folder, count) if options.resume else None
    if options.resume and state is None:
        _something_to_resume(folder, f"--shards {count}")
        listener.note(row.name, "the interrupted run made no split: running every shard from the start")
    owner = shard_folder(cfg, row.name, 1)
    if state is not None:
        split_plan, jobs = state.plan, state.jobs
        planned = {slot["name"] for slot in split_plan.get("gangs", [])}
        todo = tuple(g for g in _gangs_to_resume(owner, todo) if g.name in planned)
        listener.note(
            row.name,
            f"resuming shard(s) {_listed([j.shard.index for j in jobs if j.resume])}; "
            f"starting shard(s) {_listed([j.shard.index for j in jobs if not j.resume])} {scheduler.where()}",
        )
    else:
        split_plan = _new_split(run, scheduler, count=count, command=command, durations_from=durations_from, todo=todo)
        jobs = [Job(Shard(k, count), resume=False) for k in range(1, count + 1)]
        listener.note(
            row.name,
            f"{len(split_plan['tests'] or ())} tests in {count} shard(s) {scheduler.where()}; "
            f"{split_plan['durations_known']} with a recorded duration; estimated seconds per shard: "
            + ", ".join(f"{s:.1f}" for s in split_plan["estimated_seconds"]),
        )
    _merge_and_write(folder, command)  # the row's record: every part there is, none yet done
    try:
        if todo:
            _pending_gangs(run, owner, todo)
        scheduler.run(jobs, split_plan)
        for entry in todo:
            scheduler.run_gang(entry, gangs.gang_folder(owner, entry))
    except BaseException as exc:
        if isinstance(exc, Interrupted):
            _cut_gangs(run, owner, todo, "interrupted", f"interrupted by {exc} before or while it ran")
        else:
            why = f"not run: the spread of the row failed ({exc})"
            for job in jobs:
                if needs_salvage(shard_folder(cfg, row.name, job.shard.index)):
                    _placeholder(run, split_plan, job.shard, "error", why)
            _cut_gangs(run, owner, todo, "error", f"the spread of the row failed before it ran ({exc})")
        with contextlib.suppress(ResultsError):
            _merge_and_write(folder, command)
        raise
    merged = _merge_and_write(folder, command)
    for problem in merged.problems:
        listener.note(row.name, problem)
    return merged.record


def _new_split(
    run: RowRun,
    scheduler: Scheduler,
    *,
    count: int,
    command: Sequence[str],
    durations_from: Sequence[Path],
    todo: Sequence[Gang],
) -> PlanFile:
    """Clear the row, say it runs, collect it where its shards run, split it, and write the plan."""
    row, folder = run.row, run.folder
    durations = recorded_durations(durations_from or [run.cfg.results_dir], row.name)  # before they are cleared
    clear_row(folder)
    # the row's record says it runs before anything is collected: a driver killed now
    # leaves `running`, never the last run's record (#23)
    _row_record(run, command, status="running", reason="collecting the row's tests", of=count)
    try:
        found = scheduler.collect()
        check_count(count, found.nodeids, flag=f"--shards {count}")
    except Interrupted as exc:
        why = f"interrupted by {exc} while it collected the row's tests"
        _row_record(run, command, status="interrupted", reason=why, of=count)
        raise
    except DeviceMatrixError as exc:
        _row_record(run, command, status="error", reason=f"refused: {exc.message} (exit {exc.exit_code})", of=count)
        raise
    split_plan = make_plan(
        row.name, count, found.nodeids, durations, gangs=[g.name for g in todo], reason=found.problem
    )
    write_plan(folder / SHARDS_DIR / "plan.json", split_plan)
    for k in range(1, count + 1):
        _placeholder(
            run, split_plan, Shard(k, count), "running", "waiting to start (or the spread's driver was killed)"
        )
    return split_plan


def _listed(shards: Sequence[int]) -> str:
    return ", ".join(map(str, sorted(shards))) or "none"


def clear_row(folder: Path) -> None:
    """A new split of the whole row here: what an earlier run of the row left goes, as with `run`."""
    for name in (SHARDS_DIR, GANGS_DIR, "attempts"):
        shutil.rmtree(folder / name, ignore_errors=True)
    for name in ("run.json", "junit.xml", "report.json", "output.log"):
        (folder / name).unlink(missing_ok=True)


def _merge_and_write(folder: Path, command: Sequence[str]) -> Merged:
    merged = merge(load_spread(folder), command=command)
    write_merged(folder, merged)
    return merged


def _record(run: RowRun, *, status: RowStatus, reason: str, tests: Sequence[str] = (), why: str = "") -> RunRecord:
    state = RunState(Redactor())
    state.expect(list(tests))
    state.mark_not_run(f"not run: {why}")
    return state.to_record(
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


def _row_record(run: RowRun, command: Sequence[str], *, status: RowStatus, reason: str, of: int) -> None:
    """The spread's own record, before any shard has one: ``results/<row>/run.json``."""
    record = _record(run, status=status, reason=reason)
    record["command"] = list(command)
    record["spread"] = SpreadRef(plan=None, shard=None, of=of)
    write_json_atomic(run.folder / "run.json", record)


def _placeholder(run: RowRun, split_plan: PlanFile, shard: Shard, status: RowStatus, why: str) -> None:
    """A shard's record before its runner (or node) writes one, or instead: its tests not_run, why."""
    this = shard_run(run, shard, plan_id=split_plan["plan"])
    folder = shard_folder(run.cfg, run.row.name, shard.index)
    record = _record(this, status=status, reason=why, tests=part_of(split_plan, shard.index) or [], why=why)
    record["command"] = list(this.options.command)
    record["spread"] = SpreadRef(plan=split_plan["plan"], shard=shard.index, of=shard.count)
    write_json_atomic(folder / "run.json", record)
    write_shard_file(folder, split_plan, shard.index)


def cut_off(run: RowRun, split_plan: PlanFile, shard: Shard, exc: Interrupted) -> None:
    """A shard that never started (or never came back) when the driver was interrupted."""
    why = f"device-matrix was interrupted ({exc}) before shard {shard} came back; `--resume` runs it"
    _placeholder(run, split_plan, shard, "interrupted", why)


def lost(run: RowRun, split_plan: PlanFile, shard: Shard, why: str) -> None:
    """A shard whose results never came back (its nodes died, its task overran): not_run, why."""
    _placeholder(run, split_plan, shard, "error", why)


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


def runner_died(run: RowRun, split_plan: PlanFile, shard: Shard, *, how: str, returncode: int | None) -> bool:
    """The record of a shard whose runner ended under it (#23): who died, and what stands.

    A runner that got to write its ``interrupted`` record (its worker's death sends it
    SIGTERM) had read its journal to the end: the test that was running is a crash of that
    test, diagnosed from the output that came back. A runner killed outright read only
    part of it: no test is named that may not be the one, the crash is of the shard's
    session, and the last test its journal shows finished is said. The tests the shard's
    record has keep their outcomes; the rest of its part are not_run. Returns whether
    something is left to run (a resume of the shard continues it).
    """
    this = shard_run(run, shard, plan_id=split_plan["plan"])
    folder = shard_folder(run.cfg, run.row.name, shard.index)
    try:
        base: RunRecord | None = without_gangs(load_run(folder / "run.json"))
    except ResultsError:
        base = None
    known = {t["nodeid"]: t for t in base["tests"]} if base is not None else {}
    crashes: list[CrashRecord] = list(base["crashes"]) if base is not None else []
    attempts = _attempts_on_disk(folder, list(base["attempts"]) if base is not None else [], returncode)
    running, last = _journal_state(folder)
    drained = base is not None and base["status"] == "interrupted"
    culprit = running if drained else None
    if culprit is not None and culprit in known and known[culprit]["outcome"] in CRASHING_OUTCOMES:
        culprit = None  # its crash is recorded already: a rerun of it was cut off
    why = f"not run: shard {shard}'s runner ended ({how}) before this test ran"
    tests: dict[str, TestRecord] = {}
    for nodeid in dict.fromkeys([*(part_of(split_plan, shard.index) or []), *known]):
        test = known.get(nodeid)
        if test is None or test["outcome"] == "not_run":
            test = TestRecord(
                nodeid=nodeid, outcome="not_run", duration=0.0, message=why, skip=None, crash=None, attempt=0
            )
        tests[nodeid] = test
    if culprit is not None or not drained:
        where = (
            f"{how} while this test ran: the device-matrix runner of its shard went with it"
            if culprit is not None
            else f"{how}: the test it ran is not known (the last its journal shows finished: {last or 'none'})"
        )
        crash = _crash_of(
            this,
            culprit,
            folder=folder,
            hint=where,
            returncode=returncode,
            crash_id=f"{run.row.name}-{len(crashes) + 1}",
            attempts=attempts,
        )
        crashes.append(crash)
        if culprit is not None:
            tests[culprit] = TestRecord(
                nodeid=culprit,
                outcome="crashed",
                duration=0.0,
                message=f"crashed: {how} while it ran",
                skip=None,
                crash=crash["id"],
                attempt=crash["attempt"],
            )
    listed = list(tests.values())
    named = f" while {culprit} ran" if culprit else ""
    record = RunRecord(
        **{
            **_record(this, status="error", reason=f"shard {shard}: {how}{named}"),
            "tests": listed,
            "crashes": crashes,
            "attempts": attempts,
            "summary": summarize(listed),
            "status": row_status([t["outcome"] for t in listed], crashes),
            "command": list(this.options.command),
            "spread": SpreadRef(plan=split_plan["plan"], shard=shard.index, of=shard.count),
            "environment": dict(base["environment"]) if base is not None else {},
        }
    )
    write_json_atomic(folder / "run.json", record)
    rerun = any(c["kind"] == "crash" and c["phase"] == "test" and not c["reruns"] for c in crashes)
    return rerun or any(t["outcome"] == "not_run" for t in listed)


def _attempts_on_disk(folder: Path, attempts: list[AttemptRecord], returncode: int | None) -> list[AttemptRecord]:
    """The record's attempts, and those its runner started without recording them (their journals)."""
    known = {a["index"] for a in attempts}
    for journal in sorted((folder / "attempts").glob("*/journal.jsonl")):
        name = journal.parent.name
        index = int(name) if name.isascii() and name.isdigit() else 0
        if index and index not in known:
            attempts.append(
                AttemptRecord(
                    index=index,
                    purpose="run",
                    returncode=returncode,
                    signal_name=diagnostics.signal_name(diagnostics.signal_from_returncode(returncode)),
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
    *,
    folder: Path,
    hint: str,
    returncode: int | None,
    crash_id: str,
    attempts: Sequence[AttemptRecord],
) -> CrashRecord:
    diagnosis = diagnostics.diagnose(
        returncode=returncode, fault_text="", output_text=_tail(folder / "output.log"), redactor=Redactor()
    )
    diagnosis["hint"] = hint
    return CrashRecord(
        id=crash_id,
        kind="crash",
        phase="test" if nodeid is not None else "session",
        nodeid=nodeid,
        when=None,
        attempt=max((a["index"] for a in attempts), default=0),
        diagnosis=diagnosis,
        classification="unknown",
        reruns=[],
        repro=repro_for(run, nodeid) if nodeid is not None else shlex.join(run.options.command),
        issue=None,
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


# --- the device slots of this host ----------------------------------------------------------------


class Slots:
    """Shards as ``device-matrix run --shard K/N`` processes, at most one per device slot at a time."""

    def __init__(
        self,
        cfg: Config,
        plan: RowPlan,
        options: RunOptions,
        listener: RunListener,
        *,
        width: int,
        forwarded: Sequence[str],
    ) -> None:
        self.run_ = RowRun(cfg, plan, options)
        self.listener = listener
        self.width = width
        self.forwarded = list(forwarded)

    def where(self) -> str:
        return "here, one after another" if self.width == 1 else f"here, {self.width} at once"

    def refuse_unsatisfiable(self, todo: Sequence[Gang]) -> None:
        gangs.refuse_unsatisfiable_here(self.run_.row, todo)

    def collect(self) -> Collection:
        return collect(self.run_)

    def run_gang(self, entry: Gang, folder: Path) -> None:
        run = self.run_
        gangs.run_here(
            executor_for(run), run.cfg, run.row, run.plan.mode, entry, folder=folder, note=self.listener.note
        )

    def _argv(self, job: Job, slot: int | None) -> list[str]:
        run = self.run_
        plan_file = plan_path(run.cfg, run.row.name)
        argv = [sys.executable, "-m", "device_matrix", "--project", str(run.cfg.project_root), "run"]
        argv += ["--device", run.row.name, "--shard", str(job.shard), "--shard-plan", str(plan_file)]
        argv += ["--results", str(run.cfg.results_dir)]
        if slot is not None:
            argv += ["--slot", str(slot)]
        if job.resume:
            argv.append("--resume")
        return argv + self.forwarded

    def _start(self, job: Job, slot: int) -> PopenChild:
        run = self.run_
        folder = shard_folder(run.cfg, run.row.name, job.shard.index)
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "console.log").open("ab" if job.resume else "wb") as console:
            child = spawn(
                self._argv(job, slot if run.row.slot_env else None),
                env=os.environ,
                cwd=run.cfg.project_root,
                output=console,
                token=f"shard-{run.row.name}-{job.shard.index}-{time.monotonic_ns()}",
                grace=SHARD_GRACE,
                death_signal=signal.SIGTERM,  # a killed driver's shards write their records and end
            )
        where = f" on slot {slot}" if run.row.slot_env else ""
        self.listener.note(run.row.name, f"shard {job.shard} started{where}")
        return child

    def _ended(self, job: Job, code: int, split_plan: PlanFile, runs: int) -> Job | None:
        """A shard's process ended: its exit status is trusted, and a record it did not write is made."""
        run = self.run_
        self.listener.note(run.row.name, f"shard {job.shard} ended (exit {code})")
        if not needs_salvage(shard_folder(run.cfg, run.row.name, job.shard.index)):
            return None
        how = describe_exit(code)
        self.listener.note(run.row.name, f"shard {job.shard}: {how}")
        left = runner_died(run, split_plan, job.shard, how=how, returncode=code)
        return Job(job.shard, resume=True) if left and runs < MAX_RUNS else None

    def run(self, jobs: Sequence[Job], split_plan: PlanFile) -> None:
        free = list(range(self.width))
        waiting = list(jobs)
        runs: dict[int, int] = {}
        running: dict[int, tuple[PopenChild, int, Job]] = {}
        try:
            while waiting or running:
                while waiting and free:
                    job, slot = waiting.pop(0), free.pop(0)
                    runs[job.shard.index] = runs.get(job.shard.index, 0) + 1
                    running[job.shard.index] = (self._start(job, slot), slot, job)
                for k, (child, slot, job) in list(running.items()):
                    if child.poll() is None:
                        continue
                    del running[k]
                    free.append(slot)
                    again = self._ended(job, child.end(), split_plan, runs[k])  # reaped, its leftovers swept
                    if again is not None:
                        waiting.append(again)
                time.sleep(POLL)
        except Interrupted as exc:
            self._stop([child for child, _, _ in running.values()])
            run = self.run_
            for job in waiting:
                cut_off(run, split_plan, job.shard, exc)
            for k, (_, _, job) in running.items():
                if needs_salvage(shard_folder(run.cfg, run.row.name, k)):
                    cut_off(run, split_plan, job.shard, exc)
            raise

    @staticmethod
    def _stop(children: Sequence[PopenChild]) -> None:
        """SIGTERM to every shard at once (each writes its own `interrupted` record), then the ends."""
        for child in children:
            child.kill_group(signal.SIGTERM)
        end = time.monotonic() + SHARD_GRACE
        while any(child.poll() is None for child in children) and time.monotonic() < end:
            time.sleep(POLL)
        for child in children:
            child.end()
