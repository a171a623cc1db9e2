"""The tests of this concept that start a process; the rest are in tests/unit/test_output.py (#41)."""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Project
from tests.unit.test_output import TOKEN


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
