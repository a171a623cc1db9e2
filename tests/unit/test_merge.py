"""The merge of a row's parts, as a pure function: records in, record out (#23).

And the one rule of a row's status, the one status order, and the checks every part
passes before it is merged: its row, its split, its index and count.
"""

from __future__ import annotations

import copy
import datetime as dt
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from device_matrix.errors import ResultsError
from device_matrix.records import jsonreport
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.merge import Gang, Part, Spread, load_spread, merge, with_gangs, without_gangs
from device_matrix.records.schema import SHARD_SCHEMA, PlanFile, RunRecord, check_plan
from device_matrix.records.summary import STATUS_ORDER, count, most_serious, row_label, row_status
from device_matrix.run.context import Verdict, worst
from device_matrix.skips.tracker import Disable, disable_list_toml, parse
from device_matrix.spread.split import Split
from tests import records as R

TESTS = [f"t.py::test_{i}" for i in range(6)]


def _plan() -> PlanFile:
    return Split.make("cpu", 2, TESTS, {n: float(i + 1) for i, n in enumerate(TESTS)}, gangs=["g"]).plan


def _part(plan: PlanFile, k: int, **changes: Any) -> Part:
    mine = [TESTS[i] for i in (plan["parts"] or [])[k - 1]]
    record: dict[str, Any] = R.record("cpu", [R.test(n) for n in mine])
    record["command"] = ["device-matrix", "run", "--device", "cpu", "--shard", f"{k}/2"]
    record["spread"] = {"plan": plan["plan"], "shard": k, "of": 2}
    record.update(changes)
    shard_json = PlanFile(**{**plan, "shard": k, "host": "h", "node": None, "lost": []})
    return Part(index=k, record=record, plan=shard_json)  # type: ignore[arg-type]


def _gang(name: str, outcome: str, status: str = "passed") -> Gang:
    record: dict[str, Any] = R.record("cpu", [R.test(f"gang::{name}", outcome)], status=status)
    record["environment"]["gang"] = {"name": name, "module": "w", "world_size": 2, "master": None, "ranks": []}
    record["attempts"] = [
        {
            "index": 1,
            "purpose": "run",
            "returncode": 0,
            "signal_name": None,
            "duration": 1.0,
            "selected": 1,
            "finished": 1,
            "journal": "",
            "log": "rank0.log",
        }
    ]
    return Gang(name, record, f"shards/1/gangs/{name}")  # type: ignore[arg-type]


def _outcomes(record: RunRecord) -> dict[str, str]:
    return {t["nodeid"]: t["outcome"] for t in record["tests"]}


# --- one status rule, one order ----------------------------------------------------------------


def test_the_status_order_is_one_order_most_serious_first() -> None:
    assert STATUS_ORDER == ("running", "interrupted", "error", "crashed", "failed", "unavailable", "passed")
    assert most_serious([]) == "passed"
    assert most_serious(["passed", "failed", "crashed"]) == "crashed"
    assert most_serious(["crashed", "error"]) == "error"
    # the runner's processes use the same order
    assert worst([Verdict("failed", "a"), Verdict("crashed", "b"), Verdict("passed")]) == Verdict("crashed", "a; b")


@pytest.mark.parametrize(
    ("outcomes", "crashes", "claimed", "status"),
    [
        ([], 0, [], "passed"),
        (["passed", "skipped", "xfailed"], 0, [], "passed"),
        (["passed", "not_run"], 0, [], "failed"),
        (["passed", "xpassed"], 0, [], "failed"),
        (["passed"], 1, [], "crashed"),
        (["timeout"], 0, [], "crashed"),
        (["passed"], 0, ["interrupted"], "interrupted"),
        (["failed"], 0, ["passed"], "failed"),  # a claim never hides what the tests show
        ([], 0, ["unavailable"], "unavailable"),
        (["passed"], 0, ["unavailable", "passed"], "passed"),
        ([], 0, ["unavailable", "running"], "running"),
    ],
)
def test_one_rule_gives_the_rows_status(outcomes: list[str], crashes: int, claimed: list[str], status: str) -> None:
    crash_records = [R.crash("cpu", "t.py::x", "f" * 16)] * crashes
    assert row_status(outcomes, crash_records, claimed=claimed) == status  # type: ignore[arg-type]
    # every renderer's label follows the same rule: the record's status and its tests agree with it
    label = row_label(status, count([R.test("x", o) for o in outcomes]), crash_records)  # type: ignore[arg-type,misc]
    assert label == status


def test_a_crash_record_alone_makes_the_label_crashed_whatever_the_record_claims() -> None:
    crash = R.crash("cpu", None, "f" * 16)  # the process died between tests: no test is crashed
    assert row_label("passed", count([R.test("t.py::a")]), [crash]) == "crashed"  # type: ignore[list-item]


