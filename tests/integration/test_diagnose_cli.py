"""The tests of this concept that start a process; the rest are in tests/unit/test_diagnose_cli.py (#41)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK, EXIT_TESTS_FAILED
from tests.unit.test_diagnose_cli import CRASHING


def test_a_rows_own_output_log_is_diagnosed_as_the_runner_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `device-matrix diagnose results/cpu/output.log` on a row whose test segfaulted said
    # "no native crash found": faulthandler's dump went to attempts/NN/faulthandler.txt and
    # the log said nothing of how the process ended
    from tests.userproject import user_project

    p = user_project(tmp_path / "proj", {"tests/test_crash.py": CRASHING})
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == EXIT_TESTS_FAILED, proc.stdout + proc.stderr
    (crash,) = p.record("cpu")["crashes"]
    log = p.results / "cpu" / "output.log"
    text = log.read_text()
    # the log tells how each attempt ended, with the dump a plain pytest prints on stderr
    assert "=== device-matrix attempt 1 ended by SIGSEGV (returncode -11)" in text
    assert "=== device-matrix attempt 2 exited with 1" in text
    assert text.count("Fatal Python error: Segmentation fault") == 2  # the run and its rerun
    assert 'test_crash.py", line 6 in test_segfault' in text
    synced = p.run("issues", "sync")  # a run files only when asked (#24)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    code = main(["--project", str(p.root), "diagnose", "--json", str(log)])
    assert code == EXIT_OK
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["diagnosis"]["signal_name"] == "SIGSEGV"
    assert entry["diagnosis"]["fingerprint"] == crash["diagnosis"]["fingerprint"]
    assert [i["issue"] for i in entry["issues"]] == ["ledger:1"]  # sync filed it


HELPER_CRASH = """
import ctypes


def _read_null():
    ctypes.string_at(0)


def test_segfault():
    _read_null()
"""


def test_a_log_copied_while_the_reruns_go_on_is_read_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # #42 Seen 11: output.log copied during the crash's rerun (no run.json beside it yet) said
    # "signal: unknown", no stack and nodeid "", though it held the fatal error and the stack
    from tests.userproject import user_project

    p = user_project(tmp_path / "proj", {"tests/test_crash.py": HELPER_CRASH})
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == EXIT_TESTS_FAILED, proc.stdout + proc.stderr
    (crash,) = p.record("cpu")["crashes"]
    text = (p.results / "cpu" / "output.log").read_text()
    rerun = text.index("=== device-matrix attempt 2 (")
    copied = tmp_path / "copied" / "output.log"
    copied.parent.mkdir()
    copied.write_text(text[: text.index("Fatal Python error", rerun) + 10])  # the rerun half-way
    code = main(["--project", str(p.root), "diagnose", "--json", str(copied)])
    assert code == EXIT_OK
    (entry,) = json.loads(capsys.readouterr().out)
    diagnosis = entry["diagnosis"]
    assert diagnosis["signal_name"] == "SIGSEGV"
    assert diagnosis["fatal_error"] == "Segmentation fault"
    assert "in _read_null" in (diagnosis["python_stack"] or "")
    assert diagnosis["fingerprint"] == crash["diagnosis"]["fingerprint"]
    assert entry["recorded"]["nodeid"] == "tests/test_crash.py::test_segfault"
    # read in place, beside the run.json an earlier run left: that record is not this log's
    earlier = p.record("cpu")
    earlier["crashes"] = []
    (copied.parent / "run.json").write_text(json.dumps(earlier))
    assert main(["--project", str(p.root), "diagnose", "--json", str(copied)]) == EXIT_OK
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["diagnosis"]["signal_name"] == "SIGSEGV" and entry["recorded"]["crash"] == crash["id"]
