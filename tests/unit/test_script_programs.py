"""A program: a ``scripts`` entry of ``kind = "program"``, one test whose outcome is its process's.

The part of these tests that starts no process; the rest is in tests/integration/test_script_programs.py (#41)."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_matrix import config
from device_matrix.errors import EXIT_CONFIG, ConfigError


def test_a_kind_outside_the_closed_set_is_refused_naming_the_kinds(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[[tool.device-matrix.devices.cpu.scripts]]\nfile = "scripts/train.py"\nkind = "binary"\n'
    )
    with pytest.raises(ConfigError) as err:
        config.load(tmp_path)
    assert err.value.exit_code == EXIT_CONFIG
    assert err.value.key == "tool.device-matrix.devices.cpu.scripts[0].kind"
    assert err.value.allowed == "unittest | program"
    assert err.value.tip and 'kind = "program"' in err.value.tip
    (tmp_path / "pyproject.toml").write_text('[[tool.device-matrix.devices.cpu.scripts]]\nfile = "scripts/x.py"\n')
    assert config.load(tmp_path).row("cpu").scripts[0].kind == "unittest"
