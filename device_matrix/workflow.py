"""The GitHub Actions matrix the workflow's plan job emits, from the configuration."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from device_matrix.config import Config, Row


def actions_matrix(cfg: Config, names: Sequence[str]) -> dict[str, Any]:
    """``{"include": [...]}``: one entry per row and shard, with everything its job needs.

    A row with ``shards = N`` gives N entries; each runs ``--shard K/N`` and uploads
    ``results/<row>/shards/K`` as ``results-<row>@K``, which the triage job lays out
    again under ``results/<row>/shards/K`` and merges.
    """
    include = []
    for name in names:
        row = cfg.row(name)
        # Options with a host glob (--device=/dev/neuron*) can only be expanded on the
        # runner itself: such a row's job runs on the host and starts its container there.
        static_options = not any(c in opt for opt in row.container_options for c in "*?[")
        for k in range(1, row.shards + 1):
            sharded = row.shards > 1
            include.append(
                {
                    "row": name,
                    "shard": f"{k}/{row.shards}" if sharded else "",
                    "run_args": f"--shard {k}/{row.shards}" if sharded else "",
                    "results_path": f"results/{name}/shards/{k}" if sharded else f"results/{name}",
                    "artifact": f"results-{name}@{k}" if sharded else f"results-{name}",
                    **_job(row, static_options),
                }
            )
    return {"include": include}


def _job(row: Row, static_options: bool) -> dict[str, Any]:
    return {
        "runs_on": list(row.runner_labels),
        "image": row.image,
        "container_options": " ".join(row.container_options),
        # a row whose image must be used runs its job inside that image;
        # host rows run on the runner directly
        "in_container": row.run_in != "host" and bool(row.image) and static_options,
        "image_pinned": "@sha256:" in row.image,
        "timeout_minutes": int(row.run_timeout // 60) + 15,
    }
