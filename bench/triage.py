#!/usr/bin/env python3
"""Triage at scale: 4 rows x 5,000 tests with 50 crashes; wall time and peak memory.

Generates the run records, then runs `device-matrix triage` in a child process (twice:
the second one compares with the history the first wrote) and prints its wall time and
peak resident memory. Target: under 5 s and under 300 MB.

    python bench/triage.py [--tests 5000] [--crashes 50]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests import records as R  # noqa: E402

ROWS = ("cpu", "tpu", "cuda", "neuron")


def generate(results: Path, tests: int, crashes: int) -> None:
    rnd = random.Random(7)
    ids = [f"suites/s{i % 40}/test_mod{i % 250}.py::test_case_{i}[param-{i % 13}]" for i in range(tests)]
    crash_ids = rnd.sample(range(tests), crashes)
    for row in ROWS:
        recs, crs = [], []
        for i, nodeid in enumerate(ids):
            if i in crash_ids:
                c = R.crash(
                    row,
                    nodeid,
                    f"fp{i % 20:04d}",
                    index=len(crs) + 1,
                    python_stack="Current thread 0x1 (most recent call first):\n"
                    + "\n".join(f'  File "/srv/x/mod{k}.py", line {k} in f{k}' for k in range(30)),
                    last_output=[f"line {k} of output" for k in range(40)],
                )
                crs.append(c)
                recs.append(R.test(nodeid, "crashed", crash_id=c["id"]))
            elif i % 53 == 0:
                recs.append(R.test(nodeid, "failed", message="AssertionError: values differ\n" + "x" * 400))
            elif i % 31 == 0:
                recs.append(R.test(nodeid, "skipped", skip=R.skip_info("ledger:1" if i % 2 else None)))
            else:
                recs.append(R.test(nodeid))
        d = results / row
        d.mkdir(parents=True)
        (d / "run.json").write_text(json.dumps(R.record(row, recs, crs)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=5000)
    ap.add_argument("--crashes", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dm-triage-") as tmp:
        results = Path(tmp) / "results"
        generate(results, args.tests, args.crashes)
        size = sum(p.stat().st_size for p in results.rglob("run.json")) / 1e6
        print(f"{len(ROWS)} rows x {args.tests} tests, {args.crashes} crashes per row; run.json files {size:.1f} MB")
        for label in ("first (empty history)", "second (compares with the first)"):
            start = time.perf_counter()
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "device_matrix",
                    "--project",
                    str(ROOT),
                    "triage",
                    str(results),
                    "--history",
                    str(Path(tmp) / "history.sqlite"),
                ],
                capture_output=True,
                text=True,
                check=False,
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
            )
            wall = time.perf_counter() - start
            if proc.returncode != 0:
                print(proc.stdout + proc.stderr)
                return 1
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            print(f"  {label:<34} {wall:6.2f} s   peak RSS so far {peak:6.1f} MB")
        html = (results / "triage" / "triage.html").stat().st_size / 1e6
        md = (results / "triage" / "triage.md").stat().st_size / 1e3
        print(f"  report sizes: html {html:.1f} MB, markdown {md:.0f} kB")
        print("  target: under 5 s and under 300 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
