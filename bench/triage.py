#!/usr/bin/env python3
"""Triage at scale: 4 rows x 5,000 tests, with a history of 30 runs and without one.

Fills a history with 29 earlier runs (flaky tests, crashes that come and go, durations
that drift), writes the 30th run's records, then runs `device-matrix triage` in a child
process twice, side by side: with the history (trends, flips, slowdowns, crash history
over 30 runs) and with --no-history (the report alone). Prints each one's wall time and
peak resident memory and their ratio. Target for the report with history: under 2 s and
under 300 MB.

    python bench/triage.py [--tests 5000] [--runs 30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from device_matrix.report.history import History  # noqa: E402
from device_matrix.report.model import build  # noqa: E402
from tests import records as R  # noqa: E402

ROWS = ("cpu", "tpu", "cuda", "neuron")
CRASHES = 50
FLAKY = 40

# Runs the command given as arguments and prints its wall time, CPU time and peak RSS (MB)
# as JSON: RUSAGE_CHILDREN of this small wrapper is the command's own, not an earlier one's.
# CPU time is printed beside wall time because on a busy machine wall time is mostly waiting.
MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc.returncode, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                  "peak_mb": usage.ru_maxrss / 1024, "stderr": rc.stderr.decode()[-2000:]}))
"""


def run_records(run: int, runs: int, tests: int) -> list[dict[str, Any]]:
    """One run of the matrix: mostly passing, some flaky tests, crashes that come and go."""
    rnd = random.Random(run)
    ids = [f"suites/s{i % 40}/test_mod{i % 250}.py::test_case_{i}[param-{i % 13}]" for i in range(tests)]
    flaky = set(range(0, tests, tests // FLAKY))
    crash_at = set(random.Random(7).sample(range(tests), CRASHES))
    out = []
    for row in ROWS:
        recs, crs = [], []
        for i, nodeid in enumerate(ids):
            base = 0.002 + (i % 100) / 40  # from milliseconds to a few seconds
            slower = 3.0 if run == runs - 1 and i % 997 == 0 else 1.0
            duration = round(base * slower * rnd.uniform(0.9, 1.1), 4)
            # half of the crashing tests crash only in the first half of the history
            if i in crash_at and (i % 2 or run < runs // 2):
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
                recs.append(R.test(nodeid, "crashed", crash_id=c["id"], duration=duration))
            elif i in flaky and rnd.random() < 0.3:
                recs.append(R.test(nodeid, "failed", message="AssertionError: flaky\n" + "x" * 400, duration=duration))
            elif i % 53 == 0:
                recs.append(R.test(nodeid, "failed", message="AssertionError: values differ\n" + "x" * 400))
            elif i % 31 == 0:
                recs.append(R.test(nodeid, "skipped", skip=R.skip_info("ledger:1" if i % 2 else None)))
            elif i % 37 == 0:
                recs.append(R.test(nodeid, "xfailed", duration=duration))
            else:
                recs.append(R.test(nodeid, duration=duration))
        out.append(R.record(row, recs, crs))
    return out


def measure(argv: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    result: dict[str, Any] = json.loads(proc.stdout)
    if result["rc"] != 0:
        raise SystemExit(f"triage failed ({result['rc']}):\n{result['stderr']}")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3, help="timed triages of each kind; the median is printed")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dm-triage-") as tmp:
        history_path = Path(tmp) / "history.sqlite"
        history = History.open(history_path)
        try:
            for run in range(args.runs - 1):
                history.record(build(run_records(run, args.runs, args.tests), [], {}), f"run {run + 1}")  # type: ignore[arg-type]
        finally:
            history.close()
        results = Path(tmp) / "results"
        for rec in run_records(args.runs - 1, args.runs, args.tests):
            d = results / rec["row"]
            d.mkdir(parents=True)
            (d / "run.json").write_text(json.dumps(rec))
        size = sum(p.stat().st_size for p in results.rglob("run.json")) / 1e6
        db = history_path.stat().st_size / 1e6
        print(
            f"{len(ROWS)} rows x {args.tests} tests, {CRASHES} crashing tests per row; run.json files {size:.1f} MB; "
            f"history of {args.runs - 1} earlier runs {db:.1f} MB"
        )
        base = [sys.executable, "-m", "device_matrix", "--project", str(ROOT), "triage", str(results)]
        with_history: list[dict[str, Any]] = []
        without: list[dict[str, Any]] = []
        for i in range(args.repeat):
            # each timed triage with history adds a run, so copy the history first: every
            # timing sees the same 29 earlier runs
            copy = Path(tmp) / f"history-{i}.sqlite"
            copy.write_bytes(history_path.read_bytes())
            without.append(measure([*base, "--no-history"]))
            with_history.append(measure([*base, "--history", str(copy), "--label", f"run {args.runs}"]))
        rows = ((f"with a history of {args.runs} runs", with_history), ("without history", without))
        for label, samples in rows:
            wall = statistics.median(s["wall"] for s in samples)
            cpu = statistics.median(s["cpu"] for s in samples)
            peak = max(s["peak_mb"] for s in samples)
            print(f"  {label:<28} {wall:6.2f} s wall   {cpu:6.2f} s CPU   peak RSS {peak:6.1f} MB")
        for what in ("wall", "cpu"):
            ratio = statistics.median(s[what] for s in with_history) / statistics.median(s[what] for s in without)
            print(f"  with history / without: {ratio:.2f}x {what} time")
        html = (results / "triage" / "triage.html").stat().st_size / 1e6
        md = (results / "triage" / "triage.md").stat().st_size / 1e3
        print(f"  report sizes (with history): html {html:.1f} MB, markdown {md:.0f} kB")
        print("  target (with history): under 2 s and under 300 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
