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


def _crashing(selection: str | None = None) -> dict[str, Any]:
    """The whole row with two crashes (test_4 and test_5), or a subset of it that does not run them."""
    tests = [*WHOLE[:4], R.test("t.py::test_4", "crashed", crash_id="cpu-1")]
    tests.append(R.test("t.py::test_5", "crashed", crash_id="cpu-2"))
    crashes = [R.crash("cpu", "t.py::test_4", "fp-one", index=1), R.crash("cpu", "t.py::test_5", "fp-two", index=2)]
    if selection is None:
        return R.record("cpu", tests, crashes)
    return _subset(selection)


def test_crashes_are_compared_with_runs_of_the_same_selection(tmp_path: Path) -> None:
    # #42 Seen 10: a --test subset said "crash stopped" for the whole row's two crashes, and the
    # next whole run said "new crash" for both, though the whole run before had them
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    first = _triage(tmp_path, "r1", _crashing())
    assert sorted(first["changes"]["new_crashes"]) == []  # the lane's first run: nothing to compare
    subset = _triage(tmp_path, "r2", _crashing("--test t.py::test_0 --test t.py::test_1"))
    assert subset["changes"]["stopped_crashes"] == []
    whole = _triage(tmp_path, "r3", _crashing())
    assert whole["changes"]["new_crashes"] == [] and whole["changes"]["stopped_crashes"] == []
    # like with like still tells a change: the whole row without its crashes has them stopped
    fixed = _triage(tmp_path, "r4", R.record("cpu", WHOLE))
    assert sorted(fp for fp, _ in fixed["changes"]["stopped_crashes"]) == ["fp-one", "fp-two"]
    back = _triage(tmp_path, "r5", _crashing())
    assert sorted(back["changes"]["new_crashes"]) == ["fp-one", "fp-two"]


def test_a_crash_not_run_by_a_subset_is_not_called_stopped_in_the_crash_history(tmp_path: Path) -> None:
    # #42, a sibling of Seen 10: the crash history read a subset run as the crash's end
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    _triage(tmp_path, "r1", _crashing())
    subset = _triage(tmp_path, "r2", _crashing("--test t.py::test_0 --test t.py::test_1"))
    states = {c["fingerprint"]: c["state"] for c in subset["history"]["crashes"]}
    assert states == {"fp-one": "selection not run", "fp-two": "selection not run"}
    fixed = _triage(tmp_path, "r3", R.record("cpu", WHOLE))  # the whole row again, without them
    assert {c["state"] for c in fixed["history"]["crashes"]} == {"stopped"}
