"""Device skips: markers, the disable list, unittest skips, `skips check`."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from device_matrix.errors import ConfigError
from device_matrix.skips import (
    check,
    disable_matches,
    find_issue_in_text,
    load_disable_list,
    normalize_issue,
    scan_file,
)


@pytest.mark.parametrize(
    ("ref", "canonical"),
    [
        ("https://github.com/pytorch/xla/issues/8683", "pytorch/xla#8683"),
        ("#12", "#12"),
        ("acme/xla#3", "acme/xla#3"),
        ("ledger:007", "ledger:7"),
        ("see the wiki", None),
        ("", None),
    ],
)
def test_issue_references(ref: str, canonical: str | None) -> None:
    assert normalize_issue(ref) == canonical


def test_issue_in_free_text() -> None:
    assert find_issue_in_text("broken, see https://github.com/a/b/issues/9 for details") == "a/b#9"
    assert find_issue_in_text("tracked as ledger:4") == "ledger:4"
    assert find_issue_in_text("no reference") is None


def test_disable_list_parsing_and_matching(tmp_path: Path) -> None:
    f = tmp_path / "disabled.toml"
    f.write_text(
        """
[[disable]]
test = "suites/mlp/test_ab.py::test_checkpointing_vs_not"
devices = ["neuron"]
issue = "#45"
reason = "no optimisation barrier"
expires = 2027-03-01

[[disable]]
test = "suites/collectives/test_collectives.py"
devices = ["cuda", "tpu"]
issue = "ledger:2"
mode = "xfail"
"""
    )
    a, b = load_disable_list(f)
    assert a.issue == "#45" and a.expires == dt.date(2027, 3, 1) and a.mode == "skip"
    assert b.mode == "xfail"
    assert disable_matches(a, "suites/mlp/test_ab.py::test_checkpointing_vs_not")
    assert not disable_matches(a, "suites/mlp/test_ab.py::test_checkpointing_vs_nothing")
    assert disable_matches(b, "suites/collectives/test_collectives.py::test_spmd_all_gather")
    assert b.applies_to("tpu", "TPU") and not b.applies_to("cpu", "CPU")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[[disable]]\ntest = 'x'\ndevices = ['cpu']\nissue = 'soon'\n", "not an issue reference"),
        ("[[disable]]\ntest = 'x'\ndevice = ['cpu']\n", "unknown key"),
        ("[[disable]]\ndevices = ['cpu']\n", "needs test"),
        ("[[disable]]\ntest = 'x'\ndevices = ['cpu']\nmode = 'maybe'\n", "bad mode"),
        ("[disabled]\n", "unknown top-level"),
    ],
)
def test_disable_list_errors_say_where(tmp_path: Path, body: str, message: str) -> None:
    f = tmp_path / "disabled.toml"
    f.write_text(body)
    with pytest.raises(ConfigError, match=message) as info:
        load_disable_list(f)
    assert str(f) in str(info.value)


def test_static_scan_and_check(tmp_path: Path) -> None:
    src = tmp_path / "test_x.py"
    src.write_text(
        """import pytest, unittest

EVERYWHERE = ("cpu", "tpu")
ISSUE = "#7"

@pytest.mark.skip_device(*EVERYWHERE, issue=ISSUE, reason="from constants")
def test_const(): pass

@pytest.mark.skip_device("cuda", issue="#1", reason="ok")
def test_a(): pass

@pytest.mark.xfail_device("tpu", "neuron", reason="nobody filed it")
def test_b(): pass

@pytest.mark.skip_device("cpu", issue="#2", expires="2020-01-01")
def test_c(): pass

class T(unittest.TestCase):
    @unittest.skip("see https://github.com/o/r/issues/3")
    def test_d(self): pass
"""
    )
    found = scan_file(src, "test_x.py")
    assert [(s.mode, s.line, s.issue) for s in found] == [
        ("skip", 6, "#7"),
        ("skip", 9, "#1"),
        ("xfail", 12, None),
        ("skip", 15, "#2"),
        ("skip", 19, "o/r#3"),
    ]
    assert found[0].devices == ("cpu", "tpu")
    problems = {f.skip.line: f.problem for f in check(found, today=dt.date(2026, 6, 1))}
    assert problems == {6: None, 9: None, 12: "cites no issue", 15: "expired on 2020-01-01", 19: None}
