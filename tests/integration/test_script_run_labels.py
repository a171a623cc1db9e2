"""The tests of this concept that start a process; the rest are in tests/unit/test_script_run_labels.py (#41)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Project
from tests.unit.test_script_run_labels import SCRIPT


def test_a_run_of_a_file_that_ran_no_test_is_named_with_its_variant(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "test").mkdir(parents=True)
    (root / "test" / "test_f.py").write_text(SCRIPT)
    entries = "".join(
        f'[[tool.device-matrix.devices.cpu.scripts]]\nfile = "test/test_f.py"\nenv = {{ {name} = "1" }}\n'
        for name in ("A", "B")
    )
    (root / "pyproject.toml").write_text(
        f'[tool.device-matrix.devices.cpu]\npjrt_device = "CPU"\nrun_in = "host"\npresence = ["always"]\n{entries}'
    )
    p = Project(root)
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert p.record("cpu")["reason"] == "test/test_f.py[B]: no test ran"
    assert "test/test_f.py[B]: no test ran" in proc.stdout
