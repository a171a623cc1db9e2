"""#40: the backstop of test selection: a full run of the base branch finds what a pull
request's selection left out that fails, and the history counts it.

Selection is a prediction, and a wrong one is a false green on a pull request. As the big
CI systems do, every run of the base branch runs every test; this module compares what
such a run fails with what the pull requests based on that branch left out. The history
keeps, per pull request's lane and row, the tests its newest run left out with why
(``pr_rows``). The first full run of the base after that run checks it: each test the pull
request left out that fails now, where the base's run before it did not fail it, is a
*miss* (``misses``), named in that triage as "missed by selection on #12 (deselected:
covers none of the 3 changed files)". Which pull request's change was merged is not known
offline: each one the base run checks that left the test out is named.

A row's *miss rate* is the share of the last ``window`` pull requests checked on it whose
selection missed a test. Above ``select_max_miss_rate`` (configuration), ``run --select
changed`` runs every test of the row and says why; the pull requests that run in full are
checked too, and miss nothing, so the rate falls again.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any, TypedDict

from device_matrix.records.outcomes import BUCKET_OF, FAILING_BUCKETS

TABLES = """
CREATE TABLE IF NOT EXISTS pr_rows (lane TEXT NOT NULL, row TEXT NOT NULL, base TEXT NOT NULL, run_id INTEGER NOT NULL,
    pr INTEGER, left_out TEXT NOT NULL, checked_by INTEGER, missed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (lane, row)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS misses (run_id INTEGER NOT NULL, base TEXT NOT NULL, row TEXT NOT NULL,
    nodeid TEXT NOT NULL, lane TEXT NOT NULL, pr INTEGER, reason TEXT NOT NULL);
"""
COLUMNS: Mapping[str, frozenset[str]] = {
    "pr_rows": frozenset({"lane", "row", "base", "run_id", "pr", "left_out", "checked_by", "missed"}),
    "misses": frozenset({"run_id", "base", "row", "nodeid", "lane", "pr", "reason"}),
}
KEEP_CHECKED = 500  # checked pull requests' rows kept per base: the window reads the newest


class Miss(TypedDict):
    row: str
    nodeid: str
    pr: int | None
    lane: str
    reason: str  # why the pull request's selection left it out


class MissRate(TypedDict):
    row: str
    missed: int  # pull requests whose selection missed a failing test
    checked: int  # pull requests a full run of the base checked, the newest ``window``
    window: int
    rate: float


class Backstop(TypedDict):
    """What a triage of a base branch's full run found of the selections before it."""

    misses: list[Miss]
    rates: list[MissRate]


def missed_words(m: Miss) -> str:
    """ "missed by selection on #12 (deselected: covers none of the 3 changed files)"."""
    where = f"#{m['pr']}" if m["pr"] is not None else m["lane"]
    return f"missed by selection on {where} (deselected: {m['reason']})"


def rate_words(r: MissRate) -> str:
    """ "selection missed a failing test on 1 of 4 pull requests (25%), the last 30 checked"."""
    return (
        f"selection missed a failing test on {r['missed']:,} of {r['checked']:,} pull requests "
        f"({r['rate']:.0%}), the last {r['window']:,} checked"
    )


def _outcome(test: Mapping[str, Any], row: str) -> str | None:
    value = test.get("outcomes", {}).get(row)
    return value if isinstance(value, str) else None


def record_pull_request(
    db: sqlite3.Connection, triage: Mapping[str, Any], *, lane: str, base: str, pr: int | None, run_id: int
) -> None:
    """Keep what this pull request's run left out on each of its rows, with why (its newest run's)."""
    for r in triage["rows"]:
        row = r["row"]
        left = {
            t["nodeid"]: str(t.get("causes", {}).get(row, ""))
            for t in triage["tests"]
            if _outcome(t, row) == "deselected"
        }
        db.execute(
            "INSERT OR REPLACE INTO pr_rows (lane, row, base, run_id, pr, left_out, checked_by, missed) "
            "VALUES (?, ?, ?, ?, ?, ?, NULL, 0)",
            (lane, row, base, run_id, pr, json.dumps(left)),
        )


def check_base_run(
    db: sqlite3.Connection, triage: Mapping[str, Any], *, base: str, run_id: int, failed_before: Mapping[str, set[str]]
) -> list[Miss]:
    """The misses a full run of ``base`` finds (recorded, and returned): on each row it ran
    in full, the tests it fails that the pull requests it checks left out (``failed_before``:
    row -> the tests the base's previous run failed: not a miss, they failed already)."""
    found: list[Miss] = []
    for r in triage["rows"]:
        row = r["row"]
        chosen = r.get("test_selection")
        if chosen is not None and chosen.get("mode") == "changed" and chosen.get("full_reason") is None:
            continue  # a run that selected: it checks nothing
        failing = {
            t["nodeid"]
            for t in triage["tests"]
            if BUCKET_OF.get(_outcome(t, row) or "") in FAILING_BUCKETS
            and t["nodeid"] not in failed_before.get(row, set())
        }
        pending = db.execute(
            "SELECT lane, pr, left_out FROM pr_rows WHERE base = ? AND row = ? AND checked_by IS NULL AND run_id < ?",
            (base, row, run_id),
        ).fetchall()
        for lane, pr, text in pending:
            left = json.loads(text)
            mine = [Miss(row=row, nodeid=n, pr=pr, lane=lane, reason=left[n]) for n in sorted(failing & set(left))]
            found += mine
            db.execute(
                "UPDATE pr_rows SET checked_by = ?, missed = ? WHERE lane = ? AND row = ?",
                (run_id, len(mine), lane, row),
            )
        db.execute(
            "DELETE FROM pr_rows WHERE base = ? AND row = ? AND checked_by IS NOT NULL AND run_id NOT IN "
            "(SELECT run_id FROM pr_rows WHERE base = ? AND row = ? AND checked_by IS NOT NULL "
            "ORDER BY run_id DESC LIMIT ?)",
            (base, row, base, row, KEEP_CHECKED),
        )
    db.executemany(
        "INSERT INTO misses (run_id, base, row, nodeid, lane, pr, reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
        ((run_id, base, m["row"], m["nodeid"], m["lane"], m["pr"], m["reason"]) for m in found),
    )
    return found


def miss_rate(db: sqlite3.Connection, row: str, base: str, window: int) -> MissRate:
    """The share of the newest ``window`` pull requests of ``base`` checked on ``row`` whose
    selection missed a failing test."""
    rows = db.execute(
        "SELECT missed FROM pr_rows WHERE base = ? AND row = ? AND checked_by IS NOT NULL "
        "ORDER BY checked_by DESC, run_id DESC LIMIT ?",
        (base, row, window),
    ).fetchall()
    missed = sum(1 for (n,) in rows if n)
    return MissRate(row=row, missed=missed, checked=len(rows), window=window, rate=missed / len(rows) if rows else 0.0)


def backstop(db: sqlite3.Connection, triage: Mapping[str, Any], *, base: str, run_id: int, window: int) -> Backstop:
    """What a triage of ``base``'s run shows: the misses it found, each row's miss rate."""
    misses = [
        Miss(row=row, nodeid=nodeid, pr=pr, lane=lane, reason=reason)
        for row, nodeid, lane, pr, reason in db.execute(
            "SELECT row, nodeid, lane, pr, reason FROM misses WHERE run_id = ? AND base = ? ORDER BY row, nodeid, pr",
            (run_id, base),
        )
    ]
    rates = [miss_rate(db, r["row"], base, window) for r in triage["rows"]]
    return Backstop(misses=misses, rates=[r for r in rates if r["checked"]])


def of_lane(db: sqlite3.Connection, lane: str) -> list[Miss]:
    """The misses full runs of the base found of a pull request's lane (its selection left
    out a test the base then failed), each test once (its newest), by row and nodeid."""
    newest: dict[tuple[str, str], Miss] = {}
    for row, nodeid, pr, reason in db.execute(
        "SELECT row, nodeid, pr, reason FROM misses WHERE lane = ? ORDER BY run_id", (lane,)
    ):
        newest[(row, nodeid)] = Miss(row=row, nodeid=nodeid, pr=pr, lane=lane, reason=reason)
    return [newest[k] for k in sorted(newest)]


def forget(db: sqlite3.Connection) -> None:
    """The misses of base runs the history no longer keeps go with them."""
    db.execute("DELETE FROM misses WHERE run_id NOT IN (SELECT id FROM runs)")
