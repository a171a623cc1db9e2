"""The tests of this concept that start a process; the rest are in tests/unit/test_skips.py (#41)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import Project


def test_runner_records_every_kind_of_skip(project: Callable[..., Project], tmp_path: Path) -> None:
    p = project("skips_flaky")
    (p.root / "device-matrix-disabled.toml").write_text(
        """[[disable]]
test = "suites/skips_flaky/test_skips_flaky.py::test_disabled_by_list"
devices = ["fixture"]
issue = "ledger:9"
reason = "disabled centrally"
"""
    )
    marker = tmp_path / "marker"
    marker.write_text("already crashed")  # the flaky test passes this time
    proc = p.run("run", "--device", "fixture", env={"FLAKY_MARKER": str(marker)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in p.record()["tests"]}
    assert tests["test_linked_skip"]["outcome"] == "skipped"
    assert tests["test_linked_skip"]["skip"]["issue"] == "acme/xla#12"
    assert tests["test_unlinked_skip"]["skip"]["issue"] is None
    assert tests["test_unlinked_skip"]["skip"]["source"] == "marker"
    assert tests["test_expected_failure"]["outcome"] == "xfailed"
    assert tests["test_expected_failure"]["skip"]["issue"] == "#5"
    assert tests["test_runs_here"]["outcome"] == "passed"
    assert tests["test_unittest_skip"]["skip"]["issue"] == "acme/xla#31"
    assert tests["test_unittest_skip"]["skip"]["source"] == "unittest"
    assert tests["test_disabled_by_list"]["outcome"] == "skipped"
    assert tests["test_disabled_by_list"]["skip"]["source"] == "disable_list"
    assert tests["test_disabled_by_list"]["skip"]["issue"] == "ledger:9"
    assert "cite no issue" in proc.stdout


def test_skips_check_fails_with_file_and_line(project: Callable[..., Project]) -> None:
    p = project("skips_flaky")
    proc = p.run("skips", "check")
    assert proc.returncode == 1
    assert "suites/skips_flaky/test_skips_flaky.py:17: skip_device(fixture) cites no issue" in proc.stdout


def test_plain_pytest_run_is_untouched(tmp_path: Path) -> None:
    """Without a device (no row, no PJRT_DEVICE) the markers are registered and do nothing."""
    import os
    import subprocess
    import sys

    (tmp_path / "test_m.py").write_text(
        "import pytest\n@pytest.mark.skip_device('cpu', issue='#1')\ndef test_x():\n    assert True\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "device_matrix.child.plugin",
            "--strict-markers",
            str(tmp_path),
            "-q",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k not in ("PJRT_DEVICE", "DEVICE_MATRIX_DEVICE")},
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
