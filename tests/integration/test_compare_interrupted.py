"""#39 (5): compare ended by SIGTERM while a plain run is going ends every process of that
run (its multiprocessing workers too) and leaves on disk the verdict of each invocation it
had compared."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import clean_env
from tests.integration.test_compare import _project
from tests.integration.test_compare_daemons import _alive

pytestmark = pytest.mark.slow

QUICK = """import unittest


class TestQuick(unittest.TestCase):
    def test_quick(self):
        pass


if __name__ == "__main__":
    unittest.main()
"""

# a unittest file whose test starts a worker by multiprocessing's spawn (which starts a
# resource_tracker too, in its process group) that leaves the group (setsid: only the
# adoption of orphans finds it), each writing its pid, then waits
WORKERS = """import multiprocessing
import multiprocessing.resource_tracker as tracker
import os
import sys
import time
import unittest


def note(pid):
    with open(os.environ["PIDS_FILE"], "a") as fh:
        fh.write(f"{pid}\\n")


def wait():
    os.setsid()
    note(os.getpid())
    time.sleep(600)


class TestWorkers(unittest.TestCase):
    def test_waits_beside_a_worker(self):
        multiprocessing.get_context("spawn").Process(target=wait).start()
        tracker.ensure_running()
        note(tracker._resource_tracker._pid)
        time.sleep(600)


if __name__ == "__main__":
    unittest.main()
"""


QUICK_ENTRY = '[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/test_quick.py"\n'


# first: compare has run nothing through device-matrix yet, nothing else made it adopt orphans
@pytest.mark.parametrize("before", [[QUICK_ENTRY], []], ids=["second", "first"])
def test_sigterm_during_a_plain_run_ends_its_processes_and_keeps_the_verdicts_so_far(
    tmp_path: Path, before: list[str]
) -> None:
    pids = tmp_path / "pids.txt"
    scripts = "".join(before) + (
        '[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/test_workers.py"\n'
        f'env = {{ PIDS_FILE = "{pids}" }}\n'
    )
    root = _project(tmp_path, scripts)
    (root / "test" / "test_quick.py").write_text(QUICK)
    (root / "test" / "test_workers.py").write_text(WORKERS)
    compare = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(root), "compare", "--device", "fixture"],
        cwd=root,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while not (pids.exists() and len(pids.read_text().split()) == 2) and time.monotonic() < deadline:
            assert compare.poll() is None, compare.communicate()[0]
            time.sleep(0.1)
        started = [int(pid) for pid in pids.read_text().split()]
        assert len(started) == 2 and all(map(_alive, started))
        compare.send_signal(signal.SIGTERM)
        output, _ = compare.communicate(timeout=60)
    finally:
        if compare.poll() is None:
            compare.kill()
            compare.wait()
    time.sleep(0.5)
    left = [pid for pid in started if _alive(pid)]
    for pid in left:  # a failing run leaves nothing behind either
        os.kill(pid, signal.SIGKILL)
    assert compare.returncode == 128 + signal.SIGTERM, output
    assert left == [], output
    data = json.loads((root / "results" / "compare" / "compare.json").read_text())
    done = [(i["file"], i["tests_upstream"], i["tests_recorded"], i["mismatches"]) for i in data["invocations"]]
    assert done == [("test/test_quick.py", 1, 1, 0)] * len(before)
    assert (data["interrupted"], data["invocations_planned"]) == ("SIGTERM", len(before) + 1)
