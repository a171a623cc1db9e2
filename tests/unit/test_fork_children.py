"""#29: the children a test makes the way Python programs make them run to their end under
the script launcher, as under ``python FILE``; only a copy that returns into the runner's
loop is ended."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_matrix.child.journal import FORKED_COPY_NOTE
from tests.integration.test_script_launcher import launch

pytestmark = pytest.mark.slow

CHILDREN = """
import multiprocessing
import os
import unittest


def work(queue=None):
    if queue is not None:
        queue.put(os.getpid())


class TestChildren(unittest.TestCase):
    def test_fork_process(self):
        p = multiprocessing.get_context("fork").Process(target=work)
        p.start()
        p.join()
        self.assertEqual(p.exitcode, 0)

    def test_fork_manager(self):
        with multiprocessing.get_context("fork").Manager() as manager:
            queue = manager.Queue()
            p = multiprocessing.get_context("fork").Process(target=work, args=(queue,))
            p.start()
            p.join()
            self.assertEqual(p.exitcode, 0)
            self.assertEqual(queue.get(timeout=10), p.pid)

    def test_raw_fork(self):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        self.assertEqual(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), 0)


if __name__ == "__main__":
    unittest.main()
"""


def test_multiprocessing_fork_children_and_managers_run_to_their_end_under_the_script_launcher(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "test_children.py").write_text(CHILDREN)
    run = launch(tmp_path, "test_children.py", cwd=folder)
    assert run.outcomes() == {
        "TestChildren::test_fork_process": ("passed", None),
        "TestChildren::test_fork_manager": ("passed", None),
        "TestChildren::test_raw_fork": ("passed", None),
    }, run.proc.stderr
    assert run.proc.returncode == 0, run.proc.stderr
    assert "returned into" not in run.proc.stderr


def test_the_forked_copy_note_names_no_runner_a_script_does_not_use() -> None:
    # a unittest script's copy returned into unittest, not pytest (#29)
    assert "pytest" not in FORKED_COPY_NOTE
