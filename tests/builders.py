"""Builders the tests share: an upstream-shaped project, a GitHub client on a fake clock."""

from __future__ import annotations

import random
import shutil
import threading
from pathlib import Path
from typing import Any

from device_matrix.issues.github import GitHubTracker
from tests.conftest import FIXTURES, Project
from tests.github_server import FakeGitHub

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
