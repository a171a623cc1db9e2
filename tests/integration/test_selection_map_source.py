"""Where ``run --select changed`` finds its test map (#34): the history's maps of the base
branch and of the run's own branch, which triage stored from full runs, and the one a local
full run left in the results; a selecting run records no map and keeps the one it used."""

from __future__ import annotations

from pathlib import Path

from device_matrix.errors import EXIT_USAGE
from device_matrix.records import testmap
from tests.builders import SUITE_ON_PATH, git_project, recorded_git_project
from tests.conftest import Project
from tests.runs import outcomes_of


def _project(tmp_path: Path) -> Project:
    return git_project(tmp_path)


def test_a_change_selects_by_the_map_a_full_run_recorded_and_triage_kept(tmp_path: Path) -> None:
    p = _project(tmp_path)
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    kept = p.run("triage", str(p.results))
    assert kept.returncode == 0, kept.stdout + kept.stderr
    # the map lives on in the history alone: the next run finds it there
    (p.results / "fixture" / testmap.FILE_NAME).unlink()
    _selects_twice(p)


def _selects_twice(p: Project) -> None:
    helpers = p.root / "suites" / "mine" / "helpers.py"
    helpers.write_text(helpers.read_text() + "\n# touched\n")
    for _ in range(2):  # and again: a selecting run records no map and loses none
        proc = p.run("run", "--device", "fixture", "--select", "changed")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        rec = p.record()
        assert outcomes_of(rec) == {"test_double": "passed", "test_triple": "deselected"}, rec["test_selection"]
        assert rec["test_selection"]["changed"] == ["suites/mine/helpers.py"]


def test_a_local_full_run_s_map_selects_and_a_selecting_run_keeps_it(tmp_path: Path) -> None:
    p = _project(tmp_path)
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    recorded = (p.results / "fixture" / testmap.FILE_NAME).read_text()
    _selects_twice(p)
    assert (p.results / "fixture" / testmap.FILE_NAME).read_text() == recorded


def test_record_map_does_not_go_with_select_changed(tmp_path: Path) -> None:
    p = _project(tmp_path)
    proc = p.run("run", "--device", "fixture", "--select", "changed", "--record-map")
    assert proc.returncode == EXIT_USAGE
    assert "--record-map does not go with --select changed" in proc.stderr


CONSTS_SUITE = {
    "consts.py": "SCALE = 2\n",
    "api.py": "import consts\n\n\ndef scaled(x):\n    return x * consts.SCALE\n",
    "test_api.py": "from api import scaled\n\n\ndef test_scaled():\n    assert scaled(3) == 6\n",
    "test_consts.py": "import consts\n\n\ndef test_scale():\n    assert consts.SCALE == 2\n",
}


FIRST = SUITE_ON_PATH + "import api  # noqa\n"


def _consts_project(tmp_path: Path, conftest: str = FIRST) -> Project:
    # by default conftest.py imports the module first: no test's module import runs it
    return recorded_git_project(tmp_path, CONSTS_SUITE, conftest)


def test_a_constant_that_conftest_imported_first_runs_every_test(tmp_path: Path) -> None:
    # the trial's miss: the constant ran at import, for no test: every test must run
    p = _consts_project(tmp_path)
    # another size: a .pyc of the same second and the same size would still be imported
    (p.root / "suites" / "mine" / "consts.py").write_text("SCALE = 40\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    assert outcomes_of(rec) == {"test_scaled": "failed", "test_scale": "failed"}, rec["test_selection"]
    assert proc.returncode == 1
    # #40: the recording starts before pytest imports a run's first conftest.py: the map saw
    # consts.py run at import, and both tests read SCALE (a file the map never saw run would
    # run every test)
    assert rec["test_selection"]["full_reason"] is None
    assert rec["test_selection"]["by_reason"] == {"reads": 2}


def test_a_constant_a_test_module_imported_after_another_runs_every_test_that_reads_it(tmp_path: Path) -> None:
    # the trial's other miss: without conftest.py, test_api imports consts first and
    # test_consts's import runs nothing; the constant is the import's, and each test that
    # reads it runs (both do: one through api.py, one in its own body)
    p = _consts_project(tmp_path, conftest=SUITE_ON_PATH)
    # another size: a .pyc of the same second and the same size would still be imported
    (p.root / "suites" / "mine" / "consts.py").write_text("SCALE = 40\n")
    p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    assert outcomes_of(rec) == {"test_scaled": "failed", "test_scale": "failed"}, rec["test_selection"]
    assert rec["test_selection"]["full_reason"] is None
    assert rec["test_selection"]["by_reason"] == {"reads": 2}


def test_a_function_body_runs_the_tests_that_ran_it_and_no_other(tmp_path: Path) -> None:
    p = _consts_project(tmp_path)
    api = p.root / "suites" / "mine" / "api.py"
    api.write_text(api.read_text().replace("return x * consts.SCALE", "return x * consts.SCALE + 1"))
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    assert outcomes_of(rec) == {"test_scaled": "failed", "test_scale": "deselected"}, rec["test_selection"]
    assert proc.returncode == 1
