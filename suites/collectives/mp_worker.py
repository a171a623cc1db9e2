"""One worker of a multi-process collective test (launched like torchrun launches).

Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, joins the ``xla``
process group (rendezvous), then all-reduces a ones tensor ``--iterations`` times,
all-gathers and reduce-scatters, and prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os

from suites._limits import no_core_dumps


def main() -> None:
    no_core_dumps()
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--init-method", default="xla://")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.xla_backend
    import torch_xla.runtime as xr

    dist.init_process_group("xla", init_method=args.init_method)
    device = torch_xla.device()
    expected_world = int(os.environ["WORLD_SIZE"])
    reduced = []
    for _ in range(args.iterations):
        t = torch.ones(4, device=device)
        dist.all_reduce(t)
        torch_xla.sync()
        reduced.append(t.cpu().tolist())
    rank = dist.get_rank()
    gathered = xm.all_gather(torch.full((2,), float(rank), device=device), dim=0)
    scattered = xm.reduce_scatter(
        xm.REDUCE_SUM,
        torch.ones(expected_world * 2, device=device),
        scale=1.0,
        scatter_dim=0,
        shard_count=xr.world_size(),
    )
    torch_xla.sync()
    print(
        json.dumps(
            {
                "env_rank": int(os.environ["RANK"]),
                "rank": rank,
                "world": dist.get_world_size(),
                "xla_world": xr.world_size(),
                "xla_ordinal": xr.global_ordinal(),
                "all_reduce": reduced,
                "all_gather": gathered.cpu().tolist(),
                "reduce_scatter": scattered.cpu().tolist(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
