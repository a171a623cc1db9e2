"""The tests of this concept that start a process; the rest are in tests/unit/test_project_install_steps.py (#41)."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK, EXIT_UNAVAILABLE
from tests.unit.test_project_install_steps import NOT_THERE, doctor
from tests.userproject import user_project


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


UNREACHABLE = "thing @ git+https://device-matrix-test.invalid/nobody/thing.git"  # .invalid never resolves


def test_doctor_says_the_cause_pip_gives_not_its_last_line_and_points_at_several_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # #42 Seen 13: pip's last line was "note: This error originates from a subprocess, and is
    # likely not a problem with pip."; the cause is the clone's own line, above it
    p = user_project(tmp_path, {"tests/test_a.py": "def test_a(): pass\n"}, top=f'project_install = ["{UNREACHABLE}"]')
    code = main(["--project", str(p.root), "doctor", "--device", "cpu"])
    out = capsys.readouterr().out
    assert code == EXIT_UNAVAILABLE
    (line,) = [x for x in out.splitlines() if x.startswith("project install")]
    assert line.startswith(f"project install: does not resolve here (pip install --dry-run '{UNREACHABLE}'): git clone")
    assert "device-matrix-test.invalid" in line and "originates from a subprocess" not in line
    assert "unable to access" in line or "Could not resolve host" in line, line
    # where one command holds it all, what to do: the several-command form, documented
    assert "project_install = [[" in out and "docs/configuration.md" in out
