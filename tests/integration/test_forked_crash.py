"""#29: a test that crashes under pytest-forked (``addopts = "--forked"``, as torchprime
runs its tests) is the test's crash with its real signal, and costs no restart."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import pytest

from device_matrix.diagnostics import core as core_files
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


OTHERS = """import os
import signal


def test_a_aborts():
    os.abort()


def test_b_exits():
    os._exit(3)


def test_c_is_killed():
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_copy_that_exits_or_leaves_no_core_is_given_no_other_copys_evidence(
    project: Callable[..., Project],
) -> None:
    # the abort's core is written a moment before the next copies end: it is the abort's
    # alone; a copy that exits with a status says so, in pytest-forked's words, and is no signal
    p = project("passing", row='pytest_args = ["--forked"]')
    write_suite(p, "forked", {"test_others.py": OTHERS})
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in record["tests"]}
    crashes = {c["nodeid"].rsplit("::", 1)[-1]: c for c in record["crashes"]}
    assert {n: t["outcome"] for n, t in tests.items()} == dict.fromkeys(crashes, "crashed"), proc.stdout + proc.stderr
    assert set(crashes) == {"test_a_aborts", "test_b_exits", "test_c_is_killed"}, proc.stdout
    abort = crashes["test_a_aborts"]["diagnosis"]
    assert abort["fingerprint_basis"] == ["SIGABRT", "test_others.py:test_a_aborts"], abort
    exited, killed = crashes["test_b_exits"], crashes["test_c_is_killed"]
    for crash in (exited, killed):
        diagnosis = crash["diagnosis"]
        assert "test_a_aborts" not in str(diagnosis), diagnosis  # not the abort's stack, basis or core
        assert diagnosis["python_stack"] is None and diagnosis["core_file"] is None, diagnosis
        assert diagnosis["fingerprint"] != abort["fingerprint"]
    d = exited["diagnosis"]
    assert (d["signal_name"], d["exit_code"], d["fingerprint_basis"][0]) == (None, 3, "exit 3"), d
    exited_why = "no core file: the process exited, it was not ended by a signal"
    assert d["python_stack_missing"] == d["gdb_frames_missing"] == exited_why, d
    message = tests["test_b_exits"]["message"]
    assert message.startswith("crashed: exit code 3") and "running the test EXITED with status 3" in message, message
    assert [r["fingerprint"] for r in exited["reruns"]] == [d["fingerprint"]], exited["reruns"]
    assert exited["classification"] == "deterministic"
    d = killed["diagnosis"]
    assert (d["signal_name"], d["exit_code"]) == ("SIGKILL", -9), d
    assert d["python_stack_missing"] == "no core file: the process was ended by SIGKILL, which writes none", d
    assert "running the test CRASHED with signal 9" in tests["test_c_is_killed"]["message"]
    assert not [c for c in p.root.rglob("core*") if core_files.is_core(c)], "cores are read, then removed"
