"""#30: triage's trends, flaky tests and slowdowns read the runs of the row's own selection,
as "what changed" does: a subset run (``--test``, ``-k``) is never read beside whole runs of
the row, nor a whole run beside subsets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK, EXIT_TESTS_FAILED
from tests import records as R

TESTS = [f"t.py::test_{i}" for i in range(4)]
SUBSET = "--test t.py::test_0"


def _run(outcome: str = "passed", *, selection: str | None = None, duration: float = 0.01) -> dict[str, Any]:
    picked = TESTS[:1] if selection else TESTS
    rec = R.record("cpu", [R.test(n, outcome if n == TESTS[0] else "passed", duration=duration) for n in picked])
    if selection is not None:
        rec["selection"] = selection
    return rec


class History:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.n = 0
        (root / "pyproject.toml").write_text("[tool.device-matrix.devices.cpu]\n")

    def triage(self, rec: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        results = self.root / f"r{self.n}"
        (results / "cpu").mkdir(parents=True)
        (results / "cpu" / "run.json").write_text(json.dumps(rec))
        args = ["--project", str(self.root), "triage", str(results), "--history", str(self.root / "h.sqlite")]
        assert main([*args, "--branch", "main"]) in (EXIT_OK, EXIT_TESTS_FAILED)
        history: dict[str, Any] = json.loads((results / "triage" / "triage.json").read_text())["history"]
        return history


def test_the_trend_of_a_whole_row_leaves_out_its_subset_runs(tmp_path: Path) -> None:
    h = History(tmp_path)
    h.triage(_run())
    h.triage(_run(selection=SUBSET))
    view = h.triage(_run())
    assert [p["counts"]["passed"] for p in view["trends"]["cpu"]] == [4, 4]  # not [4, 1, 4]
    subset = h.triage(_run(selection=SUBSET))
    assert [p["counts"]["passed"] for p in subset["trends"]["cpu"]] == [1, 1]


def test_a_test_is_not_flaky_by_runs_of_another_selection(tmp_path: Path) -> None:
    h = History(tmp_path)
    # it fails only when run alone (a subset); every whole run passes it
    for _ in range(3):
        h.triage(_run())
        h.triage(_run("failed", selection=SUBSET))
    view = h.triage(_run())
    assert view["flaky"] == []
    # the subset's own runs, read together, fail every time: not flaky either, and not mixed in
    alone = h.triage(_run("failed", selection=SUBSET))
    assert alone["flaky"] == []


def test_a_test_flaky_within_its_own_selection_is_still_flaky(tmp_path: Path) -> None:
    h = History(tmp_path)
    for outcome in ("passed", "failed", "passed", "failed"):
        h.triage(_run(outcome))
        h.triage(_run(selection=SUBSET))
    view = h.triage(_run())
    assert [(f["nodeid"], f["flips"]) for f in view["flaky"]] == [(TESTS[0], 4)]


def test_a_test_is_not_slower_than_runs_of_another_selection(tmp_path: Path) -> None:
    h = History(tmp_path)
    for _ in range(3):
        h.triage(_run(duration=1.0))
        h.triage(_run(selection=SUBSET, duration=9.0))  # alone it pays the warm-up
    assert h.triage(_run(duration=1.0))["slower"] == []
    assert h.triage(_run(selection=SUBSET, duration=9.5))["slower"] == []  # against its own 9 s
    slower = h.triage(_run(duration=4.0))["slower"]
    # slower than the whole row's own runs (1 s), not than the subset's
    assert sorted((s["nodeid"], s["median"]) for s in slower) == [(n, 1.0) for n in TESTS]