# --- gangs folded into the record of the run that ran them -----------------------------------------


def test_folding_gangs_twice_is_folding_them_once_and_unfolding_restores_the_runners_verdict() -> None:
    base: dict[str, Any] = R.record("cpu", [R.test("t.py::a")], reason="all good")
    crashed = _gang("g", "crashed", status="crashed")
    once = with_gangs(base, [crashed])  # type: ignore[arg-type]
    assert once["status"] == "crashed" and _outcomes(once) == {"t.py::a": "passed", "gang::g": "crashed"}
    assert [a["log"] for a in once["attempts"]] == ["shards/1/gangs/g/rank0.log"]
    assert with_gangs(once, [crashed]) == once
    # the gang ran again and passed: the runner's own verdict, not the old fold's, is the base
    again = with_gangs(once, [_gang("g", "passed")])
    assert again["status"] == "passed" and again["summary"]["passed"] == 2
    assert without_gangs(once) == base


# --- every part checked before it is merged ------------------------------------------------------------


def test_two_good_parts_merge_with_the_plans_gang_missing_not_run() -> None:
    plan = _plan()
    merged = merge(Spread("cpu", plan, (_part(plan, 1), _part(plan, 2))))
    record = merged.record
    assert _outcomes(record) == {**dict.fromkeys(TESTS, "passed"), "gang::g": "not_run"}
    assert record["status"] == "failed"
    assert merged.problems == ("gang g: its record is missing (it did not run or was lost)",)
    assert record["spread"] == {"plan": plan["plan"], "shard": None, "of": 2}


def test_the_plans_gang_from_the_folder_of_the_shard_that_keeps_it() -> None:
    plan = _plan()
    one = _part(plan, 1)
    one = Part(one.index, one.record, one.plan, gangs=(_gang("g", "passed"),))
    merged = merge(Spread("cpu", plan, (one, _part(plan, 2))))
    assert merged.problems == () and merged.record["status"] == "passed"
    assert _outcomes(merged.record)["gang::g"] == "passed"


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"row": "tpu"}, "shard 2: a record of row 'tpu', not 'cpu'"),
        ({"spread": {"plan": "0" * 16, "shard": 2, "of": 2}}, "shard 2: of another split (plan 0000000000000000"),
        ({"spread": {"plan": None, "shard": 1, "of": 2}}, "shard 2: its record is shard 1/2, the folder shard 2/2"),
        ({"spread": {"plan": None, "shard": 2, "of": 3}}, "shard 2: its record is shard 2/3, the folder shard 2/2"),
        ({"spread": {"plan": None, "shard": None, "of": 2}}, "shard 2: the record of a whole spread"),
    ],
)
def test_a_foreign_part_is_refused_and_its_tests_are_not_run(changes: dict[str, Any], why: str) -> None:
    plan = _plan()
    merged = merge(Spread("cpu", plan, (_part(plan, 1), _part(plan, 2, **changes))))
    assert any(p.startswith(why) for p in merged.problems), merged.problems
    record = merged.record
    assert record["row"] == "cpu" and record["status"] == "failed"
    theirs = [TESTS[i] for i in (plan["parts"] or [])[1]]
    assert {n for n, o in _outcomes(record).items() if o == "not_run"} == {*theirs, "gang::g"}
    assert all(why.split(": ", 1)[1][:20] in t["message"] for t in record["tests"] if t["nodeid"] in theirs)


def test_an_older_part_without_its_spread_is_read_by_its_command() -> None:
    plan = _plan()
    old = _part(plan, 2)
    assert old.record is not None
    record = dict(old.record)
    del record["spread"]
    merged = merge(Spread("cpu", None, (_part(plan, 1), Part(2, record, None))))  # type: ignore[arg-type]
    assert [s["shard"] for s in merged.record["environment"]["shards"]] == [1, 2]
    del record["command"][-2:]  # a whole run's record in a shard's folder
    merged = merge(Spread("cpu", None, (_part(plan, 1), Part(2, record, None))))  # type: ignore[arg-type]
    assert "shard 2: the record of a whole run, not of a shard" in merged.problems


def test_a_lost_last_part_is_not_green_even_without_any_plan() -> None:
    plan = _plan()
    one = _part(plan, 1)
    merged = merge(Spread("cpu", None, (Part(1, one.record, None),)))
    assert "shard 2/2: no results" in merged.problems and merged.record["status"] == "failed"


