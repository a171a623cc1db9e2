"""All-reduce, all-gather and reduce-scatter over an SPMD device mesh, in one process.

``python -m suites.collectives.spmd_worker --devices 4 --iterations 50`` prints one JSON
object: per collective, the values each device holds after every iteration, and the
collective instructions found in XLA's optimised HLO of that collective's own step
(dumped to a temporary folder), so a result computed without any collective cannot pass
for one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from pathlib import Path

from suites._limits import no_core_dumps

OPS_RE = re.compile(r"\b(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute)(?:-start)?\(")


def main() -> None:
    no_core_dumps()
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args()
    dump = tempfile.mkdtemp(prefix="dm-hlo-")
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump} --xla_dump_hlo_as_text".strip()

    import numpy as np
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr

    xr.use_spmd()
    world = xr.global_runtime_device_count()
    n = args.devices
    if world < n:
        print(json.dumps({"error": f"{world} devices, need {n}"}))
        return
    mesh = xs.Mesh(np.arange(n), (n,), ("x",))
    device = torch_xla.device()

    seen: set[Path] = set()

    def new_hlo_ops() -> list[str]:
        """Collectives in the optimised HLO modules compiled since the last call."""
        ops: set[str] = set()
        for f in sorted(Path(dump).glob("*after_optimizations.txt")):
            if f not in seen:
                seen.add(f)
                ops.update(m.group(1) for m in OPS_RE.finditer(f.read_text(errors="replace")))
        return sorted(ops)

    def local(t: torch.Tensor) -> list[list[float]]:
        # the step's execution is asynchronous: wait before reading device buffers
        xm.wait_device_ops()
        return [s.view(-1).tolist() for s, _ in torch_xla._XLAC._get_local_shards([t])[0]]

    # all-reduce: each device holds one row of ones; the sum over rows is replicated
    ones = torch.ones(n, 8, device=device)
    xs.mark_sharding(ones, mesh, ("x", None))
    all_reduce: list[list[list[float]]] = []
    for _ in range(args.iterations):
        total = ones.sum(0)
        torch_xla.sync()
        all_reduce.append(local(total))
    hlo = {"all_reduce": new_hlo_ops()}

    # all-gather: device i holds [i, i]; replicating gathers every device's part
    ranks = torch.arange(n, dtype=torch.float32).repeat_interleave(2).to(device)
    xs.mark_sharding(ranks, mesh, ("x",))
    gathered = ranks * 1.0
    xs.mark_sharding(gathered, mesh, (None,))
    torch_xla.sync()
    all_gather = local(gathered)
    hlo["all_gather"] = new_hlo_ops()

    # reduce-scatter: sum over rows, the result split across devices
    rows = torch.ones(n, n * 2, device=device)
    xs.mark_sharding(rows, mesh, ("x", None))
    scattered = rows.sum(0)
    xs.mark_sharding(scattered, mesh, ("x",))
    torch_xla.sync()
    reduce_scatter = local(scattered)
    hlo["reduce_scatter"] = new_hlo_ops()
    print(
        json.dumps(
            {
                "world": n,
                "all_reduce": all_reduce,
                "all_gather": all_gather,
                "reduce_scatter": reduce_scatter,
                "hlo_collectives": hlo,
            }
        )
    )


if __name__ == "__main__":
    main()
