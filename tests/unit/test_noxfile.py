"""This repository's noxfile: its rows through device_matrix.nox, and the pytest range (#20)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import nox.registry
from packaging.requirements import Requirement

from device_matrix import config
from device_matrix.tomlfile import read as read_toml
from tests.conftest import REPO


@functools.cache
def noxfile() -> ModuleType:
    """Loaded once: loading registers its sessions with nox."""
    spec = importlib.util.spec_from_file_location("noxfile_under_test", REPO / "noxfile.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Recorder:
    def __init__(self) -> None:
        self.installs: list[tuple[str, ...]] = []
        self.runs: list[tuple[str, ...]] = []
        self.posargs: list[str] = []

    def install(self, *args: str) -> None:
        self.installs.append(args)

    def run(self, *args: str, **_: Any) -> None:
        self.runs.append(args)


def sessions() -> dict[str, Any]:
    noxfile()
    return nox.registry.get()


def test_every_row_is_a_session_of_the_package_tagged_rows() -> None:
    rows = sessions()
    tagged = {name for name, func in rows.items() if "rows" in (func.tags or [])}
    assert tagged == set(config.load(REPO).rows)
    # the same sessions any project's noxfile gets from device_matrix.nox.sessions()
    assert all(rows[name].func.__module__ == "device_matrix.nox" for name in tagged)


def runtime_pytest() -> Requirement:
    project = read_toml(REPO / "pyproject.toml")["project"]
    (req,) = [Requirement(d) for d in project["dependencies"] if Requirement(d).name == "pytest"]
    return req


def test_the_extras_do_not_narrow_the_pytest_users_get() -> None:
    # the runtime range is the tested range: no extra pins pytest tighter than users get it
    extras = read_toml(REPO / "pyproject.toml")["project"]["optional-dependencies"]
    assert not [d for reqs in extras.values() for d in reqs if Requirement(d).name == "pytest"]
    (floor,) = [s for s in runtime_pytest().specifier if s.operator == ">="]
    assert not [s for s in runtime_pytest().specifier if s.operator in ("<", "<=", "==", "~=")]
    assert floor.version.startswith("8.")


def test_the_plugin_facing_tests_run_on_the_lowest_and_the_newest_pytest() -> None:
    nf = noxfile()
    rows = sessions()
    (floor,) = [s for s in runtime_pytest().specifier if s.operator == ">="]
    lowest, newest = Recorder(), Recorder()
    rows["pytest-lowest"].func(lowest)
    rows["pytest-newest"].func(newest)
    assert lowest.installs == [("-e", ".[test]", f"pytest=={floor.version}")]
    assert ("--upgrade", "pytest") in newest.installs
    for rec in (lowest, newest):
        ((cmd),) = rec.runs
        assert cmd[0] == "pytest" and set(nf.PLUGIN_TESTS) <= set(cmd)
    assert all((REPO / t).is_file() for t in nf.PLUGIN_TESTS)
    assert "tests/integration/test_project_rows.py" in nf.PLUGIN_TESTS and "tests/unit/test_skips.py" in nf.PLUGIN_TESTS
    ci = (REPO / ".ci" / "run").read_text()
    assert "pytest-lowest pytest-newest" in ci


def test_the_row_sessions_install_this_checkout(tmp_path: Path) -> None:
    import device_matrix.nox as dm_nox

    cpu = sessions()["cpu"]
    fake = Recorder()
    fake.virtualenv = SimpleNamespace(location=str(tmp_path), _reused=False)  # type: ignore[attr-defined]
    fake._runner = SimpleNamespace(global_config=SimpleNamespace(no_install=False))  # type: ignore[attr-defined]
    fake.log = lambda *_: None  # type: ignore[attr-defined]
    cpu.func(fake)
    assert ("-e", str(REPO)) in fake.installs
    assert dm_nox.device_matrix_requirement() == ["-e", str(REPO)]
    assert fake.runs[-1][:8] == ("python", "-m", "device_matrix", "--project", str(REPO), "run", "--device", "cpu")
