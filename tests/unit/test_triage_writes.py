"""What triage writes is all or nothing: a bad --out is refused before anything is
written, and a triage that fails adds no run to the history (#30)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_ENVIRONMENT, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE
from device_matrix.report import html
from tests import records as R


def _project(root: Path) -> Path:
    (root / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")
    results = root / "results"
    (results / "cpu").mkdir(parents=True)
    rec = R.record("cpu", [R.test("t.py::test_a", "failed", message="AssertionError: no"), R.test("t.py::test_b")])
    (results / "cpu" / "run.json").write_text(json.dumps(rec))
    return results


def _runs(history: Path) -> int:
    if not history.exists():
        return 0
    db = sqlite3.connect(history)
    try:
        return int(db.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
    finally:
        db.close()


def _triage(root: Path, *extra: str) -> int:
    results = _project(root)
    return main(["--project", str(root), "triage", str(results), "--history", str(root / "h.sqlite"), *extra])


@pytest.mark.parametrize("where", ["file", "under-file", "proc"])
def test_an_out_folder_that_cannot_be_one_is_refused_before_anything_is_written(
    tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # #30: a FileExistsError / NotADirectoryError traceback (exit 70), the history written;
    # #42: a file where a folder is wanted is a wrong command line (exit 2), /proc the host's (5)
    (tmp_path / "a-file").write_text("mine\n")
    out = {"file": tmp_path / "a-file", "under-file": tmp_path / "a-file" / "triage", "proc": Path("/proc/triage")}
    if where == "proc":
        assert _triage(tmp_path, "--out", str(out[where])) == EXIT_ENVIRONMENT
    else:
        with pytest.raises(SystemExit) as usage:
            _triage(tmp_path, "--out", str(out[where]))
        assert usage.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--out" in err and str(out[where]) in err
    assert (tmp_path / "a-file").read_text() == "mine\n"  # nothing lost
    assert _runs(tmp_path / "h.sqlite") == 0


def test_a_triage_that_fails_adds_no_run_to_the_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # #30: a triage that ended with exit 70 had still added its run to the history
    def broken(*_: object) -> str:
        raise RuntimeError("a bug in the renderer")

    assert _triage(tmp_path) == EXIT_OK
    assert _runs(tmp_path / "h.sqlite") == 1
    monkeypatch.setattr(html, "render", broken)
    results = tmp_path / "results"
    code = main(["--project", str(tmp_path), "triage", str(results), "--history", str(tmp_path / "h.sqlite")])
    assert code == EXIT_INTERNAL
    assert _runs(tmp_path / "h.sqlite") == 1


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm on this host")
def test_an_out_folder_in_a_memory_file_system_under_dev_is_a_place_for_files(tmp_path: Path) -> None:
    # /dev/shm is a tmpfs (TMPDIR on some hosts), not a kernel file system like /dev itself
    import tempfile

    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        out = Path(shm) / "triage"
        assert _triage(tmp_path, "--out", str(out)) == EXIT_OK
        assert (out / "triage.json").is_file()
    again = ["--project", str(tmp_path), "triage", str(tmp_path / "results"), "--no-history"]
    assert main([*again, "--out", "/dev/triage-here"]) == EXIT_ENVIRONMENT
