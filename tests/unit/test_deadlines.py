"""Deadlines: the test, module or phase running when one passes is the one recorded, with the deadline that passed."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_matrix import config
from device_matrix.errors import ConfigError

pytestmark = pytest.mark.slow


# a process phase (starting, importing one module, exiting) gets phase_timeout_min at
# least, however short test_timeout; 30 s by default, lowered here so no test waits it out
PHASE_MIN = "phase_timeout_min = 10"


def test_the_phase_minimum_is_30_seconds_unless_the_configuration_says_otherwise(tmp_path: Path) -> None:
    assert config.load(tmp_path).phase_timeout_min == 30.0  # the packaged default
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\nphase_timeout_min = 2.5\n")
    assert config.load(tmp_path).phase_timeout_min == 2.5


@pytest.mark.parametrize("value", ["0", "-1", '"30"', "inf"])
def test_a_phase_minimum_that_is_not_a_number_of_seconds_is_refused(tmp_path: Path, value: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.device-matrix]\nphase_timeout_min = {value}\n")
    with pytest.raises(ConfigError) as info:
        config.load(tmp_path)
    assert "phase_timeout_min" in str(info.value) and "seconds" in str(info.value)
