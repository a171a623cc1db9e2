"""The tests of this concept that start a process; the rest are in tests/unit/test_bad_input.py (#41)."""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Project


def test_a_corrupt_ledger_after_a_run_keeps_the_run_exit_code(
    project: Callable[..., Project],
) -> None:
    p = project("skips_flaky")
    p.results.mkdir()
    (p.results / "ledger.sqlite").write_bytes(b"not a database at all" * 50)
    proc = p.run("run", "--device", "fixture")
    out = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), out
    assert p.record()["status"] in ("passed", "failed", "crashed")
    assert "issues not linked" in out and "ledger.sqlite" in out and "TIP" in out
    assert "Traceback" not in out
