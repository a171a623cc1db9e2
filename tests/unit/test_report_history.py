"""The run history: what changed, trends, flaky tests, slowdowns, crash history, old and damaged files."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from device_matrix.cli import main
from device_matrix.cli.triage import run_triage
from device_matrix.errors import EXIT_RESULTS, EnvironmentProblem, ResultsError
from device_matrix.output import Output
from device_matrix.records.summary import fold
from device_matrix.report import history as history_mod
from device_matrix.report import html, markdown
from device_matrix.report.history import SLOWER_FLOOR_S, History
from device_matrix.report.model import Triage, build, nothing_changed
from tests import records as R


def _triage(records: list[dict[str, Any]], problems: list[tuple[str, str]] | None = None) -> Triage:
    return build(records, problems or [], {})  # type: ignore[arg-type]


def _record_runs(h: History, runs: list[list[dict[str, Any]]], *, keep: int = 50) -> Triage:
    t = _triage(runs[0])
    for i, recs in enumerate(runs, 1):
        t = _triage(recs)
        t["changes"] = h.compare(t)
        h.record(t, f"run {i}", keep=keep)
    return t


def test_a_row_whose_two_crashes_stopped_is_a_change_not_nothing(tmp_path: Path) -> None:
    """Issue 13: "Nothing: same results as last time" after a row with two SIGSEGVs became clean."""
    c1 = R.crash("cpu", "s/t.py::test_a", "aaaa", index=1)
    c2 = R.crash("cpu", "s/t.py::test_b", "bbbb", index=2)
    before = [
        R.record(
            "cpu",
            [
                R.test("s/t.py::test_a", "crashed", crash_id=c1["id"]),
                R.test("s/t.py::test_b", "crashed", crash_id=c2["id"]),
                R.test("s/t.py::test_c"),
            ],
            [c1, c2],
        ),
        R.record("tpu", [R.test("s/t.py::test_c")]),
    ]
    after = [
        R.record("cpu", [R.test("s/t.py::test_a"), R.test("s/t.py::test_b"), R.test("s/t.py::test_d")]),
        R.record("neuron", [R.test("s/t.py::test_c")]),
    ]
    h = History.open(tmp_path / "h.sqlite")
    _record_runs(h, [before])
    now = _triage(after)
    ch = h.compare(now)
    assert ch["previous"] == "run 1"
    assert ch["stopped_crashes"] == [
        ["aaaa", "SIGSEGV in test_a (deterministic)"],
        ["bbbb", "SIGSEGV in test_b (deterministic)"],
    ]
    assert ch["fixed"] == [["s/t.py::test_a", "cpu"], ["s/t.py::test_b", "cpu"]]
    assert ch["appeared"] == [["s/t.py::test_d", "cpu"]]
    assert ch["disappeared"] == [["s/t.py::test_c", "cpu"]]
    assert ch["rows_added"] == ["neuron"] and ch["rows_gone"] == ["tpu"]
    now["changes"] = ch
    md = markdown.render(now)
    assert "Nothing: same results" not in md
    assert "crash stopped: SIGSEGV in test_a (deterministic)" in md
    assert "new row **neuron**" in md and "row **tpu** is gone" in md
    assert "new test on **cpu**: `s/t.py::test_d`" in md and "test gone on **cpu**: `s/t.py::test_c`" in md
    page = html.render(now)
    assert "crash stopped</span> SIGSEGV in test_b (deterministic)" in page
    assert "nothing changed" not in page


def test_an_unreadable_row_is_not_called_gone_and_its_crash_not_stopped(tmp_path: Path) -> None:
    c1 = R.crash("tpu", "s/t.py::test_a", "aaaa")
    h = History.open(tmp_path / "h.sqlite")
    _record_runs(
        h, [[R.record("cpu", [R.test("s/t.py::test_a")]), R.record("tpu", [R.test("s/t.py::test_a", "crashed")], [c1])]]
    )
    now = _triage([R.record("cpu", [R.test("s/t.py::test_a")])], [("tpu", "truncated")])
    ch = h.compare(now, frozenset({"tpu"}))
    assert ch["rows_gone"] == [] and ch["stopped_crashes"] == []
    h.record(now, "run 2")
    view = h.view(now)
    (crash,) = view["crashes"]
    assert crash["state"] == "row not run" and crash["rows"] == ["tpu"]


def test_same_results_say_nothing_changed(tmp_path: Path) -> None:
    def recs() -> list[dict[str, Any]]:  # a run of its own each time, with the same results (#41)
        return [R.record("cpu", [R.test("s/t.py::test_a"), R.test("s/t.py::test_b", "failed")])]

    h = History.open(tmp_path / "h.sqlite")
    _record_runs(h, [recs()])
    t = _triage(recs())
    t["changes"] = h.compare(t)
    assert "Nothing: same results as last time." in markdown.render(t)


def _run(i: int, *, flaky_fail: bool, slow: float) -> list[dict[str, Any]]:
    crashes = [R.crash("cpu", "s/t.py::test_crashy", "cccc")] if i < 3 else []
    return [
        R.record(
            "cpu",
            [
                # fails on every other run: flaky
                R.test("s/t.py::test_flip", "failed" if flaky_fail else "passed", duration=0.2),
                # fails from run 4 on: one flip, a regression, not flaky
                R.test("s/t.py::test_regress", "failed" if i >= 4 else "passed"),
                # skipped on some runs: says nothing about flakiness
                R.test("s/t.py::test_skippy", "skipped" if i % 2 else "passed"),
                R.test("s/t.py::test_slow", duration=slow),
                # 10x slower but milliseconds: under the floor
                R.test("s/t.py::test_ms", duration=0.001 if i < 6 else 0.01),
                # 1.5x slower: under the ratio
                R.test("s/t.py::test_steady", duration=2.0 if i < 6 else 3.0),
                R.test("s/t.py::test_crashy", "crashed" if i < 3 else "passed", crash_id="cpu-1" if i < 3 else None),
            ],
            crashes,
        )
    ]


def test_trends_flaky_tests_slowdowns_and_crash_history(tmp_path: Path) -> None:
    h = History.open(tmp_path / "h.sqlite")
    runs = [_run(i, flaky_fail=bool(i % 2), slow=3 * SLOWER_FLOOR_S if i == 6 else 0.5) for i in range(7)]
    t = _record_runs(h, runs)
    view = h.view(t, window=30)
    assert view["runs"] == [f"run {i}" for i in range(1, 8)]
    # trends: one point per run, the counts of the one fold
    points = view["trends"]["cpu"]
    assert [p["run"] for p in points] == view["runs"]
    for p, recs in zip(points, runs, strict=True):
        assert p["counts"] == fold(recs[0]).counts.buckets()  # type: ignore[arg-type]
        assert p["duration"] == 12.5
    # flaky: only the test that went both ways
    (flaky,) = view["flaky"]
    assert flaky["nodeid"] == "s/t.py::test_flip" and flaky["row"] == "cpu"
    assert flaky["flips"] == 6 and flaky["runs"] == 7 and flaky["flip_rate"] == 1.0
    assert flaky["last_flips"][0] == {"run": "run 7", "before": "failed", "after": "passed"}
    assert len(flaky["last_flips"]) == 5 and flaky["current"] == "passed"
    # slower: 6x its median and over the floor; not the milliseconds test, not the 1.5x one
    (slow,) = view["slower"]
    assert slow["nodeid"] == "s/t.py::test_slow"
    assert slow["median"] == 0.5 and slow["ratio"] == 6.0
    # crash history: first and last seen, count, stopped
    (crash,) = view["crashes"]
    assert crash["fingerprint"] == "cccc" and crash["headline"] == "SIGSEGV in test_crashy (deterministic)"
    assert (crash["first_seen"], crash["last_seen"], crash["runs"]) == ("run 1", "run 3", 3)
    assert crash["state"] == "stopped" and crash["rows"] == ["cpu"]
    t["history"] = view
    md = markdown.render(t)
    assert "## Trends (last 7 of up to 30 runs)" in md
    assert "## Flaky tests (1)" in md and "`s/t.py::test_flip`" in md
    assert "| `s/t.py::test_slow` | cpu | 3.00 s | 0.50 s | 6.0x |" in md
    assert "| SIGSEGV in test_crashy (deterministic) `cccc` | stopped |" in md


def test_window_and_kept_runs(tmp_path: Path) -> None:
    h = History.open(tmp_path / "h.sqlite")
    runs = [_run(i, flaky_fail=bool(i % 2), slow=0.5) for i in range(7)]
    t = _record_runs(h, runs, keep=4)
    assert [r[0] for r in h.db.execute("SELECT label FROM runs ORDER BY id")] == [f"run {i}" for i in range(4, 8)]
    lengths = {len(r[0]) for r in h.db.execute("SELECT outcomes FROM series")}
    assert lengths == {4}
    view = h.view(t, window=3)
    assert view["runs"] == ["run 5", "run 6", "run 7"]
    assert [p["run"] for p in view["trends"]["cpu"]] == view["runs"]
    (flaky,) = view["flaky"]
    assert flaky["runs"] == 3 and flaky["flips"] == 2


def test_sparklines_scale_from_zero() -> None:
    assert markdown.sparkline([0, 1, 2, 4]) == "▁▃▅█"
    assert markdown.sparkline([0, 0]) == "▁▁"
    assert markdown.sparkline([None, 3]) == " █"


FIRST_LAYOUT = """
CREATE TABLE runs (id INTEGER PRIMARY KEY, created TEXT NOT NULL, label TEXT NOT NULL);
CREATE TABLE outcomes (run_id INTEGER NOT NULL, row TEXT NOT NULL, nodeid TEXT NOT NULL, outcome TEXT NOT NULL);
CREATE INDEX outcomes_run ON outcomes(run_id);
CREATE TABLE crashes (run_id INTEGER NOT NULL, fingerprint TEXT NOT NULL, classification TEXT NOT NULL);
CREATE INDEX crashes_run ON crashes(run_id);
"""


def test_a_history_of_the_first_layout_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    db = sqlite3.connect(path)
    db.executescript(FIRST_LAYOUT)
    for run_id, outcome in ((1, "passed"), (2, "failed"), (3, "passed")):
        db.execute("INSERT INTO runs VALUES (?, ?, ?)", (run_id, "2026-11-01T00:00:00+00:00", f"old {run_id}"))
        db.execute("INSERT INTO outcomes VALUES (?, 'cpu', 's/t.py::test_a', ?)", (run_id, outcome))
        db.execute("INSERT INTO outcomes VALUES (?, 'cpu', 's/t.py::test_b', 'skipped')", (run_id,))
    db.execute("INSERT INTO crashes VALUES (3, 'ffff', 'deterministic')")
    db.commit()
    db.close()
    h = History.open(path)
    assert h.db.execute("PRAGMA user_version").fetchone()[0] == history_mod.VERSION
    tables = {r[0] for r in h.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "outcomes" not in tables and "crashes" not in tables
    now = _triage([R.record("cpu", [R.test("s/t.py::test_a", "failed"), R.test("s/t.py::test_b", "skipped")])])
    ch = h.compare(now)
    assert ch["previous"] == "old 3"
    assert ch["new_failures"] == [["s/t.py::test_a", "cpu"]]
    assert ch["stopped_crashes"] == [["ffff", "crash ffff"]]
    h.record(now, "new 4")
    view = h.view(now)
    assert [p["counts"]["passed"] for p in view["trends"]["cpu"]] == [1, 0, 1, 0]
    assert [p["counts"]["skipped"] for p in view["trends"]["cpu"]] == [1, 1, 1, 1]
    (flaky,) = view["flaky"]
    assert flaky["nodeid"] == "s/t.py::test_a" and flaky["flips"] == 3
    (crash,) = view["crashes"]
    assert crash["first_seen"] == "old 3" and crash["state"] == "stopped"


def _results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    (results / "cpu").mkdir(parents=True)
    (results / "cpu" / "run.json").write_text(json.dumps(R.record("cpu", [R.test("s/t.py::test_a")])))
    return results


def test_a_file_that_is_not_a_database_is_set_aside_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    path.write_bytes(b"this is not sqlite\x00" * 100)
    stream = io.StringIO()
    t = run_triage(_results(tmp_path), tmp_path / "out", path, "run 1", Output(stream, environ={}))
    assert "not a usable history database" in stream.getvalue()
    (aside,) = tmp_path.glob("h.sqlite.corrupt-*")
    assert aside.read_bytes() == b"this is not sqlite\x00" * 100
    assert t["history"] is not None and t["history"]["runs"] == ["run 1"]
    assert History.open(path).db.execute("SELECT label FROM runs").fetchall() == [("run 1",)]


def test_a_database_damaged_inside_is_set_aside_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    results = _results(tmp_path)
    many = [R.test(f"s/t.py::test_{i}") for i in range(3000)]
    (results / "cpu" / "run.json").write_text(json.dumps(R.record("cpu", many)))
    run_triage(results, tmp_path / "out", path, "run 1", Output(io.StringIO(), environ={}))
    data = bytearray(path.read_bytes())
    # keep the header (a valid SQLite file at a glance), overwrite the pages behind it
    data[4096:] = b"\xa5" * (len(data) - 4096)
    path.write_bytes(bytes(data))
    stream = io.StringIO()
    t = run_triage(results, tmp_path / "out", path, "run 2", Output(stream, environ={}))
    assert "history database" in stream.getvalue() and "moved to h.sqlite.corrupt-" in stream.getvalue()
    assert len(list(tmp_path.glob("h.sqlite.corrupt-*"))) == 1
    assert t["history"] is not None and t["history"]["runs"] == ["run 2"]


def test_a_history_from_a_newer_version_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(ResultsError, match="history version 99"):
        History.open(path)
    assert path.exists() and not list(tmp_path.glob("*.corrupt-*"))


def test_triage_exits_7_when_every_row_is_unreadable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    for row in ("cpu", "tpu"):
        (results / row).mkdir(parents=True)
        (results / row / "run.json").write_text('{"schema": "device-matrix/run", "vers')
    history = tmp_path / "h.sqlite"
    code = main(["--project", str(tmp_path), "triage", str(results), "--history", str(history)])
    assert code == EXIT_RESULTS
    err = capsys.readouterr().err
    assert "ERROR" in err and "no row's run.json could be read" in err and "TIP" in err
    # the report says why, and nothing was recorded as a run where every test vanished
    assert "truncated or not JSON" in (results / "triage" / "triage.md").read_text()
    assert not history.exists() or History.open(history).db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    # one readable row is a report with a warning, exit 0
    (results / "cpu" / "run.json").write_text(json.dumps(R.record("cpu", [R.test("s/t.py::test_a")])))
    assert main(["--project", str(tmp_path), "triage", str(results), "--history", str(history)]) == 0


def test_history_runs_must_be_a_positive_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--project", str(tmp_path), "triage", str(tmp_path), "--history-runs", "0"])
    assert exc.value.code == 2
    assert "0 is not at least 1" in capsys.readouterr().err


def test_an_unusable_history_path_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = _results(tmp_path)
    (tmp_path / "afile").write_text("x")
    for history in (tmp_path / "afile" / "h.sqlite", tmp_path):  # under a file; a folder
        # #42: a path of the wrong kind is a wrong command line (2), said before anything is read
        with pytest.raises(SystemExit) as info:
            main(["--project", str(tmp_path), "triage", str(results), "--history", str(history)])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "argument --history" in err and str(history) in err and "give a" in err and "Traceback" not in err


def test_a_locked_history_is_a_clear_error_and_is_not_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_mod, "LOCK_WAIT_S", 0.05)
    path = tmp_path / "h.sqlite"
    results = _results(tmp_path)
    run_triage(results, tmp_path / "out", path, "run 1", Output(io.StringIO(), environ={}))
    holder = sqlite3.connect(path)
    holder.execute("BEGIN EXCLUSIVE")  # another triage writing
    try:
        with pytest.raises(EnvironmentProblem, match="cannot"):
            run_triage(results, tmp_path / "out", path, "run 2", Output(io.StringIO(), environ={}))
    finally:
        holder.rollback()
        holder.close()
    assert not list(tmp_path.glob("*.corrupt-*"))
    assert History.open(path).db.execute("SELECT label FROM runs").fetchall() == [("run 1",)]


def test_crashes_classified_flaky_have_their_place_in_the_flaky_section(tmp_path: Path) -> None:
    h = History.open(tmp_path / "h.sqlite")
    flaky = R.crash("cpu", "s/t.py::test_a", "ffff")
    flaky["classification"] = "flaky"
    steady = R.crash("cpu", "s/t.py::test_b", "dddd", index=2)
    recs = [
        R.record(
            "cpu",
            [
                R.test("s/t.py::test_a", "crashed", crash_id="cpu-1"),
                R.test("s/t.py::test_b", "crashed", crash_id="cpu-2"),
            ],
            [flaky, steady],
        )
    ]
    t = _record_runs(h, [recs])
    t["history"] = h.view(t)
    assert {c["fingerprint"]: c["flaky"] for c in t["history"]["crashes"]} == {"ffff": True, "dddd": False}
    md = markdown.render(t)
    assert "## Flaky tests (0) and flaky crashes (1)" in md
    assert "- 🎲 SIGSEGV in test_a (flaky), fingerprint `ffff`, seen in 1 run(s)" in md
    page = html.render(t)
    assert "<h3>Crashes classified flaky</h3><ul><li>SIGSEGV in test_a (flaky) <code>ffff</code>" in page


def test_a_nodeid_from_a_file_name_that_is_not_utf8_is_kept_as_its_escape(tmp_path: Path) -> None:
    nodeid = "s/caf\udce9.py::test_flip"  # what pytest makes of the Latin-1 byte 0xe9
    crash = R.crash("cpu", nodeid, "eeee")
    h = History.open(tmp_path / "h.sqlite")
    runs = [
        [R.record("cpu", [R.test(nodeid, "failed" if i % 2 else "passed")], [crash] if i == 0 else [])]
        for i in range(4)
    ]
    t = _record_runs(h, runs)
    changes = h.compare(_triage(runs[-1]))  # the same test, run after run: nothing came or went
    assert changes["appeared"] == [] and changes["disappeared"] == []
    (flaky,) = h.view(t, window=30)["flaky"]
    assert flaky["nodeid"] == "s/caf\\udce9.py::test_flip"
    assert flaky["runs"] == 4 and flaky["flips"] == 3 and flaky["current"] == "failed"


# --- a branch axis (#25) -------------------------------------------------------------------


def _source(*, branch: str = "main", pr: int | None = None, commit: str = "a" * 40) -> dict[str, Any]:
    return R.source(pr=pr, commit=commit, ref=branch, run_id=None)  # each run its own id (see _triage_run)


def _triage_run(tmp_path: Path, history: Path, label: str, outcome: str, source: dict[str, Any]) -> Triage:
    results = tmp_path / label.replace(" ", "-")
    (results / "cpu").mkdir(parents=True)
    rec = R.record("cpu", [R.test("s/t.py::test_a", outcome, message="boom" if outcome == "failed" else None)])
    rec["source"] = {**source, "run_id": source["run_id"] or label}
    (results / "cpu" / "run.json").write_text(json.dumps(rec))
    return run_triage(results, results / "triage", history, label, Output(io.StringIO(), environ={}))


def test_pull_request_runs_never_make_a_test_flaky_on_its_branch(tmp_path: Path) -> None:
    """Issue 25: main and pull-request runs mixed, so a pull request that breaks a test made it
    look flaky on main."""
    history = tmp_path / "h.sqlite"
    _triage_run(tmp_path, history, "main 1", "passed", _source())
    _triage_run(tmp_path, history, "pr 1", "failed", _source(branch="feature", pr=5))
    _triage_run(tmp_path, history, "main 2", "passed", _source())
    _triage_run(tmp_path, history, "pr 2", "failed", _source(branch="feature", pr=5))
    t = _triage_run(tmp_path, history, "main 3", "passed", _source())
    assert t["history"] is not None
    assert t["history"]["flaky"] == []
    assert t["history"]["runs"] == ["main 1", "main 2", "main 3"]
    assert t["changes"]["previous"] == "main 2"


def test_a_pull_request_is_compared_with_its_base_and_shown_after_it(tmp_path: Path) -> None:
    history = tmp_path / "h.sqlite"
    for i, outcome in enumerate(("passed", "failed", "passed", "failed", "passed"), 1):
        _triage_run(tmp_path, history, f"main {i}", outcome, _source())
    t = _triage_run(tmp_path, history, "pr 1", "failed", _source(branch="feature", pr=5))
    h = t["history"]
    assert h is not None
    assert t["changes"]["previous"] == "main 5" and t["changes"]["new_failures"] == [["s/t.py::test_a", "cpu"]]
    assert h["runs"] == ["main 1", "main 2", "main 3", "main 4", "main 5", "pr 1"]
    assert h["lane"] == "pr:5" and h["flaky_lane"] == "branch:main"
    (flaky,) = h["flaky"]
    assert flaky["runs"] == 5 and flaky["flips"] == 4 and flaky["current"] == "failed"
    again = _triage_run(tmp_path, history, "pr 2", "passed", _source(branch="feature", pr=5))
    assert again["changes"]["previous"] == "pr 1" and again["changes"]["fixed"] == [["s/t.py::test_a", "cpu"]]


def test_each_branch_keeps_its_own_runs(tmp_path: Path) -> None:
    history = tmp_path / "h.sqlite"
    for i in range(3):
        _triage_run(tmp_path, history, f"main {i}", "passed", _source())
        _triage_run(tmp_path, history, f"release {i}", "failed", _source(branch="release-2"))
    t = _triage_run(tmp_path, history, "release 3", "failed", _source(branch="release-2"))
    assert t["history"] is not None and t["history"]["runs"] == [f"release {i}" for i in range(4)]
    assert [p["counts"]["failed"] for p in t["history"]["trends"]["cpu"]] == [1, 1, 1, 1]
    h = History.open(history)
    assert h.lanes() == {"branch:main": 3, "branch:release-2": 4}


# the layout of version 2: one series per row and test, no lanes
SECOND_LAYOUT = """
CREATE TABLE runs (id INTEGER PRIMARY KEY, created TEXT NOT NULL, label TEXT NOT NULL);
CREATE TABLE row_runs (run_id INTEGER NOT NULL, row TEXT NOT NULL, label TEXT NOT NULL,
    duration REAL, passed INTEGER NOT NULL, failed INTEGER NOT NULL, crashed INTEGER NOT NULL,
    timeout INTEGER NOT NULL, skipped INTEGER NOT NULL, xfailed INTEGER NOT NULL, not_run INTEGER NOT NULL,
    PRIMARY KEY (run_id, row));
