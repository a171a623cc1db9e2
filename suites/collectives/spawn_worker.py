"""Collectives under ``xmp.spawn``: torch_xla starts one worker per device itself.

Prints one JSON object with every worker's results. On a launch mode that aborts, the
process dies with the runtime's own diagnostics in its output.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from suites._limits import no_core_dumps


def _worker(index: int, iterations: int) -> dict[str, Any]:
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    device = torch_xla.device()
    world = xr.world_size()
    reduced = []
    for _ in range(iterations):
        r = xm.all_reduce(xm.REDUCE_SUM, torch.ones(4, device=device))
        torch_xla.sync()
        reduced.append(r.cpu().tolist())
    return {"index": index, "ordinal": xr.global_ordinal(), "world": world, "all_reduce": reduced}


def _entry(index: int, iterations: int) -> None:
    print("RESULT " + json.dumps(_worker(index, iterations)), flush=True)


def main() -> None:
    no_core_dumps()
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    import torch_xla.distributed.xla_multiprocessing as xmp

    xmp.spawn(_entry, args=(args.iterations,))
    print(json.dumps({"spawned": True}))


if __name__ == "__main__":
    main()
