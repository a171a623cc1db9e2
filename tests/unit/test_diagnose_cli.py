"""``device-matrix diagnose LOG...``: any shape of log, the runner's fingerprint, the issue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.cli.diagnose import returncode_from_log
from device_matrix.diagnostics import diagnose
from device_matrix.errors import EXIT_OK, EXIT_RESULTS, EXIT_TESTS_FAILED
from device_matrix.issues.base import FINGERPRINT_MARKER
from device_matrix.issues.ledger import Ledger
from device_matrix.redact import Redactor

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"


def actions_log(output: str, exit_code: int) -> str:
    """A downloaded GitHub Actions job log of a step that ran a test script."""
    lines = ["##[group]Run python suites/test_script.py", "##[endgroup]", *output.splitlines()]
    lines.append(f"##[error]Process completed with exit code {exit_code}.")
    return "\n".join(f"2025-05-06T12:34:{i % 60:02d}.{i:07d}Z {line}" for i, line in enumerate(lines)) + "\n"


def runner_fingerprint(sample: str, rc: int) -> str:
    output = (RECORDED / sample).read_text()
    return diagnose(returncode=rc, fault_text="", output_text=output, redactor=Redactor({}))["fingerprint"]


@pytest.mark.parametrize(
    ("sample", "rc"),
    [
        ("tsl_segfault.txt", 139),
        ("terminate_runtime_error.txt", 134),
        ("sigtrap_int3.txt", 133),  # only the exit code says SIGTRAP
        ("sigxcpu_cpu_limit.txt", 152),
    ],
)
def test_actions_log_gets_the_runners_fingerprint(
    sample: str, rc: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "job.log"
    log.write_text(actions_log((RECORDED / sample).read_text(), rc))
    code = main(["diagnose", "--json", "--results", str(tmp_path / "results"), str(log)])
    assert code == EXIT_OK
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["log"] == str(log)
    assert entry["diagnosis"]["fingerprint"] == runner_fingerprint(sample, -(rc - 128))
    assert entry["issues"] == []


def test_pasted_worker_crash_prints_signal_exception_and_fingerprint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "pasted.txt"
    log.write_text((RECORDED / "pytest_worker_terminate.txt").read_text())
    assert main(["diagnose", "--results", str(tmp_path), str(log)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "signal: SIGABRT" in out
    assert "exception: std::runtime_error: cannot open checkpoint" in out
    assert f"fingerprint: {runner_fingerprint('terminate_runtime_error.txt', -6)}" in out
    assert "issue: none has this fingerprint yet" in out


def test_names_the_issue_that_has_the_fingerprint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    fingerprint = runner_fingerprint("tsl_segfault.txt", -11)
    ledger = Ledger(results / "ledger.sqlite")
    ledger.create("unrelated", "no marker", [])
    ledger.create("SIGSEGV in GetIrValue", "body\n\n" + FINGERPRINT_MARKER.format("crash-" + fingerprint), [])
    ledger.close()
    log = tmp_path / "output.log"
    # the same crash, seen on another host, after pytest's progress dots
    log.write_text("tests/test_x.py ..." + (RECORDED / "tsl_segfault_other_host.txt").read_text())
    assert main(["diagnose", "--results", str(results), "--returncode", "-11", str(log)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "issue: ledger:2 [open] SIGSEGV in GetIrValue" in out
    assert "ledger:1" not in out


def test_names_the_issue_linked_in_issues_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    results.mkdir()
    fingerprint = runner_fingerprint("terminate_out_of_range.txt", -6)
    (results / "issues.json").write_text(
        json.dumps(
            {
                "version": 1,
                "links": {"crash-" + fingerprint: "org/repo#17"},
                "issues": {"org/repo#17": {"state": "closed", "title": "replica lookup out of range"}},
            }
        )
    )
    log = tmp_path / "log.txt"
    log.write_text((RECORDED / "terminate_out_of_range.txt").read_text())
    assert main(["diagnose", "--json", "--results", str(results), str(log)]) == EXIT_OK
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["issues"] == [{"issue": "org/repo#17", "title": "replica lookup out of range", "state": "closed"}]


def test_no_crash_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "ok.log"
    log.write_text("collected 3 items\n\ntests/test_a.py ...\n3 passed in 0.1s\n")
    assert main(["diagnose", "--results", str(tmp_path), str(log)]) == EXIT_TESTS_FAILED
    assert "no native crash found" in capsys.readouterr().out


def test_unreadable_log_exits_7(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--results", str(tmp_path), str(tmp_path / "missing.log")]) == EXIT_RESULTS
    err = capsys.readouterr().err
    assert "ERROR" in err and "missing.log: cannot read the log" in err
    assert "TIP" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("log", "rc"),
    [
        ("##[error]Process completed with exit code 134.", 134),
        ("run.sh: line 3:  4242 Segmentation fault      (core dumped) python train.py", -11),
        ("Trace/breakpoint trap", -5),
        ("all good\n", None),
        ("E   AssertionError: Aborted download of 3 files", None),
        # a row's output.log: a signal ended attempt 1; the resume's exit and the runner's
        # own kill at a deadline are no crash and take nothing from it
        (
            "=== device-matrix attempt 1 ended by SIGSEGV (returncode -11)\n=== device-matrix attempt 2 exited with 1",
            -11,
        ),
        ("=== device-matrix attempt 1 ended by SIGABRT (returncode 134)", 134),
        ("=== device-matrix attempt 3 was ended by the runner (returncode -9)", None),
        ("=== device-matrix attempt 2 exited with 0", None),
    ],
)
def test_returncode_from_log(log: str, rc: int | None) -> None:
    assert returncode_from_log(log) == rc


def test_names_a_seeded_issue_of_the_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "p"\n')
    fingerprint = runner_fingerprint("sigquit_from_outside.txt", -3)
    (project / "device-matrix-issues.toml").write_text(
        f'[[issue]]\nid = 9\ntitle = "peer never answers"\nfingerprint = "crash-{fingerprint}"\n'
    )
    log = tmp_path / "job.log"
    log.write_text(actions_log((RECORDED / "sigquit_from_outside.txt").read_text(), 131))
    assert main(["--project", str(project), "diagnose", str(log)]) == EXIT_OK
    assert "issue: ledger:9 [open] peer never answers" in capsys.readouterr().out
    assert not (project / "results").exists()  # looking up wrote nothing


CRASHING = """
import ctypes


def test_segfault():
    ctypes.string_at(0)


def test_fails():
    assert 1 == 2, "a failure after the crash"
"""
