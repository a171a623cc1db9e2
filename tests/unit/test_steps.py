"""The runner as steps, and the surface a driver of shards calls: open, prepare, collect, finish.

The part of these tests that starts no process; the rest is in tests/integration/test_steps.py (#41)."""

from __future__ import annotations

import dataclasses

import pytest

from device_matrix.run.context import RunOptions, Verdict
from device_matrix.run.runner import STEPS


def test_the_steps_in_their_order() -> None:
    assert [step.__name__ for step in STEPS] == [
        "prepare",
        "run_tests",
        "run_scripts",
        "rerun_crashes",
        "reconcile",
        "write",
    ]


def test_options_and_verdicts_are_frozen() -> None:
    options = RunOptions(tests=("a.py::t",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.resume = True  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Verdict("passed").status = "failed"  # type: ignore[misc]
    assert dataclasses.replace(options, resume=True).resume and not options.resume
    # a list handed over is copied: changing it afterwards changes no run's options
    args = ["-k", "x"]
    env = {"CUDA_VISIBLE_DEVICES": "0"}
    options = RunOptions(pytest_args=args, slot_env=env)
    args.append("-x")
    env["CUDA_VISIBLE_DEVICES"] = "1"
    assert options.pytest_args == ("-k", "x") and options.slot_env == {"CUDA_VISIBLE_DEVICES": "0"}
    with pytest.raises(TypeError):
        options.slot_env["X"] = "1"  # type: ignore[index]
