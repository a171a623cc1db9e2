"""#31: every line the runner writes into output.log is read back by the reader beside it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from device_matrix import diagnostics
from device_matrix.diagnostics import outputlog
from device_matrix.redact import Redactor
from device_matrix.run import crashes

TSL = (Path(__file__).parents[1] / "fixtures" / "recorded" / "tsl_segfault.txt").read_text()


@dataclass
class _Ended:
    index: int
    returncode: int
    fault: Path
    cut: int = 0
    ended_by_runner: bool = False


def _crash(crash_id: str) -> crashes.CrashRecord:
    d = diagnostics.diagnose(returncode=-11, fault_text="", output_text=TSL, redactor=Redactor({}))
    return crashes.crash_record(
        crash_id, kind="crash", phase="test", nodeid="t.py::test_x", when="call", attempt=2, diagnosis=d, repro=""
    )


def test_the_end_of_an_attempt_tells_its_crash_once_and_diagnose_reads_both_back(tmp_path: Path) -> None:
    fault = tmp_path / "faulthandler.txt"
    fault.write_text("")
    crash = _crash("cpu-1")
    text = outputlog.attempt_end(_Ended(2, -11, fault), crash=crash)
    assert text.count("\n") == 1 and text.count(crash["diagnosis"]["fingerprint"]) == 1
    (found,) = outputlog.recorded_crashes(text)
    assert (found["id"], found["attempt"], found["fingerprint"]) == ("cpu-1", "2", crash["diagnosis"]["fingerprint"])
    assert outputlog.returncode_in(text.strip()) == -11
    # the runner's own kill names its crash (a timeout) but is never taken for a signal's end
    ended = outputlog.attempt_end(_Ended(3, -9, fault, ended_by_runner=True), crash=_crash("cpu-2"))
    assert [m["id"] for m in outputlog.recorded_crashes(ended)] == ["cpu-2"]
    assert outputlog.returncode_in(ended.strip()) is None
    # an attempt without a crash names none
    assert outputlog.recorded_crashes(outputlog.attempt_end(_Ended(4, 0, fault))) == []


def test_a_crash_whose_process_went_on_has_a_line_of_its_own() -> None:
    line = outputlog.crash_line(_crash("cpu-3"))
    assert [m["id"] for m in outputlog.recorded_crashes(line)] == ["cpu-3"]


def test_an_attempts_output_begins_at_its_header() -> None:
    text = (
        "x" + outputlog.attempt_header(1, "run", "pytest") + "out\n" + outputlog.attempt_header(2, "resume", "pytest")
    )
    assert text[outputlog.attempt_start(text, 2, len(text)) :].startswith("=== device-matrix attempt 2 (resume)")
    assert outputlog.attempt_start(text, 1, len(text)) == 2
