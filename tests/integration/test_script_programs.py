"""A program: a ``scripts`` entry of ``kind = "program"``, one test whose outcome is its process's.

A maintainer's standalone training script with flags (``scripts/train.py --steps 3``, no
unittest in it) is a row item: exit 0 passed, a non-zero exit failed with the status and
the last lines of its output, a signal a crash with its diagnosis, a hang past the row's
test_timeout a timeout; in run.json, junit.xml, report.json, triage and the progress line
like any test. A unittest-kind script that ran no test stays an error, whose TIP names
``kind = "program"``.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from tests.conftest import Project, clean_env
from tests.userproject import user_project

pytestmark = pytest.mark.slow

TRAIN = """\
import argparse
import ctypes
import os
import sys
import time


def step(k, lr):
    if lr < 0:
        raise ValueError(f"learning rate must be positive, got {lr}")
    return 1.0 / (k + 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--crash", action="store_true")
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--token", default="")
    args = parser.parse_args()
    for k in range(args.steps):
        print(f"step {k} loss {step(k, args.lr):.3f} token {args.token}", flush=True)
    if args.crash:
        ctypes.string_at(0)  # a real SIGSEGV
    if args.hang:
        time.sleep(120)
    print("training done" if not args.exit else "loss diverged", flush=True)
    sys.exit(args.exit)


if __name__ == "__main__":
    main()
"""

# unittest in a program is the program's business: the program is still one test
UNIT_PROGRAM = """\
import unittest


class T(unittest.TestCase):
    def test_fails(self):
        self.assertEqual(1, 2)

    def test_passes(self):
        pass


if __name__ == "__main__":
    unittest.main()
"""

# crashes the first time only: run alone again, it passes
FLAKY = """\
import ctypes
import os
import sys

if not os.path.exists(sys.argv[1]):
    open(sys.argv[1], "w").close()
    ctypes.string_at(0)
print("no crash this time")
"""

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
KNOWN = "a-long-known-secret-value-42"


def entry(args: list[str], *, name: str = "", kind: str = "program", file: str = "scripts/train.py") -> str:
    text = f'[[tool.device-matrix.devices.cpu.scripts]]\nfile = "{file}"\nkind = "{kind}"\nargs = {json.dumps(args)}\n'
    return text + (f'name = "{name}"\n' if name else "")


def project(tmp_path: Path, *entries: str, row: str = "") -> Project:
    files = {"scripts/train.py": TRAIN, "scripts/unit_program.py": UNIT_PROGRAM, "scripts/flaky.py": FLAKY}
    return user_project(tmp_path, files, suites="[]", row=row + "\n" + "\n".join(entries))


def outcomes_by_nodeid(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["nodeid"]: t for t in record["tests"]}


def progress(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if re.match(r"cpu \[\d+(/\d+)?\] ", line)]


PASS, EXIT3, RAISE = "scripts/train.py[--steps,3]", "scripts/train.py[--exit,3]", "scripts/train.py[--lr=-1]"


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, str]:
    """One file in three entries: a pass, a non-zero exit, an uncaught exception."""
    p = project(
        tmp_path_factory.mktemp("three"),
        entry(["--steps", "3"]),
        entry(["--exit", "3"]),
        entry(["--lr=-1"]),
        entry([], file="scripts/unit_program.py"),
    )
    proc = p.run("run", "--device", "cpu")
    return p, proc.stdout + proc.stderr


def test_a_training_script_with_flags_passes_as_one_test(tmp_path: Path) -> None:
    p = project(tmp_path, entry(["--steps", "3"]))
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record("cpu")
    assert record["status"] == "passed"
    (test,) = record["tests"]
    assert (test["nodeid"], test["outcome"]) == ("scripts/train.py", "passed")
    assert test["duration"] > 0 and test["message"] is None
    assert progress(proc.stdout) == [progress(proc.stdout)[0]]
    assert progress(proc.stdout)[0].startswith("cpu [1/1] PASSED scripts/train.py ("), proc.stdout
    log = (p.results / "cpu" / "output.log").read_text()
    assert "step 2 loss 0.333" in log and "training done" in log  # its flags reached it
    junit = ElementTree.parse(p.results / "cpu" / "junit.xml").getroot()
    (case,) = junit.iter("testcase")
    # a file-level nodeid as pytest's junitxml names one
    assert (case.get("classname"), case.get("name"), case.get("file")) == ("", "scripts.train", "scripts/train.py")
    assert not list(case)
    report = json.loads((p.results / "cpu" / "report.json").read_text())
    assert [(t["nodeid"], t["outcome"]) for t in report["tests"]] == [("scripts/train.py", "passed")]


def test_each_ending_of_a_program_is_its_outcome_in_every_report(three: tuple[Project, str]) -> None:
    p, output = three
    record = p.record("cpu")
    tests = outcomes_by_nodeid(record)
    assert set(tests) == {PASS, EXIT3, RAISE, "scripts/unit_program.py"}, tests
    assert record["status"] == "failed"
    assert tests[PASS]["outcome"] == "passed"

    exit3 = tests[EXIT3]
    assert exit3["outcome"] == "failed"
    assert exit3["cause"].splitlines()[0] == "exit status 3"
    assert "loss diverged" in exit3["cause"] and "step 0 loss" in exit3["message"]
    assert "exited with status 3" in exit3["message"]
    assert exit3["file"] == "scripts/train.py"

    raised = tests[RAISE]
    assert raised["outcome"] == "failed"
    assert raised["cause"].splitlines()[0] == "exit status 1: ValueError: learning rate must be positive, got -1.0"
    # the deepest line of the program's own file in the traceback
    assert (raised["file"], raised["line"]) == ("scripts/train.py", 10)

    # a program that runs unittest is still one test: its exit status
    unit = tests["scripts/unit_program.py"]
    assert unit["outcome"] == "failed" and "exit status 1" in unit["cause"]
    assert "FAILED (failures=1)" in unit["message"]
    assert not any("::" in n for n in tests)

    lines = progress(output)
    # each program is one test, known before it runs: the total from the first line
    assert len(lines) == 4 and lines[0].startswith("cpu [1/4] ") and lines[-1].startswith("cpu [4/4] "), output
    assert any(line.startswith(f"cpu [2/4] FAILED {EXIT3} (") for line in lines), output

    junit = ElementTree.parse(p.results / "cpu" / "junit.xml").getroot()
    cases = {c.get("name"): c for c in junit.iter("testcase")}
    failure = cases["scripts.train[--exit,3]"].find("failure")
    assert failure is not None and failure.get("message") == "exit status 3"
    assert "loss diverged" in (failure.text or "")
    report = json.loads((p.results / "cpu" / "report.json").read_text())
    assert {t["nodeid"]: t["outcome"] for t in report["tests"]}[RAISE] == "failed"

    proc = p.run("triage", "--no-history")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    md = (p.results / "triage" / "triage.md").read_text()
    line = next(x for x in md.splitlines() if RAISE in x and x.startswith("- "))
    assert "scripts/train.py:10" in line and "ValueError: learning rate must be positive" in line
    page = (p.results / "triage" / "triage.html").read_text()
    failures = re.search(r"<section id='failures'>.*?</section>", page, re.S)
    assert failures is not None and "exit status 3" in failures.group(0)
    data = json.loads((p.results / "triage" / "triage.json").read_text())
    causes = {f["nodeid"]: f["cause"] for f in data["failures"]}
    assert causes[EXIT3].splitlines()[0] == "exit status 3"


def test_a_program_killed_by_a_signal_is_a_crash_with_its_diagnosis(tmp_path: Path) -> None:
    p = project(tmp_path, entry(["--crash"]))
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    record = p.record("cpu")
    (test,) = record["tests"]
    (crash,) = record["crashes"]
    assert (test["nodeid"], test["outcome"]) == ("scripts/train.py", "crashed")
    # the crash and its test agree
    assert test["crash"] == crash["id"] and crash["nodeid"] == "scripts/train.py"
    assert (crash["kind"], crash["phase"]) == ("crash", "test")
    diagnosis = crash["diagnosis"]
    assert diagnosis["signal_name"] == "SIGSEGV" and diagnosis["fingerprint"]
    assert "scripts/train.py" in (diagnosis["python_stack"] or "")
    # the repro is the program itself, with no unittest test name after its flags
    assert crash["repro"].splitlines()[0].endswith("scripts/train.py --crash"), crash["repro"]
    # crash_reruns = 1: run alone again, it crashed again
    assert crash["classification"] == "deterministic" and len(crash["reruns"]) == 1
    assert crash["reruns"][0]["outcome"] == "crashed"
    assert (test["file"], test["line"]) == ("scripts/train.py", 26)
    assert "cpu CRASHED scripts/train.py: SIGSEGV" in proc.stdout, proc.stdout

    # a resume keeps the crash as it was: nothing runs again
    attempts = len(record["attempts"])
    again = p.run("run", "--device", "cpu", "--resume")
    resumed = p.record("cpu")
    assert again.returncode == proc.returncode, again.stdout + again.stderr
    assert len(resumed["attempts"]) == attempts and resumed["crashes"] == record["crashes"]
    assert outcomes_by_nodeid(resumed)["scripts/train.py"]["outcome"] == "crashed"


def test_a_program_that_crashes_once_is_a_flaky_crash_whose_repro_is_the_program(tmp_path: Path) -> None:
    p = project(tmp_path, entry([str(tmp_path / "crashed-once")], file="scripts/flaky.py"))
    proc = p.run("run", "--device", "cpu")
    record = p.record("cpu")
    (test,) = record["tests"]
    (crash,) = record["crashes"]
    # the first run's crash is the record's; its rerun alone passed: flaky
    assert (test["outcome"], test["crash"]) == ("crashed", crash["id"]), proc.stdout + proc.stderr
    assert crash["classification"] == "flaky"
    assert [r["outcome"] for r in crash["reruns"]] == ["passed"]
    # the program itself, not pytest beside neighbours
    assert " -m pytest" not in crash["repro"]
    # #31: the interpreter the run used, whatever its name (a venv's may be `python3`)
    program = shlex.join([sys.executable, "scripts/flaky.py", str(tmp_path / "crashed-once")])
    assert crash["repro"].splitlines()[0].endswith(f" {program}")
    assert "scripts/flaky.py crash is flaky (1 rerun(s))" in proc.stdout


def test_a_resume_runs_again_a_program_that_had_no_outcome(tmp_path: Path) -> None:
    p = project(tmp_path, entry(["--steps", "2"]), entry(["--crash"]))
    p.run("run", "--device", "cpu")
    record = p.record("cpu")
    steps = "scripts/train.py[--steps,2]"
    # as an interrupt leaves it: the program that was running is not_run
    for test in record["tests"]:
        if test["nodeid"] == steps:
            test.update(outcome="not_run", message="interrupted by SIGTERM while it ran", duration=0.0)
    record["status"] = "interrupted"
    (p.results / "cpu" / "run.json").write_text(json.dumps(record))
    proc = p.run("run", "--device", "cpu", "--resume")
    resumed = p.record("cpu")
    tests = outcomes_by_nodeid(resumed)
    assert tests[steps]["outcome"] == "passed", proc.stdout + proc.stderr
    assert tests["scripts/train.py[--crash]"]["outcome"] == "crashed"
    assert len(resumed["crashes"]) == 1 and resumed["crashes"][0]["reruns"] == record["crashes"][0]["reruns"]
    assert len(resumed["attempts"]) == len(record["attempts"]) + 1


def test_a_program_that_hangs_past_test_timeout_is_a_timeout(tmp_path: Path) -> None:
    p = project(tmp_path, entry(["--hang"]), row="test_timeout = 3")
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    record = p.record("cpu")
    (test,) = record["tests"]
    (crash,) = record["crashes"]
    assert (test["nodeid"], test["outcome"]) == ("scripts/train.py", "timeout")
    assert test["crash"] == crash["id"] and crash["kind"] == "timeout"
    assert "time.sleep" in (crash["diagnosis"]["python_stack"] or "") or "train.py" in (
        crash["diagnosis"]["python_stack"] or ""
    )
    assert test["duration"] >= 3


def test_test_names_a_program_and_runs_it_alone(tmp_path: Path) -> None:
    p = project(tmp_path, entry(["--steps", "3"]), entry(["--exit", "3"]))
    proc = p.run("run", "--device", "cpu", "--test", PASS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record("cpu")
    assert [(t["nodeid"], t["outcome"]) for t in record["tests"]] == [(PASS, "passed")]
    # the file names both its entries, as a file names its tests
    proc = p.run("run", "--device", "cpu", "--test", "scripts/train.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert {t["nodeid"]: t["outcome"] for t in p.record("cpu")["tests"]} == {PASS: "passed", EXIT3: "failed"}


def test_a_unittest_script_that_ran_no_test_says_kind_program(tmp_path: Path) -> None:
    p = project(tmp_path, entry(["--steps", "1"], kind="unittest"))
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (test,) = p.record("cpu")["tests"]
    assert test["outcome"] == "error"
    assert "ran no unittest test" in test["message"]
    assert 'TIP: a script that is not a unittest file is one test with kind = "program"' in test["message"]


def test_secrets_in_a_programs_args_are_redacted(tmp_path: Path) -> None:
    row = f'[tool.device-matrix.devices.cpu.env]\nHF_TOKEN = "{KNOWN}"\n'
    p = project(tmp_path, entry(["--crash", "--token", TOKEN]), entry(["--token", KNOWN]), row="")
    text = (p.root / "pyproject.toml").read_text()
    (p.root / "pyproject.toml").write_text(text + "\n" + row)
    proc = p.run("run", "--device", "cpu")
    assert TOKEN not in proc.stdout + proc.stderr and KNOWN not in proc.stdout + proc.stderr
    record = p.record("cpu")
    (crash,) = record["crashes"]
    assert "[redacted" in crash["repro"] and "scripts/train.py --crash --token" in crash["repro"]
    assert all("[redacted" in t["nodeid"] for t in record["tests"]), record["tests"]
    p.run("triage", "--no-history")
    files = [p.results / "cpu" / n for n in ("run.json", "junit.xml", "report.json", "output.log")]
    files += [p.results / "triage" / n for n in ("triage.md", "triage.html", "triage.json")]
    for path in files:
        body = path.read_text()
        assert TOKEN not in body and KNOWN not in body, path


def test_compare_compares_a_programs_exit_status_both_ways(tmp_path: Path) -> None:
    p = project(tmp_path, entry(["--steps", "2"]), entry(["--exit", "3"]), entry(["--crash"]))
    proc = p.run("compare", "--device", "cpu", "--all")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads((p.results / "compare" / "compare.json").read_text())
    assert data["mismatches"] == 0
    rows = {i["variant"]: i for i in data["invocations"]}
    assert rows["--exit,3"]["plain_exit"] == 3 and rows["--exit,3"]["tests_upstream"] == 1
    assert rows["--exit,3"]["tests"] == [{"nodeid": EXIT3, "device_matrix": "failed", "plain": "failed", "same": True}]
    assert rows["--steps,2"]["tests"][0]["plain"] == "passed"
    assert rows["--crash"]["plain_exit"] < 0
    assert (rows["--crash"]["tests"][0]["device_matrix"], rows["--crash"]["tests"][0]["plain"]) == ("crashed",) * 2


def test_an_interrupt_lists_the_programs_that_never_ran_as_not_run(tmp_path: Path) -> None:
    # interrupted while the first program ran, the record had no entry at all for the second
    # (the progress line had counted it): a program's test is known before it runs
    p = project(tmp_path, entry(["--hang"]), entry(["--steps", "2"]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--device", "cpu"],
        cwd=p.root,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    log = p.results / "cpu" / "output.log"
    for _ in range(300):
        if log.is_file() and "step 0 loss" in log.read_text(errors="replace"):
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, out + err
    record = p.record("cpu")
    assert record["status"] == "interrupted"
    tests = outcomes_by_nodeid(record)
    assert tests["scripts/train.py[--hang]"]["outcome"] == "not_run"
    never = tests["scripts/train.py[--steps,2]"]
    assert never["outcome"] == "not_run" and "interrupted" in never["message"]
    assert record["summary"]["total"] == 2 and record["summary"]["not_run"] == 2
    # (--resume runs a not_run program again: test_a_resume_runs_again_a_program_that_had_no_outcome)
