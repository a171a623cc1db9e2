"""#34: bench/selection.py's replay maps the lines each test ran, as a device-matrix test map
keeps them, and tells what device-matrix's share of the test time went to, by why each test ran."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import selection as bench  # bench/selection.py


def test_the_replay_s_map_holds_the_lines_each_test_ran() -> None:
    run = bench.Run(
        outcomes={"t.py::a": "passed", "t.py::b": "failed", "t.py": "passed"},
        seconds={},
        files={"t.py::a": ["lib.py", "t.py"], "t.py::b": ["t.py"]},
        lines={"t.py::a": {"lib.py": [4, 5], "t.py": [9]}, "t.py::b": {"t.py": [12]}},
    )
    m = bench.to_map(run, "c" * 40)
    assert m.lines == {"t.py::a": {"lib.py": {4, 5}, "t.py": {9}}, "t.py::b": {"t.py": {12}}}
    assert m.tests["t.py::a"] == {"lib.py", "t.py"}


def test_the_share_of_the_test_time_is_told_by_why_each_test_ran() -> None:
    seconds = {"a": 1.0, "b": 2.0, "c": 7.0}
    cases = [
        bench.Case(label="x", failing=frozenset({"a"}), seconds=seconds, why={"a": "covers", "b": "own_file"}),
        bench.Case(label="y", failing=frozenset({"c"}), seconds=seconds, why={"c": "covers"}),
        # a fault no test detects is in no figure
        bench.Case(label="z", failing=frozenset(), seconds=seconds, why={"a": "full", "b": "full", "c": "full"}),
    ]
    assert bench.shares(cases) == "covers 40.0, own_file 10.0"
    assert bench.shares([]) == "none"


def test_the_figures_are_told_apart_for_the_changes_device_matrix_ran_in_full() -> None:
    # #40: what testmon saves where device-matrix runs everything (a change its map cannot
    # follow) is told apart from where both select
    seconds = {"a": 1.0, "b": 3.0, "c": 6.0}
    full = bench.Case(label="x", failing=frozenset({"a"}), seconds=seconds, full_reason="setup.py changes")
    full.selected = {"device-matrix": frozenset(seconds), "pytest-testmon": frozenset({"a"})}
    narrow = bench.Case(label="y", failing=frozenset({"c"}), seconds=seconds)
    narrow.selected = {"device-matrix": frozenset({"c"}), "pytest-testmon": frozenset({"b", "c"})}
    undetected = bench.Case(label="z", failing=frozenset(), seconds=seconds, full_reason="tox.ini changes")
    undetected.selected = {"device-matrix": frozenset(seconds), "pytest-testmon": frozenset()}
    assert bench.apart([full, narrow, undetected]) == [
        "  where device-matrix ran everything (1 of 2): pytest-testmon ran 33.3% of the tests, 10.0% of the time",
        "  elsewhere (1 of 2): device-matrix ran 33.3% of the tests, 60.0% of the time; pytest-testmon 66.7%, 90.0%",
    ]
    assert bench.apart([narrow]) == [
        "  where device-matrix ran everything (0 of 1): none",
        "  elsewhere (1 of 1): device-matrix ran 33.3% of the tests, 60.0% of the time; pytest-testmon 66.7%, 90.0%",
    ]


def test_each_faulty_change_is_listed_with_what_each_strategy_ran() -> None:
    seconds = {"a": 1.0, "b": 3.0}
    case = bench.Case(label="abc123 pkg/m.py:4 return None", failing=frozenset({"a"}), seconds=seconds)
    case.selected = {"device-matrix": frozenset({"a", "b"}), "pytest-testmon": frozenset({"a"})}
    case.why = {"a": "covers", "b": "reads"}
    assert bench.each([case, bench.Case(label="quiet", failing=frozenset(), seconds=seconds)]) == [
        "  abc123 pkg/m.py:4 return None: 1 failing; device-matrix 2/2 tests 100.0% of the time (covers 1, reads 1);"
        " pytest-testmon 1/2 25.0%"
    ]
