"""The tests of this concept that start a process; the rest are in tests/unit/test_gang.py (#41)."""

from __future__ import annotations

import signal
import subprocess
import sys

from device_matrix.diagnostics import diagnose
from device_matrix.redact import Redactor
from tests.unit.test_gang import _cpu_row, _rank, _record, _recorded


def test_a_crashed_rank_is_diagnosed_from_its_own_output() -> None:
    row, gang = _cpu_row()
    code = "import faulthandler\nfaulthandler.enable()\ndef deep():\n    faulthandler._sigsegv()\ndeep()\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == -signal.SIGSEGV
    output = proc.stdout + proc.stderr
    record = _record(
        row, gang, [_rank(0, proc.returncode, output), _rank(1, 1, _recorded("gang_rank1_eaddrinuse.txt"))]
    )
    (test,) = record["tests"]  # type: ignore[misc]
    (crash,) = record["crashes"]  # type: ignore[misc]
    assert test["outcome"] == "crashed" and test["crash"] == crash["id"]  # no xfail admits a crash
    local = diagnose(returncode=proc.returncode, fault_text="", output_text=output, redactor=Redactor())
    assert crash["diagnosis"]["fingerprint"] == local["fingerprint"] and crash["diagnosis"]["signal_name"] == "SIGSEGV"
    assert "in deep" in crash["diagnosis"]["python_stack"]
    assert crash["attempt"] == 1 and "RANK=0" in crash["repro"] and "-m suites.collectives.mp_worker" in crash["repro"]


def test_a_rank_that_waits_on_a_crashed_rank_does_not_take_the_crashs_place() -> None:
    """Rank 1 segfaults; rank 0, in a collective with it, hangs until its timeout.

    Seen: the gang's test named rank 0's timeout as its crash (its fingerprint a generic hang,
    its attempt rank 0's), while the segfault that caused it was only the second crash.
    """
    row, gang = _cpu_row()
    code = "import faulthandler\nfaulthandler.enable()\nfaulthandler._sigsegv()\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == -signal.SIGSEGV
    hung = _rank(0, -signal.SIGABRT, "Fatal Python error: Aborted\n", timed_out=True)
    record = _record(row, gang, [hung, _rank(1, proc.returncode, proc.stdout + proc.stderr)])
    (test,) = record["tests"]  # type: ignore[misc]
    crashes = {c["id"]: c for c in record["crashes"]}  # type: ignore[attr-defined]
    assert test["outcome"] == "crashed" and len(crashes) == 2
    crash = crashes[test["crash"]]
    assert crash["diagnosis"]["signal_name"] == "SIGSEGV" and "RANK=1" in crash["repro"]
    assert test["attempt"] == crash["attempt"] == 2  # rank 1's attempt, its log rank1.log
    assert test["message"].startswith("crashed: rank 1 ")
