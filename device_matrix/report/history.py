"""Run history (SQLite): what changed since the previous triage, and the trends over many.

One triage is one run of the history. Per run it keeps each row's counts (from the one
fold), wall time and label, each test's outcome and duration per row, and each crash's
fingerprint, headline and issue per row. Flips are found by SQLite itself (a window
function over the per-test sequence), so 30 runs of 4 rows x 5,000 tests are read in a
fraction of a second.

Schema versions (``PRAGMA user_version``): 0 is the first layout (runs, outcomes,
crashes without rows, durations or counts); it is migrated in place to 2. A file that is
not a SQLite database, or a damaged one, is moved aside with a warning and a new history
is started; a history written by a newer device-matrix is left alone (exit 7).
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import statistics
from collections.abc import Callable, Mapping
from pathlib import Path

from device_matrix.errors import EnvironmentProblem, ResultsError
from device_matrix.records.schema import FAILING_OUTCOMES
from device_matrix.records.summary import BUCKET_OF, BUCKETS
from device_matrix.report.model import (
    Changes,
    CrashHistory,
    FlakyTest,
    Flip,
    HistoryView,
    SlowTest,
    TrendPoint,
    Triage,
    no_changes,
)

VERSION = 2
KEEP_RUNS = 50
DEFAULT_WINDOW = 30
# A test counts as slower when it took at least SLOWER_RATIO times its median over the
# earlier runs and at least SLOWER_FLOOR_S seconds: a 3 ms test that took 9 ms is noise.
SLOWER_RATIO = 2.0
SLOWER_FLOOR_S = 1.0
SLOWER_LISTED = 50
FLIPS_KEPT = 5

# For flips a test either passed (passed, xfailed) or failed (failed, error, xpassed,
# crashed, timeout); a skip or a test that never ran says nothing about flakiness.
PASS_CLASS = 0
FAIL_CLASS = 1
CLASS_OF: Mapping[str, int] = {
    **dict.fromkeys(FAILING_OUTCOMES, FAIL_CLASS),
    "passed": PASS_CLASS,
    "xfailed": PASS_CLASS,
}

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, created TEXT NOT NULL, label TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS names (id INTEGER PRIMARY KEY, nodeid TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS row_runs (run_id INTEGER NOT NULL, row TEXT NOT NULL, label TEXT NOT NULL,
    duration REAL, {", ".join(f"{b} INTEGER NOT NULL" for b in BUCKETS)}, PRIMARY KEY (run_id, row));
CREATE TABLE IF NOT EXISTS results (row TEXT NOT NULL, test_id INTEGER NOT NULL, run_id INTEGER NOT NULL,
    outcome TEXT NOT NULL, cls INTEGER, duration REAL, PRIMARY KEY (row, test_id, run_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS crash_seen (run_id INTEGER NOT NULL, fingerprint TEXT NOT NULL, row TEXT NOT NULL,
    classification TEXT NOT NULL, headline TEXT NOT NULL, issue TEXT);
CREATE INDEX IF NOT EXISTS crash_seen_run ON crash_seen(run_id);
"""


def _case(mapping: Mapping[str, str] | Mapping[str, int], column: str, default: str) -> str:
    whens = " ".join(f"WHEN '{k}' THEN {v!r}" for k, v in mapping.items())
    return f"CASE {column} {whens} ELSE {default} END"


_BUCKET_SQL = _case(BUCKET_OF, "outcome", "''")
# The first layout, as written by device-matrix before per-test durations were kept.
_MIGRATE_FROM_0 = f"""
INSERT OR IGNORE INTO names (nodeid) SELECT DISTINCT nodeid FROM outcomes;
INSERT OR REPLACE INTO results (row, test_id, run_id, outcome, cls, duration)
    SELECT o.row, n.id, o.run_id, o.outcome, {_case(CLASS_OF, "o.outcome", "NULL")}, NULL
    FROM outcomes o JOIN names n ON n.nodeid = o.nodeid;
INSERT OR REPLACE INTO row_runs (run_id, row, label, duration, {", ".join(BUCKETS)})
    SELECT run_id, row, 'unknown', NULL,
    {", ".join(f"SUM({_BUCKET_SQL} = '{b}')" for b in BUCKETS)}
    FROM outcomes GROUP BY run_id, row;
INSERT INTO crash_seen (run_id, fingerprint, row, classification, headline, issue)
    SELECT run_id, fingerprint, '', classification, 'crash ' || fingerprint, NULL FROM crashes;
DROP TABLE outcomes;
DROP TABLE crashes;
"""  # noqa: S608 - built from constants only