CREATE TABLE series (row TEXT NOT NULL, nodeid TEXT NOT NULL, outcomes TEXT NOT NULL,
    durations BLOB NOT NULL, PRIMARY KEY (row, nodeid)) WITHOUT ROWID;
CREATE TABLE crash_seen (run_id INTEGER NOT NULL, fingerprint TEXT NOT NULL, row TEXT NOT NULL,
    classification TEXT NOT NULL, headline TEXT NOT NULL, issue TEXT);
CREATE INDEX crash_seen_run ON crash_seen(run_id);
PRAGMA user_version = 2;
"""


def test_a_history_of_version_2_is_migrated_and_taken_on_by_its_branch(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    db = sqlite3.connect(path)
    db.executescript(SECOND_LAYOUT)
    for run_id, (label, code) in enumerate((("old 1", "P"), ("old 2", "F"), ("old 3", "P")), 1):
        db.execute("INSERT INTO runs VALUES (?, '2026-11-01T00:00:00+00:00', ?)", (run_id, label))
        db.execute(
            "INSERT INTO row_runs VALUES (?, 'cpu', 'passed', 1.0, ?, ?, 0, 0, 0, 0, 0)",
            (run_id, int(code == "P"), int(code == "F")),
        )
    db.execute("INSERT INTO series VALUES ('cpu', 's/t.py::test_a', 'PFP', ?)", (b"\x00\x00\x80\x7f" * 3,))
    db.execute("INSERT INTO crash_seen VALUES (2, 'ffff', 'cpu', 'deterministic', 'SIGSEGV in test_a', NULL)")
    db.commit()
    db.close()
    h = History.open(path)
    assert h.db.execute("PRAGMA user_version").fetchone()[0] == history_mod.VERSION
    assert h.lanes() == {"": 3}
    h.close()
    t = _triage_run(tmp_path, path, "main 4", "failed", _source())
    view = t["history"]
    assert view is not None and view["runs"] == ["old 1", "old 2", "old 3", "main 4"]
    (flaky,) = view["flaky"]
    assert flaky["flips"] == 3 and view["lane"] == "branch:main"
    assert [c["first_seen"] for c in view["crashes"]] == ["old 2"]
    assert History.open(path).lanes() == {"branch:main": 4}


def test_the_oldest_pull_requests_are_forgotten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history_mod, "KEEP_PR_LANES", 2)
    history = tmp_path / "h.sqlite"
    _triage_run(tmp_path, history, "main 1", "passed", _source())
    for pr in (1, 2, 3):
        _triage_run(tmp_path, history, f"pr {pr}", "failed", _source(branch=f"f{pr}", pr=pr))
    h = History.open(history)
    assert h.lanes() == {"branch:main": 1, "pr:2": 1, "pr:3": 1}
    lanes = {r[0] for r in h.db.execute("SELECT DISTINCT lane FROM series")}
    assert lanes == {"branch:main", "pr:2", "pr:3"}
    assert h.db.execute("SELECT COUNT(*) FROM row_runs").fetchone()[0] == 3


def test_a_read_only_history_is_never_written_nor_moved(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    stream = io.StringIO()
    t = _triage_run(tmp_path, missing, "pr 1", "failed", _source(branch="f", pr=1))
    assert missing.exists()  # the writable one was created
    missing.unlink()
    results = tmp_path / "pr-1"
    t = run_triage(results, tmp_path / "o1", missing, "pr 1", Output(stream, environ={}), read_only=True)
    assert not missing.exists() and t["verdicts"] is not None
    assert {i["verdict"] for i in t["verdicts"]["items"]} == {"unknown"}
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not a database at all" * 50)
    t = run_triage(results, tmp_path / "o2", junk, "pr 1", Output(stream, environ={}), read_only=True)
    assert junk.read_bytes() == b"not a database at all" * 50 and not list(tmp_path.glob("junk.sqlite.corrupt-*"))
    assert "compared with no history, the file left as it is" in stream.getvalue()


def test_a_rerun_of_the_same_run_replaces_it_and_never_counts_twice(tmp_path: Path) -> None:
    history = tmp_path / "h.sqlite"
    first = {**_source(), "run_id": "10"}
    _triage_run(tmp_path, history, "run 10", "passed", first)
    second = {**_source(commit="b" * 40), "run_id": "11"}
    _triage_run(tmp_path, history, "run 11", "failed", second)
    # "Re-run failed jobs": attempt 2 of run 11, the test fixed meanwhile
    again = _triage_run(tmp_path, history, "run 11 again", "passed", {**second, "run_attempt": 2})
    assert again["changes"]["previous"] == "run 10" and again["changes"]["fixed"] == []
    assert again["history"] is not None and again["history"]["runs"] == ["run 10", "run 11 again"]
    assert again["history"]["flaky"] == []
    h = History.open(history)
    assert h.lanes() == {"branch:main": 2}
    assert h.db.execute("SELECT outcomes FROM series").fetchall() == [("PP",)]
    assert h.db.execute("SELECT COUNT(*) FROM row_runs").fetchone()[0] == 2


def test_a_broken_constraint_is_a_bug_and_never_sets_the_history_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = tmp_path / "h.sqlite"
    _triage_run(tmp_path, history, "main 1", "passed", _source())

    def broken(*args: Any, **kwargs: Any) -> int:
        raise sqlite3.IntegrityError("UNIQUE constraint failed: row_runs.run_id, row_runs.row")

    monkeypatch.setattr(History, "record", broken)
    with pytest.raises(sqlite3.IntegrityError):
        _triage_run(tmp_path, history, "main 2", "passed", _source())
    assert not list(tmp_path.glob("h.sqlite.corrupt-*"))
    monkeypatch.undo()
    assert History.open(history).lanes() == {"branch:main": 1}


def test_a_run_triaged_twice_is_recorded_once_and_seen_at_its_own_time(tmp_path: Path) -> None:
    # #41: a run is kept once, by its identity (rows and start times, source); its crash is
    # first and last seen when the run finished, not when it was triaged
    history = tmp_path / "h.sqlite"

    def triage_of(name: str, started: str, finished: str) -> Triage:
        results = tmp_path / name
        (results / "cpu").mkdir(parents=True, exist_ok=True)
        c = R.crash("cpu", "s/t.py::test_a", "cccc")
        rec = R.record("cpu", [R.test("s/t.py::test_a", "crashed", crash_id=c["id"])], [c], started=started)
        rec["finished_at"] = finished
        (results / "cpu" / "run.json").write_text(json.dumps(rec))
        return run_triage(results, results / "triage", history, None, Output(io.StringIO(), environ={}))

    first = triage_of("a", "2026-11-29T10:00:00+00:00", "2026-11-29T10:05:00+00:00")
    again = triage_of("a", "2026-11-29T10:00:00+00:00", "2026-11-29T10:05:00+00:00")
    assert again["changes"] == first["changes"] and again["changes"]["previous"] is None
    assert again["history"] is not None and len(again["history"]["trends"]["cpu"]) == 1
    (crash,) = again["history"]["crashes"]
    assert crash["runs"] == 1
    assert crash["first_seen"] == crash["last_seen"] == "2026-11-29T10:05:00+00:00"
    assert History.open(history).lanes() == {"": 1}
    # the next run is compared with this one, once
    later = triage_of("b", "2026-11-30T10:00:00+00:00", "2026-11-30T10:05:00+00:00")
    assert later["changes"]["previous"] == "2026-11-29T10:05:00+00:00"
    assert later["history"] is not None and later["history"]["crashes"][0]["runs"] == 2


def test_a_run_triaged_again_after_a_later_one_is_not_recorded_again(tmp_path: Path) -> None:
    # #41: A, B, then A's records again: A counted twice (a third run, newer than B) in the
    # trends and the crash's runs, and its changes were taken against B, a later run
    history = tmp_path / "h.sqlite"
    said = io.StringIO()

    def triage_of(name: str, started: str, finished: str, outcome: str, out: io.StringIO | None = None) -> Triage:
        results = tmp_path / name
        (results / "cpu").mkdir(parents=True, exist_ok=True)
        c = R.crash("cpu", "s/t.py::test_a", "cccc")
        crashed = outcome == "crashed"
        test = R.test("s/t.py::test_a", outcome, crash_id=c["id"] if crashed else None)
        rec = R.record("cpu", [test], [c] if crashed else [], started=started)
        rec["finished_at"] = finished
        (results / "cpu" / "run.json").write_text(json.dumps(rec))
        return run_triage(results, results / "triage", history, None, Output(out or io.StringIO(), environ={}))

    first = triage_of("a", "2026-11-29T10:00:00+00:00", "2026-11-29T10:05:00+00:00", "crashed")
    triage_of("b", "2026-11-30T10:00:00+00:00", "2026-11-30T10:05:00+00:00", "passed")
    again = triage_of("a", "2026-11-29T10:00:00+00:00", "2026-11-29T10:05:00+00:00", "crashed", said)
    assert History.open(history).lanes() == {"": 2}
    assert again["changes"] == first["changes"] and again["changes"]["previous"] is None
    assert again["history"] is not None and len(again["history"]["trends"]["cpu"]) == 1
    assert [c["runs"] for c in again["history"]["crashes"]] == [1]
    # its history as it stood at it: its crash current, its own run the latest of the trends
    assert [c["state"] for c in again["history"]["crashes"]] == ["current"]
    assert again["history"]["runs"] == ["2026-11-29T10:05:00+00:00"]
    assert "in the history already (2026-11-29T10:05:00+00:00): not recorded again" in said.getvalue()
    # the next run is compared with the newest, B, and counts three runs
    later = triage_of("c", "2026-12-01T10:00:00+00:00", "2026-12-01T10:05:00+00:00", "passed")
    assert later["changes"]["previous"] == "2026-11-30T10:05:00+00:00"
    assert later["history"] is not None and len(later["history"]["trends"]["cpu"]) == 3


def test_a_test_an_interrupted_run_never_ran_is_said_and_then_compared_with_its_last_outcome(tmp_path: Path) -> None:
    # #41 (a new user's trial): an interrupted run's report said "Nothing: same results as
    # last time" while 3 tests did not run, and the next run called a test that failed two
    # runs before a new failure (compared with its `not_run`)
    history = tmp_path / "h.sqlite"
    _triage_run(tmp_path, history, "main 1", "failed", _source())
    cut = _triage_run(tmp_path, history, "main 2", "not_run", _source())
    assert cut["changes"]["not_run"] == [["s/t.py::test_a", "cpu"]]
    assert cut["changes"]["new_failures"] == [] and cut["changes"]["fixed"] == []
    assert not nothing_changed(cut["changes"])
    md = (tmp_path / "main-2" / "triage" / "triage.md").read_text()
    assert "not run this time on **cpu**: `s/t.py::test_a`" in md and "Nothing: same results" not in md
    html = (tmp_path / "main-2" / "triage" / "triage.html").read_text()
    assert "not run this time on cpu" in html
    after = _triage_run(tmp_path, history, "main 3", "failed", _source())
    assert after["changes"]["new_failures"] == [] and after["changes"]["not_run"] == []
    fixed = _triage_run(tmp_path, history, "main 4", "passed", _source())
    assert fixed["changes"]["fixed"] == [["s/t.py::test_a", "cpu"]]
