"""The tests of this concept that start a process; the rest are in tests/unit/test_selection_conftest.py (#41)."""

from __future__ import annotations

from pathlib import Path

from tests.builders import recorded_git_project
from tests.runs import outcomes_of
from tests.unit.test_selection_conftest import SUITE


def test_a_fixture_changed_in_a_folder_s_conftest_runs_that_folder_s_tests(tmp_path: Path) -> None:
    p = recorded_git_project(tmp_path, SUITE)
    conftest = p.root / "suites" / "mine" / "sub" / "conftest.py"
    conftest.write_text(conftest.read_text().replace("return limits.LIMIT", "return limits.LIMIT + 1"))
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    assert outcomes_of(rec) == {"test_top": "deselected", "test_limit": "failed", "test_plain": "passed"}, rec[
        "test_selection"
    ]
    assert proc.returncode == 1
    # test_limit ran the fixture (the map says so), test_plain is under the conftest
    assert rec["test_selection"]["by_reason"] == {"covers": 1, "conftest": 1, "deselected": 1}
    # a hook acts on every test of the session: every test runs
    conftest.write_text(conftest.read_text() + "\n\ndef pytest_collection_modifyitems(items):\n    pass\n")
    p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    assert outcomes_of(rec) == {"test_top": "passed", "test_limit": "failed", "test_plain": "passed"}, rec[
        "test_selection"
    ]
    assert rec["test_selection"]["full_reason"] == (
        "suites/mine/sub/conftest.py changes, which the test map cannot follow"
    )
