"""A row run whole on this host, straight from the command line to the runner (#41).

What an earlier spread of the row left goes first: its shards' and gangs' folders, or, to
resume, a spread's record is refused with the command that resumes it (#23). A row with
gangs to run or fold runs whole through the spread's driver instead
(device_matrix.spread.driver.run_whole), which does the same first.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from device_matrix.config import Config
from device_matrix.errors import ResultsError, UsageProblem
from device_matrix.records.merge import GANGS_DIR, SHARDS_DIR, is_spread
from device_matrix.records.schema import RunRecord, load_run
from device_matrix.run.context import RunListener, RunOptions
from device_matrix.run.plan import RowPlan
from device_matrix.run.runner import run_row


def has_gangs(cfg: Config, plan: RowPlan) -> bool:
    """Whether a whole run of the row has gangs to run (the row's) or to fold (an earlier run's)."""
    return bool(plan.row.gangs) or (cfg.results_dir / plan.row.name / GANGS_DIR).is_dir()


def clear_spread(folder: Path, *, resume: bool) -> None:
    """Before a whole run of the row in ``folder``: an earlier spread's parts go; a resume of
    a spread's record is refused."""
    if resume:
        refuse_whole_resume_of_spread(folder)
        return
    shutil.rmtree(folder / SHARDS_DIR, ignore_errors=True)
    shutil.rmtree(folder / GANGS_DIR, ignore_errors=True)


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


def run_whole(cfg: Config, plan: RowPlan, options: RunOptions, listener: RunListener) -> RunRecord:
    """The row in one piece, a row without gangs (:func:`has_gangs`): the runner's record."""
    clear_spread(cfg.results_dir / plan.row.name, resume=options.resume)
    return run_row(cfg, plan, options, listener)
