"""#40: the backstop of selection, end to end: a pull request's run leaves a test out, the
change is merged, the base branch's full run fails that test, triage names the miss, and the
row's miss rate turns its selection off until it falls."""

from __future__ import annotations

import json
from pathlib import Path

from tests.builders import SELECTION_SUITE, git, git_project
from tests.runs import outcomes_of

MINE = "suites/mine"
NOTES = {
    **SELECTION_SUITE,
    "notes.md": "version 1\n",
    "test_notes.py": (
        "import pathlib\n\n\ndef test_notes():\n"
        "    assert (pathlib.Path(__file__).parent / 'notes.md').read_text().startswith('version 1')\n"
    ),
}


def test_a_test_a_pull_request_left_out_that_fails_on_the_base_is_named_and_counted(tmp_path: Path) -> None:
    p = git_project(tmp_path, NOTES)
    # the project says no test reads its *.md files: one does, and selection will miss it
    pyproject = p.root / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace("crash_reruns = 1\n", 'crash_reruns = 1\nselect_ignore = ["*.md"]\n')
    )
    git(p.root, "commit", "-qam", "docs change nothing")

    def ok(*args: str, code: int = 0) -> str:
        proc = p.run(*args)
        assert proc.returncode == code, proc.stdout + proc.stderr
        return proc.stdout + proc.stderr

    # the base branch: a full run records the map, triage keeps it and the run in the history
    ok("run", "--device", "fixture", "--record-map", "--branch", "main")
    ok("triage", str(p.results), "--branch", "main")
    # pull request 7 changes notes.md: its selection leaves every test out, and it is green
    (p.root / MINE / "notes.md").write_text("version 2\n")
    ok("run", "--device", "fixture", "--select", "changed", "--pr", "7", "--base", "main")
    assert outcomes_of(p.record())["test_notes"] == "deselected"
    ok("triage", str(p.results), "--pr", "7", "--base", "main")
    # merged; the base's full run fails the test the pull request left out
    git(p.root, "commit", "-qam", "notes 2")
    ok("run", "--device", "fixture", "--branch", "main", code=1)
    ok("triage", str(p.results), "--branch", "main")
    md = (p.results / "triage" / "triage.md").read_text()
    # (the markdown keeps GitHub from linking "#7" to an issue: a zero-width space after "#")
    assert (
        f"`{MINE}/test_notes.py::test_notes`: missed by selection on #\u200b7 "
        "(deselected: nothing changed since commit" in md
    ), md
    html = (p.results / "triage" / "triage.html").read_text()
    assert "missed by selection on #7 (deselected: nothing changed since commit" in html
    (miss,) = json.loads((p.results / "triage" / "triage.json").read_text())["backstop"]["misses"]
    assert (miss["row"], miss["nodeid"], miss["pr"]) == ("fixture", f"{MINE}/test_notes.py::test_notes", 7)
    assert "**fixture**: selection missed a failing test on 1 of 1 pull requests (100%), the last 30 checked" in md
    # the next pull request's selection on the row runs every test, and says why
    (p.root / MINE / "helpers.py").write_text("def double(x):\n    return x + x\n")
    ok("run", "--device", "fixture", "--select", "changed", "--pr", "8", "--base", "main", code=1)
    rec = p.record()
    assert "deselected" not in outcomes_of(rec).values()
    assert rec["test_selection"]["full_reason"] == (
        "on main, selection missed a failing test on 1 of 1 pull requests (100%), the last 30 checked, "
        "above select_max_miss_rate (10%)"
    )
    # pull request 7's next run (selection now off on the row) is judged: its verdicts count
    # the test its selection missed, and the failure is the base's
    ok("run", "--device", "fixture", "--select", "changed", "--pr", "7", "--base", "main", code=1)
    ok("triage", str(p.results), "--pr", "7", "--base", "main")
    verdicts = json.loads((p.results / "triage" / "triage.json").read_text())["verdicts"]
    assert [(m["nodeid"], m["pr"]) for m in verdicts["missed"]] == [(f"{MINE}/test_notes.py::test_notes", 7)]
    assert verdicts["line"].endswith(
        "; selection missed 1 test on this PR: left out, then failed by a full run of main"
    ), verdicts["line"]
