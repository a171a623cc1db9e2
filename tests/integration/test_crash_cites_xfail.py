"""A test that crashes on a device whose xfail_device marker cites an issue: its crash and
its record carry that issue, as a skip's does (#41)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow

BODY = (
    "import ctypes\nimport time\n\nimport pytest\n\n\n"
    "def test_a():\n    pass\n\n\n"
    '@pytest.mark.xfail_device("fixture", issue="#9", reason="segfaults in the kernel")\n'
    "def test_dies():\n    ctypes.string_at(0)\n\n\n"
    '@pytest.mark.xfail_device("fixture", issue="ledger:4", reason="hangs")\n'
    "def test_hangs():\n    time.sleep(60)\n\n\n"
    "def test_z():\n    pass\n"
)


def test_a_crash_carries_the_issue_of_its_device_xfail(project: Callable[..., Project]) -> None:
    p = project("segv", row="test_timeout = 2")
    (p.root / "suites" / "segv" / "test_segv.py").write_text(BODY)
    proc = p.run("run", "--device", "fixture")  # each crash rerun alone too: the record keeps the issue
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in record["tests"]}
    crashes = {c["nodeid"].rsplit("::", 1)[-1]: c for c in record["crashes"]}
    for name, outcome, issue in (("test_dies", "crashed", "#9"), ("test_hangs", "timeout", "ledger:4")):
        test = tests[name]
        assert test["outcome"] == outcome, test
        assert test["skip"] is not None, test
        assert test["skip"]["mode"] == "xfail" and test["skip"]["issue"] == issue
        assert test["skip"]["devices"] == ["fixture"]
        assert crashes[name]["issue"] == issue, crashes[name]
    assert tests["test_z"]["outcome"] == "passed" and tests["test_z"]["skip"] is None
