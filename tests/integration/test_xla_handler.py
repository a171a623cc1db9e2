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


def _line_of(marker: str) -> int:
    source = PYTEST_FILE.splitlines()
    return next(k for k, text in enumerate(source, 1) if marker in text)


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
