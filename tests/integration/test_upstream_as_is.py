"""Integration: a project shaped as pytorch/xla's test/ folder runs through device-matrix
with the outcomes it has when its files run as scripts (issue #24).

tests/fixtures/upstream_package is that shape: test/ is a package, helpers are imported
by bare name, a unittest file has a module-level function that takes ``self``, a helper
walks its callers' frames, and a file is run twice with other variables and flags.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.builders import upstream_project
from tests.conftest import FIXTURES, Project, clean_env

pytestmark = pytest.mark.slow

PACKAGE = FIXTURES / "upstream_package"


def _project(tmp_path: Path, row: str, extra: str = "") -> Project:
    """tests/fixtures/upstream_package with ``row``'s keys; ``extra`` adds to its variables (or tables)."""
    return upstream_project(tmp_path, "upstream_package", row=row, env='CPU_NUM_DEVICES = "1"\n' + extra)


def _outcomes(record: dict[str, Any]) -> dict[str, str]:
    return {t["nodeid"]: t["outcome"] for t in record["tests"]}


def _plain(root: Path, file: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The file run as upstream's run_tests.sh runs it."""
    full = clean_env()
    full.update({"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1", **(env or {})})
    return subprocess.run(
        [sys.executable, file, *args], cwd=root, env=full, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("isolation", ["file", "class"])
def test_bare_name_helpers_import_from_the_files_own_folder(tmp_path: Path, isolation: str) -> None:
    suites = '["test_bare_helper.py", "spmd/test_sharded.py", "test_module_function.py"]'
    p = _project(tmp_path, f'suites = {suites}\nisolation = "{isolation}"')
    for file in ("test/test_bare_helper.py", "test/spmd/test_sharded.py", "test/test_module_function.py"):
        assert _plain(p.root, file).returncode == 0
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outcomes = _outcomes(p.record())
    assert outcomes == {
        "test/test_bare_helper.py::TestBareHelper::test_close": "passed",
        "test/test_bare_helper.py::TestBareHelper::test_helper_is_the_folders_own": "passed",
        "test/spmd/test_sharded.py::TestSharded::test_devices": "passed",
        # unittest's collection: the module-level test_shared_check(self) is not a test
        "test/test_module_function.py::TestUsesTheSharedCheck::test_one": "passed",
        "test/test_module_function.py::TestUsesTheSharedCheck::test_two": "passed",
    }


def test_a_script_that_walks_its_callers_frames_passes_as_it_does_alone(tmp_path: Path) -> None:
    scripts = '\n[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/test_frames.py"\n'
    p = _project(tmp_path, "suites = []", extra=scripts)
    assert _plain(p.root, "test/test_frames.py").returncode == 0
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_outcomes(p.record()).values()) == {"passed"}
    assert len(p.record()["tests"]) == 4


TWICE = """
[[tool.device-matrix.devices.fixture.scripts]]
file = "test/test_variables.py"
env = { FIXTURE_METRICS_FILE = "/tmp/metrics.txt" }

[[tool.device-matrix.devices.fixture.scripts]]
file = "test/test_variables.py"

[[tool.device-matrix.devices.fixture.scripts]]
file = "test/test_variables.py"
args = ["--strict"]
"""


def test_each_run_of_a_file_is_its_own_test_in_every_output(tmp_path: Path) -> None:
    # run_tests.sh runs test_metrics.py with and without XLA_METRICS_FILE, and others with
    # flags: each run has its own outcomes, a failure never hidden by a later pass (#24)
    p = _project(tmp_path, "suites = []", extra=TWICE)
    assert _plain(p.root, "test/test_variables.py", env={"FIXTURE_METRICS_FILE": "/tmp/metrics.txt"}).returncode == 1
    assert _plain(p.root, "test/test_variables.py").returncode == 0
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    base = "test/test_variables.py::TestVariables::"
    assert _outcomes(record) == {
        f"{base}test_flag[FIXTURE_METRICS_FILE]": "skipped",
        f"{base}test_without_the_metrics_file[FIXTURE_METRICS_FILE]": "failed",
        f"{base}test_flag": "skipped",
        f"{base}test_without_the_metrics_file": "passed",
        f"{base}test_flag[--strict]": "passed",
        f"{base}test_without_the_metrics_file[--strict]": "passed",
    }
    folder = p.results / "fixture"
    suite = ET.parse(folder / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "6" and suite.get("failures") == "1"
    report = json.loads((folder / "report.json").read_text())
    assert sorted(t["nodeid"] for t in report["tests"]) == sorted(_outcomes(record))
    tri = p.run("triage", "--no-history")
    assert tri.returncode == 0, tri.stdout + tri.stderr
    triage = json.loads((p.results / "triage" / "triage.json").read_text())
    assert f"{base}test_without_the_metrics_file[FIXTURE_METRICS_FILE]" in json.dumps(triage)
    # progress: each test counted once, and a total shown only once it is known
    counters = [re.search(r"\[(\d+)(?:/(\d+))?\]", line) for line in proc.stdout.splitlines()]
    shown = [(int(m.group(1)), m.group(2)) for m in counters if m]
    assert [k for k, _ in shown] == [1, 2, 3, 4, 5, 6], proc.stdout
    assert {total for _, total in shown} <= {None, "6"}, proc.stdout


def test_a_run_files_no_issue_unasked_and_says_how_many_sync_would_file(tmp_path: Path) -> None:
    # of the package's 19 device skips, 8 say they are broken (or disable a test
    # everywhere) and cite nothing; the others say where their test applies (#24)
    p = _project(tmp_path, 'suites = ["test_bare_helper.py"]\nisolation = "file"')
    run = p.run("run", "--device", "fixture")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 filed, 8 to file" in run.stdout, run.stdout
    assert "8 issue(s) to file: run `device-matrix issues sync`" in run.stdout
    synced = p.run("issues", "sync")
    assert synced.returncode == 0 and "8 filed" in synced.stdout, synced.stdout
    again = p.run("run", "--device", "fixture")
    assert "8 linked, 0 filed, 0 to file" in again.stdout, again.stdout
    tri = p.run("triage", "--no-history")
    assert tri.returncode == 0, tri.stdout + tri.stderr
    skips = json.loads((p.results / "triage" / "triage.json").read_text())["skips"]
    from_sources = [s for s in skips if s["source"].startswith("source")]
    assert len(from_sources) == 8 and all(s["issue"].startswith("ledger:") for s in from_sources)

    # a project that wants every run to file them says so
    fresh = _project(tmp_path / "again", 'suites = ["test_bare_helper.py"]\nisolation = "file"')
    text = (fresh.root / "pyproject.toml").read_text()
    (fresh.root / "pyproject.toml").write_text(text + "\n[tool.device-matrix.tracker]\nfile_on_run = true\n")
    filing = fresh.run("run", "--device", "fixture")
    assert filing.returncode == 0 and "8 filed" in filing.stdout, filing.stdout


def _junit_messages(folder: Path) -> dict[str, tuple[str, str | None]]:
    out = {}
    for case in ET.parse(folder / "junit.xml").getroot().iter("testcase"):
        for child in case:
            if child.tag in ("failure", "error"):
                out[f"{case.get('classname')}.{case.get('name')}"] = (child.tag, child.get("message"))
    return out


def test_the_record_keeps_errors_messages_and_the_command_that_ran(tmp_path: Path) -> None:
    # the same tests under pytest and as a script (a file a script runs is left to it, #20: a copy)
    scripts = '\n[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/test_record_script.py"\nname = "script"\n'
    p = _project(tmp_path, 'suites = ["test_record.py"]\nisolation = "file"', extra='FIXTURE_CRASH = "1"\n' + scripts)
    shutil.copy(p.root / "test" / "test_record.py", p.root / "test" / "test_record_script.py")
    proc = p.run("run", "--device", "fixture", "--", "-W", "ignore::DeprecationWarning")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    base = "test/test_record.py::TestRecord::"
    script = "test/test_record_script.py::TestRecord::"
    assert _outcomes(record) == {
        f"{base}test_error": "error",  # unittest's error: not a failure (#24)
        f"{base}test_failure": "failed",
        f"{base}test_crash": "crashed",
        f"{script}test_error[script]": "error",
        f"{script}test_failure[script]": "failed",
        f"{script}test_crash[script]": "crashed",
    }
    # junit's message: the exception's line, as pytest writes it, however the file ran
    messages = _junit_messages(p.results / "fixture")
    for name in ("test_record.TestRecord.test_{}", "test_record_script.TestRecord.test_{}[script]"):
        error = messages["test." + name.format("error")]
        assert error == ("error", "TypeError: cannot unpack non-iterable bool object"), messages
        failure = messages["test." + name.format("failure")]
        assert failure == ("failure", "AssertionError: 1 != 2"), messages
    # report.json: the error's call phase in pytest-json-report's words, with its exception
    report = {t["nodeid"]: t for t in json.loads((p.results / "fixture" / "report.json").read_text())["tests"]}
    for nodeid in (f"{base}test_error", f"{script}test_error[script]"):
        call = report[nodeid]["call"]
        assert call["outcome"] == "failed", report[nodeid]
        assert call["crash"]["message"].startswith("TypeError: cannot unpack non-iterable bool object"), call
    # the command that ran, and a repro that is it (the project has no noxfile)
    assert record["command"] == [
        "device-matrix",
        "--project",
        str(p.root),
        "run",
        "--no-gdb",  # the tests' own Project.run adds it
        "--device",
        "fixture",
        "--",
        "-W",
        "ignore::DeprecationWarning",
    ]
    assert "nox -s" not in record["repro"] and record["repro"].endswith("-- -W ignore::DeprecationWarning")
    crash = next(c for c in record["crashes"] if c["nodeid"] == f"{base}test_crash")
    repro = crash["repro"]
    assert "nox -s" not in repro and "-W ignore::DeprecationWarning" in repro
    assert "--dm-as-script" in repro and "--import-mode=importlib" in repro
    ran = subprocess.run(
        ["bash", "-c", repro], env=clean_env(), capture_output=True, text=True, timeout=120, check=False
    )
    assert "Fatal Python error: Aborted" in ran.stderr or ran.returncode in (-6, 134), ran.stdout + ran.stderr
    assert "ImportError" not in ran.stdout + ran.stderr


def test_diagnose_on_a_rows_output_log_finds_what_the_run_recorded(tmp_path: Path) -> None:
    # the process of a file hangs at exit, after its tests passed: TIMEOUT during exit, a
    # fingerprint; `diagnose` on the row's own output.log says the same, with its issue (#24)
    row = 'suites = ["test_exit_hang.py"]\nisolation = "file"\ntest_timeout = 2'
    p = _project(tmp_path, row.replace("test_timeout = 2", ""), extra='FIXTURE_HANG_AT_EXIT = "1"\n')
    text = (p.root / "pyproject.toml").read_text().replace("test_timeout = 60", "test_timeout = 2")
    # the exit's deadline at 10 s, not the packaged 30: the hang is the same, the wait shorter (#31)
    (p.root / "pyproject.toml").write_text(text.replace("crash_reruns = 1", "crash_reruns = 0\nphase_timeout_min = 10"))
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = p.record()["crashes"]
    assert crash["kind"] == "timeout" and crash["phase"] == "exit"
    fingerprint = crash["diagnosis"]["fingerprint"]
    synced = p.run("issues", "sync")
    assert "1 filed" in synced.stdout or "filed ledger:" in synced.stdout, synced.stdout
    log = p.results / "fixture" / "output.log"
    for extra in ([], ["--returncode", "143"]):
        found = p.run("diagnose", "--json", *extra, str(log))
        assert found.returncode == 0, found.stdout + found.stderr
        (entry,) = json.loads(found.stdout)
        assert entry["diagnosis"]["fingerprint"] == fingerprint
        assert [i["issue"] for i in entry["issues"]] and entry["issues"][0]["issue"].startswith("ledger:")
    # the log alone, downloaded without its record, says it too
    alone = tmp_path / "downloaded.log"
    shutil.copy(log, alone)
    found = p.run("diagnose", "--json", str(alone))
    assert found.returncode == 0, found.stdout + found.stderr
    assert json.loads(found.stdout)[0]["diagnosis"]["fingerprint"] == fingerprint
    printed = p.run("diagnose", str(log))
    assert "TIMEOUT" in printed.stdout and fingerprint in printed.stdout and "no native crash" not in printed.stdout


def test_a_scripts_only_row_runs_its_scripts(tmp_path: Path) -> None:
    root = tmp_path / "upstream_package"
    shutil.copytree(PACKAGE, root)
    (root / "pyproject.toml").write_text(
        (root / "pyproject.toml").read_text()
        + """
[tool.device-matrix]
suites_dir = "test"

[[tool.device-matrix.devices.cpu.scripts]]
file = "test/test_bare_helper.py"
"""
    )
    proc = Project(root).run("run", "--device", "cpu", "--local")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_outcomes(Project(root).record("cpu"))) == {
        "test/test_bare_helper.py::TestBareHelper::test_close",
        "test/test_bare_helper.py::TestBareHelper::test_helper_is_the_folders_own",
    }
