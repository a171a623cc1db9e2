"""Run history (SQLite): what changed since the previous triage, and the trends over many.

One triage is one run of the history. Per run it keeps each row's counts (from the one
fold), wall time and label, and each crash's fingerprint, headline and issue per row. Per
test and row it keeps one *series*: a character per kept run for the outcome (``P``
passed, ``F`` failed, ``-`` absent, see ``CODE``) and a float32 per run for the duration.
Reading 30 runs of 4 rows x 5,000 tests is then 20,000 short rows, not 600,000, and a
flip is a string test.

Schema versions (``PRAGMA user_version``): 0 is the first layout (runs, outcomes and
crashes without rows, durations or counts); it is migrated in place to 2. A file that is
not a SQLite database, or a damaged one, is moved aside with a warning and a new history
is started; a history written by a newer device-matrix is left alone (exit 7).
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import sqlite3
import statistics
import struct
from array import array
from collections.abc import Callable, Mapping
from pathlib import Path

from device_matrix.errors import EnvironmentProblem, ResultsError
from device_matrix.records.atomic import storable_text
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
LOCK_WAIT_S = 5.0  # how long to wait for another triage writing the same history

CODE: Mapping[str, str] = {
    "passed": "P",
    "failed": "F",
    "error": "E",
    "xpassed": "X",
    "crashed": "C",
    "timeout": "T",
    "skipped": "S",
    "xfailed": "x",
    "not_run": "N",
}
OUTCOME_OF: Mapping[str, str] = {c: o for o, c in CODE.items()}
ABSENT = "-"
# durations: float32, +inf where the test has none (absent, or kept by the first layout),
# so that min() over a series ignores those runs without a filter
_F32 = 4
_NO_DURATION = struct.pack("<f", math.inf)
# For flips a test either passed (passed, xfailed) or failed (failed, error, xpassed,
# crashed, timeout); a skip, a test that never ran or an absent one says nothing.
PASS_CODES = frozenset("Px")
FAIL_CODES = frozenset(CODE[o] for o in FAILING_OUTCOMES)

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, created TEXT NOT NULL, label TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS row_runs (run_id INTEGER NOT NULL, row TEXT NOT NULL, label TEXT NOT NULL,
    duration REAL, {", ".join(f"{b} INTEGER NOT NULL" for b in BUCKETS)}, PRIMARY KEY (run_id, row));
CREATE TABLE IF NOT EXISTS series (row TEXT NOT NULL, nodeid TEXT NOT NULL, outcomes TEXT NOT NULL,
    durations BLOB NOT NULL, PRIMARY KEY (row, nodeid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS crash_seen (run_id INTEGER NOT NULL, fingerprint TEXT NOT NULL, row TEXT NOT NULL,
    classification TEXT NOT NULL, headline TEXT NOT NULL, issue TEXT);
CREATE INDEX IF NOT EXISTS crash_seen_run ON crash_seen(run_id);
"""

