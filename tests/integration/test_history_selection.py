"""The tests of this concept that start a process; the rest are in tests/unit/test_history_selection.py (#41)."""

from __future__ import annotations

from collections.abc import Callable

from device_matrix.errors import EXIT_OK
from tests.conftest import Project


def test_a_run_records_what_it_selected(project: Callable[..., Project]) -> None:
    p = project("passing")
    assert p.run("run", "--device", "fixture").returncode == EXIT_OK
    assert p.record()["selection"] is None  # the whole row
    assert p.run("run", "--device", "fixture", "--", "-k", "nothing_matches or test").returncode == EXIT_OK
    assert p.record()["selection"] == "-k nothing_matches or test"
