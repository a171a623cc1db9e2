"""What a first use of ``run --select changed`` found (#34): a map dated in the future.

The part of these tests that starts no process; the rest is in tests/integration/test_selection_trial.py (#41)."""

from __future__ import annotations

import datetime as dt

from device_matrix import selection
from device_matrix.records.testmap import TestMap


def _dated(created: str) -> TestMap:
    return TestMap(row="cpu", commit="a" * 40, created=created, tests={"t.py::a": frozenset({"t.py", "src/a.py"})})


def test_a_map_dated_in_the_future_runs_every_test() -> None:
    rules = selection.Rules(max_age=dt.timedelta(days=14), full=(), ignore=())
    now = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
    ahead = _dated((now + dt.timedelta(days=400)).isoformat())
    p = selection.plan(ahead, ["src/a.py"], row="cpu", rules=rules, now=now)
    assert p.full_reason is not None
    assert p.full_reason.startswith("the test map is dated in the future (")
    assert p.decide("t.py::a").run
    # a clock a minute off is no reason to distrust a map
    skewed = _dated((now + dt.timedelta(minutes=1)).isoformat())
    # (a change to a function body of src/a.py: nothing else runs every test)
    assert (
        selection.plan(skewed, ["src/a.py"], row="cpu", rules=rules, now=now, bodies=["src/a.py"]).full_reason is None
    )
