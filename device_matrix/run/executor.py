"""The one factory of a run's executor: this host's interpreter, or the row's container (#31).

It builds and starts nothing else: it is called once a run, by the maker of the run's plan
(:meth:`~device_matrix.run.context.RunSetup.open`, #41); what it built is refused or readied by
the run's check (:meth:`~device_matrix.run.context.Run.make_executor`: :func:`refuse`, then a
container's image asked what it has, :meth:`ContainerExecutor.checked`), before the first attempt.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from device_matrix.config import Config
from device_matrix.errors import EnvironmentProblem
from device_matrix.executors.base import Executor
from device_matrix.executors.container import ContainerExecutor
from device_matrix.executors.local import LocalExecutor

if TYPE_CHECKING:
    from device_matrix.run.plan import RowPlan


def build(plan: RowPlan, cfg: Config, *, python: str | None, folder: Path) -> Executor:
    """Where the children of a run of ``plan``'s row run; ``folder`` is the run's results
    folder (a container's name is kept there while it runs). ``python``: the command
    line's interpreter for a local row. Checks nothing: what cannot run is :func:`refuse`'s."""
    if plan.mode == "container":
        assert plan.engine is not None
        root = cfg.project_root.resolve()
        results = cfg.results_dir.resolve()
        return ContainerExecutor(
            plan.engine,
            plan.row,
            env_allowlist=cfg.env_allowlist,
            extra_mounts=[] if results.is_relative_to(root) else [results],
            folder=folder,
        )
    return LocalExecutor(python)


def refuse(plan: RowPlan, *, python: str | None) -> None:
    """An EnvironmentProblem when what :func:`build` built for ``plan`` cannot run: a
    container without an image, a ``--python`` that is no interpreter."""
    row = plan.row
    if plan.mode == "container":
        if not row.image:
            raise EnvironmentProblem(
                f"row {row.name!r} has no container image",
                tip=f"Set image under [tool.device-matrix.devices.{row.name}], or run it with --local.",
            )
        return
    if python is not None and shutil.which(python) is None:
        raise EnvironmentProblem(
            f"--python {python}: no such interpreter",
            tip="Pass the path of a Python that has pytest (and the row's packages), or leave it out.",
        )
