"""The tests of this concept that start a process; the rest are in tests/unit/test_devices.py (#41)."""

from __future__ import annotations

from pathlib import Path

from device_matrix.devices import detect
from tests.unit.test_devices import row


def test_command_check(tmp_path: Path) -> None:
    assert detect(row("command:true"), {}).present
    assert not detect(row("command:false"), {}).present
