"""Run history (SQLite): what changed since the previous triage, and the trends over many.

One triage is one run of the history. Per run it keeps each row's counts (from the one
fold), wall time and label, and each crash's fingerprint, headline and issue per row. Per
test and row it keeps one *series*: a character per kept run for the outcome (``P``
passed, ``F`` failed, ``D`` left out by selection, ``-`` absent, see
``records.outcomes.CODE``) and a float32 per run for the duration.
Reading 30 runs of 4 rows x 5,000 tests is then 20,000 short rows, not 600,000, and a
flip is a string test.

Every run is stored with its source (#25: commit, branch, pull request, base) in a *lane*:
its branch (``branch:main``), its pull request (``pr:12``) or its tag; the series are kept
per lane, so a pull request that breaks a test never makes it look flaky on its base.
Trends, flips, slowdowns and "first seen" are read per lane: a branch's own runs, and for a
pull request its base branch's runs followed by its own (flaky and slower from the base
alone). Per row and run the environment's facets are kept, per crash the test it crashed,
and per test and lane the signature of its latest failure (fingerprint or message), which
the verdicts of a pull request compare with (report/verdicts.py).

Schema versions (``PRAGMA user_version``): 0 is the first layout (runs, outcomes and
crashes without rows, durations or counts), 2 the layout without lanes; both are migrated
in place to 3, their runs in the lane of no source (""), which the first branch run
recorded after the migration adopts (a history was kept per branch before). Version 4 adds
the test maps (#34: per lane, row and commit, the newest ``KEEP_MAPS`` of each lane and
row), made in place in a history of version 3 or older; version 5 the selection's backstop
(#40: each pull request's left-out tests, the misses a base run found, report/misses.py),
made in place too. A file that is
not a SQLite database, or a damaged one, is moved aside with a warning and a new history
is started; a history written by a newer device-matrix is left alone (exit 7). A history
opened read-only (a pull request reading its base's) is copied into memory: the file is
never written, moved or migrated on disk.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import math
import sqlite3
import statistics
import struct
import zlib
from array import array
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from device_matrix.config import STATE_DIR, make_state_dir
from device_matrix.errors import EnvironmentProblem, ResultsError
from device_matrix.findings import former_signature
from device_matrix.records import testmap
from device_matrix.records.atomic import storable_text
from device_matrix.records.outcomes import (
    ABSENT,
    BUCKET_OF,
    BUCKETS,
    CODE,
    DESELECTED_CODES,
    DESELECTED_OUTCOMES,
    FAIL_CODES,
    FAILING_OUTCOMES,
    HISTORY_BUCKETS,
    OUTCOME_OF,
    PASS_CODES,
)
from device_matrix.records.schema import SourceInfo
from device_matrix.records.source import base_lane, is_pull_request
from device_matrix.records.source import lane as lane_of
from device_matrix.report import misses
from device_matrix.report.model import (
    Changes,
    CrashHistory,
    FlakyTest,
    Flip,
    HistoryView,
    RunSource,
    SlowTest,
    TrendPoint,
    Triage,
    no_changes,
)
from device_matrix.report.placement import Observation
from device_matrix.report.signature import mask

VERSION = 5
DEFAULT_PATH = Path(STATE_DIR) / "history.sqlite"  # under the project root
KEEP_RUNS = 50  # per lane
KEEP_PR_LANES = 30  # pull requests whose runs are kept; older ones are forgotten
KEEP_MAPS = 5  # #34: test maps kept per lane and row, each of its own commit
DEFAULT_WINDOW = 30
# A test counts as slower when it took at least SLOWER_RATIO times its median over the
# earlier runs and at least SLOWER_FLOOR_S seconds: a 3 ms test that took 9 ms is noise.
SLOWER_RATIO = 2.0
SLOWER_FLOOR_S = 1.0
SLOWER_LISTED = 50
FLIPS_KEPT = 5
LOCK_WAIT_S = 5.0  # how long to wait for another triage writing the same history

# durations: float32, +inf where the test has none (absent, or kept by the first layout),
# so that min() over a series ignores those runs without a filter
_F32 = 4
_NO_DURATION = struct.pack("<f", math.inf)

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, created TEXT NOT NULL, label TEXT NOT NULL,
    lane TEXT NOT NULL DEFAULT '', source TEXT, identity TEXT);
CREATE INDEX IF NOT EXISTS runs_lane ON runs(lane, id);
CREATE TABLE IF NOT EXISTS row_runs (run_id INTEGER NOT NULL, row TEXT NOT NULL, label TEXT NOT NULL,
    duration REAL, {", ".join(f"{b} INTEGER NOT NULL" for b in HISTORY_BUCKETS)}, env TEXT, selection TEXT,
    PRIMARY KEY (run_id, row));
CREATE TABLE IF NOT EXISTS series (lane TEXT NOT NULL, row TEXT NOT NULL, nodeid TEXT NOT NULL,
    outcomes TEXT NOT NULL, durations BLOB NOT NULL, signature TEXT, PRIMARY KEY (lane, row, nodeid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS crash_seen (run_id INTEGER NOT NULL, fingerprint TEXT NOT NULL, row TEXT NOT NULL,
    classification TEXT NOT NULL, headline TEXT NOT NULL, issue TEXT, nodeid TEXT);
CREATE INDEX IF NOT EXISTS crash_seen_run ON crash_seen(run_id);
CREATE TABLE IF NOT EXISTS test_maps (lane TEXT NOT NULL, row TEXT NOT NULL, commit_id TEXT NOT NULL,
    stored INTEGER NOT NULL, map BLOB NOT NULL, PRIMARY KEY (lane, row, commit_id)) WITHOUT ROWID;
{misses.TABLES}"""
# columns added by version 3 to the tables of version 2 (and of the first layout's runs);
# selection (#30) to those of version 3 too: a reader that knows it not ignores it
_ADDED_COLUMNS = {
    # identity (#41): a reader that knows it not records a run triaged twice twice, as before
    "runs": (("lane", "TEXT NOT NULL DEFAULT ''"), ("source", "TEXT"), ("identity", "TEXT")),
    "row_runs": (("env", "TEXT"), ("selection", "TEXT")),
    "crash_seen": (("nodeid", "TEXT"),),
}

