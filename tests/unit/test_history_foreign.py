"""A history file that is a SQLite database of another schema is set aside as a damaged
one is, and a new history started (#30: it ended triage with exit 5)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK
from tests import records as R

FOREIGN = {
    "runs-of-another-kind": "CREATE TABLE runs (x TEXT); INSERT INTO runs VALUES ('theirs');",
    "another-app": "CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('keep me');",
    "outcomes-of-another-kind": "CREATE TABLE outcomes (a, b); INSERT INTO outcomes VALUES (1, 2);",
    "series-of-another-kind": "CREATE TABLE series (lane, row); PRAGMA user_version = 3;",
}


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_a_foreign_database_is_set_aside_and_a_new_history_started(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    results = tmp_path / "results"
    (results / "cpu").mkdir(parents=True)
    (results / "cpu" / "run.json").write_text(json.dumps(R.record("cpu", [R.test("t.py::test_a")])))
    history = tmp_path / "h.sqlite"
    db = sqlite3.connect(history)
    db.executescript(FOREIGN[kind])
    db.commit()
    db.close()
    theirs = history.read_bytes()
    code = main(["--project", str(tmp_path), "triage", str(results), "--history", str(history)])
    assert code == EXIT_OK, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "not a device-matrix history" in out and "moved to h.sqlite.corrupt-" in out
    (aside,) = tmp_path.glob("h.sqlite.corrupt-*")
    assert aside.read_bytes() == theirs  # the file is kept as it was
    db = sqlite3.connect(history)
    try:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1
    finally:
        db.close()
