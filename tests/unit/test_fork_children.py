"""#29: the children a test makes the way Python programs make them run to their end under
the script launcher, as under ``python FILE``; only a copy that returns into the runner's
loop is ended."""

from __future__ import annotations

import pytest

from device_matrix.child.journal import FORKED_COPY_NOTE

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


def test_the_forked_copy_note_names_no_runner_a_script_does_not_use() -> None:
    # a unittest script's copy returned into unittest, not pytest (#29)
    assert "pytest" not in FORKED_COPY_NOTE
