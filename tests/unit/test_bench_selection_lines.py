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
