"""The noxfile's row sessions: a preinstalled torch_xla (--no-venv), the install stamp, tags."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import nox.registry
from nox.virtualenv import PassthroughEnv

from device_matrix import config
from tests.conftest import REPO


@functools.cache
def noxfile() -> ModuleType:
    """Loaded once: loading registers its sessions with nox."""
    spec = importlib.util.spec_from_file_location("noxfile_under_test", REPO / "noxfile.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeSession:
    def __init__(self, venv: Any, *, no_install: bool = False, plan: dict[str, Any] | None = None) -> None:
        self.virtualenv = venv
        self._runner = SimpleNamespace(global_config=SimpleNamespace(no_install=no_install))
        self.installs: list[tuple[str, ...]] = []
        self.runs: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.posargs: list[str] = []
        self.plan = plan or {}

    def install(self, *args: str) -> None:
        if isinstance(self.virtualenv, PassthroughEnv):
            raise ValueError("nox refuses to install without a virtualenv")
        self.installs.append(args)

    def run(self, *args: str, **kwargs: Any) -> str:
        self.runs.append((args, kwargs))
        return json.dumps(self.plan)

    def log(self, *_: object) -> None:
        pass

    def skip(self, reason: str) -> None:
        raise AssertionError(reason)


def venv(tmp_path: Path, *, reused: bool) -> SimpleNamespace:
    return SimpleNamespace(location=str(tmp_path), _reused=reused)


def test_the_stamp_is_written_only_after_an_install_that_ran(tmp_path: Path) -> None:
    nf = noxfile()
    stamp = tmp_path / nf.INSTALL_STAMP
    skipped = FakeSession(venv(tmp_path, reused=True), no_install=True)
    nf._install_once(skipped, ["torch==2.9.0"], [])
    assert skipped.installs == [] and not stamp.exists()  # -R / --no-install: nothing ran
    ran = FakeSession(venv(tmp_path, reused=True))
    nf._install_once(ran, ["torch==2.9.0"], [])
    assert ran.installs == [("torch==2.9.0",)] and stamp.is_file()
    again = FakeSession(venv(tmp_path, reused=True))
    nf._install_once(again, ["torch==2.9.0"], [])
    assert again.installs == []  # the stamp matches
    changed = FakeSession(venv(tmp_path, reused=True))
    nf._install_once(changed, ["torch==2.9.1"], [])
    assert changed.installs == [("torch==2.9.1",)]


def test_a_row_without_a_venv_uses_what_is_installed() -> None:
    noxfile()
    session = nox.registry.get()["cpu"]
    fake = FakeSession(PassthroughEnv(), plan={"mode": "local", "install": ["torch_xla==2.9.0"], "install_args": []})
    session.func(fake)  # type: ignore[arg-type]
    assert fake.installs == []
    (plan_args, plan_kw), (run_args, run_kw) = fake.runs
    assert plan_args[:3] == ("python", "-m", "device_matrix") and plan_kw["external"] is True
    assert run_args[:5] == ("python", "-m", "device_matrix", "run", "--device") and run_kw["external"] is True


def test_every_row_is_tagged_rows() -> None:
    noxfile()
    tagged = {name for name, func in nox.registry.get().items() if "rows" in (func.tags or [])}
    assert tagged == set(config.load(REPO).rows)
