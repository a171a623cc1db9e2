"""#34: the test map records the lines each test ran, and a change to function bodies only
runs the tests that ran a line of a changed function, not every test that ran its file; a
changed test file runs only its tests that ran what changed. What is not a body change
keeps the file's and the import graph's rules, and so does a map without line data."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from device_matrix import selection
from device_matrix.errors import ResultsError
from device_matrix.records import testmap
from device_matrix.records.testmap import TestMap

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RULES = selection.Rules(max_age=timedelta(days=14), full=("conftest.py", "pyproject.toml"), ignore=())

LIB = "SCALE = 2\n\n\ndef double(x):\n    return x * SCALE\n\n\ndef negate(x):\n    y = -x\n    return y\n"
TESTS = (
    "from lib import double, negate\n\n\n"
    "def test_double():\n    assert double(3) == 6\n\n\n"
    "def test_negate():\n    assert negate(3) == -3\n"
)
OTHER = "def test_other():\n    assert True\n"  # a test module that does not import lib
SUITE = {"lib.py": LIB, "test_lib.py": TESTS, "test_other.py": OTHER}


# ------------------------------------------------------------------ the plan, pure

BODIES_TESTS = {"t.py::test_double": frozenset({"lib.py", "t.py"}), "t.py::test_negate": frozenset({"lib.py", "t.py"})}
LINES = {
    "t.py::test_double": {"lib.py": frozenset({5}), "t.py": frozenset({5})},
    "t.py::test_negate": {"lib.py": frozenset({9, 10}), "t.py": frozenset({9})},
}


def _map(lines: dict[str, dict[str, frozenset[int]]] | None = LINES) -> TestMap:
    imports = {"lib.py": frozenset({1, 4, 8}), "t.py": frozenset({1, 4, 8})}
    return TestMap("cpu", "a" * 40, "2026-11-30T12:00:00+00:00", BODIES_TESTS, imports, lines)


def _ran(m: TestMap, changed: str, spans: selection.Spans) -> set[str]:
    p = selection.plan(m, [changed], row="cpu", rules=RULES, now=NOW, bodies=[changed], functions={changed: spans})
    return {n for n in m.tests if p.decide(n).run}


def test_the_plan_narrows_a_body_change_to_the_tests_that_ran_a_line_of_the_function() -> None:
    assert _ran(_map(), "lib.py", ((9, 10),)) == {"t.py::test_negate"}
    assert _ran(_map(), "lib.py", ((5, 5),)) == {"t.py::test_double"}
    assert _ran(_map(), "t.py", ((9, 9),)) == {"t.py::test_negate"}


def test_a_changed_function_no_test_ran_keeps_the_file_s_rule() -> None:
    # lines 20-22: a function of lib.py no test of the map ran (it may run where the map does not measure)
    assert _ran(_map(), "lib.py", ((9, 10), (20, 22))) == set(BODIES_TESTS)
    assert _ran(_map(), "t.py", ((20, 22),)) == set(BODIES_TESTS)


def test_a_map_without_line_data_keeps_the_file_s_rule() -> None:
    assert _ran(_map(None), "lib.py", ((9, 10),)) == set(BODIES_TESTS)
    # a test the line data does not name runs by its files
    partial = {"t.py::test_double": LINES["t.py::test_double"]}
    assert _ran(_map(partial), "lib.py", ((9, 10),)) == set(BODIES_TESTS)


def test_a_change_that_is_not_in_bodies_only_is_not_narrowed() -> None:
    m = _map()
    p = selection.plan(m, ["lib.py"], row="cpu", rules=RULES, now=NOW, bodies=[], functions={"lib.py": ((9, 10),)})
    assert p.full_reason == "lib.py changes code that runs when it is imported"


def test_an_old_map_of_files_alone_reads_and_selects_by_files(tmp_path: Path) -> None:
    path = tmp_path / testmap.FILE_NAME
    old = {
        "schema": testmap.SCHEMA,
        "version": 1,
        "row": "cpu",
        "commit": "a" * 40,
        "created": "2026-11-30T12:00:00+00:00",
        "files": ["lib.py", "t.py"],
        "tests": {"t.py::test_double": [0, 1], "t.py::test_negate": [0, 1]},
        "imports": {"lib.py": [1, 4, 8]},
    }
    path.write_text(json.dumps(old))
    m = testmap.read(path)
    assert m.lines is None
    assert m.known() == {"lib.py", "t.py"}
    assert _ran(m, "lib.py", ((9, 10),)) == set(BODIES_TESTS)


def test_the_lines_round_trip_each_distinct_set_stored_once(tmp_path: Path) -> None:
    path = tmp_path / testmap.FILE_NAME
    same = {"lib.py": frozenset({5, 6, 7, 9}), "t.py": frozenset({5})}
    m = TestMap("cpu", "a" * 40, "2026-11-30T12:00:00+00:00", BODIES_TESTS, {}, dict.fromkeys(BODIES_TESTS, same))
    testmap.write(path, m)
    data = json.loads(path.read_text())
    assert data["spans"] == ["5-7,9", "5"]
    assert testmap.read(path) == m
    assert testmap.ranges([1, 2, 3, 10, 12, 13]) == "1-3,10,12-13"
    assert testmap.from_ranges("1-3,10,12-13") == {1, 2, 3, 10, 12, 13}


@pytest.mark.parametrize(
    ("spans", "lines"),
    [
        ('["x"]', "{}"),
        ('["3-1"]', '{"t.py::a": [[0, 0]]}'),
        ('["1"]', '{"t.py::a": [[5, 0]]}'),
        ('["1"]', '{"t.py::a": [[0, 3]]}'),
    ],
)
def test_damaged_line_data_is_told(tmp_path: Path, spans: str, lines: str) -> None:
    path = tmp_path / testmap.FILE_NAME
    path.write_text(
        f'{{"schema": "{testmap.SCHEMA}", "version": 2, "row": "cpu", "commit": null, "created": "x", '
        f'"files": ["a.py"], "tests": {{"t.py::a": [0]}}, "spans": {spans}, "lines": {lines}}}'
    )
    with pytest.raises(ResultsError, match="its lines are not sets of line ranges"):
        testmap.read(path)


# ------------------------------------------------------------------ which functions a change is in

OLD = (
    "import pytest\n"  # 1
    "\n"
    "\n"
    "def f(x):\n"  # 4
    "    return x\n"  # 5
    "\n"
    "\n"
    "class C:\n"  # 8
    "    def m(self):\n"  # 9
    "        # a note\n"  # 10
    "        return 1\n"  # 11
    "\n"
    "\n"
    '@pytest.fixture(scope="module")\n'  # 14
    "def wide():\n"  # 15
    "    return 2\n"  # 16
)


def test_the_changed_functions_are_their_body_spans_in_the_old_file() -> None:
    assert selection.changed_functions(OLD, OLD.replace("return x", "return -x"), frozenset({5})) == ((5, 5),)
    assert selection.changed_functions(OLD, OLD.replace("return 1", "return 3"), frozenset({11})) == ((11, 11),)
    # lines added at a function's end: the diff touches its last line and the blank one after
    added = OLD.replace("    return x\n", "    return x\n    print(x)\n")
    assert selection.changed_functions(OLD, added, frozenset({5, 6})) == ((5, 5),)
    # a comment changed: no function's code differs, yet the line it touched is in m
    assert selection.changed_functions(OLD, OLD.replace("a note", "a word"), frozenset({10})) == ((11, 11),)


def test_what_cannot_be_told_by_function_is_none() -> None:
    # a fixture of a wider scope: the first test that asked for it alone names its lines
    assert selection.changed_functions(OLD, OLD.replace("return 2", "return 4"), frozenset({16})) is None
    assert selection.changed_functions(OLD, OLD + "\n\ndef g():\n    pass\n", frozenset({17})) is None
    assert selection.changed_functions(OLD, "def (", frozenset({1})) is None
    assert selection.changed_functions(None, OLD, frozenset()) is None
    # a module-level comment: no function changed
    assert (
        selection.changed_functions(OLD, OLD.replace("import pytest\n", "import pytest  # x\n"), frozenset({1})) is None
    )


CALLED = "def setup():\n    return 1\n\n\nVALUE = setup()\n"


def test_the_import_guard_drops_only_a_def_line_right_before_inserted_body_lines() -> None:
    inserted = "@@ -1,0 +2 @@\n+    print(1)\n"
    assert selection.import_guard(CALLED, inserted) == {2}
    # a body that ran at import (setup() at module level) is still what runs at import
    new = CALLED.replace("def setup():\n", "def setup():\n    print(1)\n")
    assert selection.bodies_only(CALLED, new, selection.import_guard(CALLED, inserted), frozenset({1, 2, 5})) is False
    assert selection.bodies_only(CALLED, new, selection.import_guard(CALLED, inserted), frozenset({1, 5})) is True
    # a replacement, or an insertion elsewhere, keeps every line it touched
    assert selection.import_guard(CALLED, "@@ -1 +1 @@\n-def setup():\n+def setup(): \n") == {1}
    assert selection.import_guard(CALLED, "@@ -2,0 +3 @@\n+    print(1)\n") == {2, 3}
    assert selection.import_guard("def (", inserted) == {1, 2}


def test_a_function_s_docstring_is_no_body_change() -> None:
    # f.__doc__ is made at import: a test may read it without running f
    old = 'def f():\n    """Say hello."""\n    return 1\n'
    assert not selection.bodies_only(old, old.replace("hello", "hi"), frozenset({2}), frozenset())
    assert selection.bodies_only(old, old.replace("return 1", "return 2"), frozenset({3}), frozenset())
