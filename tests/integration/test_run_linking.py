"""What a run says of the issues it links: sent to `issues sync` once, or not at all.

These tests start `device-matrix run` in a project of its own (the summary's own tests, in
tests/unit/test_report_summary.py, call the printer directly).
"""

from __future__ import annotations

from pathlib import Path

from tests.userproject import user_project


def test_a_run_that_links_its_skips_itself_sends_the_user_to_sync_once_or_not_at_all(tmp_path: Path) -> None:
    # `run` printed "1 device skip(s) cite no issue: run `device-matrix issues sync`" and,
    # two lines below, "filed ledger:1 for tests/test_big.py::test_big (skip on cpu)"
    skip = 'import pytest\n\n\n@pytest.mark.skip_device("cpu", reason="slow")\ndef test_big():\n    pass\n'
    # by default the run files nothing and says once how many issues sync would file (#24)
    p = user_project(tmp_path / "proj", {"tests/test_big.py": skip})
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "  cpu: 1 device skip(s) cite no issue" in lines
    assert "filed ledger:" not in proc.stdout
    assert proc.stdout.count("issues sync") == 1
    assert "  1 issue(s) to file: run `device-matrix issues sync` (or set tracker.file_on_run = true)" in lines
    # a run that files them itself sends nobody to sync
    p = user_project(
        tmp_path / "filing", {"tests/test_big.py": skip}, top="[tool.device-matrix.tracker]\nfile_on_run = true"
    )
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "  cpu: 1 device skip(s) cite no issue" in proc.stdout.splitlines()
    assert "  filed ledger:1 for tests/test_big.py::test_big (skip on cpu) [skip-" in proc.stdout
    assert "issues sync" not in proc.stdout
