"""nox under ``--no-venv`` says nothing about uv where uv is nowhere (#30 item 25): nox asks
for uv for every session it runs, whatever its backend, and said "uv binary not found."
before each of our rows."""

from __future__ import annotations

import shutil
from importlib.util import find_spec
from pathlib import Path

import pytest

from tests.integration.test_nox_api import nox_in
from tests.unit.test_nox_api import user_project


@pytest.mark.skipif(shutil.which("uv") is not None or find_spec("uv") is not None, reason="uv is installed here")
def test_a_row_under_no_venv_runs_without_a_word_about_uv(tmp_path: Path) -> None:
    root = user_project(tmp_path / "project")
    proc = nox_in(root, "--no-venv", "-s", "cpu", "--", "--no-gdb")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Session cpu was successful" in proc.stderr
    assert "uv binary" not in proc.stdout + proc.stderr
