"""The tests of this concept that start a process; the rest are in tests/unit/test_bench_selection.py (#41)."""

from __future__ import annotations

import sys

import pytest

from tests.builders import git
from tests.unit.test_bench_selection import RULES, SOURCE, bench, tiny

__all__ = ["tiny"]  # fixtures, used by name


def test_a_fault_only_its_covering_test_detects_is_caught_by_the_map_and_missed_by_own_files(tiny):
    rp, head = tiny
    baseline = rp.pytest(rp.work.parent / "base.json", cover=True)
    assert baseline.passed() == {
        "tests/test_core.py::test_limit",
        "tests/test_core.py::test_small",
        "tests/test_util.py::test_double",
    }
    fault = next(f for f in bench.fault_sites("pkg/core.py", SOURCE, [3]) if f.operator == "return None")
    (rp.work / fault.path).write_text(fault.source)
    truth = rp.pytest(rp.work.parent / "truth.json")
    failing = truth.failed_against(baseline)
    assert failing == {"tests/test_core.py::test_limit"}  # test_small never reaches line 3

    nodeids = sorted(baseline.outcomes)
    m = bench.to_map(baseline, head)  # recorded by the bench's plugin, per test, with coverage.py
    assert m.tests == {
        "tests/test_core.py::test_limit": {"pkg/core.py", "tests/test_core.py"},
        "tests/test_core.py::test_small": {"pkg/core.py", "tests/test_core.py"},
        "tests/test_util.py::test_double": {"pkg/util.py", "tests/test_util.py"},
    }
    # what ran at import (the package's __init__, each module's definitions) is kept apart
    assert {"pkg/__init__.py", "pkg/core.py", "pkg/util.py"} <= set(m.imports)
    changed = ["pkg/core.py"]
    # a fault in a function body, read from the checkout as run --select changed reads it
    chosen, full = bench.device_matrix_selection(m, changed, nodeids, RULES, rp.work)
    assert full is None
    assert chosen == {"tests/test_core.py::test_limit", "tests/test_core.py::test_small"}
    case = bench.Case(
        label=fault.label,
        failing=failing,
        seconds={
            "tests/test_core.py::test_limit": 1.0,
            "tests/test_core.py::test_small": 1.0,
            "tests/test_util.py::test_double": 2.0,
        },
        selected={
            "run everything": frozenset(nodeids),
            "own file changed": bench.own_file(nodeids, changed),
            "device-matrix": chosen,
        },
    )
    undetected = bench.Case(label="x", failing=frozenset(), seconds=case.seconds, selected=case.selected)

    everything = bench.score([case, undetected], "run everything")
    assert (everything.caught, everything.cases, everything.tests_run, everything.time_run) == (1, 1, 3, 4.0)
    own = bench.score([case, undetected], "own file changed")
    assert (own.caught, own.failing_selected, own.failing, own.tests_run, own.time_run) == (0, 0, 1, 0, 0.0)
    dm = bench.score([case, undetected], "device-matrix")
    assert (dm.caught, dm.failing_selected, dm.tests_run, dm.tests, dm.time_run, dm.time) == (1, 1, 2, 3, 2.0, 4.0)
    rows = bench.table([case], ["run everything", "own file changed", "device-matrix"])
    assert "1/1   100.0%" in rows[1]
    assert "0/1     0.0%" in rows[2]
    assert "2.0/4.0s   50.0%" in rows[3]


def test_the_replay_s_map_keeps_the_files_each_test_opened_as_run_record_map_does(tmp_path):
    # #40: without them, a data file's or a linter table's change ran every test in the replay
    src = tmp_path / "src"
    (src / "tests").mkdir(parents=True)
    (src / "tests" / "table.csv").write_text("a,1\n")
    (src / "tests" / "test_data.py").write_text(
        "import pathlib\n\n\ndef test_table():\n"
        "    assert (pathlib.Path(__file__).parent / 'table.csv').read_text() == 'a,1\\n'\n\n\n"
        "def test_plain():\n    assert True\n"
    )
    (src / "pyproject.toml").write_text("[tool.ruff]\nline-length = 79\n")
    for args in (("init", "-q"), ("add", "-A"), ("commit", "-q", "-m", "data")):
        git(src, *args)
    head = git(src, "rev-parse", "HEAD")
    rp = bench.Replay(src, tmp_path / "work", python=sys.executable, tests=[], timeout=120, autoload=False)
    rp.checkout(head)
    m = bench.to_map(rp.pytest(tmp_path / "base.json", cover=True), head)
    assert m.reads == {"tests/test_data.py::test_table": {"tests/table.csv"}, "tests/test_data.py::test_plain": set()}
    assert m.openers == {"tests/table.csv": {"tests/test_data.py:4"}}
    nodeids = sorted(m.tests)
    (rp.work / "tests" / "table.csv").write_text("a,2\n")
    (rp.work / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    chosen, full = bench.device_matrix_selection(m, ["pyproject.toml", "tests/table.csv"], nodeids, RULES, rp.work)
    assert full is None
    assert chosen == {"tests/test_data.py::test_table"}


def test_a_fault_that_stops_pytest_itself_is_left_out_not_the_end_of_the_replay(tiny):
    # #40: a replay of python-slugify ended at a fault that made pytest exit 3
    rp, _ = tiny
    (rp.work / "conftest.py").write_text("raise SystemExit(3)\n")
    assert rp.pytest(rp.work.parent / "truth.json", faulty=True).broken
    with pytest.raises(SystemExit):
        rp.pytest(rp.work.parent / "base.json")
