"""Result files honour the umask: readable by a CI's artifact upload, a web server or a
colleague when the umask says so, private when it says so (#20)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from device_matrix.records.atomic import write_json_atomic, write_text_atomic
from tests.conftest import clean_env
from tests.userproject import user_project


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_honour_the_umask(tmp_path: Path, mask: int, mode: int) -> None:
    with umask(mask):
        write_text_atomic(tmp_path / "a.md", "text")
        write_json_atomic(tmp_path / "b.json", {"a": 1})
        write_text_atomic(tmp_path / "a.md", "again")  # replacing keeps to the umask too
    assert _mode(tmp_path / "a.md") == mode
    assert _mode(tmp_path / "b.json") == mode
    assert (tmp_path / "a.md").read_text() == "again"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    (tmp_path / "a.md").mkdir()  # the rename over it fails
    with pytest.raises(OSError):
        write_text_atomic(tmp_path / "a.md", "text")
    assert [p.name for p in tmp_path.iterdir()] == ["a.md"]


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
