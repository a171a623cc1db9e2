"""Other plugins and pytest's own features in the child: a plugin's reruns, odd durations, subtests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.runs import write_suite

pytestmark = pytest.mark.slow


# What pytest-rerunfailures does for a test with reruns left: each execution between its
# own logstart and logfinish, the failed phase reported with outcome "rerun".
RERUN_CONFTEST = """
import pytest
from _pytest.runner import runtestprotocol


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    for execution in range(1, 4):
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        again = execution < 3 and any(r.failed for r in reports)
        for report in reports:
            if again and report.failed:
                report.outcome = "rerun"
            item.ihook.pytest_runtest_logreport(report=report)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        if not again:
            return True
    return True
"""


RERUN_TESTS = """
import os
from pathlib import Path

COUNT = Path(os.environ["COUNT"])


def _execution(name):
    seen = COUNT.read_text().split() if COUNT.exists() else []
    COUNT.write_text(" ".join([*seen, name]))
    return seen.count(name) + 1


def test_a_flaky():
    assert _execution("flaky") == 2


def test_b_always_fails():
    _execution("fails")
    assert False


def test_c_passes():
    _execution("passes")
"""


def test_reruns_of_a_plugin_are_not_a_crash(project: Callable[..., Project], tmp_path: Path) -> None:
    p = project("passing")
    write_suite(p, "rerun", {"conftest.py": RERUN_CONFTEST, "test_rerun.py": RERUN_TESTS})
    count = tmp_path / "count.txt"
    proc = p.run("run", "--device", "fixture", "--reruns", "0", env={"COUNT": str(count)})
    record = p.record()
    assert record["crashes"] == [], proc.stdout + proc.stderr
    outcomes = {t["nodeid"].rsplit("::", 1)[-1]: t for t in record["tests"]}
    assert {k: t["outcome"] for k, t in outcomes.items()} == {
        "test_a_flaky": "passed",
        "test_b_always_fails": "failed",
        "test_c_passes": "passed",
    }
    assert "after 1 rerun" in (outcomes["test_a_flaky"]["message"] or "")
    # every execution ran in the one process: none was cut short
    assert count.read_text().split() == ["flaky", "flaky", "fails", "fails", "fails", "passes"]
    assert proc.returncode == 1
    counters = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("fixture [")]
    assert counters == ["[1/3]", "[2/3]", "[3/3]"]


DURATION_CONFTEST = """
import pytest

VALUES = {"nan": float("nan"), "inf": float("inf"), "huge": 1e308, "tiny": 5e-324}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    report.duration = VALUES[item.name.rsplit("_", 1)[-1]]
    return report
"""


DURATION_TESTS = "".join(
    f"def test_passes_{k}():\n    pass\n\n\ndef test_fails_{k}():\n    assert 0\n\n\n"
    for k in ("nan", "inf", "huge", "tiny")
)


def _strict(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_duration_that_is_not_a_number_is_no_crash(project: Callable[..., Project]) -> None:
    p = project("passing")
    write_suite(p, "durations", {"conftest.py": DURATION_CONFTEST, "test_durations.py": DURATION_TESTS})
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = _strict((p.results / "fixture" / "run.json").read_text())
    assert isinstance(record, dict)
    assert record["crashes"] == []
    outcomes = {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}
    assert outcomes == {
        f"test_{word}_{k}": "passed" if word == "passes" else "failed"
        for k in ("nan", "inf", "huge", "tiny")
        for word in ("passes", "fails")
    }
    _strict((p.results / "fixture" / "report.json").read_text())


SUBTESTS = """
import unittest

import pytest


def test_a_one_subtest_skipped(subtests):
    with subtests.test("first"):
        pytest.skip("not on this row")
    with subtests.test("second"):
        pass


def test_b_one_subtest_fails(subtests):
    with subtests.test("first"):
        assert 1 == 2, "the first subtest"
    with subtests.test("second"):
        pass


class TestUnit(unittest.TestCase):
    def test_c_subtest_skipped(self):
        with self.subTest(i=1):
            self.skipTest("not this one")
        with self.subTest(i=2):
            pass

    def test_d_subtest_fails(self):
        with self.subTest(i=1):
            self.assertEqual(1, 2)


def test_e_after():
    pass
"""


def test_subtests_count_once_and_a_skipped_subtest_skips_no_test(project: Callable[..., Project]) -> None:
    p = project("passing")
    write_suite(p, "sub", {"test_sub.py": SUBTESTS})
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in record["tests"]}
    # as pytest reports them: a skipped subtest leaves its test passed, a failed one fails it
    assert {k: t["outcome"] for k, t in tests.items()} == {
        "test_a_one_subtest_skipped": "passed",
        "test_b_one_subtest_fails": "failed",
        "test_c_subtest_skipped": "passed",
        "test_d_subtest_fails": "failed",
        "test_e_after": "passed",
    }
    assert "the first subtest" in (tests["test_b_one_subtest_fails"]["message"] or "")
    assert "[first]" in (tests["test_b_one_subtest_fails"]["message"] or "")
    assert "(i=1)" in (tests["test_d_subtest_fails"]["message"] or "")
    assert "1 != 2" in (tests["test_d_subtest_fails"]["message"] or "")
    counters = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("fixture [")]
    assert counters == [f"[{k}/5]" for k in range(1, 6)]


def test_a_project_that_turns_plugin_autoloading_off_still_runs_journaled(project: Callable[..., Project]) -> None:
    # the runner's plugin is named on the child's command line, not only found as an entry point
    p = project("passing")
    proc = p.run("run", "--device", "fixture", env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "passed" and record["tests"]
    assert {t["outcome"] for t in record["tests"]} == {"passed"}
