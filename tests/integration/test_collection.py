"""Before the tests: a module skipped whole, a conftest.py or module that kills the process, a row that dies first."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable

import pytest

from tests.conftest import Project
from tests.runs import write_suite

pytestmark = pytest.mark.slow


def test_a_module_skipped_as_a_whole_is_in_the_record(project: Callable[..., Project]) -> None:
    p = project("module_skip")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes == {
        "suites/module_skip/test_module_skip.py": "skipped",
        "suites/module_skip/test_present.py::test_present": "passed",
    }
    (skipped,) = [t for t in record["tests"] if t["outcome"] == "skipped"]
    assert "a_package_that_is_not_installed" in skipped["message"]


def test_a_conftest_that_crashes_on_import_is_named(project: Callable[..., Project]) -> None:
    p = project("passing")
    write_suite(
        p,
        "conftest_crash",
        {
            "test_fine.py": "def test_fine():\n    pass\n",
            "sub/conftest.py": "import os\n\nos.abort()\n",
            "sub/test_under.py": "def test_under():\n    pass\n",
        },
    )
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = record["crashes"]
    assert crash["phase"] == "collection"
    assert crash["nodeid"] == "suites/conftest_crash/sub/conftest.py"
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes["suites/conftest_crash/test_fine.py::test_fine"] == "passed"
    assert outcomes["suites/conftest_crash/sub/conftest.py"] == "crashed"


def test_a_conftest_that_crashes_before_pytest_configures_is_in_the_crash_stack(
    project: Callable[..., Project],
) -> None:
    # the folder named on the command line: its conftest.py is imported before any plugin
    # is configured, so the journal has nothing yet; the Python stack still names it
    p = project("passing")
    conftest = "import os\n\n\ndef boom():\n    os.abort()\n\n\nboom()\n"
    (p.root / "suites" / "passing" / "conftest.py").write_text(conftest)
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = p.record()["crashes"]
    assert crash["diagnosis"]["signal_name"] == "SIGABRT"
    stack = crash["diagnosis"]["python_stack"] or ""
    assert "suites/passing/conftest.py" in stack and "boom" in stack, crash["diagnosis"]


def test_junit_of_a_row_that_crashed_before_any_test_carries_the_reason(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / "suites" / "passing" / "conftest.py").write_text("import os\n\nos.abort()\n")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    assert record["tests"] == [] and record["status"] == "crashed"
    suite = ET.parse(p.results / "fixture" / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("errors")) == ("1", "1")
    (error,) = suite.iter("error")
    assert error.get("message") == record["reason"]
    assert "SIGABRT" in (error.text or "")


def test_isolation_goes_on_past_a_module_that_crashes_on_import(project: Callable[..., Project]) -> None:
    p = project("iso_crash", row='isolation = "file"')
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes == {
        "suites/iso_crash/test_a.py::test_a": "passed",
        "suites/iso_crash/test_b_dies.py": "crashed",
        "suites/iso_crash/test_c.py::test_c": "passed",
    }
