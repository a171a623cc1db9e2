"""Integration: an upstream-shaped unittest project run end to end, in each isolation mode.

tests/fixtures/upstream is laid out as torch_xla's test/ folder: unittest classes, a helper
imported by bare name, a file that starts the device at import and a file whose
setUpClass switches to SPMD, which aborts when both share a process (as upstream's do).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.builders import upstream_project
from tests.conftest import FIXTURES, Project, clean_env

pytestmark = pytest.mark.slow

SUITES = '["test_operations.py", "test_pytest_style.py", "spmd"]'


def _project(tmp_path: Path, isolation: str, extra: str = "") -> Project:
    """tests/fixtures/upstream with the row's isolation; ``extra`` adds to its variables (or tables)."""
    return upstream_project(
        tmp_path,
        "upstream",
        row=f'suites = {SUITES}\nisolation = "{isolation}"',
        env='CPU_NUM_DEVICES = "1"\nXLA_SIM_SPMD_AFTER_DEVICE = "abort"\n' + extra,
    )


def _every_output_has_every_test(p: Project) -> dict[str, Any]:
    """run.json, junit.xml and report.json name the same tests, each once."""
    folder = p.results / "fixture"
    record: dict[str, Any] = json.loads((folder / "run.json").read_text())
    recorded = [t["nodeid"] for t in record["tests"]]
    assert len(recorded) == len(set(recorded))
    cases = ET.parse(folder / "junit.xml").getroot().iter("testcase")
    assert len(list(cases)) == len(recorded)
    report = json.loads((folder / "report.json").read_text())
    assert sorted(t["nodeid"] for t in report["tests"]) == sorted(n for n in recorded if "::" in n)
    assert record["summary"]["total"] == len(recorded)
    return record