_BUCKET_SQL = "CASE outcome " + " ".join(f"WHEN '{o}' THEN '{b}'" for o, b in BUCKET_OF.items()) + " ELSE '' END"
# The first layout's per-run tables, as written before per-test durations were kept; the
# series are rebuilt from its outcomes table in Python (_migrate_from_0).
_MIGRATE_FROM_0 = f"""
INSERT OR REPLACE INTO row_runs (run_id, row, label, duration, {", ".join(BUCKETS)})
    SELECT run_id, row, 'unknown', NULL, {", ".join(f"SUM({_BUCKET_SQL} = '{b}')" for b in BUCKETS)}
    FROM outcomes GROUP BY run_id, row;
INSERT INTO crash_seen (run_id, fingerprint, row, classification, headline, issue)
    SELECT run_id, fingerprint, '', classification, 'crash ' || fingerprint, NULL FROM crashes;
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
        self._cached: list[tuple[str, str, str, bytes]] | None = None

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
                f"{path}: cannot create the history's folder: {exc}",
                tip="Pass --history PATH in a writable folder, or --no-history.",
            ) from exc
        try:
            return cls._open_or_set_aside(path, warn)
        except OSError as exc:
            raise EnvironmentProblem(
                f"{path}: cannot use the history: {exc}",
                tip="Pass --history PATH naming a file in a writable folder, or --no-history.",
            ) from exc

    @classmethod
    def _open_or_set_aside(cls, path: Path, warn: Callable[[str], None]) -> History:
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
        db = sqlite3.connect(path, timeout=LOCK_WAIT_S)
        try:
            version = _version(db, path)
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            with db:
                db.executescript(SCHEMA)
                if version == 0 and "outcomes" in tables:
                    _migrate_from_0(db)
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

    def _run_ids(self) -> list[int]:
        return [int(r[0]) for r in self.db.execute("SELECT id FROM runs ORDER BY id")]

    def _series(self) -> list[tuple[str, str, str, bytes]]:
        # read once per triage: compare, record and view each walk every series
        if self._cached is None:
            self._cached = self.db.execute("SELECT row, nodeid, outcomes, durations FROM series").fetchall()
        return self._cached

    def compare(self, triage: Triage, unreadable: frozenset[str] = frozenset()) -> Changes:
        """This triage against the last one recorded. Rows in ``unreadable`` are not called gone."""
        last = self._last_run()
        if last is None:
            return no_changes()
        run_id, label = last
        changes = no_changes(label)
        before: dict[tuple[str, str], str] = {}
        for row, nodeid, outcomes, _ in self._series():
            code = outcomes[-1:]
            if code and code != ABSENT:
                before[(row, nodeid)] = OUTCOME_OF.get(code, "")
        rows_before = {str(r[0]) for r in self.db.execute("SELECT row FROM row_runs WHERE run_id = ?", (run_id,))}
        rows_now = set(triage["devices"])
        changes["rows_added"] = sorted(rows_now - rows_before)
        changes["rows_gone"] = sorted(rows_before - rows_now - unreadable)
        seen_now: set[tuple[str, str]] = set()
        for t in triage["tests"]:
            for row, outcome in t["outcomes"].items():
                if row not in rows_before:
                    continue  # a row not run last time: reported as added, nothing to compare with
                key = (row, storable_text(t["nodeid"]))  # as stored (SQLite takes UTF-8 only)
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
            prev_cls, _, rows = crashes_before.setdefault(fp, (cls_, headline, set()))
            rows.add(row)
            crashes_before[fp] = ("flaky" if "flaky" in (cls_, prev_cls) else cls_, headline, rows)
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
        keep = max(keep, 1)
        with self.db:
            cur = self.db.execute("INSERT INTO runs (created, label) VALUES (?, ?)", (_now(), label))
            run_id = int(cur.lastrowid or 0)
            ids = self._run_ids()
            oldest_kept = ids[-keep:][0]
            length = min(len(ids), keep)
            now: dict[tuple[str, str], tuple[str, float]] = {
                (row, storable_text(t["nodeid"])): (CODE.get(o, ABSENT), t["durations"].get(row, math.inf))
                for t in triage["tests"]
                for row, o in t["outcomes"].items()
            }
            rows: list[tuple[str, str, str, bytes]] = []
            for row, nodeid, outcomes, blob in self._series():
                code, duration = now.pop((row, nodeid), (ABSENT, math.inf))
                text, durations = _align(outcomes, blob, length - 1)
                if (text + code).strip(ABSENT):  # a test absent from every kept run is forgotten
                    rows.append((row, nodeid, text + code, durations + struct.pack("<f", duration)))
            for (row, nodeid), (code, duration) in now.items():
                rows.append(
                    (
                        row,
                        nodeid,
                        ABSENT * (length - 1) + code,
                        _NO_DURATION * (length - 1) + struct.pack("<f", duration),
                    )
                )
            self.db.execute("DELETE FROM series")
            self.db.executemany("INSERT INTO series (row, nodeid, outcomes, durations) VALUES (?, ?, ?, ?)", rows)
            self._cached = rows
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
                    (run_id, c["fingerprint"], row, c["classification"], storable_text(c["headline"]), c["issue"])
                    for c in triage["crashes"]
                    for row in c["rows"]
                ),
            )
            self.db.execute("DELETE FROM row_runs WHERE run_id < ?", (oldest_kept,))
            self.db.execute("DELETE FROM crash_seen WHERE run_id < ?", (oldest_kept,))
            self.db.execute("DELETE FROM runs WHERE id < ?", (oldest_kept,))
        return run_id

    def view(self, triage: Triage, window: int = DEFAULT_WINDOW) -> HistoryView:
        """Trends, flaky tests, slowdowns and crash history over the newest ``window`` runs.

        Call after :meth:`record`: the newest run is this triage.
        """
        runs = self.db.execute("SELECT id, label, created FROM runs ORDER BY id").fetchall()
        if not runs:
            return HistoryView(window=window, runs=[], trends={}, flaky=[], slower=[], crashes=[])
        shown = runs[-max(window, 1) :]
        labels = [str(lb) for _, lb, _ in shown]
        current = {storable_text(t["nodeid"]): t["outcomes"] for t in triage["tests"]}
        flaky: list[FlakyTest] = []
        slower: list[SlowTest] = []
        for row, nodeid, outcomes, blob in self._series():
            text, durations = _align(outcomes, blob, len(shown))
            kinds = set(text)
            if kinds & PASS_CODES and kinds & FAIL_CODES:
                found = _flaky(text, labels, nodeid, row)
                if found is not None:
                    found["current"] = current.get(nodeid, {}).get(row)
                    flaky.append(found)
            if text[-1] == "P" and struct.unpack_from("<f", durations, len(durations) - _F32)[0] >= SLOWER_FLOOR_S:
                slow = _slower(text, durations, nodeid, row)
                if slow is not None:
                    slower.append(slow)
        flaky.sort(key=lambda f: (-f["flip_rate"], -f["flips"], f["nodeid"], f["row"]))
        slower.sort(key=lambda s: (-(s["ratio"] or 0.0), s["nodeid"], s["row"]))
        return HistoryView(
            window=window,
            runs=labels,
            trends=self._trends(int(shown[0][0]), {int(i): (str(lb), str(c)) for i, lb, c in shown}),
            flaky=flaky,
            slower=slower[:SLOWER_LISTED],
            crashes=self._crashes(int(runs[-1][0]), set(triage["devices"])),
        )

    def _trends(self, first: int, runs: Mapping[int, tuple[str, str]]) -> dict[str, list[TrendPoint]]:
        trends: dict[str, list[TrendPoint]] = {}
        for run_id, row, label, duration, *counts in self.db.execute(_SELECT_TRENDS, (first,)):
            trends.setdefault(row, []).append(
                TrendPoint(
                    run=runs[run_id][0],
                    created=runs[run_id][1],
                    label=label,
                    counts=dict(zip(BUCKETS, (int(n) for n in counts), strict=True)),
                    duration=duration,
                )
            )
        return trends

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


def _align(outcomes: str, blob: bytes, length: int) -> tuple[str, bytes]:
    """A stored series aligned to the newest ``length`` runs: padded with absent on the left, or cut."""
    size = len(outcomes)
    if size == length and len(blob) == _F32 * length:  # the usual case: nothing to do
        return outcomes, blob
    if len(blob) != _F32 * size:  # a damaged row: trust neither
        return ABSENT * length, _NO_DURATION * length
    if length == 0:
        return "", b""
    if len(outcomes) >= length:
        return outcomes[-length:], blob[-_F32 * length :]
    pad = length - len(outcomes)
    return ABSENT * pad + outcomes, _NO_DURATION * pad + blob


def _flaky(text: str, labels: list[str], nodeid: str, row: str) -> FlakyTest | None:
    """Flips between pass and fail, skipping runs that say nothing; two or more are flaky.

    One flip is a change (a regression or a fix, in "what changed"); flaky goes both ways.
    """
    ran = [(i, c) for i, c in enumerate(text) if c in PASS_CODES or c in FAIL_CODES]
    flips = [
        Flip(run=labels[i], before=OUTCOME_OF[a], after=OUTCOME_OF[b])
        for (_, a), (i, b) in itertools.pairwise(ran)
        if (a in PASS_CODES) != (b in PASS_CODES)
    ]
    if len(flips) < 2:
        return None
    return FlakyTest(
        nodeid=nodeid,
        row=row,
        flips=len(flips),
        runs=len(ran),
        flip_rate=round(len(flips) / (len(ran) - 1), 3),
        last_flips=flips[-FLIPS_KEPT:][::-1],
        current=None,
    )


def _slower(text: str, blob: bytes, nodeid: str, row: str) -> SlowTest | None:
    durations = array("f")
    durations.frombytes(blob)
    now = durations[-1]
    earlier = durations[:-1]
    # the median of the passes is at least the least of every earlier duration: most
    # tests are cut here, by one min() in C
    if not earlier or now < SLOWER_RATIO * min(earlier):
        return None
    # durations of passes only: a failure stops early, a timeout is the deadline
    passes = [d for c, d in zip(text[:-1], earlier, strict=True) if c == "P" and d != math.inf]
    if not passes:
        return None
    median = statistics.median(passes)
    if median <= 0 or now < SLOWER_RATIO * median:
        return None
    return SlowTest(
        nodeid=nodeid, row=row, duration=round(now, 3), median=round(median, 3), ratio=round(now / median, 2)
    )


def _migrate_from_0(db: sqlite3.Connection) -> None:
    db.executescript(_MIGRATE_FROM_0)
    ids = [int(r[0]) for r in db.execute("SELECT id FROM runs ORDER BY id")]
    position = {run_id: i for i, run_id in enumerate(ids)}
    texts: dict[tuple[str, str], list[str]] = {}
    for run_id, row, nodeid, outcome in db.execute("SELECT run_id, row, nodeid, outcome FROM outcomes"):
        if run_id in position:
            text = texts.setdefault((row, nodeid), [ABSENT] * len(ids))
            text[position[run_id]] = CODE.get(outcome, ABSENT)
    none = _NO_DURATION * len(ids)  # the first layout kept no durations
    db.executemany(
        "INSERT OR REPLACE INTO series (row, nodeid, outcomes, durations) VALUES (?, ?, ?, ?)",
        ((row, nodeid, "".join(text), none) for (row, nodeid), text in texts.items()),
    )
    db.execute("DROP TABLE outcomes")
    db.execute("DROP TABLE crashes")


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