def test_clock_skew_between_hosts_never_gives_a_negative_or_short_duration() -> None:
    plan = _plan()
    one, two = _part(plan, 1), _part(plan, 2)
    assert one.record is not None and two.record is not None
    one.record.update(started_at="2026-11-29T10:00:00+00:00", finished_at="2026-11-29T10:00:30+00:00", duration=30.0)
    # the other host's clock is behind, and it writes another offset
    two.record.update(started_at="2026-11-29T11:59:00+02:00", finished_at="2026-11-29T11:59:10+02:00", duration=50.0)
    record = merge(Spread("cpu", plan, (one, two))).record
    assert record["started_at"] == "2026-11-29T11:59:00+02:00"  # 09:59 UTC, the earliest
    assert record["finished_at"] == "2026-11-29T10:00:30+00:00"
    assert record["duration"] == 90.0
    two.record.update(started_at="2026-11-29T10:00:40+00:00", finished_at="2026-11-29T10:00:20+00:00")
    assert merge(Spread("cpu", plan, (one, two))).record["duration"] == 50.0  # never less than a shard


# --- a plan on disk is checked ---------------------------------------------------------------------------


def _bad(change: Any) -> dict[str, Any]:
    data = copy.deepcopy(dict(_plan()))
    change(data)
    return data


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (_bad(lambda d: d["parts"][0].append(99)), "not every one of the 6 tests in exactly one part"),
        (_bad(lambda d: d["parts"][0].append(d["parts"][1][0])), "not every one of the 6 tests in exactly one part"),
        (_bad(lambda d: d.update(of=3)), "2 parts for 3 shards"),
        (_bad(lambda d: d.update(tests=[*d["tests"][:-1], d["tests"][0]])), "a test is listed twice"),
        (_bad(lambda d: d.update(shard=3)), "shard: 3 is not one of 1..2"),
        (_bad(lambda d: d["gangs"][0].update(shard=5)), "kept by shard 5"),
        (_bad(lambda d: d.update(plan="0" * 16)), "does not match its content"),
        (_bad(lambda d: d.update(schema="x")), "not a device-matrix shard plan"),
        (_bad(lambda d: d.update(row="../x")), "is not a row name"),
    ],
)
def test_a_plan_that_does_not_add_up_is_refused(data: dict[str, Any], problem: str) -> None:
    with pytest.raises(ResultsError, match=problem.replace("(", r"\(").replace(".", r"\.")):
        check_plan(data, "plan.json")


def test_a_plan_is_the_same_on_every_host_and_an_older_one_gets_its_id() -> None:
    assert _plan()["plan"] == _plan()["plan"]
    older = {k: v for k, v in _plan().items() if k not in ("plan", "durations", "gangs")}
    checked = check_plan(dict(older, schema=SHARD_SCHEMA), "shard.json")
    assert checked["gangs"] == [] and len(checked["plan"]) == 16


def _source(commit: str | None) -> dict[str, Any]:
    return {
        "commit": commit,
        "head_commit": None,
        "ref": "main",
        "ref_type": "branch",
        "event": "push",
        "event_name": "push",
        "pull_request": None,
        "base_ref": None,
        "base_commit": None,
        "repository": "o/r",
        "run_id": "1",
        "run_attempt": 1,
        "workflow": "ci",
        "origin": "actions",
    }


def test_parts_of_different_commits_are_not_one_green_record_of_the_first() -> None:
    # shard 2 run again after a commit: the same collection gives the same split, but the
    # row's record would say every test passed at shard 1's commit
    plan = _plan()
    a, b = "a" * 40, "b" * 40
    gang = (_gang("g", "passed"),)
    one = _part(plan, 1, source=_source(a))
    one = Part(one.index, one.record, one.plan, gangs=gang)
    merged = merge(Spread("cpu", plan, (one, _part(plan, 2, source=_source(b)))))
    assert merged.problems == (f"the shards ran different commits: shard 1 at {a[:12]}, shard 2 at {b[:12]}",)
    record = merged.record
    assert record["status"] == "failed" and "different commits" in (record["reason"] or "")
    assert record.get("source") is not None and record["source"]["commit"] is None  # no one commit was tested
    # the same commit (or a part that knows none, as from a node without git) merges green
    same = merge(Spread("cpu", plan, (one, _part(plan, 2, source=_source(a)))))
    assert same.problems == () and same.record["status"] == "passed"
    assert same.record["source"] is not None and same.record["source"]["commit"] == a
    unknown = merge(Spread("cpu", plan, (one, _part(plan, 2, source=_source(None)))))
    assert unknown.problems == () and unknown.record["status"] == "passed"


def test_parts_run_in_different_places_say_so() -> None:
    plan = _plan()
    gang = (_gang("g", "passed"),)
    one = _part(plan, 1)
    one = Part(one.index, one.record, one.plan, gangs=gang)
    other = _part(plan, 2, mode="container", image="img:2")
    merged = merge(Spread("cpu", plan, (one, other)))
    first = one.record
    assert first is not None
    assert merged.problems == (f"the shards ran in different places: shard 1 {first['mode']}, shard 2 container img:2",)
    assert merged.record["status"] == "failed"


