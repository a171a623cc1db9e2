"""#39: a crash's Python stack read from its core file (pystack) when a handler the process
installed after device-matrix's (XLA's, at the runtime's start) took the signal first, and
a verdict that compares what each attempt could show.

The process tests here need no torch_xla: a test's "first device use" installs a native
handler as XLA's does (C's ``abort`` on the fatal signals: no Python stack, SIGABRT), in
the very test that then crashes. tests/test_xla_handler.py does the same with torch_xla.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from typing import Any

import pytest

from device_matrix.diagnostics import core as core_files
from tests.conftest import Project

# --- a process whose crashing test installs a handler like XLA's -------------------------

FIRST_USE = """
import ctypes
import os
import signal

_libc = ctypes.CDLL(None)
_libc.signal.restype = ctypes.c_void_p
_libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
_started = []


def first_use():
    # as XLA's runtime does when it starts (XLA_DUMP_FATAL_STACK=1): a native handler of
    # the fatal signals that prints no Python stack and ends the process with abort()
    if not _started:
        _started.append(1)
        for sig in (signal.SIGSEGV, signal.SIGABRT):
            _libc.signal(sig, ctypes.cast(_libc.abort, ctypes.c_void_p).value)


def segfault_helper():
    ctypes.string_at(0)  # SEGFAULT LINE


def abort_helper():
    os.abort()  # ABORT LINE
"""

PYTEST_FIRST = (
    FIRST_USE
    + """

def test_a_segfault():
    first_use()
    segfault_helper()


def test_b_abort():
    first_use()
    abort_helper()


def test_c_passes():
    first_use()
"""
)

# the crash is not the first use in the run (its Python stack is faulthandler's), but it
# is in each rerun of it alone (the core's): the same crash
PYTEST_LATER = (
    FIRST_USE
    + """

def test_a_passes():
    first_use()


def test_b_segfault():
    first_use()
    segfault_helper()
"""
)

SCRIPT = (
    FIRST_USE
    + """
import unittest


class CrashTest(unittest.TestCase):
    def test_a_segfault(self):
        first_use()
        segfault_helper()

    def test_b_abort(self):
        first_use()
        abort_helper()

    def test_c_passes(self):
        first_use()


if __name__ == "__main__":
    unittest.main()
"""
)

HELPERS = {"SEGFAULT LINE": "segfault_helper", "ABORT LINE": "abort_helper"}


def line_of(source: str, marker: str) -> int:
    return next(k for k, text in enumerate(source.splitlines(), 1) if marker in text)


def check_crash(record: dict[str, Any], nodeid: str, source: str, marker: str, *, stack_from: str) -> str:
    """One crash as #39 wants it recorded; its fingerprint."""
    (crash,) = [c for c in record["crashes"] if c["nodeid"] == nodeid]
    diagnosis, helper = crash["diagnosis"], HELPERS[marker]
    file = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
    line = line_of(source, marker)
    stack = diagnosis["python_stack"] or ""
    assert re.search(rf'{re.escape(file)}", line {line} in {helper}', stack), (nodeid, diagnosis)
    assert diagnosis["python_stack_source"] == stack_from, (nodeid, diagnosis["python_stack_source"])
    assert crash["when"] == "call", (nodeid, crash["when"])
    assert f"{file}:{helper}" in diagnosis["fingerprint_basis"], (nodeid, diagnosis["fingerprint_basis"])
    assert crash["classification"] == "deterministic", (nodeid, crash["reruns"])
    (test,) = [t for t in record["tests"] if t["nodeid"] == nodeid]
    assert test["outcome"] == "crashed" and test["line"] == line, (nodeid, test)
    return str(diagnosis["fingerprint"])


