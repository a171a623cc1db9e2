"""#30: the merge of a spread row's shards says what the row selected, as each shard does
(less its own ``--shard K/N``), so triage compares the merged row with runs of the same
selection; and #33: it keeps how old the tracker's disable list its shards applied was."""

from __future__ import annotations

from typing import Any

from device_matrix.records.merge import Spread, merge
from tests.unit.test_merge import _part, _plan


def _spread(**changes: Any) -> Spread:
    plan = _plan()
    parts = []
    for k in (1, 2):
        given = {key: value(k) if callable(value) else value for key, value in changes.items()}
        parts.append(_part(plan, k, **given))
    return Spread("cpu", plan, tuple(parts), ())


def test_a_merged_row_run_with_test_says_so() -> None:
    merged = merge(_spread(selection=lambda k: f"--test t.py -k fast --shard {k}/2")).record
    assert merged["selection"] == "--test t.py -k fast"


def test_a_merged_whole_row_selects_nothing_but_the_row() -> None:
    merged = merge(_spread(selection=lambda k: f"--shard {k}/2")).record
    assert merged.get("selection") is None


def test_shards_of_different_selections_are_a_problem_of_the_merge() -> None:
    got = merge(_spread(selection=lambda k: f"--test t.py::test_{k} --shard {k}/2"))
    assert any("different selections" in p for p in got.problems), got.problems
    # compared with no other run: not with the whole row's, nor with either shard's alone
    assert got.record["selection"] == "--test t.py::test_1 | --test t.py::test_2"


def test_the_merged_row_keeps_the_oldest_disable_list_its_shards_applied() -> None:
    def ref(k: int) -> dict[str, Any]:
        return {"read_at": f"2026-12-01T0{k}:00:00+00:00", "age_s": 100 * k, "fresh": k == 1, "applied": 1, "note": ""}

    merged = merge(_spread(disables=ref)).record
    assert merged["disables"] == ref(2)
