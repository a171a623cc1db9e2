"""What the sweep after an attempt ends: only what the runner adopted from the attempt."""

from __future__ import annotations

import os
from pathlib import Path

from device_matrix.executors.base import adopted_leftovers, proc_stat

BORN = 1000  # clock ticks: when the attempt's first process started


def _proc(root: Path, pid: int, *, ppid: int, session: int, start: int, state: str = "S") -> None:
    """A /proc/<pid>/stat line: a command name with spaces and a parenthesis, as the kernel allows."""
    rest = [state, str(ppid), str(pid), str(session)] + ["0"] * 15 + [str(start)] + ["0"] * 10
    (root / str(pid)).mkdir()
    (root / str(pid) / "stat").write_text(f"{pid} (odd name) x) " + " ".join(rest) + "\n")


def test_the_attempts_orphans_and_their_descendants_are_ended_and_the_runners_own_spared(tmp_path: Path) -> None:
    me, mine = os.getpid(), os.getsid(0)
    _proc(tmp_path, 11, ppid=me, session=mine, start=BORN + 5)  # gdb reading a core: the runner's own
    _proc(tmp_path, 12, ppid=me, session=500, start=BORN - 1)  # started before the attempt
    _proc(tmp_path, 13, ppid=me, session=13, start=BORN + 7)  # setsid() orphan of the attempt
    _proc(tmp_path, 14, ppid=13, session=13, start=BORN + 8)  # its child
    _proc(tmp_path, 15, ppid=14, session=15, start=BORN + 9)  # and grandchild, in a session of its own
    _proc(tmp_path, 16, ppid=me, session=16, start=BORN + 3, state="Z")  # an orphan that ended by itself
    _proc(tmp_path, 17, ppid=1, session=17, start=BORN + 3)  # nobody's business of ours
    (tmp_path / "self").mkdir()
    doomed, adopted = adopted_leftovers(BORN, tmp_path)
    assert sorted(doomed) == [13, 14, 15]
    assert sorted(adopted) == [13, 16]  # the zombie is reaped, never signalled


def test_a_stat_line_is_read_past_a_command_name_with_parentheses(tmp_path: Path) -> None:
    _proc(tmp_path, 42, ppid=7, session=9, start=1234, state="Z")
    stat = proc_stat(42, tmp_path)
    assert stat is not None
    assert (stat.state, stat.ppid, stat.session, stat.start) == ("Z", 7, 9, 1234)
    assert proc_stat(43, tmp_path) is None
