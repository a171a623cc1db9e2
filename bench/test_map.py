#!/usr/bin/env python3
"""Cost of recording the test map (#34): `device-matrix run --record-map` against the same
run without it, over the same tests.

Both ratios from one run, each measured side by side (alternating rounds, medians):

- a sample of this repository's own test files (OWN_TESTS: unit tests in the process and
  tests that start device-matrix and pytest processes, about a minute and a half), which
  run device-matrix's own code, all of it measured (target: at most 1.30);
- the cpu suites (without the row's gangs, which are no pytest tests and record no map),
  when an interpreter with torch_xla and coverage is at hand (target: at most 1.30);
  without one that line says why it is missing.

Each line says how many tests the map has and over how many files, so a map that recorded
nothing cannot pass for a cheap one.

    python bench/test_map.py                                   # both, 3 rounds
    python bench/test_map.py --rounds 5
    python bench/test_map.py --suites-python .nox/cpu/bin/python
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, clean_env, median_of, run_command, timed

# unit tests in the process, and tests that start device-matrix and pytest processes
OWN_TESTS = [
    "tests/unit/test_config.py",
    "tests/unit/test_redact.py",
    "tests/unit/test_report_history.py",
    "tests/integration/test_report_history.py",
    "tests/unit/test_merge.py",
    "tests/unit/test_diagnostics.py",
    "tests/unit/test_triage.py",
    "tests/integration/test_triage.py",
    "tests/integration/test_collection.py",
    "tests/integration/test_cli.py",
]
SUITES = ["accumulation", "mlp", "collectives"]
TARGET = 1.30


def _map_size(results: Path, row: str) -> str:
    """The map the run wrote, in words: tests and files (so an empty one shows)."""
    path = results / row / "test-map.json"
    if not path.is_file():
        raise SystemExit(f"the run with --record-map wrote no {path}")
    data = json.loads(path.read_text())
    return f"map: {len(data['tests'])} tests over {len(data['files'])} files"


def _outcomes(results: Path, row: str) -> str:
    """What the run's tests did, in words: a run that broke cannot pass for a fast one."""
    counts = Counter(t["outcome"] for t in json.loads((results / row / "run.json").read_text())["tests"])
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items()))


def _cpu() -> float:
    """CPU seconds of every child process waited for so far (theirs waited for too): on a
    shared host, less moved by the other load than the wall clock."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


Sample = tuple[float, float]  # wall seconds, CPU seconds


def _compare(
    label: str, row: str, extra: list[str], *, python: str, rounds: int, env: dict[str, str]
) -> tuple[Sample, Sample]:
    plain: list[Sample] = []
    mapped: list[Sample] = []
    for i in range(rounds):
        said = []
        for record_map, samples in ((False, plain), (True, mapped)):
            with tempfile.TemporaryDirectory(prefix="dm-map-") as tmp:
                results = Path(tmp) / "results"
                flag = ["--record-map"] if record_map else []
                cpu = _cpu()
                t, rc, out = timed(run_command(python, ROOT, row, results, "--local", *extra, *flag), cwd=ROOT, env=env)
                if rc not in (0, 1):
                    raise SystemExit(f"device-matrix run failed ({rc}):\n{out[-3000:]}")
                samples.append((t, _cpu() - cpu))
                said.append(_outcomes(results, row) + ("; " + _map_size(results, row) if record_map else ""))
        print(
            f"{label} round {i + 1}: without the map {plain[-1][0]:.2f}s ({plain[-1][1]:.2f}s CPU; {said[0]})"
            f"   with it {mapped[-1][0]:.2f}s ({mapped[-1][1]:.2f}s CPU; {said[1]})",
            flush=True,
        )
    return _medians(plain), _medians(mapped)


def _medians(samples: list[Sample]) -> Sample:
    return median_of([s[0] for s in samples]), median_of([s[1] for s in samples])


def _suites_python_problem(python: str) -> str | None:
    if not Path(python).exists():
        return f"no interpreter {python}"
    probe = subprocess.run(
        [python, "-c", "import torch_xla, coverage"], capture_output=True, text=True, check=False, timeout=600
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        return f"{python} cannot import torch_xla and coverage ({last})"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default=sys.executable, help="interpreter for this repository's tests")
    ap.add_argument(
        "--suites-python",
        default=str(ROOT / ".nox" / "cpu" / "bin" / "python"),
        help="interpreter with torch_xla and coverage for the cpu suites (default: the cpu row's nox venv)",
    )
    ap.add_argument("--suite-rounds", type=int, default=1)
    args = ap.parse_args()

    rows = []
    own = [word for test in OWN_TESTS for word in ("--test", test)]
    # the repository's tests as its own CI runs them: hypothesis's plugin off in the processes they start
    env = clean_env(PYTEST_ADDOPTS="-p no:hypothesispytest")
    b, m = _compare("own tests", "cpu", own, python=args.python, rounds=args.rounds, env=env)
    rows.append((f"this repository's tests ({len(OWN_TESTS)} files)", b, m))
    problem = _suites_python_problem(args.suites_python)
    if problem is None:
        suites = [word for suite in SUITES for word in ("--suite", suite)]
        env = clean_env(PJRT_DEVICE="CPU", CPU_NUM_DEVICES="4")
        b, m = _compare("cpu suites", "cpu", suites, python=args.suites_python, rounds=args.suite_rounds, env=env)
        rows.append(("the cpu suites (torch_xla on CPU)", b, m))
    else:
        rows.append((f"the cpu suites: skipped, {problem}", (0.0, 0.0), (0.0, 0.0)))

    print()
    print("side by side, medians (wall clock; CPU seconds of the processes, less moved by a busy host):")
    print(f"  {'over':<44} {'without the map':>16} {'--record-map':>13} {'ratio':>7} {'CPU ratio':>10} {'target':>7}")
    for what, (b, b_cpu), (m, m_cpu) in rows:
        if b:
            ratios = f"{m / b:>7.3f} {m_cpu / b_cpu:>10.3f}"
            print(f"  {what:<44} {b:>15.2f}s {m:>12.2f}s {ratios} {TARGET:>7.2f}")
        else:
            print(f"  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
