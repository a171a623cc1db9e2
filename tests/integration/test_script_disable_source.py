"""#33: a test of a scripts entry skipped by the disable list is recorded as the disable
list's skip (its source, devices and issue), as the pytest plugin records one, not as a
skip the test's own code wrote."""

from __future__ import annotations

from pathlib import Path

from tests.integration.test_disable_runs import _project


def test_a_disabled_unittest_test_in_a_script_says_the_disable_list_skipped_it(tmp_path: Path) -> None:
    p = _project(tmp_path)
    for test in ("suites/dis/test_dis.py::test_plain", "test_x (__main__.TestY)"):
        filed = p.run("issues", "disable", test, "--device", "cuda", "--reason", "off on cuda")
        assert filed.returncode == 0, filed.stdout + filed.stderr
    proc = p.run("run", "--device", "cuda")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tests = {t["nodeid"]: t for t in p.record("cuda")["tests"]}
    pytest_skip = tests["suites/dis/test_dis.py::test_plain"]["skip"]
    script_skip = tests["test/test_script.py::TestY::test_x"]["skip"]
    assert pytest_skip["source"] == "disable_list"
    assert script_skip["source"] == "disable_list", script_skip
    assert (script_skip["devices"], script_skip["issue"]) == (["cuda"], "ledger:2")
    # the same skip as the plugin records: the same fields, its own issue
    assert script_skip == {**pytest_skip, "issue": "ledger:2", "reason": pytest_skip["reason"].replace(":1", ":2")}
