"""#29: crashes under XLA's own fatal-signal handler (``XLA_DUMP_FATAL_STACK=1``, which
pytorch/xla's run_tests.sh exports for every file), with real torch_xla on CPU.

A pytest test and an absltest file that start torch_xla's runtime, then segfault or abort
in a helper: each crash keeps its real signal, a Python stack naming the helper and its
line, ``when: call`` and a fingerprint of the helper's frame, with XLA's handler and
without it. These tests need torch_xla: ``.ci/run`` runs them in the cpu row's venv and
sets ``DEVICE_MATRIX_REQUIRE_TORCH_XLA=1``, where a missing torch_xla fails them.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import pytest

from device_matrix.diagnostics.core import is_core
from tests.conftest import Project

pytestmark = pytest.mark.slow


def _require_torch_xla() -> None:
    if importlib.util.find_spec("torch_xla") is not None:
        return
    reason = "torch_xla is not installed in this interpreter"
    if os.environ.get("DEVICE_MATRIX_REQUIRE_TORCH_XLA") == "1":
        pytest.fail(f"torch_xla is required here (DEVICE_MATRIX_REQUIRE_TORCH_XLA=1): {reason}")
    pytest.skip(f"{reason}; .ci/run runs this file in the cpu row's venv")


HELPERS = """
import ctypes
import os


def segfault_helper():
    ctypes.string_at(0)  # SEGFAULT LINE


def abort_helper():
    os.abort()  # ABORT LINE
"""

PYTEST_FILE = (
    """
import torch
import torch_xla
"""
    + HELPERS
    + """

@pytest.fixture(scope="module")
def device():
    # the runtime starts here: with XLA_DUMP_FATAL_STACK=1 XLA installs its signal handler
    device = torch_xla.device()
    assert torch.ones(1, device=device).cpu().tolist() == [1.0]
    return device


def test_a_segfault(device):
    segfault_helper()


def test_b_abort(device):
    abort_helper()
"""
).replace("import torch\n", "import pytest\nimport torch\n", 1)

ABSL_FILE = (
    """
from absl.testing import absltest
import torch
import torch_xla
"""
    + HELPERS
    + """

class CrashTest(absltest.TestCase):
    @classmethod
    def setUpClass(cls):
        # as upstream's files do: the runtime starts in setUpClass, XLA's handler with it
        cls.device = torch_xla.device()
        assert torch.ones(1, device=cls.device).cpu().tolist() == [1.0]

    def test_a_segfault(self):
        segfault_helper()

    def test_b_abort(self):
        abort_helper()


if __name__ == "__main__":
    absltest.main()
"""
)


def _project(root: Path, kind: str, handler: bool) -> Project:
    (root / "xla_tests").mkdir(parents=True)
    name = "test_crash.py"
    (root / "xla_tests" / name).write_text(PYTEST_FILE if kind == "pytest" else ABSL_FILE)
    what = 'suites = ["test_crash.py"]' if kind == "pytest" else "suites = []"
    env = '\nXLA_DUMP_FATAL_STACK = "1"' if handler else ""
    scripts = (
        '\n[[tool.device-matrix.devices.cpu.scripts]]\nfile = "xla_tests/test_crash.py"\n' if kind == "absl" else ""
    )
    (root / "pyproject.toml").write_text(
        f"""[tool.device-matrix]
crash_reruns = 0
suites_dir = "xla_tests"

[tool.device-matrix.devices.cpu]
pjrt_device = "CPU"
run_in = "host"
{what}
presence = ["always"]
test_timeout = 600

