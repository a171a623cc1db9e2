"""A token-shaped value never reaches triage's reports or its history (#30): the branch a
run names, and a skip's reason the source scan reads."""

from __future__ import annotations

import json
from pathlib import Path

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK
from tests import records as R

TOKEN = "ghp_" + "Q7w2" * 9  # the shape of a GitHub token


def _project(root: Path, test_source: str = "def test_a():\n    pass\n") -> Path:
    (root / "pyproject.toml").write_text('[tool.device-matrix.devices.cpu]\nsuites = ["s"]\n')
    (root / "suites" / "s").mkdir(parents=True)
    (root / "suites" / "s" / "test_x.py").write_text(test_source)
    results = root / "results"
    (results / "cpu").mkdir(parents=True)
    (results / "cpu" / "run.json").write_text(json.dumps(R.record("cpu", [R.test("suites/s/test_x.py::test_x")])))
    return results


def _written(results: Path, *more: Path) -> dict[str, bytes]:
    names = ("triage.md", "triage.html", "triage.json")
    return {p.name: p.read_bytes() for p in (*(results / "triage" / n for n in names), *more)}


def test_a_token_shaped_branch_is_redacted_in_every_report_and_the_history(tmp_path: Path) -> None:
    results = _project(tmp_path)
    history = tmp_path / "h.sqlite"
    args = ["--project", str(tmp_path), "triage", str(results), "--history", str(history)]
    assert main([*args, "--branch", f"feat/{TOKEN}", "--commit", "a" * 40]) == EXIT_OK
    written = _written(results, history)
    assert [name for name, data in written.items() if TOKEN[4:].encode() in data] == []
    assert b"feat/" in written["triage.html"]  # the branch is shown, its secret part redacted


def test_a_token_shaped_skip_reason_from_the_source_scan_is_redacted(tmp_path: Path) -> None:
    half = TOKEN[:20], TOKEN[20:]
    source = f"""\
import pytest
import torch_xla.runtime as xr

TOK = "{half[0]}" + "{half[1]}"


def test_x():
    if xr.device_type() == "CUDA":
        pytest.skip("token " + TOK)
"""
    results = _project(tmp_path, source)
    assert main(["--project", str(tmp_path), "triage", str(results), "--no-history"]) == EXIT_OK
    written = _written(results)
    assert b"token " in written["triage.html"]  # the skip is listed
    assert [name for name, data in written.items() if TOKEN[4:].encode() in data] == []
