"""Compilation cost of the While loop against the ordinary loop, per number of steps.

Used by test_compilation.py (which asserts on it) and bench/suites.py (which prints it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from suites.accumulation.common import clone_model, make_batches, make_model, ordinary_accumulation

UNIQUE_MICRO_BATCH = 5


@dataclass(frozen=True)
class CompileCost:
    steps: int
    while_compiles: int
    while_hlo_lines: int
    ordinary_compiles: int
    ordinary_hlo_lines: int


def _compiles() -> int:
    import torch_xla.debug.metrics as met

    data = met.metric_data("CompileTime")
    return int(data[0]) if data else 0


def _hlo_lines(tensors: Sequence[torch.Tensor]) -> int:
    import torch_xla

    return len(torch_xla._XLAC._get_xla_tensors_hlo(list(tensors)).splitlines())


def measure(device: Any, steps_list: Sequence[int]) -> list[CompileCost]:
    """Graphs compiled and HLO size of one accumulation call, for each number of steps.

    The micro-batch size is one no other test uses, so no graph of these calls is in
    the process's compilation cache already and each count is what that call compiled.
    """
    import torch_xla
    from torch_xla.experimental.gradient_accumulation import gradient_accumulation

    out = []
    for steps in steps_list:
        a = make_model(device)
        b = clone_model(a, device)
        x, y = make_batches(device, steps, micro_batch=UNIQUE_MICRO_BATCH)

        def step_a(xi: torch.Tensor, yi: torch.Tensor, model: torch.nn.Module = a) -> torch.Tensor:
            return torch.nn.functional.mse_loss(model(xi), yi)

        def step_b(xi: torch.Tensor, yi: torch.Tensor, model: torch.nn.Module = b) -> torch.Tensor:
            return torch.nn.functional.mse_loss(model(xi), yi)

        torch_xla.sync()
        c0 = _compiles()
        loss_a = gradient_accumulation(step_a, (x, y), a)
        hlo_a = _hlo_lines([loss_a, *(p.grad for p in a.parameters())])
        torch_xla.sync()
        c1 = _compiles()
        loss_b, _ = ordinary_accumulation(step_b, (x, y), ())
        hlo_b = _hlo_lines([loss_b, *(p.grad for p in b.parameters())])
        torch_xla.sync()
        c2 = _compiles()
        out.append(CompileCost(steps, c1 - c0, hlo_a, c2 - c1, hlo_b))
    return out
