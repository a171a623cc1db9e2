"""The run log: redacted before it is written, with exact per-test offsets."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from device_matrix.redact import Redactor
from device_matrix.run.pump import OutputPump
from device_matrix.wire import marker
from tests.conftest import Project

TOKEN = "ghp_" + "L3akedT0kenValue" * 3


def test_pump_strips_markers_and_records_offsets(tmp_path: Path) -> None:
    r, w = os.pipe()
    log = tmp_path / "log"
    pump = OutputPump(r, log, Redactor({}))
    pump.begin()
    os.write(w, b"collected 2 items\nsuite.py ")
    os.write(w, marker(1))
    os.write(w, b".first test output\n")
    # a marker split across two reads
    os.write(w, b"\x1edm:")
    os.write(w, b"2\x1fsecond " + f"password={TOKEN}".encode() + b"\n")
    os.close(w)
    pump.finish()
    text = log.read_bytes()
    assert b"\x1e" not in text and b"\x1f" not in text
    assert text[pump.offsets[1] :].startswith(b".first test output")
    assert text[pump.offsets[2] :].startswith(b"second password=[redacted]")
    assert TOKEN.encode() not in text


def test_planted_token_reaches_no_file(project: Callable[..., Project]) -> None:
    p = project("leaky")
    proc = p.run("run", "--device", "fixture", "--reruns", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = p.record()["crashes"]
    last = "\n".join(crash["diagnosis"]["last_output"])
    assert "connecting with GITHUB_TOKEN=[redacted]" in last
    assert "output of the test before" not in last  # the crash's output starts at its test
    tri = p.run("triage", "--no-history")
    assert tri.returncode == 0, tri.stdout + tri.stderr
    leaked = [str(f) for f in p.root.rglob("*") if f.is_file() and TOKEN.encode() in f.read_bytes()]
    assert leaked == []
    assert TOKEN not in proc.stdout + proc.stderr
