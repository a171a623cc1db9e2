"""The training script runs end to end, by hand, as a user would run it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from suites.conftest import ROOT, child_env

TRAIN = Path(__file__).with_name("train.py")


def test_help_lists_every_flag() -> None:
    proc = subprocess.run(
        [sys.executable, str(TRAIN), "--help"],
        capture_output=True,
        text=True,
        check=True,
        env=child_env(),
    )
    for flag in (
        "--batch-size",
        "--lr",
        "--num-steps",
        "--log-steps",
        "--input-dim",
        "--loss",
        "--num-classes",
        "--seed",
        "--gradient-accumulation-steps",
        "--use-gradient-accumulation-loop",
        "--use-gradient-checkpointing",
        "--skip-gradient-checkpointing",
        "--dp-degree",
        "--output",
    ):
        assert flag in proc.stdout, flag
        if "-" in flag[2:]:
            assert "--" + flag[2:].replace("-", "_") in proc.stdout, flag


def test_upstream_flag_spellings_set_the_same_options() -> None:
    """Command lines written for upstream's scripts (underscores) parse like ours (dashes)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mlp_train", TRAIN)
    assert spec is not None and spec.loader is not None
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    values = {"batch-size": "64", "gradient-accumulation-steps": "4", "input-dim": "8", "num-steps": "3"}
    values |= {"dp-degree": "2", "num-classes": "3", "loss": "cross_entropy"}
    switches = ["use-gradient-accumulation-loop", "use-gradient-checkpointing", "skip-gradient-checkpointing"]

    def argv(spell: Any) -> list[str]:
        pairs = [[f"--{spell(k)}", v] for k, v in values.items()]
        return [a for pair in pairs for a in pair] + [f"--{spell(s)}" for s in switches]

    ours = train.parse_args(argv(lambda k: k))
    upstream = train.parse_args(argv(lambda k: k.replace("-", "_")))
    assert vars(upstream) == vars(ours)
    assert ours.gradient_accumulation_steps == 4 and ours.use_gradient_accumulation_loop
    assert ours.skip_gradient_checkpointing and ours.dp_degree == 2 and ours.num_classes == 3


def test_bad_flags_give_a_clear_error() -> None:
    proc = subprocess.run(
        [sys.executable, str(TRAIN), "--batch-size", "100", "--gradient-accumulation-steps", "3"],
        capture_output=True,
        text=True,
        check=False,
        env=child_env(),
    )
    assert proc.returncode == 2
    assert "must be a multiple of --gradient-accumulation-steps" in proc.stderr


def test_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("torch_xla")
    out = tmp_path / "run.json"
    proc = subprocess.run(
        [sys.executable, str(TRAIN), "--num-steps", "6", "--log-steps", "3", "--output", str(out)],
        capture_output=True,
        text=True,
        check=False,
        env=child_env(),
        cwd=ROOT,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "step     3  loss" in proc.stdout
    result = json.loads(out.read_text())
    assert len(result["losses"]) == 6
    assert all(math.isfinite(v) and v > 0 for v in result["losses"])
    assert result["config"]["batch_size"] == 128
    assert len(result["outputs"]) == 16 and any(result["outputs"])
    assert result["compiles"] > 0
