"""The unit tier's guard (tests/unit/conftest.py, #41): each way of starting a process or
reaching another host is refused while a unit test runs, a refusal the code under test
swallows still fails the test, and this host's loopback stays open."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator

import pytest

from tests.unit.conftest import GUARD, Guard, Refused, is_local


@contextlib.contextmanager
def refused(what: str) -> Iterator[None]:
    """``what`` is refused here; the refusal is taken back so that this test itself passes."""
    before = len(GUARD.refused)
    with pytest.raises(Refused, match=re.escape(what)):
        yield
    assert len(GUARD.refused) == before + 1 and what in GUARD.refused[-1], GUARD.refused
    del GUARD.refused[before:]


def _nothing() -> None:
    pass


STARTS: dict[str, tuple[str, Callable[[], object]]] = {
    "subprocess.run": ("subprocess.Popen", lambda: subprocess.run(["true"], check=False)),
    "subprocess.check_output": ("subprocess.Popen", lambda: subprocess.check_output(["true"])),
    "os.popen": ("subprocess.Popen", lambda: os.popen("true")),
    "os.system": ("os.system", lambda: os.system("true")),
    "os.fork": ("os.fork", os.fork),
    "os.forkpty": ("os.forkpty", os.forkpty),
    "os.posix_spawn": ("os.posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {})),
    "os.posix_spawnp": ("os.posix_spawn", lambda: os.posix_spawnp("true", ["true"], {})),
    "os.spawnv": ("os.fork", lambda: os.spawnv(os.P_WAIT, "/bin/true", ["true"])),
    "os.execv": ("os.exec", lambda: os.execv("/bin/true", ["true"])),
    "multiprocessing fork": ("os.fork", lambda: multiprocessing.get_context("fork").Process(target=_nothing).start()),
    "multiprocessing spawn": (
        "_posixsubprocess.fork_exec",
        lambda: multiprocessing.get_context("spawn").Process(target=_nothing).start(),
    ),
}


@pytest.mark.parametrize("start", sorted(STARTS))
def test_every_way_of_starting_a_process_is_refused(start: str) -> None:
    event, call = STARTS[start]
    with refused(f"started a process ({event}"):
        call()


def test_a_connection_to_another_host_is_refused_and_the_loopback_is_open() -> None:
    with socket.socket() as sock, refused("reached another host (socket.connect: 192.0.2.1)"):
        sock.connect(("192.0.2.1", 9))  # TEST-NET-1: refused before a packet leaves
    with refused("reached another host (socket.getaddrinfo: example.com)"):
        socket.getaddrinfo("example.com", 443)
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        with socket.create_connection(("localhost", port), timeout=5):
            pass
    assert GUARD.refused == []


def test_a_start_in_another_thread_is_refused_too() -> None:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            subprocess.run(["true"], check=False)
        except BaseException as exc:  # the refusal, looked at below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert [type(e) for e in errors] == [Refused]
    assert "subprocess.Popen" in GUARD.refused.pop()


def test_a_refusal_the_code_swallows_still_fails_the_test() -> None:
    # a guard of its own, driven as pytest drives the hook wrappers of tests/unit/conftest.py
    guard = Guard()
    phase = guard.watched()
    next(phase)
    assert guard.on
    with contextlib.suppress(BaseException):  # the code under test hides the refusal
        guard.refuse("started a process (subprocess.Popen: git)")
    with pytest.raises(pytest.fail.Exception, match=re.escape("started a process (subprocess.Popen: git)")) as failed:
        phase.send(None)
    assert "tests/integration/" in str(failed.value)
    assert not guard.on


def test_nothing_is_refused_outside_a_test_of_the_tier() -> None:
    guard = Guard()  # off: the integration tests share the process and are not watched
    guard.refuse("started a process (subprocess.Popen: x)")
    guard.audit("subprocess.Popen", ("x", ["x"], None, None))
    guard.audit("socket.connect", (None, ("192.0.2.1", 9)))
    assert guard.refused == []
    phase = guard.watched()
    next(phase)
    with pytest.raises(StopIteration):
        phase.send(None)  # a clean phase passes its result through
    assert guard.refused == [] and not guard.on


def test_what_is_local() -> None:
    assert is_local("127.0.0.1") and is_local("127.1.2.3") and is_local("::1") and is_local("localhost")
    assert is_local(None) and is_local("") and is_local(b"127.0.0.1")
    assert not is_local("192.0.2.1") and not is_local("example.com") and not is_local("10.0.0.1")


def test_the_guard_is_on_while_a_unit_test_runs() -> None:
    assert GUARD.on
