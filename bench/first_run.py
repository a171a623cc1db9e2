#!/usr/bin/env python3
"""A new project's first hour, timed: device-matrix beside plain pytest, in one run (#20).

From an empty folder, each way installs what the README (or pytest's own page) says into
a fresh venv, writes the same small project (a package, 20 passing tests), runs it to the
first green result, then adds a test that segfaults and runs again to the first crash
diagnosis:

* device-matrix: ``pip install nox <wheel>``, the README's pyproject and noxfile lines,
  ``nox -s cpu`` (its venv gets device-matrix and the project), then ``nox -s cpu`` again
  with the crash: the record names the test, the signal, the stacks and a repro, and the
  other tests ran;
* plain pytest: ``pip install pytest -e .``, ``pytest``, then ``pytest`` with the crash:
  the process dies with the faulthandler's stack; the tests after it never ran.

Prints the wall seconds of each phase side by side and their ratio, and what each knew
after the crash. The wheel is built first (offline) and not counted: a user downloads it.

    python bench/first_run.py [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, ROOT, median_of

README = ROOT / "README.md"
TESTS = """
import pytest

from mypkg import add


@pytest.mark.parametrize("i", range(20))
def test_add(i):
    assert add(i, 1) == i + 1
"""
CRASH = """
import os
import signal


def test_segfault():
    os.kill(os.getpid(), signal.SIGSEGV)


def test_after_the_crash():
    assert True
"""
PROJECT = """[build-system]
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


def readme_block(language: str) -> str:
    text = README.read_text()
    section = text[text.index("## Use it in your project") :]
    match = re.search(rf"```{language}\n(.*?)```", section[: section.index("\n## ", 3)], re.S)
    assert match, f"no {language} block in the README's 'Use it in your project'"
    return match.group(1)


def user_env() -> dict[str, str]:
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTEST_", "DEVICE_MATRIX_", "GITHUB_", "NOX_", "CI")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return {**env, "DEVICE_MATRIX_TPU_PRESENT": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def step(argv: list[str | Path], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=user_env(), capture_output=True, text=True, timeout=1800, check=False
    )
    return time.perf_counter() - start, proc


