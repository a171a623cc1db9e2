"""SPMD gradient accumulation on a device mesh, in its own process.

``xr.use_spmd()`` cannot be undone in a process, so the suite runs this as a child:
``python -m suites.accumulation.spmd_worker --devices 4`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from suites._limits import no_core_dumps


def main() -> None:
    no_core_dumps()
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", type=int, default=4)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()

    import numpy as np
    import torch
    import torch_xla
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr
    from torch_xla.experimental.gradient_accumulation import gradient_accumulation

    from suites.accumulation.common import (
        clone_model,
        make_batches,
        make_model,
        ordinary_accumulation,
    )

    xr.use_spmd()
    n = xr.global_runtime_device_count()
    if n < args.devices:
        print(json.dumps({"error": f"{n} devices, need {args.devices}"}))
        return
    device = torch_xla.device()
    mesh = xs.Mesh(np.arange(args.devices), (args.devices, 1), ("data", "model"))

    def shard(model: torch.nn.Module) -> dict[str, Any]:
        # column- and row-wise shardings of the two big weights; the rest replicated
        specs = {"0.weight": ("data", None), "2.weight": (None, "data"), "4.weight": (None, "data")}
        for name, p in model.named_parameters():
            if name in specs:
                xs.mark_sharding(p, mesh, specs[name])
        return specs

    a = make_model(device)
    b = clone_model(a, device)
    specs = shard(a)
    shard(b)
    x, y = make_batches(device, args.steps)
    xs.mark_sharding(x, mesh, (None, "data", None))
    xs.mark_sharding(y, mesh, (None, "data", None))

    def step_for(model: torch.nn.Module) -> Any:
        return lambda xi, yi: torch.nn.functional.mse_loss(model(xi), yi)

    torch_xla.sync()
    loss_a = gradient_accumulation(step_for(a), (x, y), a)
    loss_b, _ = ordinary_accumulation(step_for(b), (x, y), ())
    torch_xla.sync()

    spec = torch_xla._XLAC._get_xla_sharding_spec
    params = {}
    for (name, pa), pb in zip(a.named_parameters(), b.parameters(), strict=True):
        params[name] = {
            "explicit": name in specs,
            "param_sharding": spec(pa),
            "grad_sharding": spec(pa.grad),
            "ordinary_grad_sharding": spec(pb.grad),
            "max_abs_diff": (pa.grad.cpu() - pb.grad.cpu()).abs().max().item(),
            "max_abs": pb.grad.cpu().abs().max().item(),
        }
    print(
        json.dumps(
            {
                "devices": n,
                "loss": loss_a.item(),
                "ordinary_loss": loss_b.item(),
                "params": params,
            }
        )
    )


if __name__ == "__main__":
    main()
