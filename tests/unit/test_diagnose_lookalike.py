"""A test's output that imitates device-matrix's own lines in output.log is not a crash (#41)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.diagnostics import outputlog
from device_matrix.errors import EXIT_OK
from tests import records as R

REAL_FP = "fedcba9876543210"
FAKE_DUMP = (
    'Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n  File "x.py", line 1\n'
)
FAKE_LINE = (
    "=== device-matrix attempt 1 ended by SIGSEGV (returncode -11): cpu-1: SIGSEGV in test_other (deterministic); "
    "fingerprint 0123456789abcdef; test tests/test_other.py::test_other\n"
)
REAL_DUMP = (
    'Fatal Python error: Aborted\n\nCurrent thread 0x2 (most recent call first):\n  File "tests/test_abort.py", '
    "line 4 in test_abort\n"
)
REAL_LINE = (
    "=== device-matrix attempt 1 ended by SIGABRT (returncode -6): cpu-1: SIGABRT in test_abort (deterministic); "
    f"fingerprint {REAL_FP}; test tests/test_abort.py::test_abort\n"
)


def _log(tmp_path: Path, *, record: bool, fake: str = FAKE_LINE) -> Path:
    row = tmp_path / "results" / "cpu"
    row.mkdir(parents=True)
    log = row / "output.log"
    log.write_text(
        outputlog.attempt_header(1, "run", "python -m pytest tests")
        + "tests/test_other.py::test_other "
        + FAKE_DUMP
        + fake
        + "PASSED\ntests/test_abort.py::test_abort "
        + REAL_DUMP
        + REAL_LINE
    )
    if record:
        crash = R.crash("cpu", "tests/test_abort.py::test_abort", REAL_FP, signal="SIGABRT")
        tests = [R.test("tests/test_other.py::test_other"), R.test("tests/test_abort.py::test_abort", "crashed")]
        (row / "run.json").write_text(json.dumps(R.record("cpu", tests, [crash])))
    return log


@pytest.mark.parametrize("record", [True, False], ids=["beside-its-record", "a-log-from-elsewhere"])
def test_a_crash_line_a_test_printed_is_not_a_crash(
    tmp_path: Path, record: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path, record=record)
    assert main(["diagnose", "--json", "--results", str(tmp_path / "results"), str(log)]) == EXIT_OK
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["recorded"]["crash"] == "cpu-1" and entry["diagnosis"]["fingerprint"] == REAL_FP


def test_only_the_last_end_line_of_an_attempt_is_the_runners() -> None:
    text = outputlog.attempt_header(1, "run", "pytest") + FAKE_LINE + "more output\n" + REAL_LINE
    assert [m["fingerprint"] for m in outputlog.recorded_crashes(text)] == [REAL_FP]
    # a test that printed a crash line and passed: the runner's own end line follows, naming none
    ended = outputlog.attempt_header(1, "run", "pytest") + FAKE_LINE + "=== device-matrix attempt 1 exited with 0\n"
    assert outputlog.recorded_crashes(ended) == []
    # attempts are read apart: attempt 2's end does not hide attempt 1's
    two = text + outputlog.attempt_header(2, "resume", "pytest") + REAL_LINE.replace("attempt 1", "attempt 2")
    assert [m["attempt"] for m in outputlog.recorded_crashes(two)] == ["1", "2"]


# the form of a crash whose process went on, which the runner writes amid the attempt's output
FAKE_WENT_ON = (
    "=== device-matrix: cpu-1 in attempt 1: SIGSEGV in test_other (deterministic); fingerprint 0123456789abcdef\n"
)


def test_one_id_twice_is_settled_by_the_record_beside_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path, record=True, fake=FAKE_WENT_ON)
    assert main(["diagnose", "--json", "--results", str(tmp_path / "results"), str(log)]) == EXIT_OK
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["diagnosis"]["fingerprint"] == REAL_FP


def test_one_id_twice_in_a_log_from_elsewhere_is_said(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _log(tmp_path, record=False, fake=FAKE_WENT_ON)
    assert main(["diagnose", "--results", str(tmp_path / "results"), str(log)]) == EXIT_OK
    text = capsys.readouterr().out
    assert "crash cpu-1 is named more than once" in text and "run.json" in text, text
