"""#40: how the recording names what another process did: the pid in a coverage data file's
name (a process it did not follow measured under a test's context), and the program an
audit event started, as a short command line."""

from __future__ import annotations

import pytest

from device_matrix.child.opens import started
from device_matrix.child.testmap import _data_pid


@pytest.mark.parametrize(
    ("name", "pid"),
    [
        ("/m/cov-1-ab/data.vm.pid30470.XNboYcLx", "30470"),  # coverage 7.11 and later
        ("/m/cov-1-ab/data.vm.pid30470.XNboYcLx.Ho03O39h4vNh", "30470"),  # and what a newer one adds
        ("/m/cov-1-ab/data.build.example.org.4242.X1a2B3cx", "4242"),  # coverage 7.10: a dotted host
        ("/m/cov-1-ab/data.vm", ""),  # no pid: a process not followed, as far as it can tell
    ],
)
def test_the_pid_of_a_coverage_data_file(name: str, pid: str) -> None:
    assert _data_pid(name) == pid


def test_the_program_an_audit_event_started_as_a_command_line() -> None:
    assert started("subprocess.Popen", ("git", ["git", "log", "-1"], None, None)) == "git log -1"
    assert started("subprocess.Popen", ("/bin/sh", None, None, None)) == "/bin/sh"  # no argv: the executable
    assert started("os.system", (b"make  data",)) == "make data"
    assert started("os.posix_spawn", ("/bin/true", ["true", "-x"], {})) == "true -x"
    assert started("os.spawn", (0, "/bin/cat", ["cat", "f"], {})) == "cat f"
    long = started("os.exec", ("/bin/echo", ["echo", "x" * 200], {}))
    assert len(long) == 80 and long.endswith("...")
