"""The tests of this concept that start a process; the rest are in tests/unit/test_triage_gate.py (#41)."""

from __future__ import annotations

from pathlib import Path

from device_matrix.errors import EXIT_TESTS_FAILED
from tests.unit.test_triage_gate import _triage


def test_the_gate_holds_a_new_failure(tmp_path: Path) -> None:
    assert _triage(tmp_path, "--fail-on", "unknown") == EXIT_TESTS_FAILED
