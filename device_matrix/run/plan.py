"""Where a row runs here: on this host, in its container, or nowhere (and why)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from device_matrix.config import Config, Row
from device_matrix.devices import detect
from device_matrix.errors import EnvironmentProblem
from device_matrix.run.executors.container import check_engine, find_engine

Mode = Literal["local", "container", "unavailable"]


@dataclass(frozen=True)
class RowPlan:
    row: Row
    mode: Mode
    reason: str
    engine: str | None = None


def plan_row(
    cfg: Config,
    row: Row,
    *,
    force: Literal["local", "container"] | None = None,
    environ: Mapping[str, str] | None = None,
) -> RowPlan:
    """Where this row runs here, or why it cannot."""
    env = os.environ if environ is None else environ
    presence = detect(row, env)
    if not presence.present:
        return RowPlan(row, "unavailable", presence.reason)
    in_image = env.get("DEVICE_MATRIX_IN_IMAGE")
    if in_image and in_image in (row.name, row.image):
        return RowPlan(row, "local", f"{presence.reason}; already in the row's image")
    want: str = force or row.run_in
    if want == "host":
        want = "local"
    if want == "local":
        return RowPlan(row, "local", presence.reason)
    engine = find_engine(cfg.container_engine, env)
    problem = "no docker or podman on PATH" if engine is None else check_engine(engine)
    if want == "container":
        if problem is not None:
            raise EnvironmentProblem(
                f"row {row.name!r} must run in its container, but {problem}",
                tip="Start the container engine, pick one with --engine, or run the row with --local.",
            )
        return RowPlan(row, "container", presence.reason, engine)
    # auto: the container when an engine answers, this host otherwise
    if problem is None and row.image:
        return RowPlan(row, "container", presence.reason, engine)
    why = "no image configured" if not row.image else problem
    return RowPlan(row, "local", f"{presence.reason}; on this host ({why})")
