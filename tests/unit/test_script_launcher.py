"""The script launcher: unittest files run as upstream runs them, journaled like pytest runs.

The part of these tests that starts no process; the rest is in tests/integration/test_script_launcher.py (#41)."""

from __future__ import annotations

import io
import os
import unittest
from pathlib import Path

import pytest

from device_matrix.child import script
from device_matrix.child.journal import JournalWriter
from device_matrix.run.journal import Fold


def test_phase_durations_add_up_to_the_test(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the runner sums the phases: each stretch of the test counted once
    clock = [100.0]
    monkeypatch.setattr(script.time, "monotonic", lambda: clock[0])

    class Timed(unittest.TestCase):
        def setUp(self) -> None:
            clock[0] += 1

        def test_body(self) -> None:
            clock[0] += 5

        def tearDown(self) -> None:
            clock[0] += 2

    writer = JournalWriter(tmp_path / "journal")
    recorder = script.Recorder(writer, "t.py", None)
    recorder.write("session", pid=os.getpid(), device=None, t=0.0, env=None)
    undo = script.install(recorder)
    try:
        unittest.TextTestRunner(stream=io.StringIO()).run(unittest.defaultTestLoader.loadTestsFromTestCase(Timed))
    finally:
        undo()
    writer.close()
    fold = Fold()
    for line in (tmp_path / "journal").read_bytes().splitlines():
        fold.feed(line)
    assert fold.broken is None and fold.finished_ids() == ["t.py::Timed::test_body"]
    reports = fold.tests["t.py::Timed::test_body"].reports
    assert [(r.when, r.duration) for r in reports] == [("setup", 1.0), ("call", 5.0), ("teardown", 2.0)]


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        ([], "no script given"),
        (["--dm-journal"], "malformed option"),
        (["--dm-journal", "x", "t.py"], "malformed option"),
        (["--dm-bogus=1", "t.py"], "unknown or malformed option"),
        (["no_such_script.py"], "no script 'no_such_script.py'"),
    ],
)
def test_bad_launcher_arguments_are_a_usage_error(
    argv: list[str], why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert script.main(argv) == script.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and why in err and "TIP: usage: python -m device_matrix.child.script" in err


def test_options_stop_at_the_script_and_the_rest_is_the_scripts() -> None:
    opts = script.parse_args(["--dm-journal=j", "--dm-env", "--dm-device=cpu", "t.py", "--dm-journal=x", "-v"])
    assert (opts.journal, opts.env, opts.device, opts.file) == ("j", True, "cpu", "t.py")
    assert opts.args == ["--dm-journal=x", "-v"]
