"""The tests of this concept that start a process; the rest are in tests/unit/test_umask.py (#41)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import clean_env
from tests.unit.test_umask import _mode
from tests.userproject import user_project


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_every_result_file_honours_the_umask(tmp_path: Path, mask: int, mode: int) -> None:
    p = user_project(
        tmp_path,
        {
            "tests/test_a.py": """\
            def test_ok():
                pass


            def test_bad():
                assert 1 == 2
            """
        },
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "device_matrix", "--project", str(p.root), *args],
            cwd=p.root,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
            preexec_fn=lambda: os.umask(mask),  # the umask only: nothing else runs before exec
        )

    proc = run("run", "--device", "cpu")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert run("triage", "--no-history").returncode == 0
    files = [f for f in p.results.rglob("*") if f.is_file() and f.name != ".lock"]
    names = {f.relative_to(p.results).as_posix() for f in files}
    assert {"cpu/run.json", "cpu/junit.xml", "cpu/report.json", "cpu/output.log"} <= names
    assert {"triage/triage.md", "triage/triage.html", "triage/triage.json"} <= names
    wrong = {f.relative_to(p.results).as_posix(): oct(_mode(f)) for f in files if _mode(f) != mode}
    assert wrong == {}
    folders = [d for d in p.results.rglob("*") if d.is_dir()]
    assert {oct(_mode(d)) for d in folders} == {oct(0o777 & ~mask)}
