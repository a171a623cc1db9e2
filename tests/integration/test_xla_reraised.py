"""The tests of this concept that start a process; the rest are in tests/unit/test_xla_reraised.py (#41)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import REPO, clean_env
from tests.unit.test_xla_reraised import KEEP_FIRST


def test_faulthandler_goes_back_in_front_of_a_handler_installed_after_it_and_chains_to_it(tmp_path: Path) -> None:
    script = tmp_path / "keep_first.py"
    script.write_text(textwrap.dedent(KEEP_FIRST))
    fault = tmp_path / "fault.txt"
    env = {**clean_env(), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(script), str(fault)], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    # once put back, a second look finds faulthandler in front: nothing to do
    assert proc.stdout.splitlines() == ["put back: True False", "the other handler ran"], proc.stdout + proc.stderr
    assert proc.returncode == 0
    text = fault.read_text()
    assert "Fatal Python error: Segmentation fault" in text
    assert f'File "{script}", line 16 in helper' in text, text
