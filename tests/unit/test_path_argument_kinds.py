"""#42 Seen 15: a path argument that names a file where a folder is wanted (or a folder where
a file is) is a wrong command line, exit 2, said before anything is read or written: not 5
(the environment), 7 (the results), 70 (a bug), and never a silent success
(``issues list FILE``, ``ci collect FILE ...`` each said "none" and exited 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_USAGE
from tests import records as R


def _exit(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["triage", "results", "--out", "afile", "--no-history"], "argument --out: afile is a file, not a folder"),
        (["triage", "results", "--history", "adir"], "argument --history: adir is a folder, not a file"),
        (["triage", "afile", "--no-history"], "argument results: afile is a file, not a folder"),
        (["triage", "results", "--out", "afile/x", "--no-history"], "afile/x lies under afile, which is a file"),
        (["run", "--device", "cpu", "--results", "afile"], "argument --results: afile is a file, not a folder"),
        (["issues", "sync", "afile"], "argument results: afile is a file"),
        (["issues", "list", "afile"], "argument results: afile is a file"),
        (["issues", "sync", "results", "--history", "adir"], "argument --history: adir is a folder"),
        (["merge", "--device", "cpu", "afile"], "argument results: afile is a file"),
        (["diagnose", "adir"], "argument LOG: adir is a folder, not a file"),
        (["diagnose", "--results", "afile", "x.log"], "argument --results: afile is a file"),
        (["ci", "collect", "afile", "results"], "argument artifacts: afile is a file"),
        (["ci", "collect", "adir", "afile"], "argument results: afile is a file"),
        (["ci", "matrix", "--output", "adir"], "argument --output: adir is a folder"),
        (["ci", "matrix", "--event-path", "adir"], "argument --event-path: adir is a folder"),
        (["compare", "--device", "cpu", "--results", "afile"], "argument --results: afile is a file"),
        (["--project", "afile", "triage", "results"], "argument --project: afile is a file"),
    ],
    ids=lambda v: "-".join(v) if isinstance(v, list) else None,
)
def test_a_path_of_the_wrong_kind_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str], said: str
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    (tmp_path / "results" / "cpu").mkdir(parents=True)
    rec = R.record("cpu", [R.test("t.py::test_a", "failed", message="AssertionError: no")])
    (tmp_path / "results" / "cpu" / "run.json").write_text(json.dumps(rec))
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert _exit(command) == EXIT_USAGE
    err = capsys.readouterr().err
    assert said in err, err
    assert "Traceback" not in err
    assert sorted(tmp_path.rglob("*")) == before  # nothing written
