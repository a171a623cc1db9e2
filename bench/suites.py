#!/usr/bin/env python3
"""Wall time of each suite on this machine, and the compile-count table.

Runs `device-matrix run --device cpu --suite S` for each suite with an interpreter that
has torch_xla (the cpu row's nox venv by default), then measures, in one process, the
graphs compiled and the HLO size of one accumulation call for 2, 4, 8 and 16 steps:
the XLA While loop against the ordinary loop. Target: all suites under 10 minutes.

    python bench/suites.py [--python .nox/cpu/bin/python]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITES = ("accumulation", "mlp", "collectives")

TABLE = r"""
import json, sys
sys.path.insert(0, {root!r})
import torch_xla
from suites.accumulation.compilation import measure
rows = measure(torch_xla.device(), (2, 4, 8, 16))
print(json.dumps([r.__dict__ for r in rows]))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--python", default=str(ROOT / ".nox" / "cpu" / "bin" / "python"))
    args = ap.parse_args()
    if not Path(args.python).exists():
        print(f"{args.python} not found: run `nox -s cpu` once, or pass --python", file=sys.stderr)
        return 2
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "4"}
    total = 0.0
    print("suite wall times (device-matrix run --device cpu --suite S):")
    with tempfile.TemporaryDirectory(prefix="dm-suites-") as tmp:
        for suite in SUITES:
            start = time.perf_counter()
            proc = subprocess.run(
                [
                    args.python,
                    "-m",
                    "device_matrix",
                    "--project",
                    str(ROOT),
                    "run",
                    "--device",
                    "cpu",
                    "--suite",
                    suite,
                    "--results",
                    f"{tmp}/{suite}",
                ],
                capture_output=True,
                text=True,
                check=False,
                env=env,
                cwd=ROOT,
            )
            wall = time.perf_counter() - start
            total += wall
            rec = json.loads((Path(tmp) / suite / "cpu" / "run.json").read_text())
            s = rec["summary"]
            slow = sorted(rec["tests"], key=lambda t: -t["duration"])[:3]
            print(
                f"  {suite:<13} {wall:7.1f} s  exit {proc.returncode}  {s['passed']} passed, {s['xfailed']} xfailed,"
                f" {s['failed'] + s['error']} failed, {s['crashed']} crashed"
            )
            for t in slow:
                print(f"      {t['duration']:6.1f} s  {t['nodeid']}")
    print(f"  {'all':<13} {total:7.1f} s  (target < 600 s)")
    proc = subprocess.run(
        [args.python, "-c", TABLE.format(root=str(ROOT))], capture_output=True, text=True, check=True, env=env, cwd=ROOT
    )
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    print()
    print("compilation per accumulation call (graphs compiled / HLO lines):")
    print(f"  {'steps':>5}  {'While loop':>16}  {'ordinary loop':>16}")
    for r in rows:
        print(
            f"  {r['steps']:>5}  {r['while_compiles']:>5} / {r['while_hlo_lines']:>6}    "
            f"{r['ordinary_compiles']:>5} / {r['ordinary_hlo_lines']:>6}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
