"""The tests of this concept that start a process; the rest are in tests/unit/test_placeholder_lookalike.py (#41)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from device_matrix.wanted import escape_ident
from tests.conftest import clean_env
from tests.unit.test_placeholder_lookalike import ENV, _placeholder


@pytest.mark.slow
def test_a_test_named_as_another_tests_placeholder_is_a_test_of_its_own(tmp_path: Path) -> None:
    suite = tmp_path / "suites" / "s"
    suite.mkdir(parents=True)
    # the test named by the secret fails; the one named as its placeholder crashes, and is
    # rerun alone by the name it was read by
    (suite / "test_ids.py").write_text(
        "import os\n\nimport pytest\n\n\n"
        f'@pytest.mark.parametrize("x", [1, 2], ids=[os.environ["PROBE_TOKEN"], {_placeholder()!r}])\n'
        "def test_named(x):\n    if x == 2:\n        os.abort()\n    assert x == 2\n\n\n"
        "def test_after():\n    pass\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        "[tool.device-matrix]\ncrash_reruns = 1\n\n[tool.device-matrix.devices.fixture]\n"
        'pjrt_device = "CPU"\nrun_in = "host"\nsuites = ["s"]\npresence = ["always"]\ntest_timeout = 60\n'
    )
    run = subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(tmp_path), "run", "--device", "fixture", "--no-gdb"],
        cwd=tmp_path,
        env={**clean_env(), **ENV},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode != 0, run.stdout + run.stderr
    record = json.loads((tmp_path / "results" / "fixture" / "run.json").read_text())
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert len(record["tests"]) == 3 and len(outcomes) == 3, outcomes
    base = "suites/s/test_ids.py::test_named"
    lookalike = f"{base}[{escape_ident(_placeholder())}]"
    assert outcomes == {
        f"{base}[{_placeholder()}]": "failed",  # the one named by the secret
        lookalike: "crashed",
        "suites/s/test_ids.py::test_after": "passed",
    }
    assert record["summary"]["failed"] == 1 and record["summary"]["crashed"] == 1
    (crash,) = record["crashes"]
    assert crash["nodeid"] == lookalike and crash["classification"] == "deterministic", crash
    assert len(crash["reruns"]) == 1
