"""Models, data and the ordinary accumulation loop the XLA While loop is compared with."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

IN_FEATURES = 16
HIDDEN = 32
OUT_FEATURES = 4
MICRO_BATCH = 8


def make_model(device: Any, *, seed: int = 0, dropout: float = 0.0, frozen: Sequence[str] = ()) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = [torch.nn.Linear(IN_FEATURES, HIDDEN), torch.nn.Tanh()]
    if dropout:
        layers.append(torch.nn.Dropout(dropout))
    layers += [
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.Tanh(),
        torch.nn.Linear(HIDDEN, OUT_FEATURES),
    ]
    model = torch.nn.Sequential(*layers)
    for name, param in model.named_parameters():
        if name in frozen:
            param.requires_grad_(False)
    return model.to(device)


def make_batches(
    device: Any, steps: int, *, seed: int = 1, micro_batch: int = MICRO_BATCH
) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps, micro_batch, IN_FEATURES, generator=g)
    y = torch.randn(steps, micro_batch, OUT_FEATURES, generator=g)
    return x.to(device), y.to(device)


def clone_model(model: torch.nn.Module, device: Any) -> torch.nn.Module:
    """An independent copy with the same weights (and the same frozen parameters)."""
    import copy

    twin = copy.deepcopy(model.cpu()).to(device)
    model.to(device)
    return twin


def ordinary_accumulation(
    train_step: Callable[..., Any],
    iterable: Sequence[torch.Tensor],
    carried: Sequence[torch.Tensor],
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """What users write without the While loop: each micro-batch's loss divided by the
    number of steps, ``backward()`` each time, carried tensors threaded through."""
    steps = iterable[0].size(0)
    total = torch.zeros((), device=iterable[0].device)
    state = list(carried)
    for i in range(steps):
        result = train_step(*(t[i] for t in iterable), *state)
        if state:
            loss, *state = result
        else:
            loss = result
        loss = loss / steps
        loss.backward()
        total = total + loss.detach()
    return total, state