_COLUMNS = ", ".join(BUCKETS)
# column names come from the BUCKETS constant; every value is a bound parameter
_INSERT_ROW_RUN = (
    f"INSERT INTO row_runs (run_id, row, label, duration, {_COLUMNS}) "  # noqa: S608 - see above
    f"VALUES (?, ?, ?, ?, {', '.join('?' for _ in BUCKETS)})"
)
_SELECT_TRENDS = (
    f"SELECT run_id, row, label, duration, {_COLUMNS} FROM row_runs "  # noqa: S608 - see above
    "WHERE run_id >= ? ORDER BY row, run_id"
)

SQLITE_MAGIC = b"SQLite format 3\x00"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class History:
    """Open with :meth:`open`; every method may raise ``sqlite3.DatabaseError`` on a damaged file."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    @classmethod
    def open(cls, path: Path, warn: Callable[[str], None] = lambda _: None) -> History:
        """Open or create the history, migrating an older layout.

        A damaged file is renamed ``<name>.corrupt-<time>`` (kept for a post mortem) and a
        new history is started; ``warn`` is told so.
        """
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EnvironmentProblem(
                f"{path.parent}: cannot create the history folder: {exc}",
                tip="Pass --history PATH in a writable folder, or --no-history.",
            ) from exc
        try:
            return cls._open(path)
        except sqlite3.OperationalError as exc:
            # can't open, locked, read-only: the file may be fine, so never move it
            raise EnvironmentProblem(
                f"{path}: cannot use the history database: {exc}",
                tip="Check that the file and its folder are writable and not in use, or pass --no-history.",
            ) from exc
        except sqlite3.DatabaseError as exc:
            aside = set_aside(path)
            warn(f"{path}: not a usable history database ({exc}); moved to {aside.name} and started a new history")
            return cls._open(path)

    @classmethod
    def _open(cls, path: Path) -> History:
        if path.exists() and path.stat().st_size:
            with path.open("rb") as fh:
                if fh.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                    raise sqlite3.DatabaseError("file is not a database")
        db = sqlite3.connect(path)
        try:
            version = _version(db, path)
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            with db:
                db.executescript(SCHEMA)
                if version == 0 and "outcomes" in tables:
                    db.executescript(_MIGRATE_FROM_0)
                db.execute(f"PRAGMA user_version = {VERSION}")
        except BaseException:
            db.close()
            raise
        return cls(db)

    def close(self) -> None:
        self.db.close()

    def _last_run(self) -> tuple[int, str] | None:
        row = self.db.execute("SELECT id, label FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        return (int(row[0]), str(row[1])) if row else None

    def compare(self, triage: Triage, unreadable: frozenset[str] = frozenset()) -> Changes:
        """This triage against the last one recorded. Rows in ``unreadable`` are not called gone."""
        last = self._last_run()
        if last is None:
            return no_changes()
        run_id, label = last
        changes = no_changes(label)
        before: dict[tuple[str, str], str] = {
            (r, n): o
            for r, n, o in self.db.execute(
                "SELECT r.row, n.nodeid, r.outcome FROM results r JOIN names n ON n.id = r.test_id WHERE r.run_id = ?",
                (run_id,),
            )
        }
        rows_before = {str(r[0]) for r in self.db.execute("SELECT row FROM row_runs WHERE run_id = ?", (run_id,))}
        rows_now = set(triage["devices"])
        changes["rows_added"] = sorted(rows_now - rows_before)
        changes["rows_gone"] = sorted(rows_before - rows_now - unreadable)
        seen_now: set[tuple[str, str]] = set()
        for t in triage["tests"]:
            for row, outcome in t["outcomes"].items():
                if row not in rows_before:
                    continue  # a row not run last time: reported as added, nothing to compare with
                key = (row, t["nodeid"])
                seen_now.add(key)
                prev = before.get(key)
                if prev is None:
                    changes["appeared"].append([t["nodeid"], row])
                    continue
                failing = outcome in FAILING_OUTCOMES
                was_failing = prev in FAILING_OUTCOMES
                if failing and not was_failing:
                    changes["new_failures"].append([t["nodeid"], row])
                elif was_failing and outcome == "passed":
                    changes["fixed"].append([t["nodeid"], row])
        changes["disappeared"] = sorted([n, r] for (r, n) in before if r in rows_now and (r, n) not in seen_now)
        crashes_before: dict[str, tuple[str, str, set[str]]] = {}
        for fp, cls_, headline, row in self.db.execute(
            "SELECT fingerprint, classification, headline, row FROM crash_seen WHERE run_id = ?", (run_id,)
        ):
            entry = crashes_before.setdefault(fp, (cls_, headline, set()))
            entry[2].add(row)
            if cls_ == "flaky":
                crashes_before[fp] = ("flaky", headline, entry[2])
        crashes_now = {c["fingerprint"] for c in triage["crashes"]}
        for c in triage["crashes"]:
            if c["fingerprint"] not in crashes_before:
                changes["new_crashes"].append(c["fingerprint"])
            if c["classification"] == "flaky" and crashes_before.get(c["fingerprint"], ("",))[0] != "flaky":
                changes["newly_flaky"].append(c["fingerprint"])
        for fp, (_, headline, rows) in sorted(crashes_before.items()):
            # rows == {""}: recorded by the first layout, which did not keep the row
            ran_again = rows & rows_now or rows == {""}
            if fp not in crashes_now and ran_again:
                changes["stopped_crashes"].append([fp, headline])
        return changes

    def record(self, triage: Triage, label: str, *, keep: int = KEEP_RUNS) -> int:
        """Add this triage as the newest run; drop runs beyond the newest ``keep``."""
        with self.db:
            cur = self.db.execute("INSERT INTO runs (created, label) VALUES (?, ?)", (_now(), label))
            run_id = int(cur.lastrowid or 0)
            self.db.executemany(
                "INSERT OR IGNORE INTO names (nodeid) VALUES (?)", ((t["nodeid"],) for t in triage["tests"])
            )
            ids = dict(self.db.execute("SELECT nodeid, id FROM names"))
            self.db.executemany(
                "INSERT INTO results (row, test_id, run_id, outcome, cls, duration) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    (row, ids[t["nodeid"]], run_id, o, CLASS_OF.get(o), t["durations"].get(row))
                    for t in triage["tests"]
                    for row, o in t["outcomes"].items()
                ),
            )
            self.db.executemany(
                _INSERT_ROW_RUN,
                (
                    (run_id, r["row"], r["label"], r["duration"], *(r["counts"].get(b, 0) for b in BUCKETS))
                    for r in triage["rows"]
                ),
            )
            self.db.executemany(
                "INSERT INTO crash_seen (run_id, fingerprint, row, classification, headline, issue) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    (run_id, c["fingerprint"], row, c["classification"], c["headline"], c["issue"])
                    for c in triage["crashes"]
                    for row in c["rows"]
                ),
            )
            oldest_kept = self.db.execute(
                "SELECT MIN(id) FROM (SELECT id FROM runs ORDER BY id DESC LIMIT ?)", (max(keep, 1),)
            ).fetchone()[0]
            self.db.execute("DELETE FROM results WHERE run_id < ?", (oldest_kept,))
            self.db.execute("DELETE FROM row_runs WHERE run_id < ?", (oldest_kept,))
            self.db.execute("DELETE FROM crash_seen WHERE run_id < ?", (oldest_kept,))
            self.db.execute("DELETE FROM runs WHERE id < ?", (oldest_kept,))
        return run_id

    def view(self, triage: Triage, window: int = DEFAULT_WINDOW) -> HistoryView:
        """Trends, flaky tests, slowdowns and crash history over the newest ``window`` runs.

        Call after :meth:`record`: the newest run is this triage.
        """
        runs = self.db.execute(
            "SELECT id, label, created FROM runs ORDER BY id DESC LIMIT ?", (max(window, 1),)
        ).fetchall()[::-1]
        if not runs:
            return HistoryView(window=window, runs=[], trends={}, flaky=[], slower=[], crashes=[])
        first, current = int(runs[0][0]), int(runs[-1][0])
        labels = {int(i): str(lb) for i, lb, _ in runs}
        return HistoryView(
            window=window,
            runs=[str(lb) for _, lb, _ in runs],
            trends=self._trends(first, labels, {int(i): str(c) for i, _, c in runs}),
            flaky=self._flaky(first, labels, triage),
            slower=self._slower(first, current, triage),
            crashes=self._crashes(current, set(triage["devices"])),
        )

    def _trends(self, first: int, labels: Mapping[int, str], created: Mapping[int, str]) -> dict[str, list[TrendPoint]]:
        trends: dict[str, list[TrendPoint]] = {}
        for run_id, row, label, duration, *counts in self.db.execute(_SELECT_TRENDS, (first,)):
            trends.setdefault(row, []).append(
                TrendPoint(
                    run=labels[run_id],
                    created=created[run_id],
                    label=label,
                    counts=dict(zip(BUCKETS, (int(n) for n in counts), strict=True)),
                    duration=duration,
                )
            )
        return trends

    def _flaky(self, first: int, labels: Mapping[int, str], triage: Triage) -> list[FlakyTest]:
        flips: dict[tuple[str, int], list[Flip]] = {}
        runs_of: dict[tuple[str, int], int] = {}
        for row, test_id, run_id, before, after, n in self.db.execute(
            """
            SELECT row, test_id, run_id, prev_outcome, outcome, n FROM (
                SELECT row, test_id, run_id, outcome, cls,
                    LAG(cls) OVER w AS prev_cls, LAG(outcome) OVER w AS prev_outcome,
                    COUNT(*) OVER (PARTITION BY row, test_id) AS n
                FROM results WHERE run_id >= ? AND cls IS NOT NULL
                WINDOW w AS (PARTITION BY row, test_id ORDER BY run_id)
            ) WHERE prev_cls IS NOT NULL AND prev_cls != cls
            """,
            (first,),
        ):
            flips.setdefault((row, test_id), []).append(Flip(run=labels[run_id], before=before, after=after))
            runs_of[(row, test_id)] = int(n)
        # one flip is a change (a regression or a fix, in "what changed"); flaky goes both ways
        flaky_keys = [k for k, f in flips.items() if len(f) >= 2]
        if not flaky_keys:
            return []
        names = self._names({k[1] for k in flaky_keys})
        current = {t["nodeid"]: t["outcomes"] for t in triage["tests"]}
        out = [
            FlakyTest(
                nodeid=names[test_id],
                row=row,
                flips=len(flips[(row, test_id)]),
                runs=runs_of[(row, test_id)],
                flip_rate=round(len(flips[(row, test_id)]) / max(runs_of[(row, test_id)] - 1, 1), 3),
                last_flips=flips[(row, test_id)][-FLIPS_KEPT:][::-1],
                current=current.get(names[test_id], {}).get(row),
            )
            for row, test_id in flaky_keys
        ]
        return sorted(out, key=lambda f: (-f["flip_rate"], -f["flips"], f["nodeid"], f["row"]))

    def _names(self, ids: set[int]) -> dict[int, str]:
        return dict(
            self.db.execute(
                "SELECT id, nodeid FROM names WHERE id IN (SELECT value FROM json_each(?))", (json.dumps(sorted(ids)),)
            )
        )

    def _slower(self, first: int, current: int, triage: Triage) -> list[SlowTest]:
        # only tests above the floor now can qualify, so only their history is read
        candidates = [
            (t["nodeid"], row, d)
            for t in triage["tests"]
            for row, d in t["durations"].items()
            if d >= SLOWER_FLOOR_S and t["outcomes"].get(row) == "passed"
        ]
        if not candidates:
            return []
        ids = dict(
            self.db.execute(
                "SELECT nodeid, id FROM names WHERE nodeid IN (SELECT value FROM json_each(?))",
                (json.dumps(sorted({n for n, _, _ in candidates})),),
            )
        )
        out: list[SlowTest] = []
        for nodeid, row, duration in candidates:
            earlier = [
                float(r[0])
                for r in self.db.execute(
                    # durations of passes only: a failure stops early, a timeout is the deadline
                    "SELECT duration FROM results WHERE row = ? AND test_id = ? AND run_id >= ? AND run_id < ? "
                    "AND duration IS NOT NULL AND outcome = 'passed'",
                    (row, ids.get(nodeid, -1), first, current),
                )
            ]
            if not earlier:
                continue
            median = statistics.median(earlier)
            if median > 0 and duration >= SLOWER_RATIO * median:
                out.append(
                    SlowTest(
                        nodeid=nodeid, row=row, duration=duration, median=median, ratio=round(duration / median, 2)
                    )
                )
        out.sort(key=lambda s: (-(s["ratio"] or 0.0), s["nodeid"], s["row"]))
        return out[:SLOWER_LISTED]

    def _crashes(self, current: int, rows_now: set[str]) -> list[CrashHistory]:
        labels = dict(self.db.execute("SELECT id, label FROM runs"))
        seen: dict[str, dict[str, object]] = {}
        for run_id, fp, row, classification, headline, issue in self.db.execute(
            "SELECT run_id, fingerprint, row, classification, headline, issue FROM crash_seen ORDER BY run_id"
        ):
            e = seen.setdefault(fp, {"first": run_id, "runs": set(), "rows": set(), "flaky": False})
            e["last"] = run_id
            e["headline"] = headline
            e["issue"] = issue or e.get("issue")
            e["runs"].add(run_id)  # type: ignore[attr-defined]
            if row:
                e["rows"].add(row)  # type: ignore[attr-defined]
            e["flaky"] = bool(e["flaky"]) or classification == "flaky"
        out: list[CrashHistory] = []
        for fp, e in seen.items():
            rows: set[str] = e["rows"]  # type: ignore[assignment]
            if e["last"] == current:
                state = "current"
            elif rows and not rows & rows_now:
                state = "row not run"
            else:
                state = "stopped"
            out.append(
                CrashHistory(
                    fingerprint=fp,
                    headline=str(e["headline"]),
                    first_seen=str(labels.get(e["first"], "?")),
                    last_seen=str(labels.get(e["last"], "?")),
                    runs=len(e["runs"]),  # type: ignore[arg-type]
                    rows=sorted(rows),
                    issue=e["issue"] if isinstance(e["issue"], str) else None,
                    flaky=bool(e["flaky"]),
                    state=state,
                )
            )
        order = {"current": 0, "stopped": 1, "row not run": 2}
        return sorted(out, key=lambda c: (order[c["state"]], -c["runs"], c["fingerprint"]))


def _version(db: sqlite3.Connection, path: Path) -> int:
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > VERSION:
        raise ResultsError(
            f"{path}: history version {version}, this device-matrix reads up to {VERSION}",
            tip="Use the device-matrix version that wrote it, pass another --history, or --no-history.",
        )
    return version


def set_aside(path: Path) -> Path:
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    path.replace(aside)
    for suffix in ("-journal", "-wal", "-shm"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.replace(aside.with_name(aside.name + suffix))
    return aside
