"""#29: two runs of one file (scripts entries that differ only in their variables) are told
apart wherever the terminal names them: the live progress line of a long nodeid keeps the
run's [variant] at its end, and a run that ran no test is named with its variant."""

from __future__ import annotations

import io

from device_matrix.output import Output

LONG = "test/test_operations.py::TestAtenXlaTensor::test_masked_scatter_with_a_long_descriptive_name_of_its_own"


def _status(nodeid: str) -> str:
    stream = io.StringIO()
    out = Output(stream, environ={}, tty=True)
    out.test_running("cpu", nodeid)
    return stream.getvalue().rsplit("\x1b[2K", 1)[-1]


def test_the_progress_line_of_two_runs_of_one_file_tells_them_apart() -> None:
    plain, other = _status(LONG), _status(LONG + "[XLA_DISABLE_FUNCTIONALIZATION]")
    assert plain != other
    assert other.endswith("[XLA_DISABLE_FUNCTIONALIZATION]") and other.startswith("cpu test/test_operations.py")
    assert len(other) <= 120 and len(plain) <= 120


def test_a_short_progress_line_is_shown_whole() -> None:
    assert _status("t.py::test_a[A]") == "cpu t.py::test_a[A]"


SCRIPT = """import os
if os.environ.get("B"):
    raise SystemExit("no device here")
import unittest

class T(unittest.TestCase):
    def test_a(self):
        pass

if __name__ == "__main__":
    unittest.main()
"""