_BUCKET_SQL = "CASE outcome " + " ".join(f"WHEN '{o}' THEN '{b}'" for o, b in BUCKET_OF.items()) + " ELSE '' END"
# The first layout's per-run tables, as written before per-test durations were kept; the
# series are rebuilt from its outcomes table in Python (_migrate_from_0).
_MIGRATE_FROM_0 = f"""
INSERT OR REPLACE INTO row_runs (run_id, row, label, duration, {", ".join(HISTORY_BUCKETS)})
    SELECT run_id, row, 'unknown', NULL, {", ".join(f"SUM({_BUCKET_SQL} = '{b}')" for b in HISTORY_BUCKETS)}
    FROM outcomes GROUP BY run_id, row;
INSERT INTO crash_seen (run_id, fingerprint, row, classification, headline, issue)
    SELECT run_id, fingerprint, '', classification, 'crash ' || fingerprint, NULL FROM crashes;
"""  # noqa: S608 - built from constants only
# version 2 kept one series per row and test: they become the lane of no source
_SERIES_FROM_2 = """
ALTER TABLE series RENAME TO series_2;
CREATE TABLE series (lane TEXT NOT NULL, row TEXT NOT NULL, nodeid TEXT NOT NULL,
    outcomes TEXT NOT NULL, durations BLOB NOT NULL, signature TEXT, PRIMARY KEY (lane, row, nodeid)) WITHOUT ROWID;
INSERT INTO series (lane, row, nodeid, outcomes, durations) SELECT '', row, nodeid, outcomes, durations FROM series_2;
DROP TABLE series_2;
"""

_COLUMNS = ", ".join(HISTORY_BUCKETS)
# column names come from the HISTORY_BUCKETS constant; every value is a bound parameter (#34:
# no column of deselected tests, which the history never counts)
_INSERT_ROW_RUN = (
    f"INSERT INTO row_runs (run_id, row, label, duration, env, selection, {_COLUMNS}) "  # noqa: S608 - see above
    f"VALUES (?, ?, ?, ?, ?, ?, {', '.join('?' for _ in HISTORY_BUCKETS)})"
)
_SELECT_TRENDS = (
    f"SELECT run_id, row, label, duration, {_COLUMNS} FROM row_runs "  # noqa: S608 - see above
    "WHERE run_id >= ? ORDER BY row, run_id"
)
# A failure's signature: its fingerprint, or the first line of its message with numbers and
# addresses masked (a value, a time or a pointer that differs is the same failure)
SIGNATURE_LIMIT = 300

SQLITE_MAGIC = b"SQLite format 3\x00"
# #41: outcomes of a test that did not run: a change is told against the one it last ran with
NOT_RAN_CODES = "".join(sorted({*DESELECTED_CODES, CODE["not_run"]}))


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class LaneRun:
    id: int
    label: str
    created: str
    lane: str
    source: SourceInfo | None
    identity: str | None = None  # #41: what the run is (run_identity), None when its records cannot say


def run_identity(triage: Triage, source: SourceInfo | None) -> str | None:
    """What makes a run this run (#41): its rows with the times their records started, and
    where it ran (its source); None when a row's record has no start time (nothing to know it by)."""
    starts = sorted((r["row"], r.get("started_at")) for r in triage["rows"])
    if not starts or any(started is None for _, started in starts):
        return None
    return json.dumps({"rows": starts, "source": source}, sort_keys=True)


def run_time(triage: Triage) -> str:
    """When the run happened: the last of its rows' finish times (#41), else when it was triaged."""
    finished = [str(r.get("finished_at")) for r in triage["rows"] if r.get("finished_at")]
    return max(finished) if finished else triage["generated_at"]


@dataclass
class Base:
    """A lane's newest runs as the verdicts of a pull request read them (report/verdicts.py)."""

    lane: str
    runs: list[LaneRun]  # oldest first
    rows: dict[str, list[str | None]]  # row -> its status label in each run (None: the row did not run)
    # (row, nodeid) -> (a code per run, aligned with ``runs``; its latest failure's signature)
    series: dict[tuple[str, str], tuple[str, str | None]] = field(default_factory=dict)
    # fingerprint -> row -> the positions (in ``runs``) of the runs it crashed in
    crashes: dict[str, dict[str, list[int]]] = field(default_factory=dict)


SeriesRow = tuple[str, str, str, bytes, str | None]  # row, nodeid, outcomes, durations, signature


def signature(outcome: str, message: str | None) -> str:
    """What makes two failures of a test the same failure: the outcome and the message's first
    line with its numbers and addresses masked (a crash's is its fingerprint, see crash_signature)."""
    first = next((line.strip() for line in (message or "").splitlines() if line.strip()), "")
    # #32: temp paths, UUIDs and hashes masked too: the same failure with another temp dir is the same
    return f"{outcome}: {mask(first)}"[:SIGNATURE_LIMIT]


def same_failure(stored: str | None, sig: str) -> bool:
    """Whether a signature the history stored is ``sig``'s: the same, or (stored before #42
    kept the numbers that say what happened) the same with every number masked. A stored
    signature that keeps numbers is compared as it is: an exit status 1 is never 137's."""
    return stored is not None and stored in (sig, former_signature(sig))


def crash_signature(fingerprint: str) -> str:
    return f"crash {fingerprint}"


def signatures(triage: Triage) -> dict[tuple[str, str], str]:
    """(row, nodeid as stored) -> the signature of each failing test of this triage."""
    out: dict[tuple[str, str], str] = {}
    for f in triage["failures"]:
        out[(f["row"], storable_text(f["nodeid"]))] = signature(f["outcome"], f["message"])
    for c in triage["crashes"]:
        for row, nodeid in c["seen"]:
            out[(row, storable_text(nodeid))] = crash_signature(c["fingerprint"])
    return out


def _source_of(text: Any) -> SourceInfo | None:
    if not isinstance(text, str):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None  # type: ignore[return-value]


def _facets_of(text: Any) -> dict[str, str]:
    if not isinstance(text, str):
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


