"""The history compares like with like (#30): a run records what it selected, and "what
changed" holds a subset run against the last run of the same selection, never the whole row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK
from tests import records as R

WHOLE = [R.test(f"t.py::test_{i}") for i in range(6)]


def _triage(root: Path, name: str, rec: dict[str, Any]) -> dict[str, Any]:
    results = root / name
    (results / "cpu").mkdir(parents=True)
    (results / "cpu" / "run.json").write_text(json.dumps(rec))
    args = ["--project", str(root), "triage", str(results), "--history", str(root / "h.sqlite"), "--branch", "main"]
    assert main(args) == EXIT_OK
    data: dict[str, Any] = json.loads((results / "triage" / "triage.json").read_text())
    return data


def _subset(selection: str) -> dict[str, Any]:
    rec = R.record("cpu", WHOLE[:2])
    rec["selection"] = selection
    return rec


def test_a_subset_run_is_compared_with_runs_of_its_own_selection(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    _triage(tmp_path, "r1", R.record("cpu", WHOLE))
    subset = _triage(tmp_path, "r2", _subset("--test t.py::test_0 --test t.py::test_1"))
    assert subset["changes"]["disappeared"] == []  # not "test gone" for the tests it did not select
    whole = _triage(tmp_path, "r3", R.record("cpu", WHOLE))
    assert whole["changes"]["appeared"] == []  # not "new test" for every test the subset left out
    again = _triage(tmp_path, "r4", _subset("--test t.py::test_0 --test t.py::test_1"))
    assert again["changes"]["disappeared"] == [] and again["changes"]["appeared"] == []
    other = _subset("-k test_1")
    other["tests"][0]["outcome"] = "failed"
    judged = _triage(tmp_path, "r5", other)  # a selection never seen before: nothing to compare with
    assert judged["changes"]["new_failures"] == [] and judged["changes"]["disappeared"] == []
