"""The unit tier (#41): tests that start no process and reach no other host.

An audit hook (PEP 578) watches each test of this folder while it is set up, runs and is
torn down. A test that starts a process fails: ``subprocess`` (hence git, podman, the CLI
run as a command), ``os.system``, ``os.fork``/``forkpty``, ``os.posix_spawn``, ``os.spawn*``,
``os.exec*`` and multiprocessing's own start (``_posixsubprocess.fork_exec``, which raises
no audit event), so Ray and a browser too. So does a test that resolves or connects to a
host other than this one's loopback. It fails even where the code under test catches the
error: what was refused is kept and reported when the test ends. Such a test belongs in
``tests/integration/``. A fake server on 127.0.0.1 in a thread and a Unix socket are fine."""

from __future__ import annotations

import _posixsubprocess
import ipaddress
import sys
from collections.abc import Callable, Generator
from typing import Any

import pytest

# the audit events of a process's start; os.spawn* and pty fork first, os.popen is a Popen
PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.system", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.exec"}
)
# the events of reaching a host: by address, and by name (a name is resolved first)
NETWORK_EVENTS = frozenset({"socket.connect", "socket.getaddrinfo"})


class Refused(BaseException):
    """What a unit test may not do (not an ``Exception``: a caught ``Exception`` of the code
    under test does not hide it, and it is also kept for the test's end)."""


def is_local(host: object) -> bool:
    """This host's loopback (by address or as ``localhost``), or not an internet address at
    all (a Unix socket's path)."""
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return True
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _host(event: str, args: tuple[Any, ...]) -> object:
    if event == "socket.connect":  # (socket, address)
        address = args[1]
        return address[0] if isinstance(address, tuple) else None
    return args[0]  # socket.getaddrinfo: (host, port, family, type, protocol)


class Guard:
    """Watches while ``on``; what it refused since it was turned on is in ``refused``."""

    def __init__(self) -> None:
        self.on = False
        self.refused: list[str] = []

    def refuse(self, what: str) -> None:
        if self.on:
            self.refused.append(what)
            raise Refused(f"a unit test {what}; it belongs in tests/integration/")

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.on:
            return
        if event in PROCESS_EVENTS:
            self.refuse(f"started a process ({event}: {' '.join(map(str, args[:2]))[:200]})")
        elif event in NETWORK_EVENTS and not is_local(host := _host(event, args)):
            self.refuse(f"reached another host ({event}: {host})")

    def watched(self) -> Generator[None, object, object]:
        """A pytest hook wrapper: the guard on around the phase; what it refused fails the test."""
        self.on, self.refused = True, []
        try:
            result = yield
        finally:
            self.on = False
        if self.refused:
            refused = "; ".join(dict.fromkeys(self.refused))
            pytest.fail(f"a unit test {refused}: it belongs in tests/integration/", pytrace=False)
        return result


def _watched_fork_exec(guard: Guard, fork_exec: Callable[..., int]) -> Callable[..., int]:
    def fork_exec_watched(*args: Any, **kwargs: Any) -> int:
        guard.refuse("started a process (_posixsubprocess.fork_exec)")
        return fork_exec(*args, **kwargs)

    return fork_exec_watched


GUARD = Guard()
# for the life of the process (an audit hook cannot be removed); it acts only while a test
# of this folder runs, so the integration tests in the same process are not watched
sys.addaudithook(GUARD.audit)
_posixsubprocess.fork_exec = _watched_fork_exec(GUARD, _posixsubprocess.fork_exec)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from GUARD.watched())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from GUARD.watched())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    if nextitem is None:
        # the session's own fixtures end after the last test, whichever test set them up (the
        # Ray cluster of an integration test run in the same process)
        return (yield)
    return (yield from GUARD.watched())
