"""Spread a row: one driver, two schedulers (#23, #31).

A row runs whole (``run``), as one shard of a split (``run --shard K/N``), or as every
shard of a split (``run --shards N``, on this host's device slots or on a Ray cluster).
What those share happens here, once: the split (device_matrix.spread.split), the
``running`` record written before anything is collected, resume, clearing what an
earlier run left, scheduling the shards, running the row's gangs in every full run of it,
and merging. Where the shards of a split run is a :class:`Scheduler`: the device slots of
this host (device_matrix.spread.local.Slots) or the nodes of a Ray cluster
(device_matrix.spread.ray.RayNodes). What a shard's record says when its runner did not
write it is device_matrix.spread.postmortem.

The runner is used through one door (device_matrix.spread.door). A shard that collects
runs one flow: opened, prepared, collected, split, finished.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from device_matrix.config import Config, Gang
from device_matrix.errors import DeviceMatrixError, ResultsError, UsageProblem
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.merge import (
    GANGS_DIR,
    SHARDS_DIR,
    Merged,
    load_gangs,
    load_spread,
    merge,
    read_report,
    with_gangs,
    without_gangs,
    write_merged,
    write_reports,
)
from device_matrix.records.outcomes import UNFINISHED_STATUSES
from device_matrix.records.schema import RowStatus, RunRecord, SpreadRef, load_run
from device_matrix.run.attempt import Interrupted
from device_matrix.run.context import Run, RunListener, RunOptions
from device_matrix.run.plan import RowPlan
from device_matrix.run.whole import clear_spread
from device_matrix.spread import gang as gangs
from device_matrix.spread.door import (
    Collection,
    RowRun,
    collect,
    executor_for,
    finish,
    refused,
    run_part,
    shard_run,
    started,
)
from device_matrix.spread.postmortem import needs_salvage, not_run_record, placeholder
from device_matrix.spread.split import Shard, Split, check_count, plan_path, recorded_durations, shard_folder

SHARD_GRACE = 30.0  # seconds a shard's runner has, after SIGTERM, to end its tests and write its record
MAX_RUNS = 3  # a shard whose runner dies under it runs at most this often (each death names its test)
POLL = 0.05


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
    """The row in one piece, then its gangs here (a row without gangs runs whole without the
    spread: device_matrix.run.whole); the shards of an earlier split go."""
    run = RowRun(cfg, plan, options)
    folder = run.folder
    todo = full_run_gangs(run, listener)
    gangs.refuse_unsatisfiable_here(run.row, todo)  # before anything is written
    clear_spread(folder, resume=options.resume)
    if options.resume:
        todo = tuple(_gangs_to_resume(folder, todo))
    with _gangs_after(run, folder, todo, resume=options.resume):
        record = run_part(run, listener)
        if todo:
            return _run_gangs_here(run, folder, todo, listener)
    return _fold_gangs(folder) if (folder / GANGS_DIR).is_dir() else record


# --- one shard ------------------------------------------------------------------------------------


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
    existing = Split.read(given_plan or plan_path(cfg, run.row.name), shard)
    todo = () if is_child else full_run_gangs(run, listener)  # a driver runs its gangs itself
    # before anything is written: the gangs this shard keeps (a new split gives them to shard 1)
    mine = existing.gangs_of(shard.index) if existing is not None else [g.name for g in todo if shard.index == 1]
    gangs.refuse_unsatisfiable_here(run.row, [g for g in todo if g.name in mine])
    if options.resume and existing is not None:
        _same_split(folder, existing, shard)
        this = shard_run(run, shard, plan_id=existing.id, slot=slot)
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
                split, collected = _split_here(this, opened, existing, shard, todo=todo, durations_from=durations_from)
            except DeviceMatrixError as exc:
                refused(opened, exc)
                raise
            split.write_shard_file(folder, shard.index)
            kept = tuple(g for g in todo if g.name in split.gangs_of(shard.index))
            ref = split.ref(shard.index)
            after_tests.enter_context(_gangs_after(this.but(spread=ref), folder, kept, resume=False))
            # collection failed: the shard's run selects nothing, and records why as a whole run would
            record = finish(opened, ref, split.part_of(shard.index, collected) or [])
        if kept:  # after the runner let go of the shard's folder: an interrupt now is the gangs'
            return _run_gangs_here(this, folder, kept, listener)
    return record


def _split_here(
    run: RowRun,
    opened: Run,
    existing: Split | None,
    shard: Shard,
    *,
    todo: Sequence[Gang],
    durations_from: Sequence[Path],
) -> tuple[Split, Sequence[str] | None]:
    """The split this shard runs: the row's plan, held against the collection here, or a new
    one made of it (this is the first shard to start) and written; and the collection."""
    found = collect(opened)
    flag = f"--shard {shard}"
    if existing is not None:
        existing.fit(found.nodeids, plan_path(run.cfg, run.row.name), flag)
        return existing, found.nodeids
    check_count(shard.count, found.nodeids, flag=flag)
    durations = recorded_durations(durations_from or [run.cfg.results_dir], run.row.name)
    split = Split.make(
        run.row.name, shard.count, found.nodeids, durations, gangs=[g.name for g in todo], reason=found.problem
    )
    path = plan_path(run.cfg, run.row.name)
    if not split.claim(path):
        # another shard of the row split it while this one collected: its split decides
        decided = Split.read(path, shard)
        if decided is not None:
            decided.fit(found.nodeids, path, flag)
            return decided, found.nodeids
        split.write(path)  # removed again since: this split is the row's
    return split, found.nodeids


def _run_shard_part(
    run: RowRun,
    split: Split,
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
        split.write_shard_file(folder, shard.index)
    this = run.but(spread=split.ref(shard.index))
    # a driver's child keeps no gang (todo is empty): its driver runs them and merges them
    kept = tuple(g for g in todo if g.name in split.gangs_of(shard.index))
    owned = tuple(_gangs_to_resume(folder, kept)) if resume else kept
    part = split.part_of(shard.index)
    with _gangs_after(this, folder, owned, resume=resume):
        # collection failed: the shard's run selects nothing, and records why as a whole run would
        record = run_part(this.but(select=part if part is not None else []), listener)
        if owned:
            return _run_gangs_here(this, folder, owned, listener)
    return _fold_gangs(folder) if kept else record


def _same_split(folder: Path, split: Split, shard: Shard) -> None:
    """A resume continues a record of this split, never one of another (its tests would mix)."""
    with contextlib.suppress(ResultsError):
        named = load_run(folder / "run.json").get("spread", {}).get("plan")
        if named is not None and named != split.id:
            raise UsageProblem(
                f"--shard {shard} --resume: the shard's record is of another split (plan {named}, not {split.id})",
                tip=f"Run --shard {shard} without --resume.",
            )


def _something_to_resume(folder: Path, flag: str) -> None:
    """``--resume`` where no run of it left a record is a mistake, as for a whole run."""
    if not (folder / "run.json").exists():
        raise ResultsError(
            f"nothing to resume: {folder / 'run.json'} is missing", tip=f"Run the row with {flag} first."
        )


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

    def run(self, jobs: Sequence[Job], split: Split) -> None:
        """Run each job; each shard's files end in ``shards/K/``. An interrupt goes on up
        once every shard cut off has written (or been given) its ``interrupted`` record."""

    def run_gang(self, entry: Gang, folder: Path) -> None:
        """Run one gang; its record ends in ``folder``."""


@dataclass(frozen=True)
class Resume:
    split: Split  # the split the interrupted run made
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
    return Resume(Split(plan), jobs)


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
        split, jobs = state.split, state.jobs
        planned = split.gang_names()
        todo = tuple(g for g in _gangs_to_resume(owner, todo) if g.name in planned)
        listener.note(
            row.name,
            f"resuming shard(s) {_listed([j.shard.index for j in jobs if j.resume])}; "
            f"starting shard(s) {_listed([j.shard.index for j in jobs if not j.resume])} {scheduler.where()}",
        )
    else:
        split = _new_split(run, scheduler, count=count, command=command, durations_from=durations_from, todo=todo)
        jobs = [Job(Shard(k, count), resume=False) for k in range(1, count + 1)]
        listener.note(
            row.name,
            f"{len(split.plan['tests'] or ())} tests in {count} shard(s) {scheduler.where()}; "
            f"{split.plan['durations_known']} with a recorded duration; estimated seconds per shard: "
            + ", ".join(f"{s:.1f}" for s in split.plan["estimated_seconds"]),
        )
    _merge_and_write(folder, command)  # the row's record: every part there is, none yet done
    try:
        if todo:
            _pending_gangs(run, owner, todo)
        scheduler.run(jobs, split)
        for entry in todo:
            scheduler.run_gang(entry, gangs.gang_folder(owner, entry))
    except BaseException as exc:
        if isinstance(exc, Interrupted):
            _cut_gangs(run, owner, todo, "interrupted", f"interrupted by {exc} before or while it ran")
        else:
            why = f"not run: the spread of the row failed ({exc})"
            for job in jobs:
                if needs_salvage(shard_folder(cfg, row.name, job.shard.index)):
                    placeholder(run, split, job.shard, "error", why)
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
) -> Split:
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
    split = Split.make(row.name, count, found.nodeids, durations, gangs=[g.name for g in todo], reason=found.problem)
    split.write(folder / SHARDS_DIR / "plan.json")
    for k in range(1, count + 1):
        placeholder(run, split, Shard(k, count), "running", "waiting to start (or the spread's driver was killed)")
    return split


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


def _row_record(run: RowRun, command: Sequence[str], *, status: RowStatus, reason: str, of: int) -> None:
    """The spread's own record, before any shard has one: ``results/<row>/run.json``."""
    record = not_run_record(run, status=status, reason=reason)
    record["command"] = list(command)
    record["spread"] = SpreadRef(plan=None, shard=None, of=of)
    write_json_atomic(run.folder / "run.json", record)
