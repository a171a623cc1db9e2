"""``device-matrix issues list`` and ``issues show``: the embedded tracker's issues, read.

A new user's run filed `ledger:1 for tests/test_crash.py::test_segfault`, and nothing
showed that issue again: its body, its state, its comments, or that it lives only in this
machine's results folder while a skip that cites it needs it in the seed file (#20).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_matrix.cli import main
from device_matrix.errors import EXIT_CONFIG, EXIT_OK, EXIT_TRACKER, EXIT_USAGE
from device_matrix.issues.ledger import Ledger

SEED = """\
[[issue]]
id = 1
title = "NaN in the fused kernel on cuda"
state = "closed"
body = "Found on torch_xla 2.7."
"""


def _project(tmp_path: Path, *, filed: bool = True) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n\n[tool.device-matrix]\n')
    (root / "device-matrix-issues.toml").write_text(SEED)
    if filed:
        ledger = Ledger(root / ".device-matrix" / "ledger.sqlite", root / "device-matrix-issues.toml")
        body = "the crash\n\n<!-- device-matrix: crash-ab12 -->"
        issue = ledger.create("SIGSEGV in test_segfault on cpu", body, ["x"])
        ledger.comment(issue, "seen again in run 2")
        ledger.close()
    return root


def test_list_shows_the_seed_and_what_was_filed_here(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path)
    before = (root / ".device-matrix" / "ledger.sqlite").read_bytes()
    assert main(["--project", str(root), "issues", "list"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert "ledger:1  closed  NaN in the fused kernel on cuda  [device-matrix-issues.toml]" in lines
    assert "ledger:2  open    SIGSEGV in test_segfault on cpu  [.device-matrix/ledger.sqlite, 1 comment(s)]" in lines
    # what a clone does not have is said, with what to do
    assert any(x.startswith("TIP") and "device-matrix-issues.toml" in x for x in lines), lines
    assert (root / ".device-matrix" / "ledger.sqlite").read_bytes() == before  # read only

    assert main(["--project", str(root), "issues", "list", "--json"]) == EXIT_OK
    listed = json.loads(capsys.readouterr().out)
    assert [(i["issue"], i["state"], i["kept_in"], i["comments"]) for i in listed] == [
        ("ledger:1", "closed", "device-matrix-issues.toml", 0),
        ("ledger:2", "open", ".device-matrix/ledger.sqlite", 1),
    ]


def test_show_prints_the_body_and_comments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path)
    assert main(["--project", str(root), "issues", "show", "ledger:2"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "ledger:2: SIGSEGV in test_segfault on cpu" in out and "state: open" in out
    assert "the crash" in out and "seen again in run 2" in out
    assert main(["--project", str(root), "issues", "show", "2"]) == EXIT_OK  # the bare number too
    capsys.readouterr()
    assert main(["--project", str(root), "issues", "show", "ledger:9"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "ledger:9 is not in the ledger" in err and "TIP" in err and "issues list" in err


def test_list_before_any_run_reads_the_seed_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path, filed=False)
    assert main(["--project", str(root), "issues", "list"]) == EXIT_OK
    assert "ledger:1  closed" in capsys.readouterr().out
    assert not (root / "results").exists()


def test_an_unreadable_ledger_is_exit_6_with_a_tip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path, filed=False)
    (root / "results").mkdir()
    (root / "results" / "ledger.sqlite").write_text("not a database")
    assert main(["--project", str(root), "issues", "list"]) == EXIT_TRACKER
    err = capsys.readouterr().err
    assert "the issue ledger cannot be read" in err and "TIP" in err


def test_a_disable_on_another_device_is_filed_not_called_already_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a new user's trial: with `DISABLED t` open on tpu, `issues disable t --device cpu` said
    # "ledger:2 already disables t; nothing filed" and the cpu row still ran the test
    root = _project(tmp_path, filed=False)
    test = "tests/test_other.py::test_plain"

    def disable(*devices: str) -> str:
        flags = [w for d in devices for w in ("--device", d)]
        assert main(["--project", str(root), "issues", "disable", test, *flags, "--reason", "R"]) == EXIT_OK
        return capsys.readouterr().out

    assert "(on tpu)" in disable("tpu")
    said = disable("cpu")
    assert "already" not in said and "(on cpu)" in said and "ledger:2 disables it on tpu" in said
    assert "already disables" in disable("cpu")  # now it is there: nothing filed twice
    assert "already disables" in disable("tpu", "cpu")
    ledger = Ledger(root / ".device-matrix" / "ledger.sqlite", root / "device-matrix-issues.toml")
    bodies = sorted(i.body.splitlines()[0] for i in ledger.list_issues() if i.title == f"DISABLED {test}")
    ledger.close()
    assert bodies == ["devices: cpu", "devices: tpu"]


def test_a_disable_on_a_device_no_row_has_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # `issues disable t --device bogus` filed `(on bogus)`, applied nowhere; `run --device bogus` is exit 3
    root = _project(tmp_path, filed=False)
    code = main(["--project", str(root), "issues", "disable", "tests/t.py::test_x", "--device", "bogus"])
    err = capsys.readouterr().err
    assert code == EXIT_CONFIG and "bogus" in err and "cpu" in err  # the names it could be
    assert not (root / ".device-matrix" / "ledger.sqlite").exists() or not [
        i
        for i in Ledger(root / ".device-matrix" / "ledger.sqlite", root / "device-matrix-issues.toml").list_issues()
        if i.title.startswith("DISABLED")
    ]
