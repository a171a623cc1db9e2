"""A real row whose passing test prints device-matrix's crash line, then a test that aborts:
``diagnose`` on its output.log finds the one crash its run.json holds (#41)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.test_project_rows import ABSENT
from tests.unit.test_diagnose_lookalike import FAKE_DUMP, FAKE_LINE
from tests.unit.test_project_rows import fresh_project

TESTS = f"""
import os
import sys


def test_other():
    sys.stderr.write({FAKE_DUMP + FAKE_LINE!r})
    sys.stderr.flush()


def test_zabort():
    os.abort()
"""


def test_diagnose_of_a_real_log_finds_only_the_crash_its_run_recorded(tmp_path: Path) -> None:
    p = fresh_project(tmp_path)
    (tmp_path / "tests" / "test_a.py").write_text(TESTS)
    p.run("run", "--device", "cpu", env=ABSENT)
    record = json.loads((tmp_path / "results" / "cpu" / "run.json").read_text())
    (crash,) = [c for c in record["crashes"] if c["kind"] == "crash"]
    log = tmp_path / "results" / "cpu" / "output.log"
    assert FAKE_LINE.strip() in log.read_text()  # the test's imitation is in the log
    for beside in (True, False):
        if not beside:
            (tmp_path / "results" / "cpu" / "run.json").unlink()  # a log read without its record
        proc = p.run("diagnose", "--json", str(log), env=ABSENT)
        found = json.loads(proc.stdout)
        assert [e["recorded"]["crash"] for e in found] == [crash["id"]], proc.stdout
        assert found[0]["diagnosis"]["fingerprint"] == crash["diagnosis"]["fingerprint"]
