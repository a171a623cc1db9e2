"""Integration: faults found in review of the rebuilt runner; each made the record lie or the run fail."""

from __future__ import annotations

import json
import os
import signal
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow


def _outcomes(record: dict[str, Any]) -> dict[str, str]:
    return {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}


def _suite(p: Project, name: str, files: dict[str, str]) -> None:
    """A suite of its own, written into the project; the row runs only it."""
    folder = p.root / "suites" / name
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    text = (p.root / "pyproject.toml").read_text()
    (p.root / "pyproject.toml").write_text(text.replace('suites = ["passing"]', f'suites = ["{name}"]'))


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


# --- 1. a grandchild that clears its environment and leaves the session --------------

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


def test_processes_that_leave_the_attempt_unmarked_are_ended_and_reaped(
    project: Callable[..., Project], escapees: Path
) -> None:
    p = project("passing", row='isolation = "file"')
    _suite(p, "escape", {"test_a_escape.py": ESCAPE, "test_b_look.py": LOOK})
    proc = p.run("run", "--device", "fixture", env={"ESCAPE_PIDS": str(escapees)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pids = {f.name: int(f.read_text()) for f in escapees.glob("pid-*")}
    assert set(pids) == {"pid-background", "pid-double", "pid-short"}
    # while the run went on (the next attempt), nothing of the first was left, not even a zombie
    seen = json.loads((escapees / "seen.json").read_text())
    assert seen == {"left": dict.fromkeys(pids), "zombies": []}
    assert {name: _state(pid) for name, pid in pids.items()} == dict.fromkeys(pids)


# --- 2. a forked copy of the test process that returns into pytest -------------------

FORK = """
import os
from pathlib import Path


def _note(name):
    with Path(os.environ["RAN"]).open("a") as fh:
        fh.write(f"{name} {os.getpid()}\\n")


def test_a_before():
    _note("a")


def test_b_forks():
    pid = os.fork()
    if pid == 0:
        return  # no os._exit(): the copy goes on into pytest
    os.waitpid(pid, 0)


def test_c_after():
    _note("c")
"""


def test_a_forked_copy_that_returns_into_pytest_is_ended_and_named(
    project: Callable[..., Project], tmp_path: Path
) -> None:
    p = project("passing")
    _suite(p, "fork", {"test_fork.py": FORK})
    ran = tmp_path / "ran.txt"
    proc = p.run("run", "--device", "fixture", "--reruns", "0", env={"RAN": str(ran)})
    record = p.record()
    assert record["crashes"] == [], proc.stdout
    assert _outcomes(record) == {"test_a_before": "passed", "test_b_forks": "error", "test_c_after": "passed"}
    (forked,) = [t for t in record["tests"] if t["nodeid"].endswith("test_b_forks")]
    assert "os._exit" in forked["message"]
    # test_c ran once, in the real process only
    assert [line.split()[0] for line in ran.read_text().splitlines()] == ["a", "c"]
    assert len({line.split()[1] for line in ran.read_text().splitlines()}) == 1
    log = (p.results / "fixture" / "output.log").read_text()
    assert "suites/fork/test_fork.py::test_b_forks" in log and "forked" in log
    assert proc.returncode == 1


# --- 3. the runner ends a child whose journal broke: the record says so ----------------

BREAK = """
import os, time


def test_a_before():
    pass


def test_b_breaks_the_journal_and_waits():
    for fd in sorted(int(x) for x in os.listdir("/proc/self/fd")):
        if fd >= 1000:
            try:
                os.write(fd, b"not json\\n")
            except OSError:
                pass
    time.sleep(60)


def test_c_after():
    pass
"""


def test_a_child_ended_for_its_broken_journal_is_not_blamed_on_someone_else(project: Callable[..., Project]) -> None:
    p = project("passing")
    _suite(p, "broken", {"test_broken.py": BREAK})
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = record["crashes"]
    assert crash["nodeid"].endswith("::test_b_breaks_the_journal_and_waits")
    hint = crash["diagnosis"]["hint"] or ""
    assert "device-matrix ended" in hint and "journal broke" in hint, hint
    assert "from outside" not in hint
    assert _outcomes(record)["test_c_after"] == "passed"


# --- 4. a test that deletes the results folder ---------------------------------------

DELETE = """
import os, shutil


def test_a_before():
    pass


def test_b_deletes():
    shutil.rmtree(os.environ["DELETE"])


def test_c_aborts():
    os.abort()


def test_d_after():
    pass
"""


@pytest.mark.parametrize("target", ["results/fixture", "results/fixture/attempts"])
def test_a_deleted_results_folder_still_gets_a_truthful_record(project: Callable[..., Project], target: str) -> None:
    p = project("passing")
    _suite(p, "delete", {"test_delete.py": DELETE})
    proc = p.run("run", "--device", "fixture", "--reruns", "0", env={"DELETE": target})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    record = p.record()
    assert _outcomes(record) == {
        "test_a_before": "passed",
        "test_b_deletes": "passed",
        "test_c_aborts": "crashed",
        "test_d_after": "passed",
    }
    reason = record["reason"] or ""
    assert "deleted while attempt 1 ran" in reason, reason
    assert "attempts/01" in reason
    # the lock is held again for the rest of the run, by this runner
    assert (p.results / "fixture" / ".lock").read_text().strip() == str(record["runner_pid"])
    assert (p.results / "fixture" / "junit.xml").is_file()


# --- 5. a selection that selects nothing ---------------------------------------------


@pytest.mark.parametrize(
    ("args", "isolation"),
    [
        (["--", "-k", "nomatch"], "row"),
        (["--test", "suites/passing/test_passing.py::test_nope"], "row"),
        # collected first, then a process per file: the collection is what selected nothing
        (["--", "-k", "nomatch"], "file"),
    ],
)
def test_a_selection_of_nothing_is_a_wrong_command_line(
    project: Callable[..., Project], args: list[str], isolation: str
) -> None:
    p = project("passing", row=f'isolation = "{isolation}"')
    proc = p.run("run", "--device", "fixture", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "selected no test" in proc.stderr and "TIP" in proc.stderr
    record = p.record()
    assert record["status"] == "error" and record["tests"] == []
    assert "selected no test" in (record["reason"] or "")


@pytest.mark.parametrize("isolation", ["row", "file"])
def test_a_suite_that_collects_nothing_is_not_a_wrong_command_line(
    project: Callable[..., Project], isolation: str
) -> None:
    p = project("passing", row=f'isolation = "{isolation}"')
    _suite(p, "empty", {"test_empty.py": "VALUE = 1\n"})
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "failed" and "no tests collected" in (record["reason"] or "")
    assert "selected no test" not in (record["reason"] or "")


# --- 6. a conftest.py that kills the interpreter on import ---------------------------


def test_a_conftest_that_crashes_on_import_is_named(project: Callable[..., Project]) -> None:
    p = project("passing")
    _suite(
        p,
        "conftest_crash",
        {
            "test_fine.py": "def test_fine():\n    pass\n",
            "sub/conftest.py": "import os\n\nos.abort()\n",
            "sub/test_under.py": "def test_under():\n    pass\n",
        },
    )
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    record = p.record()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = record["crashes"]
    assert crash["phase"] == "collection"
    assert crash["nodeid"] == "suites/conftest_crash/sub/conftest.py"
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes["suites/conftest_crash/test_fine.py::test_fine"] == "passed"
    assert outcomes["suites/conftest_crash/sub/conftest.py"] == "crashed"


# --- 7. a refused run never leaves the previous record looking current ---------------


@pytest.mark.parametrize(
    ("args", "code"),
    [(["--", "-n", "2"], 2), (["--python", "/nonexistent/python3"], 5), (["--suite", "nope"], 3)],
)
def test_a_refused_run_replaces_the_record_with_its_refusal(
    project: Callable[..., Project], args: list[str], code: int
) -> None:
    p = project("passing")
    assert p.run("run", "--device", "fixture").returncode == 0
    earlier = p.record()["runner_pid"]
    proc = p.run("run", "--device", "fixture", *args)
    assert proc.returncode == code, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "error" and record["tests"] == []
    assert record["reason"].startswith("refused") and f"exit {code}" in record["reason"]
    assert record["runner_pid"] != earlier  # this run's record, not the one before
    junit = ET.parse(p.results / "fixture" / "junit.xml").getroot()
    assert [e.get("message") for e in junit.iter("error")] == [record["reason"]]


# --- 8. junit.xml of a row that failed with no test ------------------------------------


def test_junit_of_a_row_that_crashed_before_any_test_carries_the_reason(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / "suites" / "passing" / "conftest.py").write_text("import os\n\nos.abort()\n")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    assert record["tests"] == [] and record["status"] == "crashed"
    suite = ET.parse(p.results / "fixture" / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("errors")) == ("1", "1")
    (error,) = suite.iter("error")
    assert error.get("message") == record["reason"]
    assert "SIGABRT" in (error.text or "")


# --- 9. the progress counter counts the scripts too ----------------------------------

SCRIPT = """import unittest


class T(unittest.TestCase):
    def test_one(self):
        pass


if __name__ == "__main__":
    unittest.main()
"""


def test_the_progress_total_counts_the_scripts(project: Callable[..., Project]) -> None:
    p = project("passing")
    _suite(p, "one", {"test_one.py": "def test_only():\n    pass\n"})
    (p.root / "scripts").mkdir()
    (p.root / "scripts" / "test_script.py").write_text(SCRIPT)
    text = (p.root / "pyproject.toml").read_text()
    (p.root / "pyproject.toml").write_text(
        text + '\n[[tool.device-matrix.devices.fixture.scripts]]\nfile = "scripts/test_script.py"\n'
    )
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    counters = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("fixture [")]
    assert counters == ["[1/1]", "[2/2]"]


def test_a_conftest_that_crashes_before_pytest_configures_is_in_the_crash_stack(
    project: Callable[..., Project],
) -> None:
    # the folder named on the command line: its conftest.py is imported before any plugin
    # is configured, so the journal has nothing yet; the Python stack still names it
    p = project("passing")
    conftest = "import os\n\n\ndef boom():\n    os.abort()\n\n\nboom()\n"
    (p.root / "suites" / "passing" / "conftest.py").write_text(conftest)
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = p.record()["crashes"]
    assert crash["diagnosis"]["signal_name"] == "SIGABRT"
    stack = crash["diagnosis"]["python_stack"] or ""
    assert "suites/passing/conftest.py" in stack and "boom" in stack, crash["diagnosis"]
