"""A new user's first hour, played from outside this repository (#20).

device-matrix's wheel is built and installed, with nox, into a fresh venv; a small project
of the user's own (a package, tests/ with a passing test, a device skip, later a test that
segfaults and one that fails; no suites/) is configured only with the lines the README
gives (read out of README.md, so the README cannot drift) and runs ``nox -s cpu``: green,
then the crash diagnosed, the skip cited, and ``device-matrix triage`` with the failure's
message in every report. The project needs no torch_xla: its cpu row installs nothing but
device-matrix and the project.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.built import build
from tests.conftest import REPO

pytestmark = pytest.mark.slow

README = REPO / "README.md"
# the accelerators stay absent wherever this runs (a CI runner with a GPU too)
ABSENT = {"DEVICE_MATRIX_TPU_PRESENT": "0", "DEVICE_MATRIX_CUDA_PRESENT": "0", "DEVICE_MATRIX_NEURON_PRESENT": "0"}

MATH = """
from mypkg import add


def test_add():
    assert add(1, 2) == 3
"""
SKIP = """
import pytest


@pytest.mark.skip_device("cpu", issue="#123", reason="NaN in the fused kernel on CPU")
def test_fused():
    raise AssertionError("a skipped test never runs")
"""
CRASH = """
import os
import signal


def test_segfault():
    os.kill(os.getpid(), signal.SIGSEGV)
"""
FAIL = """
from mypkg import add


def test_add_is_wrong():
    assert add(1, 1) == 3, "add(1, 1) should be 3 in this world"
"""


def readme_block(language: str) -> str:
    """The first ``language`` block of the README's "Use it in your project" section."""
    text = README.read_text()
    section = text[text.index("## Use it in your project") :]
    section = section[: section.index("\n## ", 3)]
    match = re.search(rf"```{language}\n(.*?)```", section, re.S)
    assert match, f"no {language} block in the README's 'Use it in your project'"
    return match.group(1)


