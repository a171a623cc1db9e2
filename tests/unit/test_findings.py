"""The identity of crash and skip findings: one key per finding, built in one place.

An issue filed for a finding carries its key in a hidden marker, so a key that changed
would file every known crash and skip again: the keys are pinned here exactly.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, cast

import pytest

from device_matrix.findings import (
    CRASH_PREFIX,
    DEVICE_SKIP_SOURCES,
    SKIP_PREFIX,
    crash_key,
    declared_test,
    fingerprint_of,
    is_device_skip,
    skip_key,
)
from device_matrix.records.schema import SkipInfo
from device_matrix.skips import DeviceSkip
from tests import records as R

PACKAGE = Path(__file__).resolve().parents[2] / "device_matrix"


def test_a_crash_is_known_by_its_fingerprint() -> None:
    assert crash_key("3f2a9c") == "crash-3f2a9c"
    assert crash_key("") == "crash-"


def test_a_crash_key_gives_back_its_fingerprint() -> None:
    assert fingerprint_of(crash_key("3f2a9c")) == "3f2a9c"
    assert fingerprint_of("crash-crash-1") == "crash-1"  # the prefix once, not every one


def test_a_skip_is_known_by_its_test_and_mode_and_the_key_never_changes() -> None:
    # the keys of issues already filed: sha256("mode|test"), 16 hex digits
    assert skip_key("s/t.py::a", "skip") == "skip-ad24afd0038285c5"
    assert skip_key("s/t.py::a", "xfail") == "skip-f5ffa512da7cf516"
    assert skip_key("suites/x/test_x.py:10", "skip") == "skip-2b2f8544a84bf074"
    assert len(skip_key("x", "skip")) == len("skip-") + 16


@pytest.mark.parametrize(("source", "device"), [("marker", True), ("disable_list", True), ("unittest", True)])
def test_device_skips_come_from_markers_the_disable_list_and_unittest(source: str, device: bool) -> None:
    info = cast(SkipInfo, {**R.skip_info(None), "source": source})
    assert is_device_skip(info) is device
    assert source in DEVICE_SKIP_SOURCES


def test_pytests_own_skip_is_not_a_device_skip() -> None:
    info = cast(SkipInfo, {**R.skip_info(None), "source": "pytest"})
    assert is_device_skip(info) is False
    assert frozenset({"marker", "disable_list", "unittest"}) == DEVICE_SKIP_SOURCES


def test_a_skip_in_the_sources_names_its_test_else_where_it_is_declared() -> None:
    named = DeviceSkip(mode="skip", devices=("cpu",), issue=None, reason="", source="marker", test="t.py::T::x")
    assert declared_test(named) == "t.py::T::x"
    unnamed = DeviceSkip(mode="skip", devices=("cpu",), issue=None, reason="", source="marker", file="t.py", line=7)
    assert declared_test(unnamed) == "t.py:7"


def _key_literals(tree: ast.AST) -> list[int]:
    """Lines where a string is a key prefix, or an f-string starts with one."""
    found = []
    for node in ast.walk(tree):
        value: Any = None
        if isinstance(node, ast.Constant):
            value = node.value
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            value = node.values[0].value
        if isinstance(value, str) and value.startswith((CRASH_PREFIX, SKIP_PREFIX)) and len(value) <= 6:
            found.append(node.lineno)
    return found


def test_no_other_module_builds_a_key() -> None:
    # issues/sync.py, report/model.py and cli/diagnose.py each built them once
    built = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "findings.py" and (lines := _key_literals(ast.parse(path.read_text())))
    }
    assert built == {}
    assert _key_literals(ast.parse((PACKAGE / "findings.py").read_text()))  # the check sees them where they are
