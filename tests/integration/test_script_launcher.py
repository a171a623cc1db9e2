"""The script launcher: unittest files run as upstream runs them, journaled like pytest runs."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from device_matrix import wire
from device_matrix.child.journal import FORKED_COPY_NOTE
from device_matrix.run.journal import Fold, final_outcome
from tests.conftest import FIXTURES, REPO, clean_env

SCRIPTS = FIXTURES / "scripts"
UPSTREAM = FIXTURES / "upstream"


@dataclass
class Launched:
    proc: subprocess.CompletedProcess[str]
    fold: Fold
    lines: list[bytes]
    fault: str

    def outcomes(self) -> dict[str, tuple[str, str | None]]:
        result = {}
        for nodeid in self.fold.finished_ids():
            outcome, message, _ = final_outcome(self.fold.tests[nodeid])
            result[nodeid.rsplit("::", 2)[-2] + "::" + nodeid.rsplit("::", 1)[-1]] = (outcome, message)
        return result


def launch(
    tmp_path: Path,
    file: str,
    *args: str,
    cwd: Path = SCRIPTS,
    env: dict[str, str] | None = None,
    options: tuple[str, ...] = (),
) -> Launched:
    journal, fault = tmp_path / "journal", tmp_path / "fault.txt"
    journal.unlink(missing_ok=True)  # the writer appends: one launch, one journal
    fault.unlink(missing_ok=True)
    full_env = clean_env()
    full_env.update(env or {})
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "device_matrix.child.script",
            wire.option(wire.OPT_JOURNAL, str(journal)),
            wire.option(wire.OPT_FAULTHANDLER, str(fault)),
            *options,
            file,
            *args,
        ],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = journal.read_bytes().splitlines() if journal.exists() else []
    fold = Fold()
    for line in lines:
        fold.feed(line)
    assert fold.broken is None, (fold.broken, proc.stderr)
    return Launched(proc, fold, lines, fault.read_text() if fault.exists() else "")


def test_every_unittest_outcome_is_journaled_and_the_script_behaves_as_without_us(tmp_path: Path) -> None:
    run = launch(tmp_path, "test_outcomes.py")
    plain = subprocess.run(
        [sys.executable, "test_outcomes.py"], cwd=SCRIPTS, capture_output=True, text=True, check=False, timeout=60
    )
    # the script's own runner, output and wasSuccessful() are untouched
    assert run.proc.returncode == plain.returncode == 1
    summary = "FAILED (failures=3, errors=5, skipped=2, expected failures=1, unexpected successes=1)"
    assert run.proc.stderr.strip().splitlines()[-1] == plain.stderr.strip().splitlines()[-1] == summary
    assert "device_matrix" not in run.proc.stderr  # no launcher frame in the tracebacks it prints

    fold = run.fold
    assert fold.ended and fold.exitstatus == 1 and fold.running is None
    assert fold.collected is not None and len(fold.collected) == 15
    assert all(n.startswith("test_outcomes.py::") for n in fold.collected)
    assert fold.finished_ids() == fold.collected  # one start and finish each, in run order
    got = run.outcomes()
    assert {k: v[0] for k, v in got.items()} == {
        "TestClassSetUpError::test_one": "error",
        "TestClassSetUpError::test_two": "error",
        "TestClassSkip::test_skipped_by_class": "skipped",
        "TestCleanupError::test_cleanup_fails": "error",
        "TestOutcomes::test_errors": "error",  # unittest calls it an error, and so does the record
        "TestOutcomes::test_expected_failure": "xfailed",
        "TestOutcomes::test_fails": "failed",
        "TestOutcomes::test_passes": "passed",
        "TestOutcomes::test_skipped": "skipped",
        "TestOutcomes::test_subtest_fails": "failed",
        "TestOutcomes::test_unexpected_success": "failed",
        "TestSetUpError::test_never_runs": "error",
        "TestTearDownClassError::test_first": "passed",
        "TestTearDownClassError::test_last": "error",
        "TestTearDownError::test_body_passes": "error",
    }
    assert "setUpClass broke" in (got["TestClassSetUpError::test_two"][1] or "")
    assert got["TestClassSkip::test_skipped_by_class"][1] == "Skipped: no such device here"
    # tearDownClass runs while the class's last test is still the running one, as in pytest
    assert "tearDownClass broke" in (got["TestTearDownClassError::test_last"][1] or "")
    assert "AssertionError: 4 != 5" in (got["TestOutcomes::test_fails"][1] or "")
    assert "RuntimeError: boom in the test body" in (got["TestOutcomes::test_errors"][1] or "")
    assert "(k=1)" in (got["TestOutcomes::test_subtest_fails"][1] or "")
    assert got["TestOutcomes::test_unexpected_success"][1] == "Unexpected success"
    assert "setUp broke" in (got["TestSetUpError::test_never_runs"][1] or "")
    assert "tearDown broke" in (got["TestTearDownError::test_body_passes"][1] or "")
    assert "cleanup broke" in (got["TestCleanupError::test_cleanup_fails"][1] or "")
    skipped = fold.tests["test_outcomes.py::TestOutcomes::test_skipped"]
    _, message, meta = final_outcome(skipped)
    assert message == "Skipped: not on this device, see https://github.com/pytorch/xla/issues/1234"
    assert meta is not None and meta["issue"] == "pytorch/xla#1234" and meta["mode"] == "skip"
    # phases: a setUp error is a failed setup with no call; a tearDown error a failed teardown
    setup_error = fold.tests["test_outcomes.py::TestSetUpError::test_never_runs"].reports
    assert [(r.when, r.outcome) for r in setup_error] == [("setup", "failed"), ("teardown", "passed")]
    teardown_error = fold.tests["test_outcomes.py::TestTearDownError::test_body_passes"].reports
    assert [(r.when, r.outcome) for r in teardown_error] == [
        ("setup", "passed"),
        ("call", "passed"),
        ("teardown", "failed"),
    ]
    # locations as pytest gives them: the def line, decorators skipped
    source = (SCRIPTS / "test_outcomes.py").read_text().splitlines()
    loc = skipped.location
    assert loc is not None and loc[0] == "test_outcomes.py" and loc[1] is not None
    assert source[loc[1] - 1].strip() == "def test_skipped(self):"


def test_outcomes_agree_with_the_same_file_under_pytest(tmp_path: Path) -> None:
    (tmp_path / "script").mkdir()
    run = launch(tmp_path / "script", "test_outcomes.py")
    journal = tmp_path / "pytest.journal"
    env = clean_env()
    env["PYTHONPATH"] = f"{REPO}{os.pathsep}{SCRIPTS}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "device_matrix.child.plugin",
            "-p",
            "no:cacheprovider",
            "--rootdir=.",  # nodeids relative to the working directory, as the launcher's
            wire.option(wire.OPT_JOURNAL, str(journal)),
            "test_outcomes.py",
        ],
        cwd=SCRIPTS,
        env=env,
        capture_output=True,
        check=False,
        timeout=120,
    )
    fold = Fold()
    for line in journal.read_bytes().splitlines():
        fold.feed(line)
    assert fold.broken is None and fold.ended
    under_pytest = {n: final_outcome(fold.tests[n])[0] for n in fold.finished_ids()}
    as_script = {n: final_outcome(run.fold.tests[n])[0] for n in run.fold.finished_ids()}
    assert set(under_pytest) == set(as_script)  # the same nodeids
    differ = {n: (under_pytest[n], as_script[n]) for n in as_script if under_pytest[n] != as_script[n]}
    # unittest's errors (an exception that is not the test's failureException, in setUp,
    # tearDown or the method) are errors either way (#24). The one deliberate difference: a
    # failed assertion in a cleanup is a failed teardown as a script, and so an error;
    # pytest runs the cleanups inside the call of a unittest test
    assert differ == {"test_outcomes.py::TestCleanupError::test_cleanup_fails": ("failed", "error")}


def test_a_failed_setup_module_is_an_error_of_every_test_it_kept_from_running(tmp_path: Path) -> None:
    run = launch(tmp_path, "test_module_setup.py")
    assert run.proc.returncode == 1 and run.fold.exitstatus == 1
    got = run.outcomes()
    assert set(got) == {"TestA::test_one", "TestB::test_two"}
    for outcome, message in got.values():
        assert outcome == "error" and "RuntimeError: setUpModule broke" in (message or "")


def test_script_flags_environment_and_a_helper_imported_by_bare_name(tmp_path: Path) -> None:
    file = "tests/fixtures/scripts/test_flags.py"
    run = launch(
        tmp_path, file, "--skip-gradient-checkpointing", "--steps", "3", cwd=REPO, env={"CPU_NUM_DEVICES": "1"}
    )
    assert run.proc.returncode == 0, run.proc.stderr
    assert run.fold.collected == [
        f"{file}::TestFlags::test_gradient_checkpointing",
        f"{file}::TestFlags::test_steps_flag_reached",
    ]
    got = run.outcomes()
    assert got["TestFlags::test_steps_flag_reached"] == ("passed", None)
    assert got["TestFlags::test_gradient_checkpointing"] == ("skipped", "Skipped: --skip-gradient-checkpointing given")
    assert run.fold.exitstatus == 0

    # without the flag the helper module is reached too: 2 * 3 == 6
    run = launch(tmp_path, file, "--steps", "3", cwd=REPO, env={"CPU_NUM_DEVICES": "1"})
    assert run.outcomes()["TestFlags::test_gradient_checkpointing"] == ("passed", None)


def test_a_script_that_fails_before_any_test_is_a_collection_error(tmp_path: Path) -> None:
    # the script's own assert on the environment, in __main__ before unittest.main
    run = launch(tmp_path, "test_flags.py", env={"CPU_NUM_DEVICES": "2"})
    assert run.proc.returncode == 1
    assert "AssertionError: run with CPU_NUM_DEVICES=1" in run.proc.stderr
    assert "device_matrix" not in run.proc.stderr  # the traceback python FILE would print
    assert run.fold.collected == [] and run.fold.ended and run.fold.exitstatus == 1
    assert [n for n, _ in run.fold.collect_errors] == ["test_flags.py"]
    assert "CPU_NUM_DEVICES=1" in run.fold.collect_errors[0][1]

    run = launch(tmp_path, "import_error.py")
    plain = subprocess.run(
        [sys.executable, "import_error.py"], cwd=SCRIPTS, capture_output=True, text=True, check=False, timeout=60
    )
    assert run.proc.returncode == plain.returncode == 1
    assert run.proc.stderr == plain.stderr  # the same traceback, no launcher frame in it
    assert run.fold.collected == [] and run.fold.exitstatus == 1
    assert "ModuleNotFoundError" in run.fold.collect_errors[0][1]


def test_a_script_without_unittest_ends_with_nothing_collected(tmp_path: Path) -> None:
    options = (wire.OPT_ENV, wire.option(wire.OPT_DEVICE, "cpu"))
    run = launch(tmp_path, "no_unittest.py", options=options)
    assert run.proc.returncode == 0 and run.proc.stdout == "nothing to test here\n"
    session = json.loads(run.lines[0])
    assert session["e"] == "session" and session["device"] == "cpu"
    assert run.fold.env["python"] == platform.python_version()  # --dm-env: the snapshot
    assert run.fold.collected == [] and run.fold.collect_errors == []
    assert run.fold.ended and run.fold.exitstatus == 0


def test_the_script_sees_what_python_file_args_gives_it(tmp_path: Path) -> None:
    file = "tests/fixtures/scripts/script_env.py"
    run = launch(tmp_path, file, "--flag", "value", cwd=REPO)
    plain = subprocess.run(
        [sys.executable, file, "--flag", "value"], cwd=REPO, capture_output=True, text=True, check=False, timeout=60
    )
    assert run.proc.returncode == plain.returncode == 0
    seen = json.loads(run.proc.stdout)
    assert seen == json.loads(plain.stdout)
    assert seen["name"] == "__main__" and seen["argv"] == [file, "--flag", "value"]
    assert seen["file"] == str(REPO / file) and seen["path0"] == str(SCRIPTS)
    # a directory change is journaled: a core file lands where the process was
    assert run.fold.cwds == [str(Path(tempfile.gettempdir()).resolve())]


def test_a_script_with_its_own_runner_loop_is_journaled_too(tmp_path: Path) -> None:
    run = launch(tmp_path, "custom_runner.py")
    assert run.proc.stdout == "2 1\n" and run.proc.returncode == 1  # its result, as without us
    got = run.outcomes()
    assert got["TestCustom::test_ok"] == ("passed", None)
    outcome, message = got["TestCustom::test_bad"]
    assert outcome == "failed" and "custom runner failure" in (message or "")


def test_tests_are_freed_once_run_and_still_counted(tmp_path: Path) -> None:
    run = launch(tmp_path, "test_freed.py")
    assert run.proc.returncode == 0, run.proc.stderr
    assert "counted 2" in run.proc.stderr
    assert run.outcomes()["TestFreed::test_b_the_first_is_gone"] == ("passed", None)


def test_an_interrupted_test_stays_started_and_the_process_dies_as_python_would(tmp_path: Path) -> None:
    run = launch(tmp_path, "test_interrupted.py")
    plain = subprocess.run(
        [sys.executable, "test_interrupted.py"], cwd=SCRIPTS, capture_output=True, check=False, timeout=60
    )
    assert run.proc.returncode == plain.returncode == -signal.SIGINT
    fold = run.fold
    assert fold.finished_ids() == ["test_interrupted.py::TestInterrupted::test_a_passes"]
    assert fold.running == "test_interrupted.py::TestInterrupted::test_b_interrupted"  # not passed
    assert fold.tests[fold.running].reports == []
    assert fold.ended and fold.exitstatus == 128 + signal.SIGINT


def test_a_second_unittest_run_is_not_journaled_and_fails_the_process(tmp_path: Path) -> None:
    run = launch(tmp_path, "twice.py")
    assert run.fold.collected == ["twice.py::TestFirst::test_a"]
    assert run.outcomes() == {"TestFirst::test_a": ("passed", None)}
    assert run.proc.stderr.count("Ran 1 test") == 2  # both runs ran, as the script asked
    assert "starts a second unittest run" in run.proc.stderr
    assert run.proc.returncode == 1 and run.fold.exitstatus == 1


def test_select_runs_the_listed_tests_in_the_listed_order_and_removes_the_file(tmp_path: Path) -> None:
    select = tmp_path / "select.txt"
    wanted = ["test_outcomes.py::TestOutcomes::test_passes", "test_outcomes.py::TestOutcomes::test_fails"]
    wire.write_select(select, [*wanted, "test_outcomes.py::TestGone::test_x"])
    run = launch(tmp_path, "test_outcomes.py", options=(wire.option(wire.OPT_SELECT, str(select)),))
    assert not select.exists()
    assert run.fold.collected == wanted and run.fold.finished_ids() == wanted
    assert "Ran 2 tests" in run.proc.stderr
    assert run.proc.returncode == 1 and run.fold.exitstatus == 1


def test_a_crash_leaves_the_test_started_without_finish(tmp_path: Path) -> None:
    run = launch(tmp_path, "test_crash.py", env={wire.ENV_MARKERS: "1"})
    assert run.proc.returncode == -signal.SIGSEGV
    fold = run.fold
    assert not fold.ended and fold.running == "test_crash.py::TestCrash::test_segfaults"
    assert fold.finished_ids() == ["test_crash.py::TestCrash::test_before"]
    assert fold.collected is not None and "test_crash.py::TestCrash::test_usually_after" in fold.collected
    # markers before each started test, as the plugin writes them
    assert run.proc.stdout == (wire.marker(1) + wire.marker(2)).decode()
    # SIGUSR1 dumped every thread's stack and the run went on; the crash's stack follows
    assert "test_before" in run.fault and "Segmentation fault" in run.fault
    assert run.fault.index("test_before") < run.fault.index("Segmentation fault")
    assert "test_segfaults" in run.fault[run.fault.index("Segmentation fault") :]


def test_a_crash_in_set_up_class_is_the_first_test_of_the_class(tmp_path: Path) -> None:
    run = launch(tmp_path, "test_crash_in_setup_class.py")
    assert run.proc.returncode == -signal.SIGSEGV
    assert run.fold.finished_ids() == ["test_crash_in_setup_class.py::TestAFine::test_fine"]
    assert run.fold.running == "test_crash_in_setup_class.py::TestBCrashes::test_first"
    assert "setUpClass" in run.fault


def test_a_fifo_journal_is_read_to_the_end_and_its_name_removed(tmp_path: Path) -> None:
    fifo = tmp_path / "journal.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with fifo.open("rb") as f:  # returns at EOF: every writer closed it
            received.extend(f.read().splitlines())

    reader = threading.Thread(target=read)
    reader.start()
    proc = subprocess.run(
        [sys.executable, "-m", "device_matrix.child.script", wire.option(wire.OPT_JOURNAL, str(fifo)), "twice.py"],
        cwd=SCRIPTS,
        env=clean_env(),
        capture_output=True,
        check=False,
        timeout=120,
    )
    reader.join(timeout=60)
    assert not fifo.exists()  # a test cannot find the runner's FIFO
    fold = Fold()
    for line in received:
        fold.feed(line)
    assert fold.broken is None and fold.ended and fold.exitstatus == proc.returncode == 1
    assert fold.finished_ids() == ["twice.py::TestFirst::test_a"]


def test_upstream_shaped_spmd_script_runs_with_its_flag(tmp_path: Path) -> None:
    file = "test/spmd/test_train_spmd_linear.py"
    run = launch(tmp_path, file, "--skip-gradient-checkpointing", cwd=UPSTREAM)
    got = run.outcomes()
    assert got["TestTrainSpmdLinear::test_trains"] == ("passed", None)
    assert got["TestTrainSpmdLinear::test_gradient_checkpointing"] == (
        "skipped",
        "Skipped: --skip-gradient-checkpointing given",
    )
    assert run.fold.collected is not None and all(n.startswith(f"{file}::") for n in run.fold.collected)
    assert run.fold.exitstatus == run.proc.returncode == 0


def test_a_forked_copy_that_returns_into_unittest_is_ended_and_names_the_test(tmp_path: Path) -> None:
    ran = tmp_path / "ran.txt"
    run = launch(tmp_path, "test_fork.py", env={"RAN": str(ran)})
    assert run.proc.returncode == 0, run.proc.stderr
    assert {k: v[0] for k, v in run.outcomes().items()} == {
        "TestFork::test_a_before": "passed",
        "TestFork::test_b_forks": "passed",
        "TestFork::test_c_after": "passed",
    }
    # test_c ran once, in the real process; the copy was ended with a note naming the test
    assert [line.split()[0] for line in ran.read_text().splitlines()] == ["a", "c"]
    assert len({line.split()[1] for line in ran.read_text().splitlines()}) == 1
    assert FORKED_COPY_NOTE.format(nodeid="test_fork.py::TestFork::test_b_forks") in run.proc.stderr


PACKAGE = FIXTURES / "upstream_package"


def test_a_test_cannot_tell_the_launcher_from_python_file(tmp_path: Path) -> None:
    # test_frames.py walks its callers' frames and their locals, as upstream's
    # custom_debug_lowering.py does (#24): it must see what `python FILE` gives it
    file = "test/test_frames.py"
    seen = {}
    for how in ("plain", "launched"):
        out = tmp_path / f"{how}.json"
        env = {"FRAMES_OUT": str(out), "PJRT_DEVICE": "CPU"}
        if how == "plain":
            full = clean_env()
            full.update(env)
            proc = subprocess.run(
                [sys.executable, file, "-v"],
                cwd=PACKAGE,
                env=full,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr
        else:
            (tmp_path / "launch").mkdir()
            run = launch(tmp_path / "launch", file, "-v", cwd=PACKAGE, env=env)
            assert run.proc.returncode == 0, run.proc.stderr
            assert {k: v[0] for k, v in run.outcomes().items()} == {
                "TestFrames::test_an_object_held_by_no_caller_walks_every_frame": "passed",
                "TestFrames::test_names_a_member_by_walking_frames": "passed",
                "TestFrames::test_seen_from_inside": "passed",
                "TestFrames::test_the_outermost_frame_is_this_file": "passed",
            }
        seen[how] = json.loads(out.read_text())
    assert seen["launched"]["argv"] == [file, "-v"]
    assert seen["launched"]["name"] == "__main__"
    # the same callers, frame by frame: functions, files and the types of their locals
    assert seen["launched"] == seen["plain"]


def test_the_session_ends_before_the_exit_handlers_run(tmp_path: Path) -> None:
    # a hang in an exit handler (torch_xla's, waiting for the device) is a hang at exit,
    # after the session's end, as under pytest (#24)
    ran = tmp_path / "ran.txt"
    run = launch(tmp_path, "test_exit_handler.py", env={"EXIT_HANDLER_RAN": str(ran)})
    assert run.proc.returncode == 0, run.proc.stderr
    end = json.loads(run.lines[-1])
    assert end["e"] == "end" and end["exitstatus"] == 0
    assert end["t"] <= float(ran.read_text())
    assert run.outcomes() == {"TestA::test_a": ("passed", None)}
