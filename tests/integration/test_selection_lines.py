"""The tests of this concept that start a process; the rest are in tests/unit/test_selection_lines.py (#41)."""

from __future__ import annotations

import json
from pathlib import Path

from device_matrix.records import testmap
from tests.builders import recorded_git_project
from tests.conftest import Project
from tests.runs import outcomes_of
from tests.unit.test_selection_lines import LIB, SUITE, TESTS


def _recorded(tmp_path: Path) -> Project:
    return recorded_git_project(tmp_path, SUITE)


def _select(p: Project) -> tuple[dict[str, str], dict[str, object]]:
    p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    return outcomes_of(rec), rec


def _message(rec: dict[str, object], name: str) -> str:
    tests = rec["tests"]
    assert isinstance(tests, list)
    (found,) = [t for t in tests if t["nodeid"].endswith(f"::{name}")]
    return str(found["message"])


def test_the_map_records_the_lines_each_test_ran(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    path = p.results / "fixture" / testmap.FILE_NAME
    data = json.loads(path.read_text())
    assert data["version"] == 2
    m = testmap.read(path)
    assert m.lines is not None
    double = m.lines["suites/mine/test_lib.py::test_double"]
    negate = m.lines["suites/mine/test_lib.py::test_negate"]
    assert double["suites/mine/lib.py"] == {5}  # double's body, not its def (that ran at import)
    assert negate["suites/mine/lib.py"] == {9, 10}
    assert double["suites/mine/test_lib.py"] == {5}
    assert negate["suites/mine/test_lib.py"] == {9}


def test_a_change_to_one_function_s_body_runs_only_the_test_that_ran_it(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    (p.root / "suites" / "mine" / "lib.py").write_text(LIB.replace("y = -x", "y = x"))
    outcomes, rec = _select(p)
    assert outcomes == {"test_double": "deselected", "test_negate": "failed", "test_other": "deselected"}
    assert _message(rec, "test_double") == "ran none of the changed functions of suites/mine/lib.py"
    assert rec["test_selection"]["by_reason"] == {"covers": 1, "deselected": 2}  # type: ignore[index]


def test_lines_added_to_a_function_run_the_tests_that_ran_it(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    (p.root / "suites" / "mine" / "lib.py").write_text(LIB.replace("    y = -x\n", "    y = -x\n    y -= 1\n"))
    outcomes, _ = _select(p)
    assert outcomes == {"test_double": "deselected", "test_negate": "failed", "test_other": "deselected"}


def test_a_module_level_constant_runs_only_the_tests_that_ran_code_reading_it(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    (p.root / "suites" / "mine" / "lib.py").write_text(LIB.replace("SCALE = 2", "SCALE = 20"))
    outcomes, rec = _select(p)
    # negate reads no SCALE: its test cannot see the change (the map's lines and the names read)
    assert outcomes == {"test_double": "failed", "test_negate": "deselected", "test_other": "deselected"}
    assert rec["test_selection"]["by_reason"] == {"reads": 1, "deselected": 2}  # type: ignore[index]
    assert _message(rec, "test_negate") == "reads none of the names suites/mine/lib.py binds anew"


def test_a_changed_test_function_runs_only_that_test(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    (p.root / "suites" / "mine" / "test_lib.py").write_text(TESTS.replace("== -3", "== 3"))
    outcomes, rec = _select(p)
    assert outcomes == {"test_double": "deselected", "test_negate": "failed", "test_other": "deselected"}
    assert rec["test_selection"]["by_reason"] == {"own_file": 1, "deselected": 2}  # type: ignore[index]
    assert _message(rec, "test_double") == "ran none of the changed functions of suites/mine/test_lib.py"


def test_a_test_file_s_import_change_runs_all_of_its_tests(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    (p.root / "suites" / "mine" / "test_lib.py").write_text("LIMIT = 1\n" + TESTS)
    outcomes, _ = _select(p)
    assert outcomes == {"test_double": "passed", "test_negate": "passed", "test_other": "deselected"}


def test_lines_inserted_right_after_a_def_line_are_that_function_s_body(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    (p.root / "suites" / "mine" / "lib.py").write_text(LIB.replace("def double(x):\n", "def double(x):\n    x += 1\n"))
    outcomes, _ = _select(p)
    assert outcomes == {"test_double": "failed", "test_negate": "deselected", "test_other": "deselected"}
