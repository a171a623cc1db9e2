"""The tests of this concept that start a process; the rest are in tests/unit/test_nox_api.py (#41)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import clean_env
from tests.unit.test_nox_api import ABSENT, user_project


def test_device_matrix_needs_no_nox_unless_the_noxfile_uses_it() -> None:
    code = (
        "import sys, device_matrix.cli, device_matrix.child.plugin, device_matrix.run.runner; "
        "print('nox' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), check=False)
    assert proc.stdout.strip() == "False", proc.stderr


def nox_in(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env()
    env.update(ABSENT)
    return subprocess.run(
        [sys.executable, "-m", "nox", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_nox_lists_the_rows_of_a_project_and_skips_an_absent_one_without_a_venv(tmp_path: Path) -> None:
    root = user_project(tmp_path / "project")
    listed = nox_in(root, "--list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "* cpu [rows] -> Run the cpu row of the device matrix." in listed.stdout
    assert "* tpu [rows] -> Run the tpu row of the device matrix (absent here)." in listed.stdout
    proc = nox_in(root, "-s", "tpu", "neuron")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Session tpu skipped: tpu unavailable here: $DEVICE_MATRIX_TPU_PRESENT=0" in proc.stderr
    assert not (root / ".nox" / "tpu").exists() and not (root / ".nox" / "neuron").exists()
    tagged = nox_in(root, "-t", "rows", "--list")
    assert {"cpu", "tpu", "cuda", "neuron"} <= {
        line.split()[1] for line in tagged.stdout.splitlines() if line.startswith(("* ", "- "))
    }
