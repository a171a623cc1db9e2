#!/usr/bin/env python3
"""Overhead of `device-matrix run` against `pytest --junitxml` over the same tests.

Both ratios from one run, each measured side by side (alternating rounds, medians):

- 5,000 trivial tests: the per-test cost of the journal, the output pump and the
  records (target: at most 1.10);
- the real cpu suites, when an interpreter with torch_xla is at hand (target: at most
  1.02); without one that line says why it is missing.

    python bench/overhead.py                                   # both, 3 rounds
    python bench/overhead.py --tests 2000 --rounds 5
    python bench/overhead.py --suites-python .nox/cpu/bin/python
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, clean_env, median_of, run_command, timed, write_project

QUICK = """
import pytest


@pytest.mark.parametrize("i", range({n}))
def test_quick(i):
    assert sum(range(i % 50)) >= 0
"""
SUITES = ["suites/accumulation", "suites/mlp", "suites/collectives"]


def _compare(
    label: str, project: Path, row: str, targets: list[str], *, python: str, rounds: int, env: dict[str, str]
) -> tuple[float, float]:
    with tempfile.TemporaryDirectory(prefix="dm-overhead-") as tmp:
        ours_cmd = run_command(python, project, row, Path(tmp) / "results")
        bare_cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={tmp}/junit.xml", *targets]
        ours, bare = [], []
        for i in range(rounds):
            t, rc, out = timed(bare_cmd, cwd=project, env=env)
            if rc not in (0, 1):
                raise SystemExit(f"pytest failed ({rc}):\n{out[-2000:]}")
            bare.append(t)
            t, rc, out = timed(ours_cmd, cwd=project, env=env)
            if rc not in (0, 1):
                raise SystemExit(f"device-matrix run failed ({rc}):\n{out[-2000:]}")
            ours.append(t)
            children = _attempts_seconds(Path(tmp) / "results" / row / "run.json")
            print(
                f"{label} round {i + 1}: pytest --junitxml {bare[-1]:.3f}s   device-matrix run {ours[-1]:.3f}s"
                f" (its pytest processes {children:.3f}s, the rest {ours[-1] - children:.3f}s)"
            )
    return median_of(bare), median_of(ours)


def _attempts_seconds(record: Path) -> float:
    """How long the run's pytest processes lived, from spawn to exit, as the runner timed them."""
    return sum(float(a["duration"]) for a in json.loads(record.read_text())["attempts"])


def _has_torch_xla(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import torch_xla"], capture_output=True, check=False, timeout=300)
    return probe.returncode == 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default=sys.executable, help="interpreter for the trivial tests")
    default_suites = ROOT / ".nox" / "cpu" / "bin" / "python"
    ap.add_argument(
        "--suites-python",
        default=str(default_suites),
        help="interpreter with torch_xla for the real cpu suites (default: the cpu row's nox venv)",
    )
    ap.add_argument("--suite-rounds", type=int, default=1)
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(prefix="dm-quick-") as tmp:
        project = Path(tmp)
        write_project(project, {"quick/test_quick.py": QUICK.format(n=args.tests)})
        b, o = _compare(
            "quick", project, "bench", ["suites/quick"], python=args.python, rounds=args.rounds, env=clean_env()
        )
        rows.append((f"{args.tests} trivial tests", b, o, 1.10))
    if Path(args.suites_python).exists() and _has_torch_xla(args.suites_python):
        env = clean_env(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="4")
        b, o = _compare("suites", ROOT, "cpu", SUITES, python=args.suites_python, rounds=args.suite_rounds, env=env)
        rows.append(("the cpu suites", b, o, 1.02))
    else:
        rows.append((f"the cpu suites: skipped, no torch_xla in {args.suites_python}", 0.0, 0.0, 1.02))

    print()
    print("side by side, medians:")
    print(f"  {'over':<44} {'pytest --junitxml':>18} {'device-matrix':>14} {'ratio':>7} {'target':>7}")
    for what, b, o, target in rows:
        if b:
            print(f"  {what:<44} {b:>17.3f}s {o:>13.3f}s {o / b:>7.3f} {target:>7.2f}")
        else:
            print(f"  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
