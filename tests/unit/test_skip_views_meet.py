"""The two views of a skip meet (#32): a runtime ``pytest.skip("This test only works on
TPU")`` is found by the source scan with its file, line, devices and by-design kind, and
the run records it as a plain skip (no devices, no file). Triage gives the recorded skip
what the scan found, and counts it as the by-design device skip it is.
"""

from __future__ import annotations

from device_matrix.report.skip_meet import meet
from device_matrix.skips import DeviceSkip
from tests import records as R

TPU_ONLY = """
import os

import pytest


def device_type():
    return os.environ.get("PJRT_DEVICE", "CPU")


@pytest.mark.parametrize("n", range(5))
def test_on_tpu(n):
    if device_type() != "TPU":
        pytest.skip("This test only works on TPU")
    assert n >= 0


def test_needs_a_package():
    pytest.skip("no such package here")
"""


def _declared(test: str, *, by_design: bool, reason: str = "only on TPU") -> DeviceSkip:
    return DeviceSkip(
        mode="skip",
        devices=("cpu", "cuda"),
        issue=None,
        reason=reason,
        source="pytest",
        test=test,
        file=test.split("::", 1)[0],
        line=7,
        form="pytest.skip",
        by_design=by_design,
    )


def _runtime(nodeid: str, reason: str = "Skipped: only on TPU") -> dict[str, object]:
    skip = {"mode": "skip", "devices": [], "issue": None, "reason": reason, "source": "pytest"}
    skip |= {"expires": None, "file": None, "line": None}
    return R.test(nodeid, "skipped", skip=skip)


def test_a_skip_meets_only_its_own_tests_declaration_with_the_same_reason() -> None:
    rec = R.record(
        "cpu",
        [
            _runtime("a/test_x.py::test_one[2]"),  # a case of the declared test
            _runtime("a/test_x.py::TestC::test_two"),  # under the declared class
            _runtime("a/test_x.py::test_other"),  # another test of the file
            _runtime("a/test_x.py::test_one[3]", reason="Skipped: no network"),  # another reason
        ],
    )
    declared = [
        _declared("a/test_x.py::test_one", by_design=True),
        _declared("a/test_x.py::TestC", by_design=False, reason=""),
    ]
    assert meet([rec], declared) == 2  # type: ignore[list-item]
    skips = [t["skip"] for t in rec["tests"]]
    assert (skips[0]["devices"], skips[0]["file"], skips[0]["line"], skips[0]["by_design"]) == (
        ["cpu", "cuda"],
        "a/test_x.py",
        7,
        True,
    )
    assert skips[1]["devices"] == ["cpu", "cuda"] and skips[1]["by_design"] is False
    assert skips[2]["devices"] == [] and skips[3]["devices"] == []