def user_env() -> dict[str, str]:
    """The user's shell: nothing of this checkout, of the test run or of CI."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_", "DEVICE_MATRIX_", "GITHUB_", "NOX_", "CI")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return {**env, **ABSENT, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def run(argv: list[str | Path], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=user_env(), capture_output=True, text=True, timeout=timeout, check=False
    )


def make_project(root: Path) -> None:
    (root / "mypkg").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_math.py").write_text(MATH)
    (root / "tests" / "test_skip.py").write_text(SKIP)
    project = textwrap.dedent(
        """
        [build-system]
        requires = ["setuptools>=69"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "mypkg"
        version = "1.0"

        [tool.setuptools]
        packages = ["mypkg"]

        [tool.pytest.ini_options]
        testpaths = ["tests"]
        """
    )
    # the README's lines, as a user copies them; then this project's own: a tiny project
    # needs no torch and torch_xla in its cpu row
    own = "\n[tool.device-matrix.devices.cpu]\ninstall = []\n"
    (root / "pyproject.toml").write_text(project + "\n" + readme_block("toml") + own)
    (root / "noxfile.py").write_text(readme_block("python"))


def test_a_new_project_from_the_wheel_and_the_readme(tmp_path: Path) -> None:
    wheel = build().wheel
    home = tmp_path / "home"
    venv = home / "venv"
    project = home / "mypkg"
    make_project(project)
    assert not (project / "suites").exists()

    proc = run([sys.executable, "-m", "venv", venv], cwd=home)
    assert proc.returncode == 0, proc.stderr
    python = venv / "bin" / "python"
    # the README's install line, with the wheel built here
    proc = run([python, "-m", "pip", "install", "-q", "nox", wheel], cwd=home)
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # nox -s tpu: absent here, skipped before any venv is made
    proc = run([python, "-m", "nox", "-s", "tpu"], cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Session tpu skipped: tpu unavailable here" in proc.stderr
    assert not (project / ".nox" / "tpu").exists()

    # nox -s cpu: green, the device skip cited
    proc = run([python, "-m", "nox", "-s", "cpu"], cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads((project / "results" / "cpu" / "run.json").read_text())
    assert record["status"] == "passed", record["reason"]
    tests = {t["nodeid"]: t for t in record["tests"]}
    assert set(tests) == {"tests/test_math.py::test_add", "tests/test_skip.py::test_fused"}
    skip = tests["tests/test_skip.py::test_fused"]
    assert skip["outcome"] == "skipped" and skip["skip"] and skip["skip"]["issue"] == "#123"
    # the row's venv has the wheel's device-matrix and the project, not this checkout
    row_python = project / ".nox" / "cpu" / "bin" / "python"
    script = "import device_matrix, mypkg; print(device_matrix.__file__, mypkg.__file__)"
    where = run([row_python, "-c", script], project)
    dm_file, pkg_file = where.stdout.split()
    assert Path(dm_file).is_relative_to(project / ".nox" / "cpu") and not Path(dm_file).is_relative_to(REPO)
    assert Path(pkg_file) == project / "mypkg" / "__init__.py"  # -e .: the project as it is
    stamp = json.loads((project / ".nox" / "cpu" / ".device-matrix-install.json").read_text())
    assert stamp["steps"] == [[str(wheel), "-e", "."]]  # no torch: this project's cpu row installs nothing else

    # a test that segfaults and one that fails: the crash is diagnosed, the run goes on
    (project / "tests" / "test_crash.py").write_text(CRASH)
    (project / "tests" / "test_fail.py").write_text(FAIL)
    proc = run([python, "-m", "nox", "-s", "cpu"], cwd=project)
    assert proc.returncode != 0
    assert "row packages already installed" in proc.stderr  # the stamp: no second install
    record = json.loads((project / "results" / "cpu" / "run.json").read_text())
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes["tests/test_math.py::test_add"] == "passed"
    assert outcomes["tests/test_crash.py::test_segfault"] == "crashed"
    assert outcomes["tests/test_fail.py::test_add_is_wrong"] == "failed"
    (crash,) = record["crashes"]
    assert crash["nodeid"] == "tests/test_crash.py::test_segfault"
    assert crash["diagnosis"]["signal_name"] == "SIGSEGV" and crash["diagnosis"]["fingerprint"]
    assert "test_crash.py" in (crash["diagnosis"]["python_stack"] or "")
    # the repro runs with the row's own interpreter, the venv's
    assert str(row_python) in crash["repro"], crash["repro"]
    # the terminal says why the test failed, not only that it did
    cause = "failed tests/test_fail.py::test_add_is_wrong at tests/test_fail.py:6: AssertionError: add(1, 1)"
    assert cause in proc.stdout, proc.stdout
    # a run files issues only when asked: `issues sync` files the crash's
    proc = run([venv / "bin" / "device-matrix", "issues", "sync"], cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "filed ledger:1" in proc.stdout, proc.stdout
    # the row's own log diagnoses its crash, and names the issue sync filed
    proc = run([venv / "bin" / "device-matrix", "diagnose", "results/cpu/output.log"], cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "signal: SIGSEGV" in proc.stdout and f"fingerprint: {crash['diagnosis']['fingerprint']}" in proc.stdout
    assert "issue: ledger:1" in proc.stdout

    # triage: every report says why the test failed
    proc = run([venv / "bin" / "device-matrix", "triage", "results"], cwd=project)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    triage = project / "results" / "triage"
    message = "add(1, 1) should be 3 in this world"
    for name in ("triage.md", "triage.html", "triage.json"):
        assert message in (triage / name).read_text(), name

    # git: what the runs wrote is ignored once the README's line is in .gitignore
    (project / ".gitignore").write_text("results/\n*.egg-info/\n")
    assert run(["git", "init", "-q"], cwd=project).returncode == 0
    status = run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=project).stdout.splitlines()
    assert not [line for line in status if ".device-matrix" in line or "results" in line or ".nox" in line], status