_S = TypeVar("_S", bound="Store")


class Store:
    """The history's file: opened (migrated, or set aside when damaged), its runs and series
    per lane read, and a triage recorded. Every method may raise ``sqlite3.DatabaseError``
    on a damaged file."""

    def __init__(self, db: sqlite3.Connection, *, read_only: bool = False) -> None:
        self.db = db
        self.read_only = read_only
        self._series_cache: dict[str, list[SeriesRow]] = {}
        self._recorded: int | None = None  # the run this object recorded: the one view() shows
        self.kept_before: LaneRun | None = None  # #41: the run recorded already, older than its lane's newest

    @classmethod
    def open(cls: type[_S], path: Path, warn: Callable[[str], None] = lambda _: None, *, read_only: bool = False) -> _S:
        """Open or create the history, migrating an older layout.

        A damaged file is renamed ``<name>.corrupt-<time>`` (kept for a post mortem) and a
        new history is started; ``warn`` is told so. ``read_only``: the file is read into
        memory and never written; one that cannot be read is warned about and left alone.
        """
        if read_only:
            return cls._open_read_only(path, warn)
        try:
            make_state_dir(path.parent)  # this machine's runs, never to be committed (#20)
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
    def _open_read_only(cls: type[_S], path: Path, warn: Callable[[str], None]) -> _S:
        mem = sqlite3.connect(":memory:")
        try:
            if path.is_file() and path.stat().st_size:
                _check_magic(path)
                src = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=LOCK_WAIT_S)
                try:
                    src.backup(mem)
                finally:
                    src.close()
            _upgrade(mem, _version(mem, path))
        except (sqlite3.DatabaseError, OSError) as exc:
            mem.close()
            warn(f"{path}: cannot read the history ({exc}); compared with no history, the file left as it is")
            mem = sqlite3.connect(":memory:")
            _upgrade(mem, 0)
        return cls(mem, read_only=True)

    @classmethod
    def _open_or_set_aside(cls: type[_S], path: Path, warn: Callable[[str], None]) -> _S:
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
    def _open(cls: type[_S], path: Path) -> _S:
        if path.exists() and path.stat().st_size:
            _check_magic(path)
        db = sqlite3.connect(path, timeout=LOCK_WAIT_S)
        try:
            _upgrade(db, _version(db, path))
        except BaseException:
            db.close()
            raise
        return cls(db)

    def close(self) -> None:
        self.db.close()

    # --- reading a lane ---------------------------------------------------------------

    def _runs(self, where: str = "", args: Sequence[object] = ()) -> list[LaneRun]:
        return [
            LaneRun(int(i), str(label), str(created), str(lane), _source_of(source), identity)
            for i, label, created, lane, source, identity in self.db.execute(
                f"SELECT id, label, created, lane, source, identity FROM runs {where} ORDER BY id",  # noqa: S608 - constant
                tuple(args),
            )
        ]

    def lane_runs(self, lane: str) -> list[LaneRun]:
        return self._runs("WHERE lane = ?", (lane,))

    def lanes(self) -> dict[str, int]:
        """Every lane and its number of runs."""
        return {str(lane): int(n) for lane, n in self.db.execute("SELECT lane, COUNT(*) FROM runs GROUP BY lane")}

    def _last_of(self, lane: str) -> LaneRun | None:
        runs = self._runs("WHERE lane = ? AND id = (SELECT MAX(id) FROM runs WHERE lane = ?)", (lane, lane))
        return runs[0] if runs else None

    def _series(self, lane: str) -> list[SeriesRow]:
        # read once per triage and lane: compare, record, view and the verdicts each walk them
        if lane not in self._series_cache:
            self._series_cache[lane] = self.db.execute(
                "SELECT row, nodeid, outcomes, durations, signature FROM series WHERE lane = ?", (lane,)
            ).fetchall()
        return self._series_cache[lane]

    # --- writing ----------------------------------------------------------------------

    def commit(self) -> None:
        """Keep what :meth:`record` wrote with ``commit=False``."""
        self.db.commit()

    def record(
        self,
        triage: Triage,
        label: str,
        *,
        keep: int = KEEP_RUNS,
        source: SourceInfo | None = None,
        commit: bool = True,
        maps: Sequence[testmap.TestMap] = (),
    ) -> int:
        """Add this triage as the newest run of its lane; drop the lane's runs beyond the newest ``keep``.

        ``maps``: the rows' test maps (#34), kept in the lane by row and commit.

        ``commit=False``: kept only by a later :meth:`commit`; closing without one forgets
        it (#30: a triage that fails after recording its run adds none).
        """
        keep = max(keep, 1)
        lane = lane_of(source)
        identity = run_identity(triage, source)
        self.kept_before = _recorded_before(self.lane_runs(lane), identity)
        if self.kept_before is not None:  # its records again, after a later run: kept as they are
            self._recorded = self.kept_before.id
            return self.kept_before.id
        with self.db if commit else contextlib.nullcontext(self.db):
            self._take_over_unlaned(lane)
            self._replace_same_run(lane, source, identity)
            cur = self.db.execute(
                "INSERT INTO runs (created, label, lane, source, identity) VALUES (?, ?, ?, ?, ?)",
                (_now(), label, lane, None if source is None else json.dumps(source), identity),
            )
            run_id = int(cur.lastrowid or 0)
            ids = [r.id for r in self.lane_runs(lane)]
            failed_before = self._failing_last(lane)
            rows = self._next_series(triage, lane, min(len(ids), keep))
            self.db.execute("DELETE FROM series WHERE lane = ?", (lane,))
            self.db.executemany(
                "INSERT INTO series (lane, row, nodeid, outcomes, durations, signature) VALUES (?, ?, ?, ?, ?, ?)",
                ((lane, *r) for r in rows),
            )
            self._series_cache[lane] = rows
            self._insert_rows_and_crashes(triage, run_id)
            self._check_selection(triage, source, lane, run_id, failed_before)
            self._store_maps(lane, maps)
            self.db.execute("DELETE FROM runs WHERE lane = ? AND id < ?", (lane, ids[-keep:][0]))
            self._forget_old_pull_requests()
            self.db.execute("DELETE FROM row_runs WHERE run_id NOT IN (SELECT id FROM runs)")
            self.db.execute("DELETE FROM crash_seen WHERE run_id NOT IN (SELECT id FROM runs)")
            misses.forget(self.db)
        self._recorded = run_id
        return run_id

    def _failing_last(self, lane: str) -> dict[str, set[str]]:
        """Row -> the tests the lane's newest run failed (before this one is recorded)."""
        found: dict[str, set[str]] = {}
        for row, nodeid, outcomes, _, _ in self._series(lane):
            if outcomes[-1:] in FAIL_CODES:
                found.setdefault(row, set()).add(nodeid)
        return found

    def _check_selection(
        self, triage: Triage, source: SourceInfo | None, lane: str, run_id: int, failed_before: dict[str, set[str]]
    ) -> None:
        """#40: a pull request's run keeps what its selection left out; a run of a branch checks
        the pull requests based on it that ran before it (report/misses.py)."""
        if source is not None and is_pull_request(source):
            base = base_lane(source) or ""
            misses.record_pull_request(self.db, triage, lane=lane, base=base, pr=source["pull_request"], run_id=run_id)
        elif lane.startswith("branch:"):
            misses.check_base_run(self.db, triage, base=lane, run_id=run_id, failed_before=failed_before)

    def backstop(self, triage: Triage, window: int = DEFAULT_WINDOW) -> misses.Backstop | None:
        """#40: what the run :meth:`record` recorded found of the selections before it (a
        branch's run), with each row's miss rate; None for any other run."""
        run = self._runs("WHERE id = ?", (self._recorded,)) if self._recorded is not None else []
        if not run or not run[0].lane.startswith("branch:"):
            return None
        return misses.backstop(self.db, triage, base=run[0].lane, run_id=run[0].id, window=window)

    def misses_of(self, lane: str) -> list[misses.Miss]:
        """#40: what full runs of the base found this pull request's selection missed."""
        return misses.of_lane(self.db, lane)

    def miss_rate(self, row: str, base: str, window: int = DEFAULT_WINDOW) -> misses.MissRate:
        """#40: the share of ``base``'s newest ``window`` pull requests checked on ``row`` whose
        selection missed a failing test."""
        return misses.miss_rate(self.db, row, base, window)

    def _take_over_unlaned(self, lane: str) -> None:
        if lane.startswith(("branch:", "tag:")) and self._last_of(lane) is None and self._last_of(""):
            # runs recorded before lanes (or without a source) were one branch's history:
            # the first branch recorded after them takes them on
            self.db.execute("UPDATE runs SET lane = ? WHERE lane = ''", (lane,))
            self.db.execute("UPDATE series SET lane = ? WHERE lane = ''", (lane,))
            self.db.execute("UPDATE test_maps SET lane = ? WHERE lane = ''", (lane,))
            self._series_cache.pop("", None)
            self._series_cache.pop(lane, None)

    def _replace_same_run(self, lane: str, source: SourceInfo | None, identity: str | None) -> None:
        last = self._last_of(lane)
        if last is not None and _again(last, source, identity):
            # the same run again (a re-run of its jobs, or its records triaged again, #41): it
            # replaces what was recorded for it, so that no run counts twice toward flips and rates
            for table, column in (("runs", "id"), ("row_runs", "run_id"), ("crash_seen", "run_id")):
                self.db.execute(f"DELETE FROM {table} WHERE {column} = ?", (last.id,))  # noqa: S608 - constants
            self._series_cache[lane] = [
                (row, nodeid, outcomes[:-1], blob[:-_F32], sig)
                for row, nodeid, outcomes, blob, sig in self._series(lane)
                if len(blob) == _F32 * len(outcomes)
            ]

    def _next_series(self, triage: Triage, lane: str, length: int) -> list[SeriesRow]:
        """The lane's series with this triage's outcome and duration added, ``length`` runs long."""
        now: dict[tuple[str, str], tuple[str, float]] = {
            (row, storable_text(t["nodeid"])): (CODE.get(o, ABSENT), t["durations"].get(row, math.inf))
            for t in triage["tests"]
            for row, o in t["outcomes"].items()
        }
        failed = signatures(triage)
        rows: list[SeriesRow] = []
        for row, nodeid, outcomes, blob, sig in self._series(lane):
            code, duration = now.pop((row, nodeid), (ABSENT, math.inf))
            text, durations = _align(outcomes, blob, length - 1)
            if (text + code).strip(ABSENT):  # a test absent from every kept run is forgotten
                rows.append(
                    (row, nodeid, text + code, durations + struct.pack("<f", duration), failed.get((row, nodeid), sig))
                )
        for (row, nodeid), (code, duration) in now.items():
            rows.append(
                (
                    row,
                    nodeid,
                    ABSENT * (length - 1) + code,
                    _NO_DURATION * (length - 1) + struct.pack("<f", duration),
                    failed.get((row, nodeid)),
                )
            )
        return rows

    def _insert_rows_and_crashes(self, triage: Triage, run_id: int) -> None:
        self.db.executemany(
            _INSERT_ROW_RUN,
            (
                (
                    run_id,
                    r["row"],
                    r["label"],
                    r["duration"],
                    json.dumps(r["facets"]),
                    r["selection"],
                    *(r["counts"].get(b, 0) for b in HISTORY_BUCKETS),
                )
                for r in triage["rows"]
            ),
        )
        self.db.executemany(
            "INSERT INTO crash_seen (run_id, fingerprint, row, classification, headline, issue, nodeid) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    run_id,
                    c["fingerprint"],
                    row,
                    c["classification"],
                    storable_text(c["headline"]),
                    c["issue"],
                    storable_text(nodeid),
                )
                for c in triage["crashes"]
                for row, nodeid in c["seen"]
            ),
        )

    def _forget_old_pull_requests(self) -> None:
        lanes = [
            str(r[0])
            for r in self.db.execute(
                "SELECT lane FROM runs WHERE lane LIKE 'pr:%' GROUP BY lane ORDER BY MAX(id) DESC LIMIT -1 OFFSET ?",
                (KEEP_PR_LANES,),
            )
        ]
        for lane in lanes:
            self.db.execute("DELETE FROM runs WHERE lane = ?", (lane,))
            self.db.execute("DELETE FROM series WHERE lane = ?", (lane,))
            self.db.execute("DELETE FROM test_maps WHERE lane = ?", (lane,))
            self._series_cache.pop(lane, None)

    def _store_maps(self, lane: str, maps: Sequence[testmap.TestMap]) -> None:
        """#34: each map as the newest of its lane and row (the same commit again replaces
        its own); the newest ``KEEP_MAPS`` of each kept."""
        for m in maps:
            (stored,) = self.db.execute("SELECT COALESCE(MAX(stored), 0) + 1 FROM test_maps").fetchone()
            # each file once, tests by index, compressed: a map of thousands of tests stays small
            blob = zlib.compress(json.dumps(testmap.to_json(m), separators=(",", ":")).encode("ascii"))
            self.db.execute(
                "INSERT OR REPLACE INTO test_maps (lane, row, commit_id, stored, map) VALUES (?, ?, ?, ?, ?)",
                (lane, m.row, m.commit or "", int(stored), blob),
            )
            self.db.execute(
                "DELETE FROM test_maps WHERE lane = ? AND row = ? AND stored NOT IN "
                "(SELECT stored FROM test_maps WHERE lane = ? AND row = ? ORDER BY stored DESC LIMIT ?)",
                (lane, m.row, lane, m.row, KEEP_MAPS),
            )

    def latest_map(self, row: str, lane: str) -> testmap.TestMap | None:
        """#34: the newest test map of ``row`` kept in ``lane``; None when there is none (or
        it cannot be read: a map that cannot be read is no map, and every test runs)."""
        found = self.db.execute(
            "SELECT map FROM test_maps WHERE lane = ? AND row = ? ORDER BY stored DESC LIMIT 1", (lane, row)
        ).fetchone()
        if found is None:
            return None
        try:
            data = json.loads(zlib.decompress(found[0]))
            return testmap.from_json(data, f"the history's test map of row {row!r} in {lane}")
        except (zlib.error, TypeError, ValueError, ResultsError):
            return None