[tool.device-matrix.devices.cpu.env]
CPU_NUM_DEVICES = "1"
TORCH_TEST_DEVICES = ""
PYTORCH_TEST_WITH_SLOW = "1"{env}
{scripts}"""
    )
    return Project(root)


@pytest.mark.parametrize("handler", [True, False], ids=["xla-handler", "no-handler"])
@pytest.mark.parametrize("kind", ["pytest", "absl"])
def test_a_crash_under_xla_keeps_its_signal_python_stack_phase_and_fingerprint(
    tmp_path: Path, kind: str, handler: bool
) -> None:
    _require_torch_xla()
    p = _project(tmp_path, kind, handler)
    proc = p.run("run", "--device", "cpu", timeout=900)
    record: dict[str, Any] = p.record("cpu")
    crashes = {c["nodeid"].rsplit("::", 1)[-1]: c for c in record["crashes"]}
    assert set(crashes) == {"test_a_segfault", "test_b_abort"}, proc.stdout + proc.stderr
    source = PYTEST_FILE if kind == "pytest" else ABSL_FILE
    lines = {
        "test_a_segfault": next(k for k, t in enumerate(source.splitlines(), 1) if "SEGFAULT LINE" in t),
        "test_b_abort": next(k for k, t in enumerate(source.splitlines(), 1) if "ABORT LINE" in t),
    }
    for name, signal, helper in (
        ("test_a_segfault", "SIGSEGV", "segfault_helper"),
        ("test_b_abort", "SIGABRT", "abort_helper"),
    ):
        crash = crashes[name]
        diagnosis = crash["diagnosis"]
        assert diagnosis["signal_name"] == signal, (name, diagnosis["signal_name"], diagnosis["hint"])
        stack = diagnosis["python_stack"] or ""
        assert re.search(rf'test_crash\.py", line {lines[name]} in {helper}', stack), (name, stack)
        assert crash["when"] == "call", (name, crash["when"])
        assert f"test_crash.py:{helper}" in diagnosis["fingerprint_basis"], (name, diagnosis["fingerprint_basis"])
        (test,) = [t for t in record["tests"] if t["nodeid"] == crash["nodeid"]]
        assert test["outcome"] == "crashed"
        assert test["line"] == lines[name], (name, test["line"])
    assert crashes["test_a_segfault"]["diagnosis"]["fingerprint"] != crashes["test_b_abort"]["diagnosis"]["fingerprint"]


# --- #39: the crash in the test that starts XLA's runtime (and so installs its handler) ---

FIRST_USE = """
import ctypes
import os

import torch
import torch_xla


def first_use():
    # the runtime starts at the first use of the device: XLA installs its handler here
    device = torch_xla.device()
    assert torch.ones(1, device=device).cpu().tolist() == [1.0]


def segfault_helper():
    ctypes.string_at(0)  # SEGFAULT LINE


def abort_helper():
    os.abort()  # ABORT LINE
"""

# each crash is its process's first use of the device: the one in which XLA's handler replaces faulthandler
UNITTEST_FIRST = (
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

# the segfault is sorted after a test that started the runtime (faulthandler was put back in
# front), its rerun alone is the first use (#39 item 2); the abort, after the restart, is the first
ABSL_LATER = (
    FIRST_USE
    + """
from absl.testing import absltest


class CrashTest(absltest.TestCase):
    def test_a_passes(self):
        first_use()

    def test_b_segfault(self):
        first_use()
        segfault_helper()

    def test_c_abort(self):
        first_use()
        abort_helper()


if __name__ == "__main__":
    absltest.main()
"""
)

# the seed: test/spmd/test_train_spmd_linear_model.py's shape, SPMD on, 4 CPU devices, a
# segfault injected at the first training step
SPMD_SEED = """
import ctypes
import sys
import unittest

import numpy as np
import torch
import torch_xla
import torch_xla.distributed.spmd as xs
import torch_xla.runtime as xr


def segfault_helper():
    ctypes.string_at(0)  # SEGFAULT LINE


