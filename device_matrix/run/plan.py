"""Where a row runs here: on this host, in its container, or nowhere (and why)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from device_matrix.config import Config, Row
from device_matrix.devices import detect
from device_matrix.errors import EnvironmentProblem
from device_matrix.run.executors.engine import Engine, find_engine

Mode = Literal["local", "container", "unavailable"]


@dataclass(frozen=True)
class RowPlan:
    row: Row
    mode: Mode
    reason: str
    engine: Engine | None = None


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
    if want == "auto" and not row.image:
        return RowPlan(row, "local", f"{presence.reason}; on this host (no image configured)")
    engine = find_engine(cfg.container_engine, env)
    if want == "container":
        if not isinstance(engine, Engine):
            raise EnvironmentProblem(
                f"row {row.name!r} must run in its container, but {engine.reason}",
                tip="Start the container engine, pick one with --engine, or run the row with --local.",
            )
        return RowPlan(row, "container", presence.reason, engine)
    # auto: the container when an engine answers, this host otherwise
    if isinstance(engine, Engine):
        return RowPlan(row, "container", presence.reason, engine)
    return RowPlan(row, "local", f"{presence.reason}; on this host ({engine.reason})")
