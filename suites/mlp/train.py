#!/usr/bin/env python3
"""Train a small MLP on synthetic data with torch_xla, and write what happened as JSON.

Run by hand on any XLA device (the device comes from PJRT_DEVICE):

    PJRT_DEVICE=CPU python suites/mlp/train.py --num-steps 20 --output run.json
    PJRT_DEVICE=CPU python suites/mlp/train.py --gradient-accumulation-steps 4 \\
        --use-gradient-accumulation-loop --output loop.json
    PJRT_DEVICE=CPU CPU_NUM_DEVICES=4 python suites/mlp/train.py --dp-degree 4 --output dp4.json

Every multi-word flag is also accepted in upstream's spelling with underscores
(``--gradient_accumulation_steps 4 --use_gradient_accumulation_loop``), so command lines
written for torch_xla's own training scripts run unchanged.

The data are generated from --seed (a fixed random teacher network): no download, no
network. ``--loss cross_entropy`` labels each sample with the teacher's top class among
``--num-classes`` (upstream's linear-model setup: a wide ``--input-dim``, cross entropy,
``--lr 0.1``). The effective batch is always --batch-size: with accumulation over k steps
each micro-batch holds batch-size/k samples; with --dp-degree d each device holds
batch-size/d of them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

HIDDEN = 64
PROBE_SAMPLES = 16


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)

    def flag(name: str, **kwargs: Any) -> None:
        # upstream's scripts spell flags with underscores; both spellings set one option
        words = name[2:]
        spellings = [name] + (["--" + words.replace("-", "_")] if "-" in words else [])
        p.add_argument(*spellings, **kwargs)

    flag("--batch-size", type=int, default=128, help="effective batch size (default 128)")
    flag("--lr", type=float, default=0.05, help="SGD learning rate")
    flag("--num-steps", type=int, default=20, help="optimizer steps")
    flag("--log-steps", type=int, default=5, help="print the loss every N steps")
    flag("--input-dim", type=int, default=32, help="input features")
    flag("--loss", choices=("mse", "cross_entropy"), default="mse", help="regression or classification")
    flag("--num-classes", type=int, default=10, help="classes for --loss cross_entropy")
    flag("--seed", type=int, default=0, help="seed of the data and the weights")
    flag("--gradient-accumulation-steps", type=int, default=1, help="micro-batches per step")
    flag(
        "--use-gradient-accumulation-loop",
        action="store_true",
        help="accumulate with torch_xla's XLA While loop instead of a Python loop",
    )
    flag("--use-gradient-checkpointing", action="store_true", help="checkpoint the hidden layers")
    flag(
        "--skip-gradient-checkpointing",
        action="store_true",
        help="ignore --use-gradient-checkpointing (for devices that cannot do it)",
    )
    flag("--dp-degree", type=int, default=1, help="data-parallel SPMD over this many devices")
    flag("--output", type=Path, help="write losses and final outputs here as JSON")
    args = p.parse_args(argv)
    k = args.gradient_accumulation_steps
    if k < 1 or args.batch_size % k:
        p.error(f"--batch-size {args.batch_size} must be a multiple of --gradient-accumulation-steps {k}")
    if args.dp_degree < 1 or (args.batch_size // k) % args.dp_degree:
        p.error(f"each micro-batch ({args.batch_size // k}) must split evenly over --dp-degree {args.dp_degree}")
    if args.loss == "cross_entropy" and args.num_classes < 2:
        p.error("--num-classes must be at least 2")
    if args.num_steps < 1 or args.log_steps < 1:
        p.error("--num-steps and --log-steps must be at least 1")
    return args


def n_outputs(args: argparse.Namespace) -> int:
    return args.num_classes if args.loss == "cross_entropy" else 1


def build(args: argparse.Namespace, device: Any) -> tuple[Any, Any, Any]:
    import torch

    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(args.input_dim, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, n_outputs(args)),
    ).to(device)
    g = torch.Generator().manual_seed(args.seed + 1)
    teacher = torch.randn(args.input_dim, n_outputs(args), generator=g) / math.sqrt(args.input_dim)
    probe = torch.randn(PROBE_SAMPLES, args.input_dim, generator=g)
    return model, teacher, probe


def batch(args: argparse.Namespace, step: int, teacher: Any) -> tuple[Any, Any]:
    import torch

    g = torch.Generator().manual_seed(args.seed * 100_003 + step)
    x = torch.randn(args.batch_size, args.input_dim, generator=g)
    if args.loss == "cross_entropy":
        return x, (x @ teacher).argmax(dim=1)
    y = torch.tanh(x @ teacher) + 0.01 * torch.randn(args.batch_size, 1, generator=g)
    return x, y


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch
    import torch_xla
    import torch_xla.debug.metrics as met
    import torch_xla.runtime as xr

    use_ckpt = args.use_gradient_checkpointing and not args.skip_gradient_checkpointing
    mesh = None
    if args.dp_degree > 1:
        import numpy as np
        import torch_xla.distributed.spmd as xs

        xr.use_spmd()
        available = xr.global_runtime_device_count()
        if available < args.dp_degree:
            print(f"error: --dp-degree {args.dp_degree} but {available} device(s)", file=sys.stderr)
            return 2
        mesh = xs.Mesh(np.arange(args.dp_degree), (args.dp_degree,), ("data",))
    device = torch_xla.device()
    model, teacher, probe = build(args, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    k = args.gradient_accumulation_steps
    micro = args.batch_size // k
    layers = list(model)

    def forward(x: Any) -> Any:
        h = layers[1](layers[0](x))
        if use_ckpt:
            import torch_xla.utils.checkpoint as ckpt

            h = ckpt.checkpoint(torch.nn.Sequential(layers[2], layers[3]), h, use_reentrant=True)
        else:
            h = layers[3](layers[2](h))
        return layers[4](h)

    def train_step(x: Any, y: Any) -> Any:
        if args.loss == "cross_entropy":
            return torch.nn.functional.cross_entropy(forward(x), y)
        return torch.nn.functional.mse_loss(forward(x), y)

    def shard(t: Any, batch_dim: int) -> Any:
        if mesh is not None:
            import torch_xla.distributed.spmd as xs

            spec: list[str | None] = [None] * t.dim()
            spec[batch_dim] = "data"
            xs.mark_sharding(t, mesh, tuple(spec))
        return t

    losses: list[float] = []
    started = time.perf_counter()
    for step in range(args.num_steps):
        x_cpu, y_cpu = batch(args, step, teacher)
        if k == 1:
            x, y = shard(x_cpu.to(device), 0), shard(y_cpu.to(device), 0)
            loss = train_step(x, y)
            loss.backward()
        elif args.use_gradient_accumulation_loop:
            from torch_xla.experimental.gradient_accumulation import gradient_accumulation

            x = shard(x_cpu.view(k, micro, -1).to(device), 1)
            y = shard(y_cpu.view(k, micro, *y_cpu.shape[1:]).to(device), 1)
            loss = gradient_accumulation(train_step, (x, y), model)
        else:
            total = torch.zeros((), device=device)
            for i in range(k):
                xi = shard(x_cpu[i * micro : (i + 1) * micro].to(device), 0)
                yi = shard(y_cpu[i * micro : (i + 1) * micro].to(device), 0)
                part = train_step(xi, yi) / k
                part.backward()
                total = total + part.detach()
            loss = total
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch_xla.sync()
        value = float(loss.item())
        losses.append(value)
        if (step + 1) % args.log_steps == 0 or step == 0:
            print(f"step {step + 1:>5}  loss {value:.6f}", flush=True)

    with torch.no_grad():
        outputs = forward(probe.to(device)).cpu().view(-1).tolist()
    compiles = met.metric_data("CompileTime")
    result = {
        "config": {k2: (str(v) if isinstance(v, Path) else v) for k2, v in vars(args).items()},
        "checkpointing": use_ckpt,
        "device": str(device),
        "devices": xr.global_runtime_device_count(),
        "losses": losses,
        "final_loss": losses[-1],
        "outputs": outputs,
        "compiles": int(compiles[0]) if compiles else 0,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1))
    print(
        json.dumps(
            {
                "final_loss": result["final_loss"],
                "output": str(args.output) if args.output else None,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