class History(Store):
    """The store and its queries: what changed, the views over many runs, a pull request's
    base, and a crash's observations by environment. Open with :meth:`open`."""

    def compare(
        self, triage: Triage, unreadable: frozenset[str] = frozenset(), *, source: SourceInfo | None = None
    ) -> Changes:
        """This triage against the last one of its lane (a pull request's first: its base's last).

        Rows in ``unreadable`` are not called gone.
        """
        lane = lane_of(source)
        runs = self.lane_runs(lane)
        identity = run_identity(triage, source)
        back = 1  # the previous run's place from the end of each series
        if runs and _again(runs[-1], source, identity):
            back = 2  # the last run again: it is replaced, the one before is the previous (#41)
        elif (earlier := _recorded_before(runs, identity)) is not None:
            back = len(runs) - runs.index(earlier) + 1  # an older run again: the run before it (#41)
        last = runs[-back] if len(runs) >= back else None
        against = lane
        base = base_lane(source) if is_pull_request(source) else None
        if last is None and base is not None:
            last, against, back = self._last_of(base), base, 1
        if last is None:
            return no_changes()
        run_id = last.id
        changes = no_changes(last.label)
        rows_before = {str(r[0]) for r in self.db.execute("SELECT row FROM row_runs WHERE run_id = ?", (run_id,))}
        rows_now = set(triage["devices"])
        changes["rows_added"] = sorted(rows_now - rows_before)
        changes["rows_gone"] = sorted(rows_before - rows_now - unreadable)
        lane_runs = self.lane_runs(against)
        backs = self._like_with_like(triage, lane_runs[: len(lane_runs) - back + 1], len(lane_runs))
        before: dict[tuple[str, str], str] = {}
        for row, nodeid, outcomes, _, _ in self._series(against):
            row_back = backs.get(row)
            ran = outcomes[: len(outcomes) - row_back + 1] if row_back else ""
            # #34: a test selection left out, or an interrupted run never started (#41), is
            # compared with the outcome it last ran with
            code = ran.rstrip(NOT_RAN_CODES)[-1:] or ran[-1:]
            if code and code != ABSENT:
                before[(row, nodeid)] = OUTCOME_OF.get(code, "")
        seen_now: set[tuple[str, str]] = set()
        for t in triage["tests"]:
            for row, outcome in t["outcomes"].items():
                if row not in rows_before or row not in backs:
                    # a row not run last time is reported as added; one that never ran this
                    # selection before has nothing to compare with (#30)
                    continue
                key = (row, storable_text(t["nodeid"]))  # as stored (SQLite takes UTF-8 only)
                seen_now.add(key)
                if outcome in DESELECTED_OUTCOMES:
                    continue  # #34: neither new, nor fixed, nor gone: it did not run
                prev = before.get(key)
                if outcome == "not_run":  # #41: its run ended before it (interrupted, a crash)
                    if prev is not None and prev != "not_run":
                        changes["not_run"].append([t["nodeid"], row])
                    continue
                if prev is None:
                    changes["appeared"].append([t["nodeid"], row])
                    continue
                failing = outcome in FAILING_OUTCOMES
                was_failing = prev in FAILING_OUTCOMES
                if failing and not was_failing:
                    changes["new_failures"].append([t["nodeid"], row])
                elif was_failing and outcome == "passed":
                    changes["fixed"].append([t["nodeid"], row])
        changes["disappeared"] = sorted(
            [n, r] for (r, n) in before if r in rows_now and r in rows_before and (r, n) not in seen_now
        )
        # #42: crashes like tests, each row against the newest run of its own selection
        same_run = {row: lane_runs[len(lane_runs) - b].id for row, b in backs.items()}
        self._compare_crashes(triage, changes, same_run, run_id, rows_now)
        return changes

    def _compare_crashes(
        self, triage: Triage, changes: Changes, same_run: Mapping[str, int], last: int, rows_now: Collection[str]
    ) -> None:
        """New, newly flaky and stopped crashes: each row's against the run ``same_run`` names
        for it (the newest of its selection); a row that never ran its selection has nothing
        to compare with. ``last``: the previous run, whose crashes the first layout recorded
        without their row."""
        wanted = {(run, row) for row, run in same_run.items()} | {(last, "")}
        crashes_before: dict[str, tuple[str, str, set[str]]] = {}
        runs = sorted({run for run, _ in wanted})
        marks = ",".join("?" * len(runs))
        for fp, cls_, headline, row, run in self.db.execute(
            f"SELECT fingerprint, classification, headline, row, run_id FROM crash_seen WHERE run_id IN ({marks})",  # noqa: S608 - placeholders only
            runs,
        ):
            if (run, row) not in wanted:
                continue
            prev_cls, _, rows = crashes_before.setdefault(fp, (cls_, headline, set()))
            rows.add(row)
            crashes_before[fp] = ("flaky" if "flaky" in (cls_, prev_cls) else cls_, headline, rows)
        crashes_now = {c["fingerprint"] for c in triage["crashes"]}
        for c in triage["crashes"]:
            compared = any(row in same_run for row in c["rows"])
            if c["fingerprint"] not in crashes_before and compared:
                changes["new_crashes"].append(c["fingerprint"])
            if (
                compared
                and c["classification"] == "flaky"
                and crashes_before.get(c["fingerprint"], ("",))[0] != "flaky"
            ):
                changes["newly_flaky"].append(c["fingerprint"])
        for fp, (_, headline, rows) in sorted(crashes_before.items()):
            # rows == {""}: recorded by the first layout, which did not keep the row
            ran_again = rows & set(rows_now) or rows == {""}
            if fp not in crashes_now and ran_again:
                changes["stopped_crashes"].append([fp, headline])

    def _like_with_like(self, triage: Triage, candidates: Sequence[LaneRun], length: int) -> dict[str, int]:
        """Per row of ``triage``, the place from the end of its lane's series (``length``
        runs long) of the newest of ``candidates`` that ran the row with the same selection
        (#30: a subset run is compared with the same subset, a whole row with a whole row)."""
        place = {run.id: length - k for k, run in enumerate(candidates)}
        # the newest run of the row's selection: the least place from the end
        return {row: min(place[i] for i in ids) for row, ids in self._of_selection(triage, place).items() if ids}

    def _of_selection(self, triage: Triage, run_ids: Collection[int]) -> dict[str, set[int]]:
        """Per row of ``triage``, those of ``run_ids`` that ran it with its selection (#30)."""
        wanted = {r["row"]: r["selection"] for r in triage["rows"]}
        same: dict[str, set[int]] = {row: set() for row in wanted}
        if not run_ids:
            return same
        for run_id, row, selection in self.db.execute(
            "SELECT run_id, row, selection FROM row_runs WHERE run_id >= ? ORDER BY run_id",
            (min(run_ids),),
        ):
            if run_id in run_ids and row in wanted and selection == wanted[row]:
                same[str(row)].add(int(run_id))
        return same

    # --- views ------------------------------------------------------------------------

    def view(self, triage: Triage, window: int = DEFAULT_WINDOW) -> HistoryView:
        """Trends, flaky tests, slowdowns and crash history over the newest ``window`` runs.

        Call after :meth:`record`: the newest run is this triage. A pull request's view is
        its base's runs followed by its own; its flaky tests and slowdowns are its base's.
        """
        window = max(window, 1)
        newest = self._runs("WHERE id = ?", (self._recorded,)) if self._recorded else []
        if not newest:
            newest = self._runs("WHERE id = (SELECT MAX(id) FROM runs)")
        if not newest:
            return HistoryView(
                window=window,
                runs=[],
                trends={},
                flaky=[],
                slower=[],
                crashes=[],
                lane="",
                flaky_lane="",
                sources=[],
            )
        this = newest[0]
        base = base_lane(this.source) if is_pull_request(this.source) else None
        own = self.lane_runs(this.lane)
        flaky_lane = base or this.lane
        flaky_runs = self.lane_runs(flaky_lane)[-window:] if base else own[-window:]
        shown = sorted([*flaky_runs, *own], key=lambda r: r.id)[-window:] if base else own[-window:]
        labels = [r.label for r in flaky_runs]
        current = {storable_text(t["nodeid"]): t for t in triage["tests"]}
        # #30: a row's flips, slowdowns and trend read the runs of its selection only, as compare does
        same = self._of_selection(triage, {r.id for r in [*flaky_runs, *shown]})
        masks = {row: [r.id in ids for r in flaky_runs] for row, ids in same.items()}
        kept = {row: None if all(mask) else mask for row, mask in masks.items()}  # None, the usual: every run
        flaky: list[FlakyTest] = []
        slower: list[SlowTest] = []
        for row, nodeid, outcomes, blob, _ in self._series(flaky_lane):
            text, durations = _only(*_align(outcomes, blob, len(flaky_runs)), kept.get(row))
            kinds = set(text)
            if kinds & PASS_CODES and kinds & FAIL_CODES:
                found = _flaky(text, labels, nodeid, row)
                if found is not None:
                    found["current"] = current[nodeid]["outcomes"].get(row) if nodeid in current else None
                    flaky.append(found)
            if base is not None:
                # a pull request's durations against its base's: the base's runs, then this one
                test = current.get(nodeid)
                if test is None or test["outcomes"].get(row) != "passed":
                    continue
                text += "P"
                durations += struct.pack("<f", test["durations"].get(row, math.inf))
            if text[-1] == "P" and struct.unpack_from("<f", durations, len(durations) - _F32)[0] >= SLOWER_FLOOR_S:
                slow = _slower(text, durations, nodeid, row)
                if slow is not None:
                    slower.append(slow)
        flaky.sort(key=lambda f: (-f["flip_rate"], -f["flips"], f["nodeid"], f["row"]))
        slower.sort(key=lambda s: (-(s["ratio"] or 0.0), s["nodeid"], s["row"]))
        # #41: the records of a run older than its lane's newest, triaged again: its trends and
        # crashes as they stood at it (a crash seen then is current, its latest run is its own)
        shown = [r for r in shown if r.id <= this.id]
        return HistoryView(
            window=window,
            runs=[r.label for r in shown],
            trends=self._trends({r.id: (r.label, r.created) for r in shown}, same),
            flaky=flaky,
            slower=slower[:SLOWER_LISTED],
            crashes=self._crashes(this.id, set(triage["devices"]), {r.id for r in shown}),
            lane=this.lane,
            flaky_lane=flaky_lane,
            sources=[_run_source(r) for r in shown],
        )

    def _trends(
        self, runs: Mapping[int, tuple[str, str]], same: Mapping[str, Collection[int]]
    ) -> dict[str, list[TrendPoint]]:
        """Each row's counts over ``runs``; a row of this triage over the runs of its selection
        (``same``), one it did not run over all of them."""
        trends: dict[str, list[TrendPoint]] = {}
        if not runs:
            return trends
        for run_id, row, label, duration, *counts in self.db.execute(_SELECT_TRENDS, (min(runs),)):
            if run_id not in runs:
                continue  # another lane's run
            if row in same and run_id not in same[row]:
                continue  # a run of another selection of the row (#30)
            # every bucket, as the one fold gives them; #34: deselected tests are never counted
            counted: dict[str, int] = dict.fromkeys(BUCKETS, 0)
            counted.update(zip(HISTORY_BUCKETS, map(int, counts), strict=True))
            trends.setdefault(row, []).append(
                TrendPoint(
                    run_id=int(run_id),
                    run=runs[run_id][0],
                    created=runs[run_id][1],
                    label=label,
                    counts=counted,
                    duration=duration,
                )
            )
        return trends

    def _crashes(self, current: int, rows_now: set[str], shown: Collection[int]) -> list[CrashHistory]:
        labels = dict(self.db.execute("SELECT id, label FROM runs"))
        selection = {
            (int(r), str(row)): sel for r, row, sel in self.db.execute("SELECT run_id, row, selection FROM row_runs")
        }
        seen: dict[str, dict[str, object]] = {}
        last_on: dict[str, dict[str, int]] = {}  # fingerprint -> row -> the last run it was seen in there
        for run_id, fp, row, classification, headline, issue in self.db.execute(
            "SELECT run_id, fingerprint, row, classification, headline, issue FROM crash_seen ORDER BY run_id"
        ):
            if run_id not in shown:
                continue
            e = seen.setdefault(fp, {"first": run_id, "runs": set(), "rows": set(), "flaky": False})
            e["last"] = run_id
            e["headline"] = headline
            e["issue"] = issue or e.get("issue")
            e["runs"].add(run_id)  # type: ignore[attr-defined]
            if row:
                e["rows"].add(row)  # type: ignore[attr-defined]
                last_on.setdefault(fp, {})[row] = run_id
            e["flaky"] = bool(e["flaky"]) or classification == "flaky"

        def ran_again(fp: str) -> bool:
            """#42: whether a later run of a row ran the selection the crash was last seen in there."""
            return any(
                r > last and selection.get((r, row), "") == selection.get((last, row), "")
                for row, last in last_on.get(fp, {}).items()
                for r in shown
                if (r, row) in selection
            )

        out: list[CrashHistory] = []
        for fp, e in seen.items():
            rows: set[str] = e["rows"]  # type: ignore[assignment]
            if e["last"] == current:
                state = "current"
            elif rows and not rows & rows_now:
                state = "row not run"
            elif rows and not ran_again(fp):
                state = "selection not run"  # its rows ran since, but never what it was seen in
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
        order = {"current": 0, "stopped": 1, "selection not run": 2, "row not run": 3}
        return sorted(out, key=lambda c: (order[c["state"]], -c["runs"], c["fingerprint"]))

    def base(self, lane: str, window: int = DEFAULT_WINDOW) -> Base:
        """The newest ``window`` runs of ``lane``: what a pull request's verdicts compare with."""
        runs = self.lane_runs(lane)[-max(window, 1) :]
        position = {r.id: i for i, r in enumerate(runs)}
        out = Base(lane=lane, runs=runs, rows={})
        if not runs:
            return out
        first = runs[0].id
        for run_id, row, label in self.db.execute(
            "SELECT run_id, row, label FROM row_runs WHERE run_id >= ?", (first,)
        ):
            if run_id in position:
                out.rows.setdefault(row, [None] * len(runs))[position[run_id]] = str(label)
        for row, nodeid, outcomes, blob, sig in self._series(lane):
            out.series[(row, nodeid)] = (_align(outcomes, blob, len(runs))[0], sig)
        for run_id, fp, row in self.db.execute(
            "SELECT DISTINCT run_id, fingerprint, row FROM crash_seen WHERE run_id >= ? ORDER BY run_id", (first,)
        ):
            if run_id in position:
                out.crashes.setdefault(fp, {}).setdefault(row, []).append(position[run_id])
        return out

    def observations(
        self,
        nodeids: Mapping[str, Collection[str]],
        *,
        include: int | None = None,
        skip: SourceInfo | None = None,
    ) -> dict[str, list[Observation]]:
        """Per fingerprint, a crash or a pass per run and row of its tests (the nodeids named
        here and those it crashed before), with the row's facets in that run.

        Runs of branches and tags only (a pull request's own crash may be its change's),
        and the run ``include`` (this triage's) whatever its lane; never a run of the same
        source as ``skip`` (its records are counted by the caller).
        """
        runs = self._runs()
        kept = {
            r.id: r for r in runs if (not r.lane.startswith("pr:") or r.id == include) and not _same_run(r.source, skip)
        }
        by_lane: dict[str, list[LaneRun]] = {}
        for r in runs:
            by_lane.setdefault(r.lane, []).append(r)
        envs: dict[tuple[int, str], dict[str, str]] = {
            (int(run_id), str(row)): _facets_of(env)
            for run_id, row, env in self.db.execute("SELECT run_id, row, env FROM row_runs")
            if run_id in kept
        }
        wanted = {fp: {storable_text(n) for n in ids} for fp, ids in nodeids.items()}
        crashed: dict[str, set[tuple[int, str]]] = {fp: set() for fp in wanted}
        marks = ", ".join("?" for _ in wanted)
        if wanted:
            for run_id, fp, row, nodeid in self.db.execute(
                f"SELECT run_id, fingerprint, row, nodeid FROM crash_seen WHERE fingerprint IN ({marks})",  # noqa: S608
                tuple(wanted),
            ):
                if run_id in kept:
                    crashed[fp].add((int(run_id), str(row)))
                    if nodeid:
                        wanted[fp].add(str(nodeid))
        every = set().union(*wanted.values()) if wanted else set()
        passed: dict[str, set[tuple[int, str]]] = {}  # nodeid -> (run, row) where it passed
        if every:
            for lane, row, nodeid, outcomes, blob in self.db.execute(
                "SELECT lane, row, nodeid, outcomes, durations FROM series"
            ):
                if nodeid not in every:
                    continue
                lane_runs = by_lane.get(lane, [])
                text = _align(outcomes, blob, len(lane_runs))[0]
                hits = passed.setdefault(nodeid, set())
                for r, code in zip(lane_runs, text, strict=True):
                    if code == "P" and r.id in kept:
                        hits.add((r.id, str(row)))
        out: dict[str, list[Observation]] = {}
        for fp, ids in wanted.items():
            crash_runs = crashed[fp]
            pass_runs = set().union(*(passed.get(n, set()) for n in ids)) - crash_runs if ids else set()
            out[fp] = [
                Observation(row=row, facets=envs.get((run_id, row), {}), crashed=hit)
                for hit, group in ((True, crash_runs), (False, pass_runs))
                for run_id, row in sorted(group)
            ]
        return out