def handler_project(project: Callable[..., Project]) -> Project:
    """Two pytest files and a unittest script whose tests install the handler; a second row
    runs the pytest files under pytest-forked, where every test is its copy's first."""
    p = project(
        "passing",
        row='suites = ["handler"]\nscripts = [{ file = "script/test_script.py" }]',
        extra_rows='\n[tool.device-matrix.devices.forked]\npjrt_device = "CPU"\nrun_in = "host"\n'
        'suites = ["handler"]\npresence = ["always"]\npytest_args = ["--forked"]\n',
    )
    handler = p.root / "suites" / "handler"
    handler.mkdir(parents=True)
    (handler / "test_first.py").write_text(PYTEST_FIRST)
    (handler / "test_later.py").write_text(PYTEST_LATER)
    (p.root / "script").mkdir()
    (p.root / "script" / "test_script.py").write_text(SCRIPT)
    return p


FIRST, LATER = "suites/handler/test_first.py::", "suites/handler/test_later.py::"
needs_pystack = pytest.mark.skipif(importlib.util.find_spec("pystack") is None, reason="pystack (the test extra)")


@pytest.mark.slow
@needs_pystack
def test_a_crash_in_the_test_that_installs_the_handler_keeps_its_python_stack(
    project: Callable[..., Project],
) -> None:
    p = handler_project(project)
    proc = p.run("run", "--device", "fixture", timeout=600)
    record = p.record()
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert list(outcomes.values()).count("passed") == 3, (outcomes, proc.stdout + proc.stderr)
    script = "script/test_script.py::CrashTest::"
    prints = {
        check_crash(record, FIRST + "test_a_segfault", PYTEST_FIRST, "SEGFAULT LINE", stack_from="core"),
        check_crash(record, FIRST + "test_b_abort", PYTEST_FIRST, "ABORT LINE", stack_from="core"),
        check_crash(record, script + "test_a_segfault", SCRIPT, "SEGFAULT LINE", stack_from="core"),
        check_crash(record, script + "test_b_abort", SCRIPT, "ABORT LINE", stack_from="core"),
        # item 2: the rerun alone reads the core, the run had faulthandler's: deterministic
        check_crash(record, LATER + "test_b_segfault", PYTEST_LATER, "SEGFAULT LINE", stack_from="faulthandler"),
    }
    assert len(prints) == 5  # no two crashes share a fingerprint
    assert not [c for c in p.root.rglob("core*") if core_files.is_core(c)], "cores are read, then removed"


@pytest.mark.slow
@needs_pystack
@pytest.mark.skipif(importlib.util.find_spec("pytest_forked") is None, reason="pytest-forked (the test extra)")
def test_under_pytest_forked_each_copys_crash_keeps_its_python_stack(project: Callable[..., Project]) -> None:
    p = handler_project(project)
    proc = p.run("run", "--device", "forked", timeout=600)
    record = p.record("forked")
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert list(outcomes.values()).count("passed") == 2, (outcomes, proc.stdout + proc.stderr)
    prints = {
        check_crash(record, FIRST + "test_a_segfault", PYTEST_FIRST, "SEGFAULT LINE", stack_from="core"),
        check_crash(record, FIRST + "test_b_abort", PYTEST_FIRST, "ABORT LINE", stack_from="core"),
        check_crash(record, LATER + "test_b_segfault", PYTEST_LATER, "SEGFAULT LINE", stack_from="core"),
    }
    assert len(prints) == 3  # no two crashes share a fingerprint
    assert not [c for c in p.root.rglob("core*") if core_files.is_core(c)], "cores are read, then removed"


WORKER = (
    FIRST_USE
    + """
import multiprocessing
import sys


def worker():
    # as XLA's handler does, it says which signal came; then no Python stack
    print("*** Received signal 11 ***", file=sys.stderr, flush=True)
    first_use()
    segfault_helper()


def test_a_worker_dies():
    process = multiprocessing.get_context("fork").Process(target=worker)
    process.start()
    process.join()
    assert process.exitcode == 0
"""
)


