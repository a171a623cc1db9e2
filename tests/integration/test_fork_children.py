"""The tests of this concept that start a process; the rest are in tests/unit/test_fork_children.py (#41)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.test_script_launcher import launch
from tests.unit.test_fork_children import CHILDREN

pytestmark = pytest.mark.slow


def test_multiprocessing_fork_children_and_managers_run_to_their_end_under_the_script_launcher(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "test_children.py").write_text(CHILDREN)
    run = launch(tmp_path, "test_children.py", cwd=folder)
    assert run.outcomes() == {
        "TestChildren::test_fork_process": ("passed", None),
        "TestChildren::test_fork_manager": ("passed", None),
        "TestChildren::test_raw_fork": ("passed", None),
    }, run.proc.stderr
    assert run.proc.returncode == 0, run.proc.stderr
    assert "returned into" not in run.proc.stderr
