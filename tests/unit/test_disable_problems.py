"""#42: a disable issue that cannot be read as meant is answered, never applied more widely.

The part of these tests that starts no process; the rest is in tests/integration/test_disable_problems.py (#41)."""

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