@pytest.mark.slow
@needs_pystack
def test_a_worker_that_dies_under_such_a_handler_keeps_its_python_stack(project: Callable[..., Project]) -> None:
    # a process the test started: its core, not the test's process's, holds the stack
    p = project("passing", row='suites = ["worker"]')
    (p.root / "suites" / "worker").mkdir(parents=True)
    (p.root / "suites" / "worker" / "test_worker.py").write_text(WORKER)
    proc = p.run("run", "--device", "fixture")
    record = p.record()
    (crash,) = record["crashes"]
    assert crash["kind"] == "worker_crash", (crash, proc.stdout + proc.stderr)
    diagnosis = crash["diagnosis"]
    assert diagnosis["signal_name"] == "SIGSEGV"
    assert diagnosis["python_stack_source"] == "core", diagnosis
    line = line_of(WORKER, "SEGFAULT LINE")
    assert f'test_worker.py", line {line} in segfault_helper' in (diagnosis["python_stack"] or "")
    assert "test_worker.py:segfault_helper" in diagnosis["fingerprint_basis"]
    assert not [c for c in p.root.rglob("core*") if core_files.is_core(c)], "cores are read, then removed"


SILENT = """
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
CRASH = [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"]  # no faulthandler: it prints nothing

# while the module is imported no test runs: a core written now is no test's
os.chdir(HERE / "imported")
subprocess.run(CRASH)
os.chdir(HERE.parent.parent)
time.sleep(0.2)  # a core's time is the kernel's coarse clock: not within a tick of the first test's start


def test_a_expects_the_crash(monkeypatch):
    monkeypatch.chdir(HERE / "expected")  # a folder of its own: each crash writes "core"
    assert subprocess.run(CRASH).returncode == -11


def test_b_subprocess_crash():
    r = subprocess.run(CRASH)
    assert r.returncode == 0, r.returncode
"""


@pytest.mark.slow
@needs_pystack
def test_a_core_a_silent_process_left_is_its_tests_worker_crash_never_litter(project: Callable[..., Project]) -> None:
    # the subprocesses inherit the raised core limit and print nothing as they die: only
    # their cores say it, read by the time each was written
    p = project("passing", row='suites = ["silent"]')
    suite = p.root / "suites" / "silent"
    for folder in (suite / "imported", suite / "expected"):
        folder.mkdir(parents=True)
    (suite / "test_silent.py").write_text(SILENT)
    proc = p.run("run", "--device", "fixture")
    said = proc.stdout + proc.stderr
    record = p.record()
    outcomes = {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}
    assert outcomes == {"test_a_expects_the_crash": "passed", "test_b_subprocess_crash": "failed"}, said
    (crash,) = record["crashes"]  # the expected crash's test passed: its core is only removed
    assert crash["kind"] == "worker_crash" and crash["nodeid"].endswith("::test_b_subprocess_crash"), crash
    diagnosis = crash["diagnosis"]
    assert diagnosis["signal_name"] == "SIGSEGV", diagnosis
    assert diagnosis["python_stack_source"] == "core", diagnosis
    assert 'File "<string>", line 1' in (diagnosis["python_stack"] or ""), diagnosis
    (test,) = [t for t in record["tests"] if t["nodeid"] == crash["nodeid"]]
    assert test["crash"] == crash["id"] and "AssertionError: -11" in (test["message"] or ""), test
    # the core written while no test ran and the expected crash's are told, each, and removed:
    # a core holds its process's memory, secrets with it, which no redaction reaches
    (imported,) = [w for w in record["warnings"] if "while no test ran" in w]
    (expected,) = [w for w in record["warnings"] if w != imported]
    assert "ended by SIGSEGV while no test ran" in imported and imported.endswith("its core is removed"), imported
    assert "ended by SIGSEGV while " in expected and "::test_a_expects_the_crash ran (passed)" in expected, expected
    assert expected.endswith("its core is removed"), expected
    assert f"warning: {imported}" in said and f"warning: {expected}" in said
    litter = [c for c in p.root.rglob("core*") if core_files.is_core(c)]
    assert not litter, "cores are read, then removed"
