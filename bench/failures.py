#!/usr/bin/env python3
"""A red run at scale (#32): N failing trivial tests through `device-matrix run` against
plain `pytest --junitxml` on the same tests, then `device-matrix triage` over the record.

Prints, in one run: both walls and their ratio (target: at most 1.10), and their CPU
seconds (what a busy machine does not blur), the sizes of the record's files (run.json,
report.json, junit.xml, output.log, and the attempt's journal copy) against the bare
run's junit.xml, triage's wall time and peak resident memory, the sizes of triage.html
(target: at most 5 MB at 20,000 failures) and triage.json, and how many failure groups
the report leads with. The tests fail in 4 causes, each message with its own temp path.

    python bench/failures.py                  # 20,000 failing tests
    python bench/failures.py --tests 3000     # a busy machine
    python bench/failures.py --rounds 3       # alternating rounds, medians (a shared machine)
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import clean_env, run_command, timed, write_project

FAILING = """
import pytest

CAUSES = [
    lambda i, p: OSError(f"We couldn't connect to 'https://hub.example:{{40000 + i}}' for {{p}}/config.json"),
    lambda i, p: RuntimeError(f"shape mismatch at {{hex(id(p))}}: [{{i}}, 128] against [{{i}}, 64]"),
    lambda i, p: FileNotFoundError(f"No such file or directory: '{{p}}/weights-{{i}}.bin'"),
    lambda i, p: AssertionError(f"diverged after {{i}} steps"),
]


@pytest.mark.parametrize("i", range({n}))
def test_failing(i, tmp_path):
    raise CAUSES[i % 4](i, tmp_path)
"""

# runs the command given as arguments; prints its wall time and peak RSS (MB) as JSON
MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc.returncode, "wall": time.perf_counter() - start, "peak_mb": usage.ru_maxrss / 1024,
                  "stderr": rc.stderr.decode()[-2000:]}))
"""


def _cpu() -> float:
    """CPU seconds of the children waited for so far (a run's own children with it)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _mb(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:8.2f} MB" if path.is_file() else "  absent"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=20_000)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds of both; their medians are compared")
    args = ap.parse_args()
    env = clean_env()
    with tempfile.TemporaryDirectory(prefix="dm-failures-") as tmp:
        project = Path(tmp) / "project"
        write_project(project, {"red/test_red.py": FAILING.format(n=args.tests)})
        bare_junit = Path(tmp) / "junit.xml"
        bare_cmd = [args.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={bare_junit}"]
        results = Path(tmp) / "results"
        bares, ourses, bare_cpus, our_cpus = [], [], [], []
        for i in range(args.rounds):
            cpu = _cpu()
            t, rc, out = timed([*bare_cmd, "suites/red"], cwd=project, env=env)
            if rc != 1:
                raise SystemExit(f"pytest should fail every test ({rc}):\n{out[-2000:]}")
            bares.append(t)
            bare_cpus.append(_cpu() - cpu)
            cpu = _cpu()
            t, rc, out = timed(run_command(args.python, project, "bench", results), cwd=project, env=env)
            if rc == 0 or not (results / "bench" / "run.json").is_file():
                raise SystemExit(f"device-matrix run did not record a red row ({rc}):\n{out[-2000:]}")
            ourses.append(t)
            our_cpus.append(_cpu() - cpu)
            print(f"round {i + 1}: pytest --junitxml {bares[-1]:.2f} s, device-matrix run {ourses[-1]:.2f} s")
        bare, ours = statistics.median(bares), statistics.median(ourses)
        bare_cpu, our_cpu = statistics.median(bare_cpus), statistics.median(our_cpus)
        triage_out = Path(tmp) / "triage"
        measure = [args.python, "-c", MEASURE, args.python, "-m", "device_matrix", "--project", str(project)]
        cmd = [*measure, "triage", str(results), "--out", str(triage_out), "--no-history"]
        _, _, printed = timed(cmd, cwd=project, env=env)
        triage = json.loads(printed.strip().splitlines()[-1])
        if not (triage_out / "triage.json").is_file():
            raise SystemExit(f"triage wrote no report ({triage['rc']}):\n{triage['stderr']}")
        groups = json.loads((triage_out / "triage.json").read_text())["groups"]

        print(f"{args.tests} failing trivial tests, 4 causes")
        print(f"  pytest --junitxml      {bare:8.2f} s   (median of {args.rounds})")
        print(f"  device-matrix run      {ours:8.2f} s   ratio {ours / bare:.3f} (target 1.10)")
        print(f"  CPU: pytest {bare_cpu:.2f} s, device-matrix {our_cpu:.2f} s   ratio {our_cpu / bare_cpu:.3f}")
        print("records:")
        print(f"  bare junit.xml         {_mb(bare_junit)}")
        for name in ("run.json", "report.json", "junit.xml", "output.log", "attempts/01/journal.jsonl"):
            print(f"  {name:<22} {_mb(results / 'bench' / name)}")
        print("triage (--no-history):")
        print(f"  wall                   {triage['wall']:8.2f} s")
        print(f"  peak RSS               {triage['peak_mb']:8.0f} MB")
        print(f"  triage.html            {_mb(triage_out / 'triage.html')} (target 5 MB)")
        print(f"  triage.json            {_mb(triage_out / 'triage.json')}")
        print(f"  failure groups         {len(groups):8d}   ({', '.join(str(g['count']) for g in groups)} tests)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
