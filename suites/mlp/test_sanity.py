"""The training script runs end to end, by hand, as a user would run it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

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
        "--seed",
        "--gradient-accumulation-steps",
        "--use-gradient-accumulation-loop",
        "--use-gradient-checkpointing",
        "--skip-gradient-checkpointing",
        "--dp-degree",
        "--output",
    ):
        assert flag in proc.stdout, flag


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
