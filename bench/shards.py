#!/usr/bin/env python3
"""Shards: one row as 1, 2 and 4 shards, locally and on a local Ray cluster, side by side.

The synthetic suite has 2,000 tests whose durations (log-normal, fixed seed) are recorded
in a run.json beforehand; each test sleeps for its duration. For each way it prints the
wall time, the speedup over one shard, the balance (longest shard / mean shard: by the
recorded durations, and as measured) and, on Ray, its fixed cost per shard (Ray's wall
time less the local one with the same shards, per shard).

Target: balance at most 1.1 on the synthetic suite.

    python bench/shards.py [--tests 2000] [--seconds 24] [--no-ray]
    python bench/shards.py --cpu-suites /path/to/python-with-torch_xla   # the cpu row too

A test that sleeps leaves the cores free, so on a 2-core machine the local shards still
overlap; the cpu suites compute, and there the cores are the limit (see the README).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, ROOT, clean_env, run_command, timed, write_project

sys.path.insert(0, str(ROOT))
from device_matrix.spread.split import balance, split

SUITE = """
import json
import time
from pathlib import Path

import pytest

DURATIONS = json.loads((Path(__file__).parent / "durations.json").read_text())


@pytest.mark.parametrize("i", range(len(DURATIONS)))
def test_synthetic(i):
    time.sleep(DURATIONS[i])
