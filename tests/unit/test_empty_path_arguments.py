"""#30: an empty string given for a folder (triage's RESULTS, run's --results, --project, ...)
is a usage error that says so, never the default read in silence: `triage "$DIR"` with DIR
unset must not triage the configuration's results folder as if it were the one asked for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_USAGE
from tests import records as R


def _project(root: Path) -> Path:
    (root / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    results = root / "results"
    (results / "cpu").mkdir(parents=True)
    rec = R.record("cpu", [R.test("t.py::test_a", "failed", message="AssertionError: no")])
    (results / "cpu" / "run.json").write_text(json.dumps(rec))
    return results


def _exit(argv: list[str]) -> int:
    """The exit status of ``device-matrix ARGV``: a command line argparse refuses exits 2."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["triage", "", "--no-history"], "argument results: names no path"),
        (["merge", "--device", "cpu", ""], "argument results: names no path"),
        (["issues", "sync", ""], "argument results: names no path"),
        (["issues", "list", ""], "argument results: names no path"),
        (["diagnose", "--results", "", "x.log"], "argument --results: names no path"),
        (["run", "--device", "cpu", "--results", ""], "argument --results: names no path"),
    ],
    ids=["triage", "merge", "issues-sync", "issues-list", "diagnose", "run"],
)
def test_an_empty_results_folder_is_refused_not_read_as_the_default(
    tmp_path: Path, command: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _project(tmp_path)
    before = sorted(p.relative_to(results) for p in results.rglob("*"))
    assert _exit(["--project", str(tmp_path), *command]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert said in err and "leave it out for the default" in err
    assert sorted(p.relative_to(results) for p in results.rglob("*")) == before  # nothing written


def test_an_empty_project_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _project(tmp_path)
    assert _exit(["--project", "", "triage", str(tmp_path / "results"), "--no-history"]) == EXIT_USAGE
    assert "argument --project: names no path" in capsys.readouterr().err
    assert not (tmp_path / "results" / "triage").exists()


def test_ci_collect_refuses_an_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit(["ci", "collect", "", str(tmp_path / "out")]) == EXIT_USAGE
    assert "argument artifacts: names no path" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
