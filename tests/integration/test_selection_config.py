"""#40: a change to pyproject.toml in a linter's table alone runs none of the tests but
those that opened the file; one in a table pytest, the row or the installed project reads
runs every test."""

from __future__ import annotations

from pathlib import Path

from tests.builders import recorded_git_project
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