def test_one_process_for_the_row_crashes_where_upstream_would_not(tmp_path: Path) -> None:
    p = _project(tmp_path, "row")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = _every_output_has_every_test(p)
    # every resume imports test_operations.py again, so each SPMD test aborts in turn
    assert len(record["crashes"]) == 3
    assert len({c["diagnosis"]["fingerprint"] for c in record["crashes"]}) == 1
    for crash in record["crashes"]:
        assert crash["diagnosis"]["signal_name"] == "SIGABRT"
        assert "spmd/test_train_spmd_linear.py" in crash["nodeid"]
        # alone, in its own file, it passes: flaky, and the repro runs it beside its neighbours
        assert crash["classification"] == "flaky"
        repro = crash["repro"].splitlines()[0]
        assert "test/test_operations.py" in repro and "test/spmd" in repro
    # and the repro, run as printed, crashes the same way
    ran = subprocess.run(
        ["bash", "-c", record["crashes"][0]["repro"].splitlines()[0]],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode in (-signal.SIGABRT, 128 + signal.SIGABRT), ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "in use_spmd" in ran.stderr  # the same abort: faulthandler names the frame


@pytest.mark.parametrize("isolation", ["file", "class"])
def test_a_process_per_file_or_class_runs_like_upstream(tmp_path: Path, isolation: str) -> None:
    p = _project(tmp_path, isolation)
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = _every_output_has_every_test(p)
    assert record["crashes"] == []
    assert {t["outcome"] for t in record["tests"]} <= {"passed", "skipped", "xfailed"}
    purposes = [a["purpose"] for a in record["attempts"]]
    assert purposes[0] == "collect"
    files = {t["nodeid"].split("::")[0] for t in record["tests"]}
    if isolation == "file":
        assert purposes[1:] == ["run"] * len(files)
    else:
        # a class's tests share a process; a module's plain functions share one too
        classes = {
            "::".join(parts[:2]) if len(parts) > 2 else parts[0]
            for parts in (t["nodeid"].split("::") for t in record["tests"])
        }
        assert purposes[1:] == ["run"] * len(classes) and len(classes) >= len(files)


def test_a_module_that_fails_to_import_hides_no_other_test(tmp_path: Path) -> None:
    p = _project(tmp_path, "row")
    (p.root / "test" / "test_broken_import.py").write_text("import module_that_does_not_exist\n")
    text = (p.root / "pyproject.toml").read_text().replace(SUITES, SUITES.replace("[", '["test_broken_import.py", '))
    (p.root / "pyproject.toml").write_text(text.replace('XLA_SIM_SPMD_AFTER_DEVICE = "abort"', ""))
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = _every_output_has_every_test(p)
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes["test/test_broken_import.py"] == "error"
    assert "module_that_does_not_exist" in next(
        t["message"] for t in record["tests"] if t["nodeid"] == "test/test_broken_import.py"
    )
    others = [o for n, o in outcomes.items() if n != "test/test_broken_import.py"]
    assert len(others) > 10 and "not_run" not in others


def test_resume_with_a_results_folder_outside_the_project(tmp_path: Path) -> None:
    p = _project(tmp_path, "row")
    (p.root / "pyproject.toml").write_text(
        (p.root / "pyproject.toml").read_text().replace('XLA_SIM_SPMD_AFTER_DEVICE = "abort"', "")
    )
    outside = tmp_path / "elsewhere" / "results"
    first = p.run("run", "--device", "fixture", "--results", str(outside))
    assert first.returncode == 0, first.stdout + first.stderr
    run_json = outside / "fixture" / "run.json"
    record = json.loads(run_json.read_text())
    expected = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    for t in record["tests"][3:]:
        t["outcome"] = "not_run"
    record["status"] = "interrupted"
    run_json.write_text(json.dumps(record))
    resumed = p.run("run", "--device", "fixture", "--results", str(outside), "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    again = json.loads(run_json.read_text())
    # the project's own pytest configuration still applied: the same tests, the same outcomes
    assert {t["nodeid"]: t["outcome"] for t in again["tests"]} == expected
    assert again["attempts"][-1]["purpose"] == "resume"
    assert again["attempts"][-1]["selected"] == len(expected) - 3


def test_device_skips_that_say_where_their_test_applies_need_no_issue(tmp_path: Path) -> None:
    # upstream's `skipIf(xr.device_type() != "TPU", ...)` and "needs the TPU runtime" are
    # where a test applies, not defects: the run files nothing and asks for nothing (#24)
    p = _project(tmp_path, "file")
    (p.root / "pyproject.toml").write_text(
        (p.root / "pyproject.toml").read_text().replace('XLA_SIM_SPMD_AFTER_DEVICE = "abort"', "")
    )
    run = p.run("run", "--device", "fixture")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 filed, 0 to file" in run.stdout, run.stdout
    check = p.run("skips", "check", "test")
    assert check.returncode == 0 and "0 problem(s)" in check.stdout, check.stdout
    tri = p.run("triage", "--no-history")
    assert tri.returncode == 0, tri.stdout + tri.stderr
    data = json.loads((p.results / "triage" / "triage.json").read_text())
    assert [s for s in data["skips"] if s["source"].startswith("source")] == []


SCRIPTS = """
[[tool.device-matrix.devices.fixture.scripts]]
file = "test/spmd/test_train_spmd_linear.py"
args = ["--skip-gradient-checkpointing"]
env = { CPU_NUM_DEVICES = "1" }

[[tool.device-matrix.devices.fixture.scripts]]
file = "test/test_crash_script.py"
"""


def test_files_run_as_scripts_with_their_flags(tmp_path: Path) -> None:
    p = _project(tmp_path, "file")
    shutil.copy(FIXTURES / "scripts" / "test_crash.py", p.root / "test" / "test_crash_script.py")
    text = (p.root / "pyproject.toml").read_text().replace(SUITES, '["test_operations.py"]')
    (p.root / "pyproject.toml").write_text(text.replace('XLA_SIM_SPMD_AFTER_DEVICE = "abort"', "") + SCRIPTS)
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = _every_output_has_every_test(p)
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    spmd = "test/spmd/test_train_spmd_linear.py::TestTrainSpmdLinear::"
    assert outcomes[spmd + "test_trains"] == "passed"
    # the flag reached the script's own __main__
    assert outcomes[spmd + "test_gradient_checkpointing"] == "skipped"
    crash_file = "test/test_crash_script.py::TestCrash::"
    assert outcomes[crash_file + "test_before"] == "passed"
    assert outcomes[crash_file + "test_segfaults"] == "crashed"
    assert outcomes[crash_file + "test_usually_after"] == "passed"  # resumed in the script
    (crash,) = record["crashes"]
    assert crash["diagnosis"]["signal_name"] == "SIGSEGV"
    assert crash["classification"] == "deterministic"  # rerun alone, as a script again
    assert crash["repro"].endswith("test/test_crash_script.py TestCrash.test_segfaults")
    assert any("test_operations.py::" in n for n in outcomes)
    purposes = [a["purpose"] for a in record["attempts"]]
    # collect, the operations file, the spmd script, the crash script, its resume, its rerun
    assert purposes == ["collect", "run", "run", "run", "resume", "rerun"]
