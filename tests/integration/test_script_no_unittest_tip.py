"""A scripts entry that runs no unittest test says on the terminal what to do (#29), not only in
run.json: the TIP naming ``kind = "program"`` is printed under the failure."""

from __future__ import annotations

from pathlib import Path

from tests.integration.test_script_programs import entry, project


def test_the_terminal_says_kind_program_for_a_script_that_ran_no_unittest_test(tmp_path: Path) -> None:
    p = project(tmp_path, entry(["--steps", "1"], kind="unittest"))
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    said = proc.stdout + proc.stderr
    assert "ran no unittest test" in said
    (tip,) = [line for line in said.splitlines() if line.strip().startswith("tip:")]
    assert 'kind = "program"' in tip and "[[scripts]]" in tip