def _same_run(a: SourceInfo | None, b: SourceInfo | None, *, attempt: bool = True) -> bool:
    """Runs of one CI run (of one attempt, unless ``attempt`` is False)."""
    if a is None or b is None or not b.get("run_id"):
        return False
    keys = ("commit", "run_id", "repository", *(("run_attempt",) if attempt else ()))
    return all(a.get(k) == b.get(k) for k in keys)


def _again(last: LaneRun, source: SourceInfo | None, identity: str | None) -> bool:
    """Whether the run being recorded is ``last`` again: a re-run of its CI run, or the same
    records (rows, start times, source) triaged again (#41)."""
    return _same_run(last.source, source, attempt=False) or (identity is not None and identity == last.identity)


def _recorded_before(runs: Sequence[LaneRun], identity: str | None) -> LaneRun | None:
    """The run of these records (``identity``) when one older than the lane's newest holds
    them: its records triaged again after a later run, which must not count twice (#41). A
    re-run of an older CI run's jobs has records of its own, and is recorded as the newest."""
    if identity is None:
        return None
    return next((r for r in runs[:-1] if r.identity == identity), None)


def _run_source(r: LaneRun) -> RunSource:
    return RunSource(
        id=r.id,
        label=r.label,
        lane=r.lane,
        commit=r.source.get("commit") if r.source else None,
        pull_request=r.source.get("pull_request") if r.source else None,
    )


