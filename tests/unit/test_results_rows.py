"""A row folder holds its own row's record: a ``cpu/`` folder whose run.json says another
row is refused with a word, never read as that row (#30)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK, EXIT_RESULTS
from tests import records as R


def _results(root: Path, rows: dict[str, str]) -> Path:
    (root / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    results = root / "results"
    for folder, row in rows.items():
        (results / folder).mkdir(parents=True)
        (results / folder / "run.json").write_text(json.dumps(R.record(row, [R.test("t.py::test_a")])))
    return results


def test_a_row_folder_whose_record_names_another_row_is_a_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _results(tmp_path, {"cpu": "tpu"})
    assert main(["--project", str(tmp_path), "triage", str(results), "--no-history"]) == EXIT_RESULTS
    said = capsys.readouterr()
    assert "cpu/run.json is the record of row 'tpu'" in said.out + said.err


def test_the_other_rows_are_still_triaged(tmp_path: Path) -> None:
    results = _results(tmp_path, {"cpu": "tpu", "cuda": "cuda"})
    assert main(["--project", str(tmp_path), "triage", str(results), "--no-history"]) == EXIT_OK
    data = json.loads((results / "triage" / "triage.json").read_text())
    assert [r["row"] for r in data["rows"]] == ["cuda"]
    (problem,) = data["problems"]
    assert problem["row"] == "cpu" and "is the record of row 'tpu'" in problem["problem"]


def test_a_shards_record_is_never_read_as_its_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a new user's trial: `triage results/cpu` of a row run as 2 shards read shards/1/run.json
    # as the row (3 of its 6 tests, exit 0) and added that run to the history
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    row = tmp_path / "results" / "cpu"
    for k in (1, 2):
        rec = R.record("cpu", [R.test(f"t.py::test_{k}")])
        rec["spread"] = {"plan": "p", "shard": k, "of": 2}
        (row / "shards" / str(k)).mkdir(parents=True)
        (row / "shards" / str(k) / "run.json").write_text(json.dumps(rec))
    assert main(["--project", str(tmp_path), "triage", str(row), "--no-history"]) == EXIT_RESULTS
    said = capsys.readouterr()
    assert "shards/1/run.json is the record of shard 1/2 of row 'cpu', not the row's" in said.out + said.err
    assert "device-matrix merge" in said.out + said.err
