"""Where a row runs here: on this host, in its container, or nowhere (and why)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from device_matrix.config import Config, Row
from device_matrix.devices import detect
from device_matrix.errors import EnvironmentProblem
from device_matrix.executors.engine import Engine, find_engine

Mode = Literal["local", "container", "unavailable"]


@dataclass(frozen=True)
class RowPlan:
    row: Row
    mode: Mode
    reason: str
    engine: Engine | None = None
    in_image: bool = False  # this host is the row's image already (a job container, a nested call)

    @property
    def image(self) -> str | None:
        """The image the row's tests run in (see :func:`image_ran_in`)."""
        return image_ran_in(self.row, self.mode, in_image=self.in_image)


def in_rows_image(row: Row, environ: Mapping[str, str] | None = None) -> bool:
    """Whether this host is the row's image already: its job container, or the row's own
    container calling device-matrix again (``DEVICE_MATRIX_IN_IMAGE`` names the row)."""
    named = (os.environ if environ is None else environ).get("DEVICE_MATRIX_IN_IMAGE")
    return bool(named) and named in (row.name, row.image)


def image_ran_in(row: Row, mode: str, *, in_image: bool) -> str | None:
    """The image a row's tests ran in: its container's, or the one this host is
    (``in_image``: see :func:`in_rows_image`); a row run on a host of its own ran in no
    image of the row's, and its record names none."""
    return row.image or None if mode == "container" or in_image else None


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
    if in_rows_image(row, env):
        return RowPlan(row, "local", f"{presence.reason}; already in the row's image", in_image=True)
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
