"""One worker of a multi-process collective test (launched like torchrun launches).

Reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, joins the ``xla``
process group (rendezvous), then all-reduces a ones tensor ``--iterations`` times,
all-gathers and reduce-scatters, and prints one JSON object.

``--check`` (a gang of Ray tasks runs it so: device_matrix.spread.gang) makes the worker its
own test: a last rendezvous after the collectives, a short summary instead of every
iteration, and :class:`CollectiveMismatch` when the world or any sum is not the one the
launcher gave (WORLD_SIZE).
"""

from __future__ import annotations

import argparse
import json
import os

from suites._limits import no_core_dumps


class CollectiveMismatch(AssertionError):
    """What this rank saw is not what WORLD_SIZE ranks must see."""


def main() -> None:
    no_core_dumps()
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--init-method", default="xla://")
    parser.add_argument("--check", action="store_true", help="a last rendezvous; fail unless every sum is WORLD_SIZE")
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
    if args.check:
        check(rank, expected_world, reduced, xr.world_size(), xr.global_ordinal())
        return
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


def check(rank: int, world: int, reduced: list[list[float]], xla_world: int, ordinal: int) -> None:
    import torch_xla.core.xla_model as xm

    xm.rendezvous("device-matrix-last")  # every rank reaches the end before any of them leaves
    sums = sorted({v for values in reduced for v in values})
    print(json.dumps({"rank": rank, "world": world, "xla_world": xla_world, "xla_ordinal": ordinal, "sums": sums}))
    if xla_world != world or sums != [float(world)]:
        raise CollectiveMismatch(
            f"rank {rank}: torch_xla sees ordinal {ordinal} of world {xla_world}, all_reduce of ones gave {sums} "
            f"over {len(reduced)} iterations; WORLD_SIZE is {world}"
        )


if __name__ == "__main__":
    main()