def _check_magic(path: Path) -> None:
    with path.open("rb") as fh:
        if fh.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
            raise sqlite3.DatabaseError("file is not a database")


# the columns every layout's tables had (the first layout's outcomes and crashes too): a
# database with other tables, or these without them, is another program's
_OURS: Mapping[str, frozenset[str]] = {
    "runs": frozenset({"id", "created", "label"}),
    "row_runs": frozenset({"run_id", "row", "label"}),
    "series": frozenset({"row", "nodeid", "outcomes", "durations"}),
    "crash_seen": frozenset({"run_id", "fingerprint", "row", "classification", "headline", "issue"}),
    "outcomes": frozenset({"run_id", "row", "nodeid", "outcome"}),
    "crashes": frozenset({"run_id", "fingerprint", "classification"}),
    "test_maps": frozenset({"lane", "row", "commit_id", "stored", "map"}),
    **misses.COLUMNS,
}


def _check_ours(db: sqlite3.Connection, tables: Collection[str]) -> None:
    """Raise ``sqlite3.DatabaseError`` for a database of another schema (#30): it is set
    aside as a damaged one is, never written into, nor a reason to stop."""
    for table in sorted(tables):
        if table.startswith("sqlite_"):
            continue
        if table not in _OURS:
            raise sqlite3.DatabaseError(f"not a device-matrix history (it has a table {table!r})")
        have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
        if missing := _OURS[table] - have:
            raise sqlite3.DatabaseError(
                f"not a device-matrix history (its table {table!r} has no {', '.join(sorted(missing))})"
            )


