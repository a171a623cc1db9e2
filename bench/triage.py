#!/usr/bin/env python3
"""Triage at scale: 4 rows x 5,000 tests, with a history of 30 runs and without one, and a
pull request's verdicts against a history of 3 branches (#25).

Fills a history with 3 branches (main, release, dev) of 30 runs each, but main's last
(flaky tests, crashes that come and go, durations that drift), writes the last run's
records, then runs `device-matrix triage` in a child process, side by side:

* a push to main: the 30th run recorded into main's lane, trends, flips, slowdowns and
  crash history over 30 runs (what triage did before verdicts, per branch now);
* a pull request on main: the same records as a pull request's, the history read-only,
  every failure judged against main's 30 runs, its crashes placed by environment;
* --no-history: the report alone;
* with ``--baseline REV``: the push triage of the code at REV (``git archive``), on a
  history of one branch of 29 runs that code writes itself.

Prints each one's wall time, CPU time and peak resident memory, and their ratios. Target
for the pull request's verdicts: under 2 s and under 300 MB.

    python bench/triage.py [--tests 5000] [--runs 30] [--branches 3] [--repeat 3] [--baseline REV]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# the tree whose device_matrix is measured: this one, or (in a child) the baseline's
TREE = Path(os.environ.get("DEVICE_MATRIX_BENCH_TREE", ROOT))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(TREE))
from device_matrix.report.history import History  # noqa: E402
from device_matrix.report.model import build  # noqa: E402
from tests import records as R  # noqa: E402

ROWS = ("cpu", "tpu", "cuda", "neuron")
CRASHES = 50
FLAKY = 40
BRANCHES = ("main", "release", "dev")
PR = 77

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


def source(branch: str, run: int, *, pr: int | None = None) -> dict[str, Any]:
    commit = hashlib.sha1(f"{branch} {run} {pr}".encode()).hexdigest()
    ref = f"feature-{pr}" if pr else branch
    return R.source(pr=pr, commit=commit, ref=ref, run_id=str(run), workflow="bench")


def environment(row: str, run: int) -> dict[str, Any]:
    """A snapshot like the runner's: the cuda row lands on one of two kinds of host."""
    env: dict[str, Any] = {"python": "3.11.7", "packages": {"torch": "2.9.0", "torch_xla": "2.9.0"}, "host": f"{row}-h"}
    if row == "cuda":
        env["drivers"] = {
            "nvidia-smi": "Tesla T4, 535.104.05, 15360 MiB" if run % 3 else "NVIDIA A100, 550.54, 40960 MiB"
        }
    return env


def run_records(run: int, runs: int, tests: int, seed: int = 0) -> list[dict[str, Any]]:
    """One run of the matrix: mostly passing, some flaky tests, crashes that come and go."""
    rnd = random.Random(run * 1009 + seed)
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
        rec = R.record(row, recs, crs)
        rec["environment"] = environment(row, run)
        out.append(rec)
    return out


def build_history(path: Path, runs: int, tests: int, branches: int) -> None:
    """``branches`` branches of ``runs`` runs, main's last left out (the run measured); the
    code of TREE writes it (one branch, without sources, for a baseline without lanes)."""
    history = History.open(path)
    lanes = "source" in History.record.__code__.co_varnames
    try:
        for b, branch in enumerate(BRANCHES[:branches]):
            for run in range(runs - 1 if branch == "main" else runs):
                triage = build(run_records(run, runs, tests, seed=b), [], {})  # type: ignore[arg-type]
                if lanes:
                    history.record(triage, f"{branch} {run + 1}", source=source(branch, run))  # type: ignore[arg-type]
                else:
                    history.record(triage, f"{branch} {run + 1}")
    finally:
        history.close()


