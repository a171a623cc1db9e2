"""The device slots of this host as the spread's scheduler (#23).

Each shard of a split is a ``device-matrix run --shard K/N`` process of its own, at most
one per device slot at a time (one after another without ``--parallel``). A shard whose
runner dies under it is told by its exit status and the record it did not write, and runs
again (at most ``MAX_RUNS`` times) to continue its part.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from device_matrix.config import Config, Gang
from device_matrix.executors.base import PopenChild, spawn
from device_matrix.run.attempt import Interrupted
from device_matrix.run.context import RunListener, RunOptions
from device_matrix.run.plan import RowPlan
from device_matrix.spread import gang as gangs
from device_matrix.spread.door import Collection, RowRun, collect, executor_for
from device_matrix.spread.driver import MAX_RUNS, POLL, SHARD_GRACE, Job
from device_matrix.spread.postmortem import cut_off, describe_exit, needs_salvage, runner_died
from device_matrix.spread.split import Split, plan_path, shard_folder


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

    def _ended(self, job: Job, code: int, split: Split, runs: int) -> Job | None:
        """A shard's process ended: its exit status is trusted, and a record it did not write is made."""
        run = self.run_
        self.listener.note(run.row.name, f"shard {job.shard} ended (exit {code})")
        if not needs_salvage(shard_folder(run.cfg, run.row.name, job.shard.index)):
            return None
        how = describe_exit(code)
        self.listener.note(run.row.name, f"shard {job.shard}: {how}")
        left = runner_died(run, split, job.shard, how=how, returncode=code)
        return Job(job.shard, resume=True) if left and runs < MAX_RUNS else None

    def run(self, jobs: Sequence[Job], split: Split) -> None:
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
                    again = self._ended(job, child.end(), split, runs[k])  # reaped, its leftovers swept
                    if again is not None:
                        waiting.append(again)
                time.sleep(POLL)
        except Interrupted as exc:
            self._stop([child for child, _, _ in running.values()])
            run = self.run_
            for job in waiting:
                cut_off(run, split, job.shard, exc)
            for k, (_, _, job) in running.items():
                if needs_salvage(shard_folder(run.cfg, run.row.name, k)):
                    cut_off(run, split, job.shard, exc)
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
