"""The tests of this concept that start a process; the rest are in tests/unit/test_merge_selection.py (#41)."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.conftest import Project


def test_a_row_spread_with_test_keeps_its_selection_in_the_merged_record(project: Callable[..., Project]) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", "--shards", "2", "--test", "suites/passing")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    shard = json.loads((p.results / "fixture/shards/1/run.json").read_text())
    assert shard["selection"] == "--test suites/passing --shard 1/2"
    assert p.record()["selection"] == "--test suites/passing"
