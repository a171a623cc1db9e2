#!/usr/bin/env python3
"""Overhead of `device-matrix run` against bare `pytest` over the same tests.

Runs both side by side (alternating, several rounds) and prints each median wall time
and their ratio. Target: ratio at most 1.05.

    python bench/overhead.py                 # 300 quick tests, 5 rounds
    python bench/overhead.py --tests 1000 --rounds 7
    python bench/overhead.py --suites --python .nox/cpu/bin/python   # the real cpu suites
"""

from __future__ import annotations

import argparse
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--suites", action="store_true", help="use the real suites with the cpu row (needs torch_xla)")
    ap.add_argument("--python", default=sys.executable, help="interpreter with pytest (and torch_xla for --suites)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="dm-overhead-") as tmp:
        if args.suites:
            project, row, targets = ROOT, "cpu", ["suites/accumulation", "suites/mlp", "suites/collectives"]
            extra = {"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "4"}
        else:
            project = Path(tmp)
            write_project(project, {"quick/test_quick.py": QUICK.format(n=args.tests)})
            row, targets, extra = "bench", ["suites/quick"], {}
        env = clean_env(**extra)
        ours_cmd = run_command(args.python, project, row, Path(tmp) / "results")
        bare_cmd = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *targets]
        ours, bare = [], []
        for i in range(args.rounds):
            t, rc, out = timed(bare_cmd, cwd=project, env=env)
            if rc not in (0, 1):
                print(out[-2000:])
                return 1
            bare.append(t)
            t, rc, out = timed(ours_cmd, cwd=project, env=env)
            if rc not in (0, 1):
                print(out[-2000:])
                return 1
            ours.append(t)
            print(f"round {i + 1}: bare pytest {bare[-1]:.3f}s   device-matrix run {ours[-1]:.3f}s")
        b, o = median_of(bare), median_of(ours)
        what = "the cpu suites" if args.suites else f"{args.tests} quick tests"
        print()
        print(f"over {what}, median of {args.rounds} rounds each, side by side:")
        print(f"  bare pytest            {b:8.3f} s")
        print(f"  device-matrix run      {o:8.3f} s")
        print(f"  ratio                  {o / b:8.3f}   (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
