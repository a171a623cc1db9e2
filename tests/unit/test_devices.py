"""Presence checks: ordered, env override first."""

from __future__ import annotations

from pathlib import Path

from device_matrix.config import Row
from device_matrix.devices import detect


def row(*checks: str) -> Row:
    return Row(name="tpu", pjrt_device="TPU", presence=checks)


def test_env_override_decides_first(tmp_path: Path) -> None:
    (tmp_path / "accel0").touch()
    r = row("env:DM_TPU", f"glob:{tmp_path}/accel*")
    assert detect(r, {"DM_TPU": "0"}).present is False
    assert detect(r, {"DM_TPU": "yes"}).present is True
    assert detect(r, {}).present is True  # unset: the glob decides


def test_absent_lists_what_was_tried(tmp_path: Path) -> None:
    p = detect(row("env:DM_TPU", f"glob:{tmp_path}/accel*", "command:definitely-not-a-tool -L"), {})
    assert not p.present
    assert "$DM_TPU unset" in p.reason and "accel*" in p.reason and "not found" in p.reason
