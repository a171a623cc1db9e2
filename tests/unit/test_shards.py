"""Shards: the split by recorded durations, one shard's run, device slots, and the merge.

The part of these tests that starts no process; the rest is in tests/integration/test_shards.py (#41)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from device_matrix.config import Row
from device_matrix.errors import UsageProblem
from device_matrix.spread.slots import slot_env
from device_matrix.spread.split import balance, parse_shard, recorded_durations, split
from tests import records as R
from tests.conftest import make_project


def test_longest_first_to_the_least_loaded_shard() -> None:
    durations = {"a": 8.0, "b": 7.0, "c": 6.0, "d": 5.0, "e": 4.0}
    # a->0, b->1, c->1 (7 < 8), d->0 (8 < 13), e->0 (13 = 13: fewer tests... both have 2; lower shard)
    parts = split(["a", "b", "c", "d", "e"], durations, 2)
    assert parts == [["a", "d", "e"], ["b", "c"]]
    assert balance(parts, durations) == pytest.approx(17 / 15)


def test_each_part_keeps_the_collection_order() -> None:
    nodeids = ["m::z", "m::a", "m::k", "m::b"]
    parts = split(nodeids, {"m::a": 3.0, "m::b": 2.0, "m::k": 1.0, "m::z": 0.5}, 2)
    for part in parts:
        assert part == [n for n in nodeids if n in part]


def test_the_split_is_the_same_whatever_order_the_tests_come_in() -> None:
    rng = random.Random(7)
    nodeids = [f"t.py::test_{i}" for i in range(300)]
    # many equal durations: only the tie-breaks decide
    durations = {n: float(rng.choice([1, 2, 3])) for n in nodeids[:200]}
    expected = [set(p) for p in split(nodeids, durations, 4)]
    for _ in range(5):
        shuffled = nodeids[:]
        rng.shuffle(shuffled)
        assert [set(p) for p in split(shuffled, dict(reversed(list(durations.items()))), 4)] == expected


def test_without_durations_the_split_is_by_count() -> None:
    parts = split([f"t::{i}" for i in range(10)], {}, 4)
    assert sorted(len(p) for p in parts) == [2, 2, 3, 3]
    assert sorted(n for p in parts for n in p) == sorted(f"t::{i}" for i in range(10))


def test_a_test_without_a_duration_weighs_the_mean_of_the_known_ones() -> None:
    # known: 10 and 2 (mean 6); the new test goes where 6 fits best: beside the 2
    parts = split(["old_long", "old_short", "new"], {"old_long": 10.0, "old_short": 2.0}, 2)
    assert parts == [["old_long"], ["old_short", "new"]]


def test_more_shards_than_tests_leaves_shards_empty() -> None:
    assert split(["a", "b"], {}, 4) == [["a"], ["b"], [], []]


def test_two_thousand_recorded_durations_split_within_ten_percent() -> None:
    rng = random.Random(2026)
    durations = {f"s/test_{i}.py::t": rng.lognormvariate(-3, 1.2) for i in range(2000)}
    for count in (2, 4, 8):
        parts = split(list(durations), durations, count)
        assert sum(map(len, parts)) == 2000
        assert balance(parts, durations) <= 1.1


@pytest.mark.parametrize("text", ["0/2", "3/2", "2", "a/b", "1/0", "-1/2"])
def test_a_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageProblem):
        parse_shard(text)


def test_a_shard_is_k_of_n() -> None:
    shard = parse_shard(" 2 / 4 ")
    assert (shard.index, shard.count, str(shard)) == (2, 4, "2/4")


def _record(tests: list[tuple[str, str, float]], finished: str) -> dict[str, Any]:
    rec = R.record("fixture", [R.test(n, o, duration=d) for n, o, d in tests], started=finished)
    rec["finished_at"] = finished
    return rec


def test_recorded_durations_come_from_the_newest_record(tmp_path: Path) -> None:
    row = tmp_path / "fixture"
    (row / "shards" / "1").mkdir(parents=True)
    (row / "run.json").write_text(json.dumps(_record([("a", "passed", 1.0), ("b", "passed", 2.0)], "2026-01-01")))
    (row / "shards" / "1" / "run.json").write_text(
        json.dumps(_record([("a", "passed", 5.0), ("b", "not_run", 0.0)], "2026-02-01"))
    )
    (row / "shards" / "2").mkdir()
    (row / "shards" / "2" / "run.json").write_text("{truncated")
    assert recorded_durations([row], "fixture") == {"a": 5.0, "b": 2.0}
    assert recorded_durations([tmp_path], "fixture") == {"a": 5.0, "b": 2.0}  # a results folder
    assert recorded_durations([row / "run.json"], "fixture") == {"a": 1.0, "b": 2.0}
    assert recorded_durations([row], "other") == {}


def test_slot_variables_are_the_rows_templates() -> None:
    row = Row(name="cuda", pjrt_device="CUDA", slot_env={"CUDA_VISIBLE_DEVICES": "{slot}", "PORT": "{port}"})
    assert slot_env(row, 3) == {"CUDA_VISIBLE_DEVICES": "3", "PORT": "8479"}


def test_a_gang_entry_is_read_into_the_row(tmp_path: Path) -> None:
    from device_matrix import config

    row = (
        'gangs = [{ name = "all_reduce", module = "suites.collectives.mp_worker", world_size = 2, '
        'args = ["--check"], env = { CPU_NUM_DEVICES = "1" }, '
        'xfail = { devices = ["cpu"], issue = "ledger:4", reason = "r", raises = ["DistNetworkError"] } }]'
    )
    p = make_project(tmp_path, ["passing"], row=row)
    (gang,) = config.load(p.root).row("fixture").gangs
    assert (gang.name, gang.module, gang.world_size, gang.args) == (
        "all_reduce",
        "suites.collectives.mp_worker",
        2,
        ("--check",),
    )
    assert dict(gang.env) == {"CPU_NUM_DEVICES": "1"}
    assert gang.xfail is not None and gang.xfail["raises"] == ["DistNetworkError"]
