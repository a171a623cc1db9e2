"""#42: a disable issue that cannot be read as meant is answered, never applied more widely.

A body line ``device: cuda`` (singular) disabled the test on every row; the answer to an
unreadable disable quoted a Python repr; a test named by nothing the row runs was counted
as applied.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from device_matrix.issues.disables import read_disables
from device_matrix.issues.ledger import Ledger
from device_matrix.skips.tracker import Disable, Unreadable, parse

DAY = dt.date(2026, 11, 2)


@pytest.mark.parametrize(
    "line",
    [
        "device: cuda",
        "Device: cuda",
        "devices = cuda",
        "platform: rocm",
        "rows: cuda",
        "**devices**: cuda",
        "- devices: cuda",
        "`devices: cuda`",
        "Devices : cuda ,",
    ],
)
def test_a_devices_line_that_cannot_be_read_is_a_problem_never_every_row(line: str) -> None:
    got = parse("#4", "DISABLED a.py::t", f"Flaky since the bump.\n\n{line}\n", DAY)
    assert isinstance(got, Unreadable), got
    assert repr(line.strip()) in got.problem and "devices: cuda, neuron" in got.problem


@pytest.mark.parametrize(
    "body",
    [
        "Devices: CUDA, neuron",
        "devices:cuda,neuron",
        "  platforms: cuda, neuron  ",
    ],
)
def test_the_documented_devices_line_still_reads(body: str) -> None:
    got = parse("#4", "DISABLED a.py::t", body, DAY)
    assert isinstance(got, Disable) and got.devices == ("cuda", "neuron")


@pytest.mark.parametrize(
    "body",
    [
        "The device runs out of memory: see the log.",  # prose that starts with the word
        "Devices differ in rounding, so the tolerance is tight.",
        "",
    ],
)
def test_prose_about_devices_is_no_devices_line(body: str) -> None:
    got = parse("#4", "DISABLED a.py::t", body, DAY)
    assert isinstance(got, Disable) and got.devices == ("*",)


def test_the_answer_to_an_unreadable_disable_is_its_problem_in_words(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    bad = ledger.create("DISABLED a.py::t", "device: cuda", [])
    got = read_disables(lambda: ledger, tmp_path / ".device-matrix", ledger=ledger.path)
    (problem,) = got.unreadable
    (note,) = ledger.comments(bad)
    assert "Unreadable(" not in note and "issue=" not in note
    assert f"could not read this disable, so it is not applied: {problem.problem}." in note


# --- what the tracker says, on one line --------------------------------------------------


def _project_with_issue(tmp_path: Path, title: str) -> Path:
    from device_matrix import config
    from device_matrix.issues import open_tracker

    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (root / "pyproject.toml").write_text('[project]\nname = "p"\nversion = "0"\n\n[tool.device-matrix]\n')
    cfg = config.load(root)
    tracker = open_tracker(cfg, cfg.results_dir)
    tracker.create(title, "devices: cpu", [])
    return root


LINES_TITLE = "DISABLED the flaky one\n\x1b[2Jsecond line"


@pytest.mark.parametrize(
    "command",
    [["skips", "list"], ["skips", "check"], ["issues", "list"], ["issues", "show", "1"]],
    ids=" ".join,
)
def test_a_title_holding_a_line_break_prints_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    from device_matrix.cli import main

    root = _project_with_issue(tmp_path, LINES_TITLE)
    main(["--project", str(root), *command])
    out = capsys.readouterr().out
    assert "\x1b" not in out  # nor a terminal's control sequence
    (line,) = [x for x in out.splitlines() if "flaky" in x]
    assert "second line" in line and "\\n" in line and "\\x1b[2J" in line, out


# --- a disable that matches no test ------------------------------------------------------


def test_a_disable_that_matches_no_test_of_the_row_is_said_and_answered_once(tmp_path: Path) -> None:
    import json

    from tests.integration.test_disable_runs import _project

    p = _project(tmp_path)
    ledger = Ledger(p.root / ".device-matrix" / "ledger.sqlite")
    ledger.create("DISABLED suites/dis/test_dis.py::test_plain", "devices: cuda", [])
    # "\u043e" is a Cyrillic o, which only looks like the test's own
    typo = ledger.create("DISABLED suites/dis/test_dis.py::test_p\u043eram", "devices: cuda", [])
    for _ in range(2):
        proc = p.run("run", "--device", "cuda", "--device", "cpu")
        assert proc.returncode == 0, proc.stdout + proc.stderr
    got = p.record("cuda")["disables"]
    assert got["applied"] == 1, got
    assert got["unmatched"] == [
        {"issue": typo.key, "test": "suites/dis/test_dis.py::test_p\u043eram", "problem": "matches no test of row cuda"}
    ]
    assert json.loads((p.results / "cuda" / "disables.json").read_text())["unmatched"] == got["unmatched"]
    assert p.record("cpu")["disables"]["applied"] == 0  # neither applies on cpu
    assert p.record("cpu")["disables"]["unmatched"] == []
    (answer,) = ledger.comments(typo)  # once, over two runs
    assert "matches no test of row cuda" in answer and "test_p\u043eram" in answer
    plain = ledger.get("ledger:1")
    assert plain is not None and ledger.comments(plain) == []  # the one that matched is not answered


def test_a_run_of_part_of_a_row_says_nothing_of_what_its_disables_match(tmp_path: Path) -> None:
    from tests.integration.test_disable_runs import _project

    p = _project(tmp_path)
    ledger = Ledger(p.root / ".device-matrix" / "ledger.sqlite")
    ledger.create("DISABLED suites/dis/test_dis.py::test_plain", "devices: cuda", [])
    proc = p.run("run", "--device", "cuda", "--test", "test/test_script.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = p.record("cuda")["disables"]
    assert "unmatched" not in got and got["applied"] == 1
    plain = ledger.get("ledger:1")
    assert plain is not None and ledger.comments(plain) == []


def test_in_a_row_job_the_issues_sync_answers_a_disable_that_matches_no_test(tmp_path: Path) -> None:
    from tests.integration.test_disable_runs import _project

    p = _project(tmp_path)
    ledger = Ledger(p.root / ".device-matrix" / "ledger.sqlite")
    gone = ledger.create("DISABLED suites/dis/test_dis.py::test_renamed", "devices: cpu", [])
    proc = p.run("run", "--device", "cpu", env={"GITHUB_ACTIONS": "true"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.record("cpu")["disables"]["unmatched"][0]["problem"] == "matches no test of row cpu"
    assert ledger.comments(gone) == []  # a row job's token is read-only: it only reads
    for _ in range(2):
        synced = p.run("issues", "sync")
        assert synced.returncode == 0, synced.stdout + synced.stderr
    (answer,) = ledger.comments(gone)
    assert "`suites/dis/test_dis.py::test_renamed` matches no test of row cpu" in answer


def test_a_disable_on_no_row_nor_device_of_the_project_is_answered_once(tmp_path: Path) -> None:
    from tests.integration.test_disable_runs import _project

    p = _project(tmp_path)
    ledger = Ledger(p.root / ".device-matrix" / "ledger.sqlite")
    typo = ledger.create("DISABLED suites/dis/test_dis.py::test_plain", "devices: cdua", [])
    for _ in range(2):
        assert p.run("run", "--device", "cpu").returncode == 0
    (answer,) = ledger.comments(typo)
    assert "is disabled on cdua: no row of this project nor its device has that name (cpu, cuda, " in answer
    assert p.record("cpu")["disables"]["applied"] == 0