class TestSPMDLinearModel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        xr.use_spmd()

    def test_a_basic(self):
        device = torch_xla.device()
        model = torch.nn.Linear(16, 8).to(device)
        mesh = xs.Mesh(np.arange(xr.global_runtime_device_count()), (4, 1))
        xs.mark_sharding(model.weight, mesh, (0, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.ones(4, 16, device=device)).sum()
            loss.backward()
            optimizer.step()
            torch_xla.sync()
            if step == 0:
                segfault_helper()

    def test_b_passes(self):
        pass


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
"""

FORKED = (
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

FILES = {
    "test_unittest_first.py": UNITTEST_FIRST,
    "test_absl_later.py": ABSL_LATER,
    "spmd/test_train_spmd_linear_model.py": SPMD_SEED,
    "test_forked.py": FORKED,
}


def _first_use_project(root: Path) -> Project:
    """One project: the scripts in the cpu row, the pytest file in a row under pytest-forked."""
    for name, text in FILES.items():
        (root / "xla_tests" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "xla_tests" / name).write_text(text)
    row = """pjrt_device = "CPU"
run_in = "host"
presence = ["always"]
test_timeout = 600"""
    env = 'CPU_NUM_DEVICES = "1"\nXLA_DUMP_FATAL_STACK = "1"\nTORCH_TEST_DEVICES = ""'
    (root / "pyproject.toml").write_text(
        f"""[tool.device-matrix]
crash_reruns = 1
suites_dir = "xla_tests"

[tool.device-matrix.devices.cpu]
{row}
suites = []

[tool.device-matrix.devices.cpu.env]
{env}

[[tool.device-matrix.devices.cpu.scripts]]
file = "xla_tests/test_unittest_first.py"

[[tool.device-matrix.devices.cpu.scripts]]
file = "xla_tests/test_absl_later.py"

[[tool.device-matrix.devices.cpu.scripts]]
file = "xla_tests/spmd/test_train_spmd_linear_model.py"
env = {{ XLA_USE_SPMD = "1", CPU_NUM_DEVICES = "4" }}

[tool.device-matrix.devices.forked]
{row}
suites = ["test_forked.py"]

[tool.device-matrix.devices.forked.env]
{env}

[tool.pytest.ini_options]
addopts = "--forked"
"""
    )
    return Project(root)


def _check_first_use_crash(record: dict[str, Any], nodeid: str, marker: str, signal: str) -> str:
    """#39: the crash as the record must have it; its fingerprint."""
    path = nodeid.split("::", 1)[0]
    source = FILES[path.removeprefix("xla_tests/")]
    helper = {"SEGFAULT LINE": "segfault_helper", "ABORT LINE": "abort_helper"}[marker]
    line = next(k for k, t in enumerate(source.splitlines(), 1) if marker in t)
    (crash,) = [c for c in record["crashes"] if c["nodeid"] == nodeid]
    diagnosis = crash["diagnosis"]
    file = path.rsplit("/", 1)[-1]
    assert diagnosis["signal_name"] == signal, (nodeid, diagnosis["signal_name"], diagnosis["hint"])
    stack = diagnosis["python_stack"] or ""
    assert re.search(rf'{re.escape(file)}", line {line} in {helper}', stack), (nodeid, diagnosis)
    assert diagnosis["python_stack_source"] in ("faulthandler", "output", "core"), diagnosis
    assert crash["when"] == "call", (nodeid, crash["when"])
    assert f"{file}:{helper}" in diagnosis["fingerprint_basis"], (nodeid, diagnosis["fingerprint_basis"])
    assert crash["classification"] == "deterministic", (nodeid, crash["reruns"])
    (test,) = [t for t in record["tests"] if t["nodeid"] == nodeid]
    assert test["outcome"] == "crashed" and test["line"] == line, (nodeid, test)
    return str(diagnosis["fingerprint"])


def test_a_crash_in_the_test_that_starts_xla_keeps_its_python_stack_and_verdict(tmp_path: Path) -> None:
    # #39 items 1, 2 and 6, with torch_xla: scripts (unittest, absltest, the SPMD seed) and
    # a pytest row under pytest-forked, XLA_DUMP_FATAL_STACK=1, each crash the first use of
    # the device in its process or sorted after it
    _require_torch_xla()
    p = _first_use_project(tmp_path)
    proc = p.run("run", "--device", "cpu", timeout=1500)
    record: dict[str, Any] = p.record("cpu")
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    passed = {n for n, o in outcomes.items() if o == "passed"}
    assert {n.rsplit("::", 1)[-1] for n in passed} == {"test_c_passes", "test_a_passes", "test_b_passes"}, (
        outcomes,
        proc.stdout[-3000:] + proc.stderr[-3000:],
    )
    unittest_first = "xla_tests/test_unittest_first.py::CrashTest::"
    absl_later = "xla_tests/test_absl_later.py::CrashTest::"
    prints = {
        _check_first_use_crash(record, unittest_first + "test_a_segfault", "SEGFAULT LINE", "SIGSEGV"),
        _check_first_use_crash(record, unittest_first + "test_b_abort", "ABORT LINE", "SIGABRT"),
        _check_first_use_crash(record, absl_later + "test_b_segfault", "SEGFAULT LINE", "SIGSEGV"),
        _check_first_use_crash(record, absl_later + "test_c_abort", "ABORT LINE", "SIGABRT"),
        _check_first_use_crash(
            record,
            "xla_tests/spmd/test_train_spmd_linear_model.py::TestSPMDLinearModel::test_a_basic",
            "SEGFAULT LINE",
            "SIGSEGV",
        ),
    }
    assert len(prints) == 5, "no two crashes share a fingerprint"

    proc = p.run("run", "--device", "forked", timeout=900)
    record = p.record("forked")
    outcomes = {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}
    assert outcomes == {"test_a_segfault": "crashed", "test_b_abort": "crashed", "test_c_passes": "passed"}, (
        outcomes,
        proc.stdout[-3000:] + proc.stderr[-3000:],
    )
    forked = {
        _check_first_use_crash(record, "xla_tests/test_forked.py::test_a_segfault", "SEGFAULT LINE", "SIGSEGV"),
        _check_first_use_crash(record, "xla_tests/test_forked.py::test_b_abort", "ABORT LINE", "SIGABRT"),
    }
    assert len(forked) == 2
    assert not [c for c in tmp_path.rglob("core*") if is_core(c)], "cores are read, then removed"
