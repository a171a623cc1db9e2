"""pytest's own cut of a summary line leaves no piece of a known secret (#30), in any file
of the run or on the terminal: a real run of a test whose assertion message holds one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from device_matrix.redact import MIN_CUT, REDACTED
from tests.conftest import clean_env

SECRET = "Sup3rS3cretValue4XYZW"
ENV = {"PROBE_TOKEN": SECRET}


@pytest.mark.slow
def test_pytests_cut_summary_line_leaves_no_piece_of_the_secret(tmp_path: Path) -> None:
    suite = tmp_path / "suites" / "s"
    suite.mkdir(parents=True)
    (suite / "test_tok.py").write_text(
        "import os\n\n\ndef test_token():\n"
        '    tok = os.environ["PROBE_TOKEN"]\n'
        '    assert tok == "x", "token is " + tok + " and more text, long enough to be cut to the width"\n'
    )
    (tmp_path / "pyproject.toml").write_text(
        "[tool.device-matrix.devices.fixture]\n"
        'pjrt_device = "CPU"\nrun_in = "host"\nsuites = ["s"]\npresence = ["always"]\ntest_timeout = 60\n'
    )
    env = {**clean_env(), **ENV, "COLUMNS": "80"}
    run = subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(tmp_path), "run", "--device", "fixture", "--no-gdb"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    results = tmp_path / "results" / "fixture"
    log = (results / "output.log").read_text()
    # pytest did cut the line (the evidence this test is about), and the piece left went
    assert f"AssertionError: token is {REDACTED}..." in log, log
    record = json.loads((results / "run.json").read_text())
    assert record["tests"][0]["outcome"] == "failed"
    texts = {"stdout": run.stdout + run.stderr}
    texts.update({str(f): f.read_text(errors="replace") for f in results.rglob("*") if f.is_file()})
    for name, text in texts.items():
        assert SECRET[: MIN_CUT * 2] not in text, name
