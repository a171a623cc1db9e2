"""The tests of this concept that start a process; the rest are in tests/unit/test_journal.py (#41)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from device_matrix.child.journal import FORKED_COPY_EXIT, FORKED_COPY_NOTE
from tests.unit.test_journal import FORKED


@pytest.mark.parametrize(
    "call",
    [
        'writer.start("t.py::b", 1.0, {}, 2, ("t.py", 1))',
        'writer.passed("teardown", 0.1, hold=True)',
        'writer.finish("t.py::forks", 2.0)',
        'writer.write("report", nodeid="t.py::forks", when="call", outcome="failed", duration=0.1, '
        "longrepr=None, wasxfail=None, skip=None)",
    ],
)
def test_a_forked_copy_is_ended_by_any_event_and_writes_none(tmp_path: Path, call: str) -> None:
    journal = tmp_path / "journal.jsonl"
    proc = subprocess.run(
        [sys.executable, "-c", FORKED.replace("{call}", call), str(journal)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(FORKED_COPY_EXIT)
    assert FORKED_COPY_NOTE.format(nodeid="t.py::forks") in proc.stderr
    # only the real process's events, numbered without a gap
    events = [json.loads(line) for line in journal.read_text().splitlines()]
    assert [(e["e"], e["n"]) for e in events] == [("session", 1), ("pass", 2)]
