"""#40: a change to pyproject.toml in a linter's table alone runs none of the tests but
those that opened the file; one in a table pytest, the row or the installed project reads
runs every test."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from device_matrix.cli.select import change_plan
from device_matrix.records.testmap import TestMap
from device_matrix.selection import Rules
from tests.builders import git, recorded_git_project
from tests.runs import outcomes_of

SUITE = {
    "test_plain.py": "def test_plain():\n    assert True\n",
    "test_meta.py": (
        "import pathlib\n\nTOP = pathlib.Path(__file__).resolve().parents[2]\n\n\n"
        "def test_no_wide_lines():\n    assert 'line-length = 200' not in (TOP / 'pyproject.toml').read_text()\n"
    ),
}


def test_a_linter_s_table_changed_runs_only_the_tests_that_read_pyproject(tmp_path: Path) -> None:
    p = recorded_git_project(tmp_path, SUITE)
    pyproject = p.root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n# the linter\n[tool.ruff]\nline-length = 200\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    sel = rec["test_selection"]
    assert sel["full_reason"] is None, proc.stdout + proc.stderr
    assert outcomes_of(rec) == {"test_plain": "deselected", "test_no_wide_lines": "failed"}
    assert sel["by_reason"] == {"opens": 1, "deselected": 1}
    # the row's own table: every test
    pyproject.write_text(pyproject.read_text().replace("line-length = 200", "line-length = 100") + "\n")
    text = pyproject.read_text()
    pyproject.write_text(text.replace("crash_reruns = 1", "crash_reruns = 0"))
    assert text != pyproject.read_text()
    p.run("run", "--device", "fixture", "--select", "changed")
    sel = p.record()["test_selection"]
    assert sel["full_reason"] == "pyproject.toml changes, which the test map cannot follow"


SETUP = (
    "from setuptools import setup\n\nsetup(name='mine', version='1.0', packages=['pkg'], description='{description}')\n"
)


def test_a_changed_setup_py_runs_every_test_as_the_build_not_as_an_import(tmp_path: Path) -> None:
    # #40: toolz: a commit that changed setup.py ran every test "because setup.py may write the
    # process's state when it is imported", though no test imports it: it runs every test as
    # the build (what is installed), which the reason must say
    files = {
        "setup.py": SETUP.format(description="Mine"),
        "versioneer.py": "import sys\n\nif __name__ == '__main__':\n    sys.exit(1)\n",
        "tools/gen.py": "X = 1\n",
        "pkg/__init__.py": "",
        "pkg/lib.py": "def f():\n    return 1\n",
        "tests/test_lib.py": "from pkg.lib import f\n\n\ndef test_f():\n    assert f() == 1\n",
    }
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    commit = git(tmp_path, "rev-parse", "HEAD").strip()
    lines = {"tests/test_lib.py::test_f": {"pkg/lib.py": frozenset({2}), "tests/test_lib.py": frozenset({5})}}
    found = TestMap("cpu", commit, "2026-12-01T00:00:00+00:00", {n: frozenset(p) for n, p in lines.items()}, {}, lines)
    rules = Rules(max_age=timedelta(days=10_000), full=("setup.py", "noxfile.py"), ignore=())
    (tmp_path / "setup.py").write_text(SETUP.format(description="Mine, described"))
    p = change_plan(tmp_path, found, ["setup.py"], row="cpu", rules=rules)
    assert (
        p.full_reason == "setup.py changes, which the test map cannot follow (setup.py is the build: what is installed)"
    )
    # a module no test of the map ran (setup.py's versioneer.py, removed with it; a tool) runs
    # every test for that, whatever its import does: it says so, not that its import may write
    (tmp_path / "versioneer.py").unlink()
    (tmp_path / "noxfile.py").write_text("import nox\n")
    p = change_plan(tmp_path, found, ["noxfile.py", "setup.py", "versioneer.py"], row="cpu", rules=rules)
    assert p.full_reason == (
        "setup.py, noxfile.py change, which the test map cannot follow (setup.py is the build: what is installed)"
    )
    (tmp_path / "tools" / "gen.py").write_text("import os\n\nos.environ.setdefault('MODE', 'fast')\nX = 1\n")
    p = change_plan(tmp_path, found, ["tools/gen.py"], row="cpu", rules=rules)
    assert (
        p.full_reason == "tools/gen.py is a Python file no test of the map ran (new, or where the map does not measure)"
    )
    # a test file's write still runs every test: a new test module is imported with the rest
    (tmp_path / "tests" / "test_new.py").write_text("import os\n\nos.environ['MODE'] = 'x'\n")
    p = change_plan(tmp_path, found, ["tests/test_new.py"], row="cpu", rules=rules)
    assert p.full_reason is not None and "tests/test_new.py writes into another module's state" in p.full_reason
    # a module a test imports that calls out at import still says so
    (tmp_path / "pkg" / "lib.py").write_text(
        "import os\n\nos.environ.setdefault('MODE', 'fast')\n\n\ndef f():\n    return 1\n"
    )
    p = change_plan(tmp_path, found, ["setup.py", "pkg/lib.py"], row="cpu", rules=rules)
    assert p.full_reason is not None and "pkg/lib.py may write the process's state" in p.full_reason
