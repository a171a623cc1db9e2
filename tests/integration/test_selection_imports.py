"""The tests of this concept that start a process; the rest are in tests/unit/test_selection_imports.py (#41)."""

from __future__ import annotations

from pathlib import Path

from device_matrix.cli.select import import_graph
from tests.builders import git, recorded_git_project
from tests.conftest import Project
from tests.runs import outcomes_of
from tests.unit.test_selection_imports import BASE, SUITE


def test_the_graph_is_read_from_the_project_s_python_files_in_git(tmp_path: Path) -> None:
    more = {"pkg/plug.py": "from pkg import consts\n", "build/gen.py": "import pkg.consts\n"}
    for path, text in {**BASE, **more}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "pyproject.toml").write_text(
        '[project.entry-points.pytest11]\nplug = "pkg.plug"\n\n[tool.pytest.ini_options]\naddopts = "-p pkg.other -q"\n'
    )
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    (tmp_path / "pkg" / "new.py").write_text("import pkg.consts\n")  # untracked: read too
    (tmp_path / "pkg" / "other.py").unlink()  # deleted: still a module its importers name
    graph = import_graph(tmp_path, ["pkg/other.py"])
    assert graph is not None
    assert "pkg/consts.py" in graph.imports["pkg/new.py"]
    assert "pkg/other.py" in graph.imports["tests/test_other.py"]
    assert "build/gen.py" not in graph.imports  # git ignores it
    assert graph.plugins == {
        "pkg/plug.py": "the pytest plugin pkg.plug (pyproject.toml's pytest11 entry point)",
        "pkg/other.py": "the pytest plugin pkg.other (-p in pyproject.toml's addopts)",
    }


def _recorded(tmp_path: Path) -> Project:
    return recorded_git_project(tmp_path, SUITE)


def test_a_constant_one_test_module_imports_runs_it_and_leaves_out_the_rest(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    (p.root / "suites" / "mine" / "consts.py").write_text("SCALE = 40\n")  # another size: no stale .pyc
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    assert outcomes_of(rec) == {"test_scaled": "failed", "test_other": "deselected", "test_limit": "deselected"}
    assert proc.returncode == 1
    assert rec["test_selection"]["full_reason"] is None
    # #34: the test module reads the constant its change binds anew (namereads)
    assert rec["test_selection"]["by_reason"] == {"reads": 1, "deselected": 2}
    (other,) = [t for t in rec["tests"] if t["nodeid"].endswith("::test_other")]
    # #34: the change is told by the names it binds, and the reason says so
    assert other["message"] == "reads none of the names suites/mine/consts.py binds anew"


def test_a_module_a_folder_s_conftest_imports_runs_the_tests_of_that_folder(tmp_path: Path) -> None:
    p = _recorded(tmp_path)
    (p.root / "suites" / "mine" / "limits.py").write_text("LIMIT = 600\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    assert outcomes_of(rec) == {"test_scaled": "deselected", "test_other": "deselected", "test_limit": "failed"}
    assert proc.returncode == 1
    # #34: the test module reads the constant its change binds anew (namereads)
    assert rec["test_selection"]["by_reason"] == {"reads": 1, "deselected": 2}
