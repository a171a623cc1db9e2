"""``device-matrix compare``: a row's scripts as scripts and through device-matrix (#24)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import upstream_project
from tests.conftest import SUITES, clean_env

SCRIPTS = """
[[tool.device-matrix.devices.fixture.scripts]]
file = "test/test_variables.py"
env = { FIXTURE_METRICS_FILE = "/tmp/metrics.txt" }

[[tool.device-matrix.devices.fixture.scripts]]
file = "test/test_variables.py"
args = ["--strict"]

[[tool.device-matrix.devices.fixture.scripts]]
file = "test/test_record.py"

[[tool.device-matrix.devices.fixture.scripts]]
file = "test/test_frames.py"
"""


def _project(tmp_path: Path, scripts: str) -> Path:
    """tests/fixtures/upstream_package with a row of only ``scripts``, each crash not rerun."""
    return upstream_project(tmp_path, "upstream_package", row="suites = []\n" + scripts, env="", crash_reruns=0).root


def _compare(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(root), "compare", "--device", "fixture", *args],
        cwd=root,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_the_same_outcomes_both_ways_per_test_with_the_time_ratio(tmp_path: Path) -> None:
    root = _project(tmp_path, SCRIPTS)
    proc = _compare(root, "--all")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # failures, but the same both ways
    data = json.loads((root / "results" / "compare" / "compare.json").read_text())
    assert data["mismatches"] == 0 and data["time_ratio"] > 0
    rows = {(i["file"], i["variant"]): i for i in data["invocations"]}
    metrics = rows[("test/test_variables.py", "FIXTURE_METRICS_FILE")]
    assert (metrics["tests_upstream"], metrics["tests_recorded"], metrics["plain_exit"]) == (2, 2, 1)
    record = rows[("test/test_record.py", "")]
    got = {t["nodeid"].rsplit("::", 1)[1]: (t["device_matrix"], t["plain"], t["same"]) for t in record["tests"]}
    assert got == {
        "test_error": ("error", "error", True),
        "test_failure": ("failed", "failed", True),
        "test_crash": ("passed", None, True),  # not named by a quiet run: not failing there
    }
    assert rows[("test/test_frames.py", "")]["tests_recorded"] == 4
    assert "same      device-matrix error" in proc.stdout and "DIFFERENT" not in proc.stdout
    assert "total: 11 test(s) upstream, 11 recorded, 0 mismatch(es)" in proc.stdout


DIFFERS = """\
import os
import sys
import unittest


class TestDiffers(unittest.TestCase):
    def test_same(self):
        pass

    def test_sees_the_runner(self):
        # the attempt's token: what the runner leaves in a script's environment (#39)
        self.assertNotIn("DEVICE_MATRIX_ATTEMPT", os.environ)


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
"""


@pytest.mark.slow
def test_a_difference_is_shown_and_fails_the_command(tmp_path: Path) -> None:
    root = _project(tmp_path, '[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/test_differs.py"\n')
    (root / "test" / "test_differs.py").write_text(DIFFERS)
    proc = _compare(root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "DIFFERENT device-matrix failed     plain not failing" in proc.stdout
    assert "test/test_differs.py::TestDiffers::test_sees_the_runner" in proc.stdout
    assert "  same " not in proc.stdout  # only the differences, without --all
    assert "total: 2 test(s) upstream, 2 recorded, 1 mismatch(es)" in proc.stdout


def test_a_row_without_scripts_is_refused_with_a_tip(tmp_path: Path) -> None:
    shutil.copytree(SUITES / "passing", tmp_path / "suites" / "passing")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.device-matrix.devices.fixture]\npjrt_device = "CPU"\nrun_in = "host"\nsuites = ["passing"]\n'
    )
    proc = _compare(tmp_path)
    assert proc.returncode != 0 and "has no scripts to compare" in proc.stderr + proc.stdout
    assert "TIP" in proc.stderr + proc.stdout


EXITS = """\
import os
import sys
import unittest


class TestPasses(unittest.TestCase):
    def test_a(self):
        pass


if __name__ == "__main__":
    unittest.main(exit=False)
    sys.exit(0 if "DEVICE_MATRIX_ATTEMPT" in os.environ else 5)  # fails only as a plain script
"""

BROKEN = "import module_that_does_not_exist\n"


@pytest.mark.slow
def test_the_process_and_a_script_that_never_ran_a_test_are_compared_too(tmp_path: Path) -> None:
    scripts = "".join(
        f'[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/{name}"\n'
        for name in ("test_exits.py", "test_broken.py")
    )
    root = _project(tmp_path, scripts)
    (root / "test" / "test_exits.py").write_text(EXITS)
    (root / "test" / "test_broken.py").write_text(BROKEN)
    proc = _compare(root, "--all")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads((root / "results" / "compare" / "compare.json").read_text())
    exits, broken = data["invocations"]
    # every test passed both ways, but the plain process exited 5: its CI step fails
    assert exits["mismatches"] == 1
    assert {"nodeid": "test/test_exits.py (the process)", "device_matrix": "row passed", "plain": "exit 5"} in [
        {k: t[k] for k in ("nodeid", "device_matrix", "plain")} for t in exits["tests"]
    ]
    # the import failed both ways: the file's own error, the same
    assert broken["mismatches"] == 0 and broken["tests_upstream"] is None and broken["tests_recorded"] == 1
    assert broken["tests"] == [
        {"nodeid": "test/test_broken.py", "device_matrix": "error", "plain": "error", "same": True}
    ]
