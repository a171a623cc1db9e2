#!/usr/bin/env python3
"""What a command loads, and the fixed cost of a one-test run, before and after a change.

For this tree and the tree of a git ref (``--before``, default ``HEAD``), side by side:
the package's modules a `device-matrix run` of one test loads (of the package's modules
in that tree), those `device-matrix triage` loads, and the wall time of the one-test run
(median of ``--rounds``, the two trees alternating round by round).

    python bench/startup.py                         # this tree against HEAD
    python bench/startup.py --before main --rounds 9
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PY, ROOT, clean_env, median_of, run_command, write_project

ONE_TEST = "def test_one():\n    assert 1 + 1 == 2\n"
# device-matrix as its console script runs it, then the package's modules it loaded, one a line
PROBE = """
import atexit, runpy, sys

LISTING = sys.argv.pop(1)

def loaded():
    names = sorted(m for m in sys.modules if m == "device_matrix" or m.startswith("device_matrix."))
    with open(LISTING, "w") as f:
        f.write("\\n".join(names))

atexit.register(loaded)
runpy.run_module("device_matrix", run_name="__main__", alter_sys=True)
"""


def export(ref: str, into: Path) -> Path:
    """The package of ``ref``'s tree, written under ``into``."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", ref, "device_matrix"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def modules(tree: Path, argv: list[str], work: Path) -> list[str]:
    """The package's modules a command (``argv``, after ``python -m device_matrix``) loads from ``tree``."""
    listing = work / "modules.txt"
    probe = [PY, "-c", PROBE, str(listing), *argv[3:]]
    env = clean_env(PYTHONPATH=str(tree))
    proc = subprocess.run(probe, cwd=work, env=env, capture_output=True, text=True, check=False)
    if not listing.exists():
        raise SystemExit(f"{tree}: {' '.join(argv[3:])} ended {proc.returncode}: {proc.stderr[-2000:]}")
    return listing.read_text().split()


def one_run(tree: Path, project: Path, results: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        run_command(PY, project, "bench", results),
        cwd=project,
        env=clean_env(PYTHONPATH=str(tree)),
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - start
    if proc.returncode != 0:
        said = proc.stdout[-2000:] + proc.stderr[-2000:]
        raise SystemExit(f"{tree}: the one-test run ended {proc.returncode}: {said}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="HEAD", help="the git ref to compare with (default HEAD)")
    parser.add_argument("--rounds", type=int, default=5, help="one-test runs of each tree (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="dm-startup-") as tmp:
        work = Path(tmp)
        trees = {f"before ({args.before})": export(args.before, work / "before"), "after (this tree)": ROOT}
        project = work / "project"
        write_project(project, {"one/test_one.py": ONE_TEST})
        results = work / "results"
        run = run_command(PY, project, "bench", str(results))
        triage = [PY, "-m", "device_matrix", "--project", str(project), "triage", str(results), "--no-history"]
        times: dict[str, list[float]] = {label: [] for label in trees}
        for _ in range(args.rounds):
            for label, tree in trees.items():
                times[label].append(one_run(tree, project, results))
        rows = []
        for label, tree in trees.items():
            total = len(list((tree / "device_matrix").rglob("*.py")))
            loaded_run = modules(tree, run, work)
            loaded_triage = modules(tree, triage, work)
            took = f"{median_of(times[label]):.2f} (min {min(times[label]):.2f})"
            rows.append((label, f"{len(loaded_run)} of {total}", f"{len(loaded_triage)}", took))
    head = ("tree", "modules a run loads", "modules triage loads", f"one-test run, s (median of {args.rounds})")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for row in [head, tuple("-" * w for w in widths), *rows]:
        print(" | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
