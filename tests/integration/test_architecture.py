"""The tests of this concept that start a process; the rest are in tests/unit/test_architecture.py (#41)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from tests.conftest import Project, clean_env
from tests.unit.test_architecture import _loads, _under


def test_triage_and_the_tracker_never_load_the_runner() -> None:
    # "Neither imports the runner"; "readers of results (triage, issues sync, merge) never
    # load the runner": not report/, issues/ or records/, on any path
    runner_side = ("device_matrix.run", "device_matrix.spread")
    for room in ("device_matrix.report", "device_matrix.issues", "device_matrix.records"):
        loaded = _loads(_under(room))
        assert not {m for m in loaded if m in runner_side or m.startswith(tuple(f"{r}." for r in runner_side))}, room
    # and the commands that read results, as they start
    code = (
        "import sys, device_matrix.cli.triage, device_matrix.cli.issues, device_matrix.cli.diagnose;"
        "import device_matrix.records.merge;"
        "print(sorted(m for m in sys.modules if m.startswith(('device_matrix.run.', 'device_matrix.spread'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), check=True)
    assert proc.stdout.strip() == "[]", proc.stdout


def test_the_runner_reads_disables_without_the_tracker_client() -> None:
    # #41: the runner reads a row's disables from the ledger (the default tracker); the
    # GitHub client and requests load only where the tracker is GitHub's
    code = (
        "import sys, device_matrix.run.runner;"
        "print(sorted(m for m in sys.modules if m in ('device_matrix.issues.client', 'device_matrix.issues.github',"
        " 'requests')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), check=True)
    assert proc.stdout.strip() == "[]", proc.stdout


def _plain_run(p: Project) -> tuple[int, list[str], str]:
    """A run of row ``fixture`` in a process of its own: its exit code, the modules of the
    package (and requests) it loaded, and what it printed."""
    code = (
        "import json, sys; from device_matrix.cli import main;"
        f"code = main(['--project', {str(p.root)!r}, 'run', '--no-gdb', '--device', 'fixture']);"
        "print(json.dumps([code, sorted(m for m in sys.modules if m.startswith(('device_matrix', 'requests')))]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=p.root, capture_output=True, text=True, env=clean_env(), check=False
    )
    exit_code, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    return exit_code, loaded, proc.stdout + proc.stderr


def test_a_plain_run_goes_from_the_command_line_to_the_runner_without_the_spread(
    project: Callable[..., Project],
) -> None:
    # #41: `run` crossed spread/ twice (driver.run_whole, door.run_part) for a row it did not
    # spread; a row without gangs runs whole through run/whole.py, and its record is the same
    p = project("passing")
    exit_code, loaded, said = _plain_run(p)
    spread = [m for m in loaded if m.startswith("device_matrix.spread")]
    assert (exit_code, spread) == (0, []), said
    record = json.loads((p.results / "fixture" / "run.json").read_text())
    assert record["status"] == "passed" and "spread" not in record


# what a run that selects nothing, on a project without a tracker of its own, has no use for
NOT_FOR_A_PLAIN_RUN = (
    "device_matrix.selection",  # the selection engine (--select)
    "device_matrix.changes.importgraph",
    "device_matrix.changes.namereads",
    "device_matrix.cli.select",
    "device_matrix.report",  # triage's reports and the run history
    "device_matrix.issues.client",  # the GitHub tracker's client
    "device_matrix.issues.github",
    "requests",
)


def test_a_plain_run_loads_no_selection_report_or_tracker_client(project: Callable[..., Project]) -> None:
    # #41 "load what a command uses": a run without --select loaded the selection engine, the
    # import graph and the name reader (cli/select.py held the options' checks too), and the
    # run history's module and its report models to name one path after every run
    exit_code, loaded, said = _plain_run(project("passing"))
    assert exit_code == 0, said
    assert "device_matrix.run.runner" in loaded  # the listing is of the run that ran
    below = tuple(f"{name}." for name in NOT_FOR_A_PLAIN_RUN)
    unused = [m for m in loaded if m in NOT_FOR_A_PLAIN_RUN or m.startswith(below)]
    assert not unused, unused