"""


def synthetic(root: Path, tests: int, seconds: float) -> dict[str, float]:
    """The suite and a run.json that recorded its durations (summing to ``seconds``)."""
    rng = random.Random(2026)
    raw = [rng.lognormvariate(0, 1.0) for _ in range(tests)]
    scale = seconds / sum(raw)
    durations = [round(d * scale, 6) for d in raw]
    write_project(root, {"synthetic/test_synthetic.py": SUITE}, row_extra="ray_num_cpus = 1")
    (root / "suites/synthetic/durations.json").write_text(json.dumps(durations))
    nodeids = [f"suites/synthetic/test_synthetic.py::test_synthetic[{i}]" for i in range(tests)]
    recorded = dict(zip(nodeids, durations, strict=True))
    record = {
        "schema": "device-matrix/run",
        "version": 1,
        "row": "bench",
        "status": "passed",
        "finished_at": "2026-01-01T00:00:00+00:00",
        "tests": [{"nodeid": n, "outcome": "passed", "duration": d} for n, d in recorded.items()],
        "crashes": [],
        "summary": {},
    }
    (root / "recorded/bench").mkdir(parents=True)
    (root / "recorded/bench/run.json").write_text(json.dumps(record))
    return recorded


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalRay:
    """A one-node Ray cluster of this benchmark's own, stopped at the end."""

    def __init__(self, cpus: int) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="dmbench", dir="/tmp"))
        self.address = f"127.0.0.1:{free_port()}"
        log = self.tmp / "head.log"
        env = clean_env(RAY_USAGE_STATS_ENABLED="0")
        with log.open("wb") as fh:
            self.proc = subprocess.Popen(
                [
                    str(Path(PY).parent / "ray"),
                    "start",
                    "--head",
                    "--block",
                    "--disable-usage-stats",
                    f"--port={self.address.rsplit(':', 1)[1]}",
                    f"--num-cpus={cpus}",
                    f"--temp-dir={self.tmp}",
                    "--include-dashboard=false",
                ],
                stdout=fh,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        start = time.perf_counter()
        while "Ray runtime started" not in log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.perf_counter() - start > 120:
                raise SystemExit(f"ray start failed: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        self.startup = time.perf_counter() - start

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(60)
        shutil.rmtree(self.tmp, ignore_errors=True)


def measured_balance(results: Path, row: str) -> tuple[float, list[float]]:
    record: dict[str, Any] = json.loads((results / row / "run.json").read_text())
    walls = [float(s["duration"]) for s in record["environment"].get("shards", [])] or [float(record["duration"])]
    return max(walls) / (sum(walls) / len(walls)), walls


def run_ways(
    project: Path, row: str, counts: list[int], ray: LocalRay | None, extra: list[str]
) -> list[dict[str, Any]]:
    rows = []
    env = clean_env(RAY_USAGE_STATS_ENABLED="0")
    for executor in ("local", "ray") if ray else ("local",):
        for n in counts:
            results = project / f"results-{executor}-{n}"
            spread = ["--shards", str(n), "--durations", str(project / "recorded")]
            spread += ["--executor", "ray", "--address", ray.address] if executor == "ray" and ray else ["--parallel"]
            wall, code, output = timed(run_command(PY, project, row, results, *spread, *extra), cwd=project, env=env)
            if code != 0:
                print(output[-3000:])
                raise SystemExit(f"{executor} with {n} shard(s) exited {code}")
            measured, walls = measured_balance(results, row)
            rows.append({"executor": executor, "shards": n, "wall": wall, "measured": measured, "walls": walls})
    return rows


def report(title: str, rows: list[dict[str, Any]], estimated: dict[int, float] | None) -> None:
    print(f"\n{title}")
    print(
        f"{'executor':<8} {'shards':>6} {'wall s':>8} {'speedup':>8} {'balance est':>12} {'balance run':>12}"
        "  shard walls"
    )
    base = {r["executor"]: r["wall"] for r in rows if r["shards"] == 1}
    base.setdefault("ray", base["local"])
    for r in rows:
        est = f"{estimated[r['shards']]:.3f}" if estimated else "-"
        walls = ", ".join(f"{w:.1f}" for w in r["walls"])
        print(
            f"{r['executor']:<8} {r['shards']:>6} {r['wall']:>8.1f} {base[r['executor']] / r['wall']:>7.2f}x "
            f"{est:>12} {r['measured']:>12.3f}  {walls}"
        )
    local = {r["shards"]: r["wall"] for r in rows if r["executor"] == "local"}
    for r in rows:
        if r["executor"] == "ray":
            extra = r["wall"] - local[r["shards"]]
            print(
                f"ray fixed cost with {r['shards']} shard(s): {extra:+.1f} s in all, "
                f"{extra / r['shards']:+.1f} s per shard"
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=24.0, help="sum of the synthetic tests' durations")
    ap.add_argument("--no-ray", action="store_true", help="local shards only")
    ap.add_argument("--cpu-suites", metavar="PYTHON", help="also the cpu row's suites, with this interpreter")
    args = ap.parse_args()
    counts = [1, 2, 4]
    print(f"cores here: {os.cpu_count()}")
    ray = None
    if not args.no_ray:
        try:
            import ray as _  # noqa: F401 - only to know whether it is there
        except ImportError:
            print("Ray is not installed: local shards only (pip install 'device-matrix[ray]')")
        else:
            ray = LocalRay(cpus=4)
            print(f"local Ray cluster up in {ray.startup:.1f} s (one node, num-cpus 4)")
    try:
        with tempfile.TemporaryDirectory(prefix="dm-shards-") as tmp:
            project = Path(tmp) / "synthetic"
            recorded = synthetic(project, args.tests, args.seconds)
            estimated = {n: balance(split(list(recorded), recorded, n), recorded) for n in counts}
            rows = run_ways(project, "bench", counts, ray, [])
            report(f"synthetic suite: {args.tests} tests, {args.seconds:.0f} s of recorded durations", rows, estimated)
            if args.cpu_suites:
                cpu_project = Path(tmp) / "cpu"
                shutil.copytree(ROOT / "suites", cpu_project / "suites")
                shutil.copy(ROOT / "pyproject.toml", cpu_project / "pyproject.toml")
                shutil.copy(ROOT / "device-matrix-issues.toml", cpu_project / "device-matrix-issues.toml")
                (cpu_project / "recorded").mkdir()
                first = run_ways(cpu_project, "cpu", [1], None, ["--python", args.cpu_suites])
                shutil.copytree(cpu_project / "results-local-1/cpu", cpu_project / "recorded/cpu")
                rows = first + run_ways(cpu_project, "cpu", [2, 4], ray, ["--python", args.cpu_suites])
                report("cpu suites (torch_xla on PJRT CPU)", rows, None)
    finally:
        if ray is not None:
            ray.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
