"""The tests of this concept that start a process; the rest are in tests/unit/test_project_install_steps.py (#41)."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_matrix.errors import EXIT_OK, EXIT_UNAVAILABLE
from tests.unit.test_project_install_steps import NOT_THERE, doctor


def test_doctor_says_a_project_install_that_resolves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # pytest is installed here: pip resolves it without an index
    code, lines = doctor(tmp_path, capsys, '[["pytest"]]')
    assert lines == ["project install: resolves here (pip install --dry-run pytest)"]
    assert code == EXIT_OK


def test_doctor_says_which_step_of_the_project_install_does_not_resolve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = doctor(tmp_path, capsys, f'[["pytest"], ["--no-index", "{NOT_THERE}"]]')
    assert code == EXIT_UNAVAILABLE
    assert lines[0] == "project install: step 1 resolves here (pip install --dry-run pytest)"
    assert lines[1].startswith(
        f"project install: step 2 does not resolve here (pip install --dry-run --no-index {NOT_THERE}): "
    )
    assert "device-matrix-no-such-package-here" in lines[1]
