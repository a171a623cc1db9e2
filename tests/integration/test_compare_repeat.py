"""#39 (4): ``compare --repeat N`` runs each invocation N times each way, alternating: a
test that differs every time, one outcome each way, is a mismatch; a race that goes either
way in both (pytorch/xla's test_execute_time_metric) is flaky, shown and not a mismatch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_compare import _compare, _project

pytestmark = pytest.mark.slow

# the outcome of each run of the file, both ways in turn (plain, through, plain, through),
# read from $PATTERN by a counter kept in $COUNTER: P passes, F fails
FLIPS = """import os
import unittest


class TestFlips(unittest.TestCase):
    def test_flips(self):
        counter = os.environ["COUNTER"]
        runs = int(open(counter).read()) if os.path.exists(counter) else 0
        with open(counter, "w") as fh:
            fh.write(str(runs + 1))
        self.assertEqual(os.environ["PATTERN"][runs], "P")

    def test_steady(self):
        pass


if __name__ == "__main__":
    unittest.main()
"""


@pytest.mark.parametrize(
    ("pattern", "mismatches", "flaky", "exit_code"),
    [("PFPF", 1, 0, 1), ("FPPF", 0, 1, 0), ("PPPF", 0, 1, 0)],
    ids=["the-row-fails-every-time", "either-way-both-ways", "once-of-four"],
)
def test_a_repeated_compare_tells_a_difference_from_a_race(
    tmp_path: Path, pattern: str, mismatches: int, flaky: int, exit_code: int
) -> None:
    scripts = (
        '[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/test_flips.py"\n'
        f'env = {{ COUNTER = "{tmp_path / "counter"}", PATTERN = "{pattern}" }}\n'
    )
    root = _project(tmp_path, scripts)
    (root / "test" / "test_flips.py").write_text(FLIPS)
    proc = _compare(root, "--repeat", "2")
    assert proc.returncode == exit_code, proc.stdout + proc.stderr
    data = json.loads((root / "results" / "compare" / "compare.json").read_text())
    assert (data["mismatches"], data["flaky"]) == (mismatches, flaky), proc.stdout
    (invocation,) = data["invocations"]
    tests = {t["nodeid"].rsplit("::", 1)[1]: t for t in invocation["tests"]}
    assert invocation["runs"] == 2 and not tests["test_steady"]["flaky"] and tests["test_steady"]["same"]
    flips = tests["test_flips"]
    assert flips["device_matrix"] == "/".join("passed" if c == "P" else "failed" for c in pattern[1::2])
    assert (flips["same"], flips["flaky"]) == (mismatches == 0, flaky == 1)
    assert (root / "results" / "compare" / "02").is_dir() is False  # one invocation
    assert (root / "results" / "compare" / "01-2" / "fixture" / "run.json").is_file()


def test_repeat_below_one_is_refused(tmp_path: Path) -> None:
    root = _project(tmp_path, '[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/test_flips.py"\n')
    proc = _compare(root, "--repeat", "0")
    assert proc.returncode == 2 and "--repeat 0" in proc.stdout + proc.stderr
