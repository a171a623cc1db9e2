"""Gradient checkpointing inside the While loop, and SPMD with sharded parameters."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from suites.accumulation.common import clone_model, make_batches, make_model, ordinary_accumulation
from suites.accumulation.test_accumulation import (
    DEFAULT_ATOL,
    DEFAULT_RTOL,
    assert_close,
    assert_same_grads,
)
from suites.conftest import run_worker

ga = pytest.importorskip("torch_xla.experimental.gradient_accumulation")


def test_checkpointing_inside_the_loop(device: Any, xla: Any, matrix_settings: dict[str, Any]) -> None:
    if matrix_settings.get("skip_gradient_checkpointing"):
        pytest.skip("matrix setting skip_gradient_checkpointing is true for this row")
    import torch_xla.utils.checkpoint as ckpt

    tol = {
        "rtol": float(matrix_settings.get("accumulation_rtol", DEFAULT_RTOL)),
        "atol": float(matrix_settings.get("accumulation_atol", DEFAULT_ATOL)),
    }
    a = make_model(device)
    b = clone_model(a, device)
    x, y = make_batches(device, 4)

    def step_for(model: torch.nn.Module, checkpointed: bool) -> Any:
        first, act, middle, act2, last = list(model)

        def step(xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            h = act(first(xi))
            # reentrant checkpointing (the only kind torch_xla supports) needs an input
            # that requires grad: h does
            h = ckpt.checkpoint(middle, h, use_reentrant=True) if checkpointed else middle(h)
            return torch.nn.functional.mse_loss(last(act2(h)), yi)

        return step

    xla.sync()
    loss = ga.gradient_accumulation(step_for(a, True), (x, y), a)
    e_loss, _ = ordinary_accumulation(step_for(b, False), (x, y), ())
    xla.sync()
    assert_close(loss, e_loss, "accumulated loss", tol)
    assert_same_grads(a, b, tol)


def test_spmd_gradients_keep_parameter_sharding(matrix_settings: dict[str, Any]) -> None:
    devices = int(matrix_settings.get("spmd_devices", 4))
    if devices < 2:
        pytest.skip(f"the row gives {devices} device(s) for SPMD (setting spmd_devices)")
    result = run_worker(
        "suites.accumulation.spmd_worker",
        ["--devices", str(devices)],
        env={"CPU_NUM_DEVICES": str(devices)},
    )
    assert "error" not in result, result.get("error")
    assert result["devices"] >= devices
    rtol = float(matrix_settings.get("accumulation_rtol", DEFAULT_RTOL))
    atol = float(matrix_settings.get("accumulation_atol", DEFAULT_ATOL))
    assert result["loss"] == pytest.approx(result["ordinary_loss"], rel=rtol, abs=atol)
    explicit = {n: p for n, p in result["params"].items() if p["explicit"]}
    assert len(explicit) == 3
    for name, p in explicit.items():
        assert p["param_sharding"] != "{replicated}" and p["param_sharding"], name
        assert p["grad_sharding"] == p["param_sharding"], f"{name}: {p}"
    for name, p in result["params"].items():
        assert p["max_abs_diff"] <= atol + rtol * p["max_abs"], f"{name}: {p}"