# --- a part edited by hand -----------------------------------------------------------------------


def _with_report(part: Part) -> Part:
    """The part as its runner leaves it: report.json built from the same record as run.json."""
    assert part.record is not None
    return replace(part, report=jsonreport.build(part.record, {}, {}, Path(".")))


def test_a_parts_outcome_edited_after_its_run_is_not_believed() -> None:
    """Seen: a test flipped from failed to passed in shards/2/run.json merged green, exit 0."""
    plan = Split.make("cpu", 2, TESTS, {}, gangs=[]).plan
    one = _with_report(_part(plan, 1))
    failing = _part(plan, 2, status="failed")
    assert failing.record is not None
    victim = failing.record["tests"][0]["nodeid"]
    failing.record["tests"][0] = R.test(victim, "failed")
    two = _with_report(failing)
    assert two.record is not None
    edited = copy.deepcopy(dict(two.record))
    edited["tests"][0] = R.test(victim, "passed")
    edited["status"], edited["reason"] = "passed", None
    merged = merge(Spread("cpu", plan, (one, replace(two, record=edited))))  # type: ignore[arg-type]
    assert merged.record["status"] == "failed"
    (problem,) = merged.problems
    assert problem == f"shard 2: {victim}: passed in its run.json, failed in its report.json"
    assert merged.record["reason"] is not None and problem in merged.record["reason"]
    # the same parts as their runners wrote them merge without a word
    honest = merge(Spread("cpu", plan, (one, two)))
    assert honest.problems == () and _outcomes(honest.record)[victim] == "failed"


def test_a_parts_summary_is_never_read_the_merge_counts_its_tests() -> None:
    plan = _plan()
    one, two = _part(plan, 1), _part(plan, 2, status="failed")
    assert two.record is not None
    two.record["tests"][0] = R.test(two.record["tests"][0]["nodeid"], "failed")
    two.record["summary"] = {**two.record["summary"], "failed": 0, "passed": 99, "total": 99}
    merged = merge(Spread("cpu", plan, (one, two)))
    assert merged.record["summary"]["total"] == len(TESTS) + 1  # the plan's gang, not run
    assert merged.record["summary"]["failed"] == 1 and merged.record["summary"]["passed"] == len(TESTS) - 1


# --- #42: the tracker's disables of a spread row ------------------------------------------------


def test_a_spread_rows_record_says_which_of_its_disables_match_no_test(tmp_path: Path) -> None:
    # a shard runs part of the row: only the merge of every part can say which of the row's
    # disables name none of its tests, as a whole run's record does
    plan = Split.make("cpu", 2, TESTS, dict.fromkeys(TESTS, 1.0)).plan
    found = parse("ledger:1", f"DISABLED {TESTS[4]}", "devices: cpu", dt.date(2026, 11, 2))
    typo = parse("ledger:2", "DISABLED t.py::test_typo", "devices: cpu", dt.date(2026, 11, 2))
    assert isinstance(found, Disable) and isinstance(typo, Disable)
    folder = tmp_path / "cpu"
    (folder / "shards").mkdir(parents=True)
    write_json_atomic(folder / "shards" / "plan.json", plan)
    for k in (1, 2):
        part = _part(plan, k)
        assert part.record is not None and part.plan is not None
        part.record["disables"] = {
            "read_at": "2026-11-03T00:00:00+00:00",
            "age_s": 5,
            "fresh": True,
            "applied": 2,
            "note": "read",
        }
        shard = folder / "shards" / str(k)
        shard.mkdir()
        write_json_atomic(shard / "run.json", part.record)
        write_json_atomic(shard / "shard.json", part.plan)
        write_json_atomic(
            shard / "disables.json", {**part.record["disables"], "disables": [found.as_json(), typo.as_json()]}
        )
        (shard / "device-matrix-disabled.toml").write_text(
            '[[disable]]\ntest = "t.py"\ndevices = ["cpu"]\n\n' + disable_list_toml([found, typo], [])
        )
    record = merge(load_spread(folder)).record
    assert record["status"] == "passed", record["reason"]
    assert record.get("disables") == {
        "read_at": "2026-11-03T00:00:00+00:00",
        "age_s": 5,
        "fresh": True,
        "applied": 1,
        "note": "read",
        "unmatched": [{"issue": "ledger:2", "test": "t.py::test_typo", "problem": "matches no test of row cpu"}],
    }
    # a part that did not come back: what the row's tests are is not known, nor what matches none
    (folder / "shards" / "2" / "run.json").unlink()
    assert "unmatched" not in (merge(load_spread(folder)).record.get("disables") or {})
