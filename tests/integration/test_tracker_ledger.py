"""The tests of this concept that start a process; the rest are in tests/unit/test_tracker_ledger.py (#41)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from device_matrix.issues.ledger import Ledger
from tests.conftest import clean_env
from tests.unit.test_tracker_ledger import _write_results


def _fingerprints(ledger_path: Path) -> Counter[str]:
    ledger = Ledger(ledger_path)
    try:
        return Counter(i.fingerprint for i in ledger.list_issues() if i.fingerprint)
    finally:
        ledger.close()


def test_three_concurrent_syncs_file_no_duplicate(tmp_path: Path) -> None:
    _write_results(tmp_path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "device_matrix", "--project", str(tmp_path), "issues", "sync"],
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    counts = _fingerprints(tmp_path / ".device-matrix" / "ledger.sqlite")  # the project's (#42)
    assert len(counts) == 6 and set(counts.values()) == {1}  # 1 crash + 5 skips, each once
    filed = sum(int(o.split(" filed,")[0].rsplit(", ", 1)[-1]) for o, _ in outs)
    assert filed == 6
