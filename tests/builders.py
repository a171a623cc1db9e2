"""Builders the tests share: an upstream-shaped project, a GitHub client on a fake clock, a
process started in the background and waited on for a sign of where it is."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from device_matrix.issues.github import GitHubTracker
from tests.conftest import FIXTURES, Project, clean_env, make_project
from tests.github_server import FakeGitHub
from tests.runs import write_suite

TOKEN = "t0ken-for-tests"


def upstream_project(
    tmp_path: Path, fixture: str, *, row: str = "", env: str = 'CPU_NUM_DEVICES = "1"', crash_reruns: int = 1
) -> Project:
    """A copy of ``tests/fixtures/FIXTURE`` (shaped as torch_xla's test/ folder, its tests in
    ``test/``) with one host row, ``fixture``: ``row`` adds to its keys (and may add its
    ``scripts`` tables), ``env`` is its variables (none: no table)."""
    root = tmp_path / fixture
    shutil.copytree(FIXTURES / fixture, root)
    variables = f"\n[tool.device-matrix.devices.fixture.env]\n{env}\n" if env else ""
    (root / "pyproject.toml").write_text(
        (root / "pyproject.toml").read_text()
        + f"""
[tool.device-matrix]
suites_dir = "test"
crash_reruns = {crash_reruns}

[tool.device-matrix.devices.fixture]
pjrt_device = "CPU"
run_in = "host"
presence = ["always"]
test_timeout = 60
{row}
{variables}"""
    )
    return Project(root)


class FakeTime:
    """The tracker's clock and sleep: a sleep is recorded and moves the clock on (from any thread)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.lock = threading.Lock()

    def sleep(self, s: float) -> None:
        with self.lock:
            self.sleeps.append(s)
            self.now += s

    def clock(self) -> float:
        return self.now


def client(gh: FakeGitHub, t: FakeTime | None = None, **kw: Any) -> GitHubTracker:
    """A GitHub tracker on the fake server ``gh``, its clock ``t`` (a new one without), its jitter seeded."""
    t = t or FakeTime()
    return GitHubTracker(
        gh.repo,
        kw.pop("token", TOKEN),
        api_url=kw.pop("api_url", gh.url),
        sleep=t.sleep,
        clock=t.clock,
        wall_clock=lambda: 5000.0,
        rng=kw.pop("rng", random.Random(7)),
        **kw,
    )


def started(
    argv: Sequence[str], log: Path, *, env: Mapping[str, str], cwd: Path | None = None, session: bool = False
) -> subprocess.Popen[bytes]:
    """``argv`` started in the background, its output (both streams) into ``log``; ``session``:
    it leads a process group of its own (a ``ray start --block`` node, ended with its group)."""
    with log.open("wb") as fh:
        return subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), stdout=fh, stderr=subprocess.STDOUT, start_new_session=session
        )


def run_started(p: Project, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """``device-matrix ARGS`` on project ``p``, started in the background, its output into ``log``."""
    return started(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), *args], log, env=clean_env(), cwd=p.root
    )


def wait_for(
    proc: subprocess.Popen[bytes],
    log: Path,
    *,
    line: str | None = None,
    path: Path | None = None,
    timeout: float = 120.0,
    poll: float = 0.05,
) -> None:
    """Until ``log`` holds ``line`` and ``path`` exists (each where given). Where ``proc`` ends
    first or ``timeout`` passes, the test fails with the end of the log and ``proc`` is killed."""
    end = time.monotonic() + timeout
    while not ((line is None or line in log.read_text(errors="replace")) and (path is None or path.exists())):
        if proc.poll() is not None or time.monotonic() > end:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            waited = " and ".join(f"{w!r}" for w in (line, path and path.name) if w)
            pytest.fail(f"{waited} never came (exit {proc.returncode}): {log.read_text(errors='replace')[-2000:]}")
        time.sleep(poll)


# --- a project in git (#34: test selection reads git's diff) --------------------------------

# two helpers and the test of each, in suites/mine/: what the selection tests change
SELECTION_SUITE = {
    "helpers.py": "def double(x):\n    return 2 * x\n",
    "other.py": "def triple(x):\n    return 3 * x\n",
    "test_double.py": "from helpers import double\n\n\ndef test_double():\n    assert double(2) == 4\n",
    "test_triple.py": "from other import triple\n\n\ndef test_triple():\n    assert triple(2) == 6\n",
}
# a conftest.py that lets the suite's tests import its helpers by name
SUITE_ON_PATH = "import sys, os\nsys.path.insert(0, os.path.dirname(__file__))\n"


def git(root: Path, *args: str) -> str:
    """git in ``root`` as a committer; its output stripped (a failure fails the test)."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def committed(p: Project, ignored: Sequence[str] = ()) -> Project:
    """``p`` committed on branch main, git ignoring device-matrix's folders and ``ignored``
    (what its tests write into the project, as a user's .gitignore would: not the code's)."""
    lines = ("results/", "__pycache__/", ".device-matrix/", *ignored)
    (p.root / ".gitignore").write_text("".join(f"{line}\n" for line in lines))
    git(p.root, "init", "-q", "-b", "main")
    git(p.root, "add", "-A")
    git(p.root, "commit", "-qm", "base")
    return p


def git_project(tmp_path: Path, suite: Mapping[str, str] = SELECTION_SUITE, conftest: str = SUITE_ON_PATH) -> Project:
    """A project whose suites/mine holds ``suite`` and ``conftest``, committed on branch main."""
    p = make_project(tmp_path, ["passing"])
    write_suite(p, "mine", dict(suite))
    (p.root / "suites" / "mine" / "conftest.py").write_text(conftest)
    return committed(p)


def recorded_git_project(
    tmp_path: Path, suite: Mapping[str, str] = SELECTION_SUITE, conftest: str = SUITE_ON_PATH
) -> Project:
    """:func:`git_project`, its test map recorded by a full run (``run --record-map``)."""
    p = git_project(tmp_path, suite, conftest)
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    return p
