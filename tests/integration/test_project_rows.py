"""Rows on the project's own tests: a project without suites/ runs what plain pytest runs (#20).

A maintainer's repository has its tests where pytest finds them (``testpaths``, else the
root), no ``suites/`` folder and no device-matrix configuration but a row or two. The
packaged rows run those tests; ``--test`` runs what it names; a bare ``run`` runs the rows
present here and says which are not, without failing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_matrix.errors import EXIT_CONFIG, EXIT_OK, EXIT_TESTS_FAILED, EXIT_UNAVAILABLE
from tests.conftest import Project
from tests.unit.test_project_rows import fresh_project

# the packaged accelerator rows, absent wherever these tests run (a CI runner with a GPU too)
ABSENT = {"DEVICE_MATRIX_TPU_PRESENT": "0", "DEVICE_MATRIX_CUDA_PRESENT": "0", "DEVICE_MATRIX_NEURON_PRESENT": "0"}


def nodeids(p: Project, row: str = "cpu") -> list[str]:
    return sorted(t["nodeid"] for t in p.record(row)["tests"])


def test_a_project_without_suites_runs_the_test_it_names(tmp_path: Path) -> None:
    p = fresh_project(tmp_path)
    proc = p.run("run", "--device", "cpu", "--test", "tests/test_a.py", env=ABSENT)
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
    assert "UNAVAILABLE" not in proc.stdout
    assert nodeids(p) == ["tests/test_a.py::test_a", "tests/test_a.py::test_sees_only_the_device_it_was_given"]


def test_a_row_without_suites_runs_what_plain_pytest_runs(tmp_path: Path) -> None:
    p = fresh_project(tmp_path)
    proc = p.run("run", "--device", "cpu", env=ABSENT)
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
    rec = p.record("cpu")
    assert rec["status"] == "passed" and rec["summary"]["passed"] == 2
    assert nodeids(p) == ["tests/test_a.py::test_a", "tests/test_a.py::test_sees_only_the_device_it_was_given"]


def test_without_testpaths_the_row_runs_the_project_root(tmp_path: Path) -> None:
    p = fresh_project(tmp_path, testpaths=False)
    proc = p.run("run", "--device", "cpu", env=ABSENT)
    assert proc.returncode == EXIT_TESTS_FAILED, proc.stdout + proc.stderr
    assert "tools/test_not_a_test.py::test_outside_testpaths" in nodeids(p)
    assert p.record("cpu")["summary"]["failed"] == 1


def test_plan_and_list_call_the_cpu_row_runnable_in_a_fresh_project(tmp_path: Path) -> None:
    p = fresh_project(tmp_path)
    plans = {x["row"]: x for x in json.loads(p.run("plan", "--json", env=ABSENT).stdout)}
    assert plans["cpu"]["mode"] == "local", plans["cpu"]
    assert plans["tpu"]["mode"] == "unavailable" and "suites" not in plans["tpu"]["reason"]
    rows = {r["row"]: r for r in json.loads(p.run("list", "--json", env=ABSENT).stdout)}
    assert rows["cpu"]["present"] is True and rows["cpu"]["suites"] == []
    assert rows["cpu"]["tests"] == ["tests"]  # what the row runs: pytest's testpaths here
    text = p.run("list", env=ABSENT).stdout
    assert "tests: tests (the project's testpaths)" in text, text
    doctor = p.run("doctor", env=ABSENT)
    assert "suites missing" not in doctor.stdout


def test_a_bare_run_passes_when_the_rows_present_here_pass(tmp_path: Path) -> None:
    p = fresh_project(tmp_path)
    proc = p.run("run", env=ABSENT)
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
    assert "tpu: UNAVAILABLE" in proc.stdout and "cuda: UNAVAILABLE" in proc.stdout
    assert p.record("cpu")["status"] == "passed" and p.record("tpu")["status"] == "unavailable"
    # a row the user named and that is absent here is exit 4, alone or beside a passing row
    assert p.run("run", "--device", "tpu", env=ABSENT).returncode == EXIT_UNAVAILABLE
    assert p.run("run", "--device", "cpu,tpu", env=ABSENT).returncode == EXIT_UNAVAILABLE
    # a bare run still fails for what failed
    (tmp_path / "tests" / "test_b.py").write_text("def test_b():\n    assert 0\n")
    assert p.run("run", env=ABSENT).returncode == EXIT_TESTS_FAILED


def test_a_bare_run_with_require_device_fails_on_an_absent_row(tmp_path: Path) -> None:
    p = fresh_project(tmp_path)
    assert p.run("run", "--require-device", env=ABSENT).returncode == 5


SCRIPT = """
import unittest


