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
