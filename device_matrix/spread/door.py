"""The runner, through one door: every use of it by the spread is here (#23, #31).

Only the runner's public steps (device_matrix.run.runner) over a run of the row with the
spread's options: collect the row, open a part's run and write its ``running`` record
before anything is collected, finish it over a selection of nodeids, run a part whole,
the row's executor and repro command. The runner never imports the spread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from device_matrix.config import Config, Row
from device_matrix.errors import DeviceMatrixError
from device_matrix.executors.base import Executor
from device_matrix.records.merge import SHARDS_DIR
from device_matrix.records.schema import RunRecord, SpreadRef
from device_matrix.run import runner
from device_matrix.run.context import Run, RunListener, RunOptions, Verdict
from device_matrix.run.plan import RowPlan
from device_matrix.run.runner import Collection
from device_matrix.spread.split import Shard


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


def _run(run: RowRun, listener: RunListener | None = None) -> Run:
    return Run(run.cfg, run.plan, run.options, listener or Silent())


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
    return runner.finish(opened, runner.RUNNING, part=runner.Part(tuple(select), spread_))


def run_part(run: RowRun, listener: RunListener) -> RunRecord:
    """The runner over the part the run's options describe (folder, selection, command, slot)."""
    return runner.run_row(run.cfg, run.plan, run.options, listener)


def executor_for(run: RowRun) -> Executor:
    """Where the row's processes run (a container's image checked first: #21)."""
    return _run(run).make_executor()


def repro_for(run: RowRun, nodeid: str) -> str:
    """The command that reruns ``nodeid`` as the row runs it (a container's own command)."""
    opened = _run(run)
    if run.plan.mode == "container":
        with contextlib.suppress(DeviceMatrixError):
            opened.make_executor()  # the container's command is known once its image is checked
    return opened.repro.of(nodeid, [nodeid.split("::", 1)[0]])


class Silent:
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


def shard_run(run: RowRun, shard: Shard, *, plan_id: str | None, slot: int | None = None) -> RowRun:
    """The run of shard ``shard``: its folder, the command that runs it again, its place in the split."""
    command = ["device-matrix", "run", "--device", run.row.name, "--shard", str(shard)]
    return run.but(
        results_subdir=f"{SHARDS_DIR}/{shard.index}",
        command=command if slot is None else [*command, "--slot", str(slot)],
        spread=SpreadRef(plan=plan_id, shard=shard.index, of=shard.count),
    )


__all__ = [  # Collection too: the rest of the spread names the runner's types through the door
    "Collection",
    "RowRun",
    "Silent",
    "collect",
    "executor_for",
    "finish",
    "refused",
    "repro_for",
    "run_part",
    "shard_run",
    "started",
]