def must(ok: bool, what: str, proc: subprocess.CompletedProcess[str]) -> None:
    if not ok:
        sys.exit(f"{what} failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def write_project(root: Path, *, device_matrix: bool) -> None:
    (root / "mypkg").mkdir(parents=True)
    (root / "mypkg" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_add.py").write_text(TESTS)
    text = PROJECT
    if device_matrix:
        # the README's lines; a project without torch_xla installs nothing else in its cpu row
        text += "\n" + readme_block("toml") + "\n[tool.device-matrix.devices.cpu]\ninstall = []\n"
        (root / "noxfile.py").write_text(readme_block("python"))
    (root / "pyproject.toml").write_text(text)


def with_device_matrix(home: Path, wheel: Path) -> dict[str, float | str]:
    project = home / "mypkg"
    home.mkdir()
    start = time.perf_counter()
    t_venv, proc = step([PY, "-m", "venv", home / "venv"], home)
    must(proc.returncode == 0, "venv", proc)
    python = home / "venv" / "bin" / "python"
    t_install, proc = step([python, "-m", "pip", "install", "-q", "nox", wheel], home)
    must(proc.returncode == 0, "pip install nox device-matrix", proc)
    write_project(project, device_matrix=True)
    t_green, proc = step([python, "-m", "nox", "-s", "cpu"], project)
    must(proc.returncode == 0, "nox -s cpu", proc)
    green = time.perf_counter() - start
    t_warm, proc = step([python, "-m", "nox", "-s", "cpu"], project)
    must(proc.returncode == 0, "nox -s cpu (again)", proc)
    (project / "tests" / "test_crash.py").write_text(CRASH)
    t_crash, proc = step([python, "-m", "nox", "-s", "cpu"], project)
    record = json.loads((project / "results" / "cpu" / "run.json").read_text())
    must(bool(record["crashes"]), "the crash run", proc)
    crash = record["crashes"][0]
    after = [t for t in record["tests"] if t["nodeid"].endswith("test_after_the_crash")]
    knew = (
        f"{crash['nodeid']}: {crash['diagnosis']['signal_name']}, fingerprint {crash['diagnosis']['fingerprint']}, "
        f"{crash['classification']} ({len(crash['reruns'])} rerun(s)); test_after_the_crash "
        f"{after[0]['outcome'] if after else 'missing'}; {len(record['tests'])} outcomes recorded"
    )
    return {
        "install": t_venv + t_install,
        "first green": t_green,
        "to green": green,
        "green again": t_warm,
        "crash run": t_crash,
        "to crash": green + t_crash,
        "knew": knew,
    }


def with_pytest(home: Path) -> dict[str, float | str]:
    project = home / "mypkg"
    home.mkdir()
    start = time.perf_counter()
    t_venv, proc = step([PY, "-m", "venv", home / "venv"], home)
    must(proc.returncode == 0, "venv", proc)
    python = home / "venv" / "bin" / "python"
    write_project(project, device_matrix=False)
    t_install, proc = step([python, "-m", "pip", "install", "-q", "pytest", "-e", "."], project)
    must(proc.returncode == 0, "pip install pytest -e .", proc)
    t_green, proc = step([python, "-m", "pytest", "-q"], project)
    must(proc.returncode == 0, "pytest", proc)
    green = time.perf_counter() - start
    t_warm, _ = step([python, "-m", "pytest", "-q"], project)
    (project / "tests" / "test_crash.py").write_text(CRASH)
    t_crash, proc = step([python, "-m", "pytest", "-q"], project)
    output = proc.stdout + proc.stderr
    named = "test_crash.py" in output and "Segmentation fault" in output
    knew = (
        f"exit {proc.returncode}; "
        + ("the faulthandler's stack names test_crash.py" if named else "no stack naming the test")
        + f"; test_after_the_crash {'ran' if 'test_after_the_crash' in output else 'never ran'}; no report written"
    )
    return {
        "install": t_venv + t_install,
        "first green": t_green,
        "to green": green,
        "green again": t_warm,
        "crash run": t_crash,
        "to crash": green + t_crash,
        "knew": knew,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1, help="rounds of both ways (the median is printed)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dm-first-run-") as tmp:
        out = Path(tmp)
        start = time.perf_counter()
        tree = out / "src"
        shutil.copytree(
            ROOT, tree, ignore=shutil.ignore_patterns(".git", ".nox", "results", "build", "*.egg-info", "__pycache__")
        )
        proc = subprocess.run(
            [PY, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out / "dist"), str(tree)],
            capture_output=True,
            text=True,
            check=False,
        )
        must(proc.returncode == 0, "building the wheel (python -m build, from the test extra)", proc)
        (wheel,) = (out / "dist").glob("*.whl")
        print(f"wheel {wheel.name} built in {time.perf_counter() - start:.1f}s (not counted)")
        runs: dict[str, list[dict[str, float | str]]] = {"device-matrix": [], "pytest": []}
        for r in range(args.rounds):
            runs["device-matrix"].append(with_device_matrix(out / f"dm{r}", wheel))
            runs["pytest"].append(with_pytest(out / f"pt{r}"))
    phases = ["install", "first green", "to green", "green again", "crash run", "to crash"]
    print(f"\n{'phase (wall s)':<38} {'device-matrix':>14} {'pytest':>10} {'ratio':>7}")
    labels = {
        "install": "venv + pip install",
        "first green": "first run, green",
        "to green": "empty folder -> first green",
        "green again": "second run, green (warm)",
        "crash run": "run with a segfaulting test",
        "to crash": "empty folder -> first crash diagnosis",
    }
    for phase in phases:
        dm = median_of([float(x[phase]) for x in runs["device-matrix"]])
        pt = median_of([float(x[phase]) for x in runs["pytest"]])
        print(f"{labels[phase]:<38} {dm:>14.1f} {pt:>10.1f} {dm / pt:>6.1f}x")
    print("\nafter the crash:")
    print(f"  device-matrix: {runs['device-matrix'][-1]['knew']}")
    print(f"  pytest:        {runs['pytest'][-1]['knew']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
