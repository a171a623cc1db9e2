"""#34: the history keeps each row's test map by lane, row and commit, a bounded number of
them, and answers the newest one (`latest_map`); triage stores the maps the results hold;
a history of version 3 is migrated in place."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK
from device_matrix.records import testmap
from device_matrix.records.schema import SourceInfo
from device_matrix.records.source import unknown
from device_matrix.report import history as history_mod
from device_matrix.report.history import KEEP_MAPS, History
from device_matrix.report.model import Triage, build
from tests import records as R


def _triage() -> Triage:
    return build([R.record("cpu", [R.test("t.py::test_a")])], [], {})  # type: ignore[list-item]


def _source(branch: str = "main", commit: str = "a" * 40, pr: int | None = None) -> SourceInfo:
    return {
        **unknown(),
        "commit": commit,
        "ref": branch,
        "ref_type": "branch",
        "event": "pull_request" if pr else "push",
        "pull_request": pr,
        "base_ref": "main" if pr else None,
        "origin": "git",
    }


def _map(commit: str, files: frozenset[str], row: str = "cpu") -> testmap.TestMap:
    return testmap.TestMap(row=row, commit=commit, created="2026-12-01T00:00:00+00:00", tests={"t.py::test_a": files})


def test_latest_map_is_the_newest_one_recorded_for_the_row_in_the_lane(tmp_path: Path) -> None:
    h = History.open(tmp_path / "h.sqlite")
    assert h.latest_map("cpu", "branch:main") is None
    first = _map("1" * 40, frozenset({"pkg/a.py"}))
    h.record(_triage(), "main 1", source=_source(commit="1" * 40), maps=[first])
    second = _map("2" * 40, frozenset({"pkg/b.py"}))
    h.record(_triage(), "main 2", source=_source(commit="2" * 40), maps=[second, _map("2" * 40, frozenset(), "tpu")])
    assert h.latest_map("cpu", "branch:main") == second
    assert h.latest_map("tpu", "branch:main") == _map("2" * 40, frozenset(), "tpu")
    assert h.latest_map("cuda", "branch:main") is None
    # a pull request's map is its own lane's: the base's newest stays the base's
    pr = _map("3" * 40, frozenset({"pkg/c.py"}))
    h.record(_triage(), "pr 7", source=_source("feature", "3" * 40, pr=7), maps=[pr])
    assert h.latest_map("cpu", "branch:main") == second
    assert h.latest_map("cpu", "pr:7") == pr
    h.close()
    # kept on disk, and read from a history opened read-only (a pull request reads its base's)
    again = History.open(tmp_path / "h.sqlite", read_only=True)
    assert again.latest_map("cpu", "branch:main") == second


def test_the_same_commit_again_replaces_its_map_and_a_lane_keeps_a_bounded_number(tmp_path: Path) -> None:
    h = History.open(tmp_path / "h.sqlite")
    for i in range(KEEP_MAPS + 3):
        commit = f"{i:040x}"
        h.record(_triage(), f"main {i}", source=_source(commit=commit), maps=[_map(commit, frozenset({f"f{i}.py"}))])
    stored = h.db.execute("SELECT COUNT(*) FROM test_maps WHERE lane = 'branch:main' AND row = 'cpu'").fetchone()[0]
    assert stored == KEEP_MAPS
    newest = f"{KEEP_MAPS + 2:040x}"
    again = _map(newest, frozenset({"again.py"}))
    h.record(_triage(), "main again", source=_source(commit=newest), maps=[again])
    assert h.latest_map("cpu", "branch:main") == again
    count = h.db.execute("SELECT COUNT(*) FROM test_maps WHERE commit_id = ?", (newest,)).fetchone()[0]
    assert count == 1


def test_a_history_of_version_3_is_migrated_in_place_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    h = History.open(path)
    h.record(_triage(), "main 1", source=_source())
    h.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE test_maps")
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    h = History.open(path)
    assert h.db.execute("PRAGMA user_version").fetchone()[0] == history_mod.VERSION == 5
    assert h.lanes() == {"branch:main": 1}
    assert h.latest_map("cpu", "branch:main") is None
    m = _map("b" * 40, frozenset({"pkg/a.py"}))
    h.record(_triage(), "main 2", source=_source(commit="b" * 40), maps=[m])
    assert h.latest_map("cpu", "branch:main") == m


def _results(root: Path, maps: dict[str, Any]) -> Path:
    results = root / "results"
    for row, text in maps.items():
        (results / row).mkdir(parents=True)
        (results / row / "run.json").write_text(json.dumps(R.record(row, [R.test("t.py::test_a")])))
        if text is not None:
            (results / row / testmap.FILE_NAME).write_text(text)
    return results


def test_triage_stores_the_test_map_each_row_of_the_results_holds(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n[tool.device-matrix.devices.tpu]\n")
    recorded = _map("c" * 40, frozenset({"pkg/a.py", "t.py"}))
    results = _results(tmp_path, {"cpu": json.dumps(testmap.to_json(recorded)), "tpu": None})
    history = tmp_path / "h.sqlite"
    args = ["--project", str(tmp_path), "triage", str(results), "--history", str(history), "--branch", "main"]
    assert main(args) == EXIT_OK
    h = History.open(history)
    assert h.latest_map("cpu", "branch:main") == recorded
    assert h.latest_map("tpu", "branch:main") is None  # a row that recorded none has none


def test_a_damaged_test_map_is_warned_about_and_the_triage_goes_on(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    results = _results(tmp_path, {"cpu": "{not json"})
    history = tmp_path / "h.sqlite"
    args = ["--project", str(tmp_path), "triage", str(results), "--history", str(history), "--branch", "main"]
    assert main(args) == EXIT_OK
    said = capsys.readouterr()
    assert "the test map is not JSON" in said.out + said.err
    assert History.open(history).latest_map("cpu", "branch:main") is None
