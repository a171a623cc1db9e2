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
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, clean_env, median_of, run_command, timed

# unit tests in the process, and tests that start device-matrix and pytest processes
OWN_TESTS = [
    "tests/test_config.py",
    "tests/test_redact.py",
    "tests/test_report_history.py",
    "tests/test_merge.py",
    "tests/test_diagnostics.py",
    "tests/test_triage.py",
    "tests/test_collection.py",
    "tests/test_cli.py",
]
SUITES = ["accumulation", "mlp", "collectives"]
TARGET = 1.30


def _map_size(results: Path, row: str) -> str:
    """The map the run wrote, in words: tests and files (so an empty one shows)."""
    path = results / row / "test-map.json"
    if not path.is_file():
        raise SystemExit(f"the run with --record-map wrote no {path}")
    data = json.loads(path.read_text())
    return f"{len(data['tests'])} tests over {len(data['files'])} files"


def _compare(
    label: str, row: str, extra: list[str], *, python: str, rounds: int, env: dict[str, str]
) -> tuple[float, float]:
    plain, mapped = [], []
    for i in range(rounds):
        for record_map, times in ((False, plain), (True, mapped)):
            with tempfile.TemporaryDirectory(prefix="dm-map-") as tmp:
                results = Path(tmp) / "results"
                cmd = run_command(
                    python, ROOT, row, results, "--local", *extra, *(["--record-map"] if record_map else [])
                )
                t, rc, out = timed(cmd, cwd=ROOT, env=env)
                if rc not in (0, 1):
                    raise SystemExit(f"device-matrix run failed ({rc}):\n{out[-3000:]}")
                times.append(t)
                size = _map_size(results, row) if record_map else ""
        print(f"{label} round {i + 1}: without the map {plain[-1]:.2f}s   with it {mapped[-1]:.2f}s ({size})")
    return median_of(plain), median_of(mapped)


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
        rows.append((f"the cpu suites: skipped, {problem}", 0.0, 0.0))

    print()
    print("side by side, medians:")
    print(f"  {'over':<44} {'without the map':>16} {'--record-map':>13} {'ratio':>7} {'target':>7}")
    for what, b, m in rows:
        if b:
            print(f"  {what:<44} {b:>15.2f}s {m:>12.2f}s {m / b:>7.3f} {TARGET:>7.2f}")
        else:
            print(f"  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
