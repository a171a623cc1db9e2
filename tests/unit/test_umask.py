"""Result files honour the umask: readable by a CI's artifact upload, a web server or a
colleague when the umask says so, private when it says so (#20)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from device_matrix.records.atomic import write_json_atomic, write_text_atomic


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