def _upgrade(db: sqlite3.Connection, version: int) -> None:
    """Bring a history of ``version`` to this one, in place (in one transaction)."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    _check_ours(db, tables)
    with db:
        for table, columns in _ADDED_COLUMNS.items():
            if table not in tables:
                continue
            have = {r[1] for r in db.execute(f"PRAGMA table_info({table})")}
            for name, decl in columns:
                if name not in have:
                    db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
        if "series" in tables and "lane" not in {r[1] for r in db.execute("PRAGMA table_info(series)")}:
            db.executescript(_SERIES_FROM_2)
        db.executescript(SCHEMA)
        if version == 0 and "outcomes" in tables:
            _migrate_from_0(db)
        db.execute(f"PRAGMA user_version = {VERSION}")


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


def _only(text: str, blob: bytes, kept: Sequence[bool] | None) -> tuple[str, bytes]:
    """An aligned series with the runs not ``kept`` (another selection's, #30) read as absent;
    ``kept`` None: every run."""
    if kept is None:
        return text, blob
    codes = "".join(c if keep else ABSENT for c, keep in zip(text, kept, strict=True))
    durations = b"".join(blob[k * _F32 : (k + 1) * _F32] if keep else _NO_DURATION for k, keep in enumerate(kept))
    return codes, durations


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
        "INSERT OR REPLACE INTO series (lane, row, nodeid, outcomes, durations) VALUES ('', ?, ?, ?, ?)",
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
