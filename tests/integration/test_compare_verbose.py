"""#29 (6): compare reads verbose unittest output as unittest writes it, whatever a test
prints between its name and its outcome."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from device_matrix.cli.compare import read_plain

NOISY = """import sys
import unittest
import warnings


class TestNoisy(unittest.TestCase):
    def test_a_warns(self):
        warnings.warn("a warning between the name and the outcome")

    def test_b_prints(self):
        print("line one", file=sys.stderr)
        print("line two", file=sys.stderr, flush=True)

    def test_c_fails_after_a_warning(self):
        warnings.warn("then a failure")
        self.fail("no")

    def test_d_quiet(self):
        pass

    @unittest.skip("not here")
    def test_e_skipped(self):
        pass


if __name__ == "__main__":
    unittest.main()
"""


def test_a_verbose_run_with_output_between_name_and_outcome_is_read_per_test(tmp_path: Path) -> None:
    script = tmp_path / "test_noisy.py"
    script.write_text(NOISY)
    proc = subprocess.run(
        [sys.executable, str(script), "--verbose"], capture_output=True, text=True, timeout=60, check=False
    )
    assert "a warning between the name and the outcome" in proc.stderr  # the sample is what it says
    plain = read_plain(proc.stdout + proc.stderr, proc.returncode, 1.0)
    assert plain.verbose
    assert plain.named == {
        "TestNoisy::test_a_warns": "passed",
        "TestNoisy::test_b_prints": "passed",
        "TestNoisy::test_c_fails_after_a_warning": "failed",
        "TestNoisy::test_d_quiet": "passed",
        "TestNoisy::test_e_skipped": "skipped",
    }, proc.stderr
