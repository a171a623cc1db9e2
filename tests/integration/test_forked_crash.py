"""#29: a test that crashes under pytest-forked (``addopts = "--forked"``, as torchprime
runs its tests) is the test's crash with its real signal, and costs no restart."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import pytest

from tests.conftest import Project
from tests.runs import write_suite

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("pytest_forked") is None, reason="pytest-forked (the test extra)"),
]

SUITE = """import ctypes


def segfault_helper():
    ctypes.string_at(0)  # THE LINE


def test_a_segfaults():
    segfault_helper()


def test_b_after():
    pass
"""


def test_a_segfault_in_a_forked_copy_is_the_tests_sigsegv_and_the_session_goes_on(
    project: Callable[..., Project],
) -> None:
    p = project("passing")
    write_suite(p, "forked", {"test_forked.py": SUITE})
    text = (p.root / "pyproject.toml").read_text()
    (p.root / "pyproject.toml").write_text(text + '\n[tool.pytest.ini_options]\naddopts = "--forked"\n')
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in record["tests"]}
    assert {n: t["outcome"] for n, t in tests.items()} == {"test_a_segfaults": "crashed", "test_b_after": "passed"}, (
        proc.stdout + proc.stderr
    )
    (crash,) = record["crashes"]
    diagnosis = crash["diagnosis"]
    assert diagnosis["signal_name"] == "SIGSEGV", diagnosis["hint"]
    assert crash["when"] == "call"
    basis = diagnosis["fingerprint_basis"]
    assert basis[0] == "SIGSEGV" and "test_forked.py:segfault_helper" in basis, basis
    # pytest-forked's own frames are dropped as pytest's are
    assert not {"__init__.py:runforked", "__init__.py:_worker", "forkedfunc.py:_child"} & set(basis), basis
    assert "journal broke" not in (diagnosis["hint"] or "")
    line = next(k for k, t in enumerate(SUITE.splitlines(), 1) if "THE LINE" in t)
    assert tests["test_a_segfaults"]["line"] == line
    # the session went on: one pytest process ran the row, the rerun is the crash's own
    assert [a["purpose"] for a in record["attempts"]] == ["run", "rerun"], record["attempts"]
    assert crash["classification"] == "deterministic"
