"""``triage --fail-on``: a gate that is asked for is never silently off (#30)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_USAGE
from tests import records as R


def _results(root: Path) -> Path:
    (root / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    results = root / "results"
    (results / "cpu").mkdir(parents=True)
    rec = R.record("cpu", [R.test("t.py::test_a", "failed", message="AssertionError: no")])
    (results / "cpu" / "run.json").write_text(json.dumps(rec))
    return results


def _triage(root: Path, *extra: str) -> int:
    """The exit status of the triage: a command line argparse refuses exits 2."""
    results = _results(root)
    try:
        return main(
            ["--project", str(root), "triage", str(results), "--no-history", "--pr", "3", "--base", "main", *extra]
        )
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize("empty", ["", " ", ",", " , "])
def test_a_fail_on_that_names_no_verdict_is_refused(
    tmp_path: Path, empty: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # #30: --fail-on "" turned the gate off (exit 0) where --fail-on "," was refused
    assert _triage(tmp_path, "--fail-on", empty) == EXIT_USAGE
    assert "--fail-on names no verdict" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--out", "--history"])
def test_an_empty_path_is_refused_not_read_as_the_default(
    tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # a sibling of #30's --fail-on "": an empty --out or --history fell back to the default
    assert _triage(tmp_path, flag, "") == EXIT_USAGE
    assert f"argument {flag}: names no path" in capsys.readouterr().err
    assert not (tmp_path / "results" / "triage").exists()
