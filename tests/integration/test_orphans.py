"""Nothing an attempt starts or leaves outlives it: processes that hide, zombies, core files in any folder."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.runs import is_alive, outcomes_of, write_suite

pytestmark = pytest.mark.slow


def _state(pid: int) -> str | None:
    """The process's state letter (Z: a zombie), or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


@pytest.fixture
def escapees(tmp_path: Path) -> Iterator[Path]:
    """A folder where tests note the pids they leave behind; whatever is left is killed after."""
    folder = tmp_path / "pids"
    folder.mkdir()
    yield folder
    for f in folder.iterdir():
        if not (f.name.startswith("pid-") and f.read_text().strip().isdigit()):
            continue
        pid = int(f.read_text())
        try:
            # only a sleep the test left: a pid freed by the runner may be another's by now
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0"):
                os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


ESCAPE = """
import os, subprocess
from pathlib import Path

PIDS = Path(os.environ["ESCAPE_PIDS"])


def _escape(name, script):
    # env -i: no DEVICE_MATRIX_ATTEMPT to be found by; setsid: out of the group and session
    subprocess.run(["env", "-i", "setsid", "sh", "-c", script.replace("FILE", str(PIDS / name))], check=True)


def test_a_leaves_processes_that_hide():
    _escape("pid-background", "sleep 300 & echo $! > FILE")
    # a double fork: the subshell exits, its child setsid()s again
    _escape("pid-double", "(setsid sleep 300 & echo $! > FILE) & wait")
    # one that ends on its own: an orphan that must not stay a zombie
    _escape("pid-short", "sleep 0.2 & echo $! > FILE")
"""


LOOK = """
import json, os, time
from pathlib import Path

PIDS = Path(os.environ["ESCAPE_PIDS"])


def _state(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def test_b_looks_around():
    time.sleep(0.5)  # the short one has ended by now
    runner = os.getppid()
    left = {}
    for f in PIDS.glob("pid-*"):
        state = _state(int(f.read_text()))
        left[f.name] = state[0] if state else None
    zombies = []
    for entry in Path("/proc").iterdir():
        state = _state(int(entry.name)) if entry.name.isdigit() else None
        if state and state[0] == "Z" and int(state[1]) == runner:
            zombies.append(int(entry.name))
    (PIDS / "seen.json").write_text(json.dumps({"left": left, "zombies": zombies}))
"""


def test_nothing_of_an_attempt_outlives_it(project: Callable[..., Project], tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    p = project("grandchild")
    proc = p.run("run", "--device", "fixture", env={"GRANDCHILD_PIDS": str(pids)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    left = {f.name: int(f.read_text()) for f in pids.iterdir()}
    assert set(left) == {"stubborn", "detached"}
    assert [name for name, pid in left.items() if is_alive(pid)] == []


def test_processes_that_leave_the_attempt_unmarked_are_ended_and_reaped(
    project: Callable[..., Project], escapees: Path
) -> None:
    p = project("passing", row='isolation = "file"')
    write_suite(p, "escape", {"test_a_escape.py": ESCAPE, "test_b_look.py": LOOK})
    proc = p.run("run", "--device", "fixture", env={"ESCAPE_PIDS": str(escapees)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pids = {f.name: int(f.read_text()) for f in escapees.glob("pid-*")}
    assert set(pids) == {"pid-background", "pid-double", "pid-short"}
    # while the run went on (the next attempt), nothing of the first was left, not even a zombie
    seen = json.loads((escapees / "seen.json").read_text())
    assert seen == {"left": dict.fromkeys(pids), "zombies": []}
    assert {name: _state(pid) for name, pid in pids.items()} == dict.fromkeys(pids)


def test_tests_run_from_the_project_root_and_leave_no_core(project: Callable[..., Project], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    p = project("cwd_abort")
    shutil_data = p.root / "suites" / "cwd_abort" / "data"
    (p.root / "data").mkdir()
    (p.root / "data" / "input.txt").write_text((shutil_data / "input.txt").read_text())
    proc = p.run("run", "--device", "fixture", "--no-gdb", "--reruns", "0", env={"CWD_ABORT_DIR": str(elsewhere)})
    record = p.record()
    outcomes = outcomes_of(record)
    assert outcomes["test_a_reads_a_file_relative_to_the_root"] == "passed", proc.stdout
    assert outcomes["test_b_moves_away_and_aborts"] == "crashed"
    assert outcomes["test_c_after"] == "passed"
    assert "../" not in (p.results / "fixture" / "output.log").read_text()
    assert list(elsewhere.iterdir()) == []
    assert not list(p.root.glob("core*"))
    assert not list((p.results / "fixture").rglob("core*"))
