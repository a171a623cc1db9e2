"""Helpers for the library's tests: throwaway projects over the fixture suites."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
SUITES = FIXTURES / "suites"
REPO = HERE.parent

# the fixture suites crash on purpose; they run only inside throwaway projects
collect_ignore = ["fixtures"]
# #31: the session's one Ray cluster, its fixtures registered once (one per worker, not per module)
pytest_plugins = ["tests.ray_cluster"]

# #31: what the suite keeps between runs lives outside the checkout, one folder per
# checkout: the bytecode of this process and of every child it starts (they inherit the
# variable), hypothesis's database and the browser test's screenshots
SCRATCH = Path(
    os.environ.get("DEVICE_MATRIX_TEST_SCRATCH")
    or Path(tempfile.gettempdir())
    / f"device-matrix-tests-{os.getuid()}-{hashlib.sha256(str(REPO).encode()).hexdigest()[:12]}"
)
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(SCRATCH / "pycache"))
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
# and written there, even where PYTHONDONTWRITEBYTECODE is set: the hundreds of processes
# the suite starts would each compile device-matrix again (0.2 s of CPU a start)
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False
os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = str(SCRATCH / "hypothesis")
set_hypothesis_home_dir(SCRATCH / "hypothesis")

# what the checkout holds that is the environment the suite runs in, not its output
_ENVIRONMENT = frozenset({".git", ".venv", ".nox"})


def checkout_files() -> dict[str, tuple[int, int]]:
    """Every file of the checkout outside the environment, with its size and mtime. By the
    folders' entries (``DirEntry.stat``): a test map recorded over these tests takes a path
    asked about with ``os.stat`` for one the test reads, and this guard is no test's."""
    files: dict[str, tuple[int, int]] = {}
    todo = [str(REPO)]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if folder != str(REPO) or entry.name not in _ENVIRONMENT:
                    todo.append(entry.path)
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            files[os.path.relpath(entry.path, REPO)] = (st.st_size, st.st_mtime_ns)
    return files


def checkout_changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """The files written, changed or removed between two ``checkout_files``."""
    return sorted(f for f in before.keys() | after.keys() if before.get(f) != after.get(f))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """#31: a group of tests that must share one worker (xdist_group: the Ray tests, one
    cluster) is a chain run one test after another; first in the queue, the other worker
    runs the rest beside it, not after it."""
    items.sort(key=lambda item: item.get_closest_marker("xdist_group") is None)


@pytest.fixture(scope="session", autouse=True)
def _checkout_untouched() -> Iterator[None]:
    """#31: the suite writes nothing into the checkout (each xdist worker checks its span).

    Not under mutmut (``nox -s mutation``): it runs the tests in a copy of the tree of its own
    and writes its bookkeeping there while they run, so every mutant, an equivalent one too,
    would read as killed."""
    if "MUTANT_UNDER_TEST" in os.environ:
        yield
        return
    before = checkout_files()
    yield
    changed = checkout_changes(before, checkout_files())
    assert not changed, f"the tests wrote into the checkout ({len(changed)} file(s)): {changed[:20]}"


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.results = root / "results"

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 240, gdb: bool = False
    ) -> subprocess.CompletedProcess[str]:
        if args[:1] == ("run",) and not gdb:
            # gdb takes a second or more over each core of a crash: only the tests of what
            # it reads ask for it (gdb=True); cores are still written, and removed
            args = ("run", "--no-gdb", *args[1:])
        full_env = clean_env()
        if env:
            full_env.update(env)
        return subprocess.run(
            [sys.executable, "-m", "device_matrix", "--project", str(self.root), *args],
            cwd=self.root,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def record(self, row: str = "fixture") -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.results / row / "run.json").read_text())
        return data


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "DEVICE_MATRIX_", "PYTEST_"))}
    env.pop("CI", None)
    env["PYTHONPATH"] = str(REPO)
    # hypothesis is for this suite's own tests: the pytest processes the tests start
    # need not import it (a fifth of a bare pytest start)
    env["PYTEST_ADDOPTS"] = "-p no:hypothesispytest"
    return env


def make_project(
    root: Path,
    suites: list[str],
    *,
    extra_rows: str = "",
    top: str = "",
    row: str = "",
) -> Project:
    dest = root / "suites"
    for suite in suites:
        shutil.copytree(SUITES / suite, dest / suite)
    listed = ", ".join(f'"{s}"' for s in suites)
    keys = {
        "pjrt_device": '"CPU"',
        "run_in": '"host"',
        "suites": f"[{listed}]",
        "presence": '["always"]',
        "test_timeout": "60",
    }
    for line in row.strip().splitlines():  # the test's own keys win
        key, _, value = line.partition("=")
        keys[key.strip()] = value.strip()
    row_text = "\n".join(f"{k} = {v}" for k, v in keys.items())
    (root / "pyproject.toml").write_text(
        f"""[tool.device-matrix]
crash_reruns = 1
{top}

[tool.device-matrix.devices.fixture]
{row_text}
{extra_rows}
"""
    )
    return Project(root)


@pytest.fixture
def project(tmp_path: Path) -> Callable[..., Project]:
    def factory(*suites: str, **kwargs: Any) -> Project:
        return make_project(tmp_path, list(suites), **kwargs)

    return factory
