"""Run history (SQLite): what changed since the previous triage."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

from device_matrix.records.schema import FAILING_OUTCOMES
from device_matrix.report.model import Changes, Triage

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, created TEXT NOT NULL, label TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outcomes (run_id INTEGER NOT NULL, row TEXT NOT NULL, nodeid TEXT NOT NULL,
    outcome TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS outcomes_run ON outcomes(run_id);
CREATE TABLE IF NOT EXISTS crashes (run_id INTEGER NOT NULL, fingerprint TEXT NOT NULL,
    classification TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS crashes_run ON crashes(run_id);
"""
KEEP_RUNS = 50


class History:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMA)

    def close(self) -> None:
        self.db.close()

    def _last_run(self) -> tuple[int, str] | None:
        row = self.db.execute("SELECT id, label FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return (int(row[0]), str(row[1])) if row else None

    def compare(self, triage: Triage) -> Changes:
        last = self._last_run()
        changes = Changes(previous=None, new_failures=[], fixed=[], new_crashes=[], newly_flaky=[])
        if last is None:
            return changes
        run_id, label = last
        changes["previous"] = label
        before = {
            (r, n): o
            for r, n, o in self.db.execute("SELECT row, nodeid, outcome FROM outcomes WHERE run_id = ?", (run_id,))
        }
        rows_before = {r for r, _ in before}
        for t in triage["tests"]:
            for row, outcome in t["outcomes"].items():
                if row not in rows_before:
                    continue  # a row not run last time: nothing to compare with
                prev = before.get((row, t["nodeid"]))
                failing = outcome in FAILING_OUTCOMES
                was_failing = prev in FAILING_OUTCOMES if prev else False
                if failing and not was_failing:
                    changes["new_failures"].append([t["nodeid"], row])
                elif was_failing and outcome == "passed":
                    changes["fixed"].append([t["nodeid"], row])
        crashes_before = dict(
            self.db.execute("SELECT fingerprint, classification FROM crashes WHERE run_id = ?", (run_id,)).fetchall()
        )
        for c in triage["crashes"]:
            if c["fingerprint"] not in crashes_before:
                changes["new_crashes"].append(c["fingerprint"])
            if c["classification"] == "flaky" and crashes_before.get(c["fingerprint"]) != "flaky":
                changes["newly_flaky"].append(c["fingerprint"])
        return changes

    def record(self, triage: Triage, label: str) -> None:
        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        with self.db:
            cur = self.db.execute("INSERT INTO runs (created, label) VALUES (?, ?)", (now, label))
            run_id = cur.lastrowid
            self.db.executemany(
                "INSERT INTO outcomes (run_id, row, nodeid, outcome) VALUES (?, ?, ?, ?)",
                ((run_id, row, t["nodeid"], o) for t in triage["tests"] for row, o in t["outcomes"].items()),
            )
            self.db.executemany(
                "INSERT INTO crashes (run_id, fingerprint, classification) VALUES (?, ?, ?)",
                ((run_id, c["fingerprint"], c["classification"]) for c in triage["crashes"]),
            )
            old = [
                r[0] for r in self.db.execute("SELECT id FROM runs ORDER BY id DESC LIMIT -1 OFFSET ?", (KEEP_RUNS,))
            ]
            for rid in old:
                self.db.execute("DELETE FROM outcomes WHERE run_id = ?", (rid,))
                self.db.execute("DELETE FROM crashes WHERE run_id = ?", (rid,))
                self.db.execute("DELETE FROM runs WHERE id = ?", (rid,))
