#!/usr/bin/env python3
"""Crash recovery: 200 quick tests with 3 segfaults, four ways, side by side in one run.

Prints each way's wall time and how many test results it kept in a report:

* device-matrix run (resume after each crash; with and without crash reruns),
* bare pytest --junitxml (dies at the first crash: its report is never written),
* pytest -n 1 (pytest-xdist replaces the crashed worker),
* one pytest process per test.

Target: every result kept, wall time within 1.3x of pytest-xdist's.

    python bench/crash_recovery.py [--tests 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, clean_env, median_of, run_command, timed, write_project

SUITE = """
import ctypes

import pytest

CRASH_AT = {crash_at}


@pytest.mark.parametrize("i", range({n}))
def test_quick(i):
    if i in CRASH_AT:
        ctypes.string_at(0)
    assert i >= 0
"""


def junit_count(path: Path) -> int:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return 0
    return len(root.findall(".//testcase"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tests", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--skip-per-test", action="store_true", help="skip the slow one-process-per-test way")
    args = ap.parse_args()
    n = args.tests
    crash_at = {n // 4, n // 2, 3 * n // 4}
    with tempfile.TemporaryDirectory(prefix="dm-crash-") as tmp:
        project = Path(tmp)
        write_project(project, {"crashy/test_crashy.py": SUITE.format(n=n, crash_at=sorted(crash_at))})
        env = clean_env()
        target = "suites/crashy"
        ids = [f"suites/crashy/test_crashy.py::test_quick[{i}]" for i in range(n)]
        rows: dict[str, tuple[list[float], int]] = {}

        def ours(reruns: int) -> tuple[float, int]:
            res = project / f"results-{reruns}"
            t, _rc, _out = timed(run_command(PY, project, "bench", res, "--reruns", str(reruns)), cwd=project, env=env)
            rec = json.loads((res / "bench" / "run.json").read_text())
            return t, sum(1 for x in rec["tests"] if x["outcome"] != "not_run")

        def bare() -> tuple[float, int]:
            xml = project / "bare.xml"
            xml.unlink(missing_ok=True)
            t, _, _ = timed(
                [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", target], cwd=project, env=env
            )
            return t, junit_count(xml)

        def xdist() -> tuple[float, int]:
            xml = project / "xdist.xml"
            xml.unlink(missing_ok=True)
            t, _, _ = timed(
                [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", f"--junitxml={xml}", target],
                cwd=project,
                env=env,
            )
            return t, junit_count(xml)

        def per_test() -> tuple[float, int]:
            total, kept = 0.0, 0
            for k, nodeid in enumerate(ids):
                xml = project / f"one-{k}.xml"
                t, _, _ = timed(
                    [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}", nodeid],
                    cwd=project,
                    env=env,
                )
                total += t
                kept += junit_count(xml)
            return total, kept

        ways = {
            "device-matrix run (2 reruns)": lambda: ours(2),
            "device-matrix run (no reruns)": lambda: ours(0),
            "bare pytest": bare,
            "pytest -n 1 (xdist)": xdist,
        }
        for r in range(args.rounds):
            for name, fn in ways.items():
                t, kept = fn()
                rows.setdefault(name, ([], kept))[0].append(t)
                rows[name] = (rows[name][0], kept)
            print(f"round {r + 1} done", flush=True)
        if not args.skip_per_test:
            t, kept = per_test()
            rows["one process per test"] = ([t], kept)
        xd = median_of(rows["pytest -n 1 (xdist)"][0])
        print()
        print(f"{n} quick tests, 3 segfaults (at {sorted(crash_at)}); median wall of {args.rounds} round(s):")
        print(f"  {'way':<32} {'wall s':>8} {'vs xdist':>9} {'results kept':>13}")
        for name, (times, kept) in rows.items():
            w = median_of(times)
            print(f"  {name:<32} {w:8.2f} {w / xd:9.2f} {kept:>8}/{n}")
        print("  target: every result kept, device-matrix within 1.30x of xdist")
    return 0


if __name__ == "__main__":
    sys.exit(main())