def baseline_tree(rev: str, into: Path) -> Path:
    """The files of ``rev`` (git archive): the code to compare with."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def measure(argv: list[str], tree: Path = ROOT) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
    )
    result: dict[str, Any] = json.loads(proc.stdout)
    if result["rc"] != 0:
        raise SystemExit(f"triage failed ({result['rc']}):\n{result['stderr']}")
    return result


def _write(results: Path, records: list[dict[str, Any]]) -> None:
    for rec in records:
        d = results / rec["row"]
        d.mkdir(parents=True, exist_ok=True)
        (d / "run.json").write_text(json.dumps(rec))


def _line(label: str, samples: list[dict[str, Any]]) -> None:
    wall = statistics.median(s["wall"] for s in samples)
    cpu = statistics.median(s["cpu"] for s in samples)
    peak = max(s["peak_mb"] for s in samples)
    print(f"  {label:<44} {wall:6.2f} s wall   {cpu:6.2f} s CPU   peak RSS {peak:6.1f} MB")


def _ratio(a: list[dict[str, Any]], b: list[dict[str, Any]], what: str) -> float:
    return statistics.median(s[what] for s in a) / statistics.median(s[what] for s in b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--branches", type=int, default=3, choices=range(1, len(BRANCHES) + 1))
    ap.add_argument("--repeat", type=int, default=3, help="timed triages of each kind; the median is printed")
    ap.add_argument("--baseline", metavar="REV", help="also time the push triage of the code at this git revision")
    ap.add_argument("--build-history", metavar="PATH", help=argparse.SUPPRESS)  # in a child: the baseline's
    args = ap.parse_args()
    if args.build_history:
        build_history(Path(args.build_history), args.runs, args.tests, 1)
        return 0
    with tempfile.TemporaryDirectory(prefix="dm-triage-") as tmp:
        history_path = Path(tmp) / "history.sqlite"
        build_history(history_path, args.runs, args.tests, args.branches)
        last = run_records(args.runs - 1, args.runs, args.tests)
        push, pull = Path(tmp) / "push", Path(tmp) / "pull"
        for rec in last:
            rec["source"] = source("main", args.runs - 1)
        _write(push, last)
        for rec in last:
            rec["source"] = source("main", args.runs - 1, pr=PR)
        _write(pull, last)
        size = sum(p.stat().st_size for p in push.rglob("run.json")) / 1e6
        db = history_path.stat().st_size / 1e6
        print(
            f"{len(ROWS)} rows x {args.tests} tests, {CRASHES} crashing tests per row; run.json files {size:.1f} MB; "
            f"history of {args.branches} branch(es) x {args.runs} runs (main's last one measured) {db:.1f} MB"
        )
        baseline_history = None
        tree = None
        if args.baseline:
            tree = baseline_tree(args.baseline, Path(tmp) / "baseline")
            baseline_history = Path(tmp) / "baseline.sqlite"
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--build-history",
                    str(baseline_history),
                    "--runs",
                    str(args.runs),
                    "--tests",
                    str(args.tests),
                ],
                check=True,
                env={"PATH": "/usr/bin:/bin", "DEVICE_MATRIX_BENCH_TREE": str(tree)},
            )
        base = [sys.executable, "-m", "device_matrix", "--project", str(ROOT), "triage"]
        kinds: dict[str, list[dict[str, Any]]] = {"push": [], "pull": [], "none": [], "baseline": []}
        for i in range(args.repeat):
            # each timed push adds a run: every timing starts from a copy of the same history
            copy = Path(tmp) / f"history-{i}.sqlite"
            copy.write_bytes(history_path.read_bytes())
            kinds["none"].append(measure([*base, str(push), "--no-history"]))
            kinds["push"].append(measure([*base, str(push), "--history", str(copy), "--label", f"main {args.runs}"]))
            kinds["pull"].append(
                measure([*base, str(pull), "--history", str(history_path), "--history-read-only", "--label", "pr"])
            )
            if baseline_history is not None and tree is not None:
                old = Path(tmp) / f"baseline-{i}.sqlite"
                old.write_bytes(baseline_history.read_bytes())
                kinds["baseline"].append(
                    measure(
                        [*base[:4], str(tree), "triage", str(push), "--history", str(old), "--label", "main"],
                        tree,
                    )
                )
        verdicts = json.loads((pull / "triage" / "triage.json").read_text())["verdicts"]
        _line(f"push to main (history of {args.runs} runs)", kinds["push"])
        _line(f"pull request: {len(verdicts['items'])} verdicts vs main", kinds["pull"])
        _line("without history", kinds["none"])
        if kinds["baseline"]:
            _line(f"baseline {args.baseline}: push, one-branch history", kinds["baseline"])
        for what in ("wall", "cpu"):
            print(f"  pull request / push: {_ratio(kinds['pull'], kinds['push'], what):.2f}x {what} time")
            if kinds["baseline"]:
                print(
                    f"  pull request / baseline push: {_ratio(kinds['pull'], kinds['baseline'], what):.2f}x {what} time"
                )
        print(f"  verdicts: {verdicts['line']}")
        html = (pull / "triage" / "triage.html").stat().st_size / 1e6
        md = (pull / "triage" / "triage.md").stat().st_size / 1e3
        print(f"  report sizes (pull request): html {html:.1f} MB, markdown {md:.0f} kB")
        print("  target (pull request's verdicts): under 2 s and under 300 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
