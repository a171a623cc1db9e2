"""The GitHub Actions matrix the workflow's plan job emits, from the configuration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from device_matrix.config import Config


def actions_matrix(cfg: Config, names: Sequence[str]) -> dict[str, Any]:
    """``{"include": [...]}``: one entry per row, with everything its job needs."""
    include = []
    for name in names:
        row = cfg.row(name)
        # Options with a host glob (--device=/dev/neuron*) can only be expanded on the
        # runner itself: such a row's job runs on the host and starts its container there.
        static_options = not any(c in opt for opt in row.container_options for c in "*?[")
        include.append(
            {
                "row": name,
                "runs_on": list(row.runner_labels),
                "image": row.image,
                "container_options": " ".join(row.container_options),
                # a row whose image must be used runs its job inside that image;
                # host rows run on the runner directly
                "in_container": row.run_in != "host" and bool(row.image) and static_options,
                "image_pinned": "@sha256:" in row.image,
                "timeout_minutes": int(row.run_timeout // 60) + 15,
            }
        )
    return {"include": include}
