"""Integration: odd inputs that made the run record lie or the runner fail (exit 70)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Project, clean_env
from tests.test_runner_review import _suite

pytestmark = pytest.mark.slow


# --- 1. nodeids that are not plain text: a file name that is not UTF-8, raw parametrize ids ---

ABORT_THEN_PASS = "import os\n\n\ndef test_abort():\n    os.abort()\n\n\ndef test_after():\n    pass\n"


def test_a_test_file_named_in_no_utf8_is_recorded_and_resumed(project: Callable[..., Project]) -> None:
    p = project("passing")
    _suite(p, "latin", {"test_plain.py": "def test_plain():\n    pass\n"})
    # a legacy file name in Latin-1: pytest's nodeid holds a lone surrogate for the byte
    folder = os.fsencode(p.root / "suites" / "latin")
    Path(os.fsdecode(os.path.join(folder, b"test_caf\xe9.py"))).write_text(ABORT_THEN_PASS)
    proc = subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--device", "fixture", "--reruns=0"],
        cwd=p.root,
        # a terminal that takes UTF-8 only, as under an ordinary UTF-8 locale
        env={**clean_env(), "PYTHONIOENCODING": "utf-8:strict"},
        capture_output=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert b"Traceback" not in proc.stderr
    record = p.record()
    outcomes = {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}
    # the test after the abort ran in the resumed process, selected by its own nodeid
    assert outcomes == {"test_abort": "crashed", "test_after": "passed", "test_plain": "passed"}
    assert record["status"] == "crashed"
    cases = ET.parse(p.results / "fixture" / "junit.xml").getroot().iter("testcase")
    assert sorted(c.get("name") for c in cases) == ["test_abort", "test_after", "test_plain"]


RAW_IDS = r"""
import os
import pytest

IDS = ["line\nbreak", "para\u2029sep", "line\u2028sep", "nel\x85x", "tab\tx", "uni\u00e9"]


def test_a_abort():
    os.abort()


@pytest.mark.parametrize("v", range(len(IDS)), ids=IDS)
def test_b_raw(v):
    pass
"""


def test_raw_parametrize_ids_survive_a_resume(project: Callable[..., Project]) -> None:
    p = project("passing")
    _suite(p, "raw", {"test_raw.py": RAW_IDS})
    (p.root / "pytest.ini").write_text(
        "[pytest]\ndisable_test_id_escaping_and_forfeit_all_rights_to_community_support = true\n"
    )
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    outcomes = {t["nodeid"].split("::", 1)[1]: t["outcome"] for t in record["tests"]}
    raw = {k: v for k, v in outcomes.items() if k.startswith("test_b_raw")}
    assert len(raw) == 6 and set(raw.values()) == {"passed"}, outcomes
    assert outcomes["test_a_abort"] == "crashed"


# --- 2. a plugin that reruns failed tests (pytest-rerunfailures' protocol) -------------

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
    _suite(p, "rerun", {"conftest.py": RERUN_CONFTEST, "test_rerun.py": RERUN_TESTS})
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


# --- 3. durations that are not a number of seconds (a plugin's own) ---------------------

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
    _suite(p, "durations", {"conftest.py": DURATION_CONFTEST, "test_durations.py": DURATION_TESTS})
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


# --- 4. a forked copy that returns into pytest while a module is imported ---------------

FORK_AT_IMPORT = """
import os

pid = os.fork()
if pid:
    os.waitpid(pid, 0)
# the copy goes on: under plain pytest it would collect and run the whole session again


def test_in_forking_module():
    pass
"""


def test_a_copy_forked_while_importing_a_module_names_the_module(project: Callable[..., Project]) -> None:
    p = project("passing")
    _suite(p, "fork_import", {"test_forks.py": FORK_AT_IMPORT, "test_other.py": "def test_other():\n    pass\n"})
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    outcomes = {t["nodeid"]: t for t in record["tests"]}
    assert {n: t["outcome"] for n, t in outcomes.items()} == {
        "suites/fork_import/test_forks.py::test_in_forking_module": "passed",
        "suites/fork_import/test_other.py::test_other": "passed",
        "suites/fork_import/test_forks.py": "error",
    }
    assert "imported" in (outcomes["suites/fork_import/test_forks.py"]["message"] or "")
    assert record["status"] == "failed"


# --- 5. a plugin hook that raises: pytest's INTERNALERROR is in the row's reason --------

RAISING_HOOK = """
def pytest_runtest_logreport(report):
    if report.nodeid.endswith("test_b_hook_raises") and report.when == "call":
        raise RuntimeError("a plugin's own bug")
"""


def test_an_internal_error_of_pytest_is_the_rows_reason(project: Callable[..., Project]) -> None:
    p = project("passing")
    tests = (
        "def test_a_before():\n    pass\n\n\ndef test_b_hook_raises():\n    pass\n\n\ndef test_c_after():\n    pass\n"
    )
    _suite(p, "hook", {"conftest.py": RAISING_HOOK, "test_hook.py": tests})
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    outcomes = {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}
    assert outcomes == {"test_a_before": "passed", "test_b_hook_raises": "error", "test_c_after": "not_run"}
    reason = record["reason"] or ""
    assert "pytest exited 3 (internal error)" in reason and "a plugin's own bug" in reason, reason


# --- 6. subtests (pytest's `subtests` fixture, unittest's subTest) ----------------------

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
    _suite(p, "sub", {"test_sub.py": SUBTESTS})
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