class TestScript(unittest.TestCase):
    def test_runs(self):
        self.assertTrue(True)


if __name__ == "__main__":
    unittest.main()
"""


def test_a_row_with_scripts_and_no_suites_runs_only_its_scripts(tmp_path: Path) -> None:
    # #24: the scripts snippet alone, with no `suites = []`
    tool = '[[tool.device-matrix.devices.cpu.scripts]]\nfile = "test/test_script.py"\n'
    p = fresh_project(tmp_path, tool=tool)
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "test_script.py").write_text(SCRIPT)
    proc = p.run("run", "--device", "cpu", env=ABSENT)
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
    assert nodeids(p) == ["test/test_script.py::TestScript::test_runs"]


def test_a_row_whose_suites_are_missing_is_a_configuration_error_but_test_runs(tmp_path: Path) -> None:
    tool = (
        '[tool.device-matrix.devices.own]\npjrt_device = "CPU"\nrun_in = "host"\npresence = ["always"]\n'
        'suites = ["nope"]\n'
    )
    p = fresh_project(tmp_path, tool=tool)
    proc = p.run("run", "--device", "own", env=ABSENT)
    assert proc.returncode == EXIT_CONFIG, proc.stdout + proc.stderr
    assert "suite 'nope'" in proc.stderr and "TIP" in proc.stderr
    proc = p.run("run", "--device", "own", "--test", "tests/test_a.py::test_a", env=ABSENT)
    assert proc.returncode == EXIT_OK, proc.stdout + proc.stderr
    assert nodeids(p, "own") == ["tests/test_a.py::test_a"]


def test_list_shows_each_rows_environment(tmp_path: Path) -> None:
    tool = '[tool.device-matrix.devices.cpu.env]\nCPU_NUM_DEVICES = "4"\n'
    p = fresh_project(tmp_path, tool=tool)
    rows = {r["row"]: r for r in json.loads(p.run("list", "--json", env=ABSENT).stdout)}
    assert rows["cpu"]["env"] == {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "4"}
    assert rows["tpu"]["env"] == {"PJRT_DEVICE": "TPU"}
    text = p.run("list", env=ABSENT).stdout
    assert "env: CPU_NUM_DEVICES=4 PJRT_DEVICE=CPU" in text, text


@pytest.mark.parametrize("row", ["cpu", "tpu", "cuda", "neuron"])
def test_a_packaged_row_sets_only_its_pjrt_device(tmp_path: Path, row: str) -> None:
    p = fresh_project(tmp_path)
    rows = {r["row"]: r for r in json.loads(p.run("list", "--json", env=ABSENT).stdout)}
    assert rows[row]["env"] == {"PJRT_DEVICE": rows[row]["pjrt_device"]}
    assert rows[row]["suites"] == [] and rows[row]["settings"] == {}


def test_skips_check_reads_the_projects_tests_by_default(tmp_path: Path) -> None:
    p = fresh_project(tmp_path)
    (tmp_path / "tests" / "test_skip.py").write_text(
        "import pytest\n\n@pytest.mark.skip_device('cuda', reason='NaN in the fused kernel')\ndef test_k():\n    pass\n"
    )
    proc = p.run("skips", "check", env=ABSENT)
    assert proc.returncode != EXIT_OK, proc.stdout + proc.stderr
    assert "tests/test_skip.py:3" in proc.stdout and "cites no issue" in proc.stdout
