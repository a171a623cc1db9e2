"""device_matrix.nox: a project's noxfile defines its rows' sessions in one call (#20).

The session of a present row installs the row's packages, this very device-matrix and the
project into its venv once, and runs the row with the venv's interpreter; an absent row's
session skips before any venv is made; ``--no-venv`` installs nothing.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nox.registry
import pytest
from nox.virtualenv import PassthroughEnv

import device_matrix.nox as dm_nox
from device_matrix import config
from tests.conftest import REPO

ABSENT = {"DEVICE_MATRIX_TPU_PRESENT": "0", "DEVICE_MATRIX_CUDA_PRESENT": "0", "DEVICE_MATRIX_NEURON_PRESENT": "0"}
NOXFILE = "import device_matrix.nox\n\ndevice_matrix.nox.sessions()\n"


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """nox's registry of sessions, empty for the test (defining sessions registers them)."""
    fresh: dict[str, Any] = {}
    monkeypatch.setattr(nox.registry, "_REGISTRY", fresh)
    yield fresh


@pytest.fixture
def absent_accelerators(monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in ABSENT.items():
        monkeypatch.setenv(var, value)


class Skipped(Exception):
    pass


class Errored(Exception):
    pass


class FakeSession:
    """What a row's session uses of nox.Session."""

    def __init__(self, venv: Any, *, no_install: bool = False, posargs: list[str] | None = None) -> None:
        self.virtualenv = venv
        self._runner = SimpleNamespace(global_config=SimpleNamespace(no_install=no_install))
        self.installs: list[tuple[str, ...]] = []
        self.runs: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self.posargs = posargs or []

    def install(self, *args: str) -> None:
        if isinstance(self.virtualenv, PassthroughEnv):
            raise ValueError("nox refuses to install without a virtualenv")
        self.installs.append(args)

    def run(self, *args: str, **kwargs: Any) -> None:
        self.runs.append((args, kwargs))

    def log(self, *_: object) -> None:
        pass

    def skip(self, reason: str) -> None:
        raise Skipped(reason)

    def error(self, reason: str) -> None:
        raise Errored(reason)


def venv(tmp_path: Path, *, reused: bool = True) -> SimpleNamespace:
    return SimpleNamespace(location=str(tmp_path), _reused=reused)


def user_project(root: Path, tool: str = "") -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "mypkg"\nversion = "1"\ndependencies = []\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n\n' + tool
    )
    (root / "noxfile.py").write_text(NOXFILE)
    return root


# --- the sessions ----------------------------------------------------------------------


def test_one_session_per_row_tagged_rows(tmp_path: Path, registry: dict[str, Any], absent_accelerators: None) -> None:
    root = user_project(tmp_path, '[tool.device-matrix.devices.mine]\npjrt_device = "CPU"\npresence = ["always"]\n')
    names = dm_nox.sessions(project=root)
    assert names == list(config.load(root).rows) and "mine" in names
    assert set(registry) == set(names)
    assert all(func.tags == [dm_nox.TAG] for func in registry.values())
    assert registry["cpu"].venv_params == ["--system-site-packages"] and registry["cpu"].reuse_venv is True


def test_an_absent_row_skips_without_a_venv(
    tmp_path: Path, registry: dict[str, Any], absent_accelerators: None
) -> None:
    dm_nox.sessions(project=user_project(tmp_path))
    tpu = registry["tpu"]
    assert tpu.venv_backend == "none"  # nox makes no venv for it
    with pytest.raises(Skipped, match=r"tpu unavailable here: \$DEVICE_MATRIX_TPU_PRESENT=0"):
        tpu.func(FakeSession(PassthroughEnv()))
    assert registry["cpu"].venv_backend is None


def test_rows_python_and_backend(tmp_path: Path, registry: dict[str, Any]) -> None:
    root = user_project(tmp_path)
    assert dm_nox.sessions(["cpu"], python={"cpu": "3.12"}, venv_backend="uv", project=root) == ["cpu"]
    assert set(registry) == {"cpu"}
    assert registry["cpu"].python == "3.12" and registry["cpu"].venv_backend == "uv"
    registry.clear()
    dm_nox.sessions(["cpu"], python="3.11", venv_backend="conda", project=root)
    assert registry["cpu"].python == "3.11" and registry["cpu"].venv_params == []  # conda takes no virtualenv flag


def test_an_unknown_row_or_a_bad_configuration_ends_nox_with_exit_3(
    tmp_path: Path, registry: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    root = user_project(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        dm_nox.sessions(["gpu"], project=root)
    assert exit_info.value.code == 3
    err = capsys.readouterr().err
    assert "ERROR unknown device row 'gpu'" in err and "TIP" in err
    (root / "pyproject.toml").write_text("[tool.device-matrix]\nresults = 'x'\n")
    with pytest.raises(SystemExit):
        dm_nox.sessions(project=root)
    assert "unknown key" in capsys.readouterr().err and registry == {}


# --- the body of a row's session -------------------------------------------------------


def test_a_row_installs_its_packages_device_matrix_and_the_project_then_runs_in_the_venv(tmp_path: Path) -> None:
    root = user_project(tmp_path / "p", '[tool.device-matrix]\nproject_install = ["-e", "."]\n')
    cfg = config.load(root)
    fake = FakeSession(venv(tmp_path / "venv"), posargs=["--", "-k", "a"])
    (tmp_path / "venv").mkdir()
    dm_nox.run_row(fake, cfg, "cpu")  # type: ignore[arg-type]
    own = dm_nox.device_matrix_requirement()
    assert fake.installs == [("torch==2.9.0", "torch_xla==2.9.0"), (*own, "-e", ".")]
    ((args, kwargs),) = fake.runs
    # the venv's interpreter (nox puts its bin first on PATH), never the one nox runs in
    assert args == ("python", "-m", "device_matrix", "--project", str(root), "run", "--device", "cpu", "--", "-k", "a")
    assert kwargs["external"] is False


def test_without_a_venv_the_row_runs_with_the_interpreter_nox_runs_in(tmp_path: Path) -> None:
    cfg = config.load(user_project(tmp_path))
    fake = FakeSession(PassthroughEnv())
    dm_nox.run_row(fake, cfg, "cpu")  # type: ignore[arg-type]
    assert fake.installs == []
    ((args, kwargs),) = fake.runs
    assert args[:5] == (sys.executable, "-m", "device_matrix", "--project", str(cfg.project_root))
    assert kwargs["external"] is True


def test_a_row_in_its_container_installs_only_device_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from device_matrix.run import plan as plan_mod

    cfg = config.load(user_project(tmp_path / "p", '[tool.device-matrix]\nproject_install = ["."]\n'))
    row = cfg.row("cpu")
    monkeypatch.setattr(plan_mod, "plan_row", lambda *_a, **_k: plan_mod.RowPlan(row, "container", "x", "docker"))
    (tmp_path / "venv").mkdir()
    fake = FakeSession(venv(tmp_path / "venv"))
    dm_nox.run_row(fake, cfg, "cpu")  # type: ignore[arg-type]
    assert fake.installs == [tuple(dm_nox.device_matrix_requirement())]


def test_the_stamp_is_written_only_after_an_install_that_ran(tmp_path: Path) -> None:
    stamp = tmp_path / dm_nox.INSTALL_STAMP
    steps = [["torch==2.9.0"], ["-e", "."]]
    skipped = FakeSession(venv(tmp_path), no_install=True)
    dm_nox.install_once(skipped, steps, tmp_path)  # type: ignore[arg-type]
    assert skipped.installs == [] and not stamp.exists()  # -R / --no-install: nothing ran
    ran = FakeSession(venv(tmp_path))
    dm_nox.install_once(ran, steps, tmp_path)  # type: ignore[arg-type]
    assert ran.installs == [("torch==2.9.0",), ("-e", ".")] and stamp.is_file()
    again = FakeSession(venv(tmp_path))
    dm_nox.install_once(again, steps, tmp_path)  # type: ignore[arg-type]
    assert again.installs == []  # the stamp matches
    changed = FakeSession(venv(tmp_path))
    dm_nox.install_once(changed, [["torch==2.9.1"], ["-e", "."]], tmp_path)  # type: ignore[arg-type]
    assert changed.installs == [("torch==2.9.1",), ("-e", ".")]


def test_a_changed_project_installs_again_a_changed_tool_table_does_not(tmp_path: Path) -> None:
    root = user_project(tmp_path / "p")
    (tmp_path / "venv").mkdir()
    steps = [["-e", "."]]

    def installs() -> list[tuple[str, ...]]:
        fake = FakeSession(venv(tmp_path / "venv"))
        dm_nox.install_once(fake, steps, root)  # type: ignore[arg-type]
        return fake.installs

    assert installs() == [("-e", ".")]
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + '\n[tool.device-matrix]\nresults_dir = "out"\n')
    assert installs() == []
    pyproject.write_text(pyproject.read_text().replace("dependencies = []", 'dependencies = ["numpy"]'))
    assert installs() == [("-e", ".")]
    wheel = tmp_path / "dm.whl"
    wheel.write_bytes(b"1")
    steps = [[str(wheel)]]
    # a venv installed before keeps a same-version wheel unless its files are forced in
    assert installs() == [("--force-reinstall", "--no-deps", str(wheel)), (str(wheel),)] and installs() == []
    os.utime(wheel, ns=(1, 1))  # the wheel was built again
    assert installs() == [("--force-reinstall", "--no-deps", str(wheel)), (str(wheel),)]


def test_a_first_install_forces_nothing(tmp_path: Path) -> None:
    wheel = tmp_path / "dm.whl"
    wheel.write_bytes(b"1")
    fake = FakeSession(venv(tmp_path))
    dm_nox.install_once(fake, [[str(wheel)]], tmp_path)  # type: ignore[arg-type]
    assert fake.installs == [(str(wheel),)]


def test_an_unreadable_stamp_installs_again(tmp_path: Path) -> None:
    (tmp_path / dm_nox.INSTALL_STAMP).write_text("{not json")
    fake = FakeSession(venv(tmp_path))
    dm_nox.install_once(fake, [["x"]], tmp_path)  # type: ignore[arg-type]
    assert fake.installs == [("x",)]


# --- which device-matrix the venv gets --------------------------------------------------


def dist(tmp_path: Path, direct_url: dict[str, Any] | None) -> metadata.Distribution:
    info = tmp_path / "device_matrix-0.2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: device-matrix\nVersion: 0.2.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return metadata.PathDistribution(info)


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        (None, ["device-matrix==0.2.0"]),  # from an index: the same version
        ({"url": "file:///src/dm", "dir_info": {"editable": True}}, ["-e", "/src/dm"]),
        ({"url": "file:///src/d%20m", "dir_info": {}}, ["/src/d m"]),
        (
            {"url": "https://github.com/o/device-matrix", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
            ["device-matrix @ git+https://github.com/o/device-matrix@abc123"],
        ),
        (
            {"url": "https://example.com/device_matrix-0.2.0-py3-none-any.whl", "archive_info": {}},
            ["device-matrix @ https://example.com/device_matrix-0.2.0-py3-none-any.whl"],
        ),
        # a wheel file that is gone: the same version, wherever pip finds it
        ({"url": "file:///nowhere/device_matrix-0.2.0-py3-none-any.whl", "archive_info": {}}, ["device-matrix==0.2.0"]),
        ({"url": 3}, ["device-matrix==0.2.0"]),
    ],
)
def test_the_requirement_of_an_installation(tmp_path: Path, direct_url: Any, expected: list[str]) -> None:
    assert dm_nox._requirement_of(dist(tmp_path, direct_url)) == expected


def test_a_wheel_that_is_there_is_installed_as_it_is(tmp_path: Path) -> None:
    wheel = tmp_path / "device_matrix-0.2.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    d = dist(tmp_path / "site", {"url": wheel.as_uri(), "archive_info": {}})
    assert dm_nox._requirement_of(d) == [str(wheel)]


def test_this_checkout_is_installed_from_where_it_is() -> None:
    # the test venv has this tree installed editable; a noxfile that puts an uninstalled
    # checkout on sys.path gets the same tree, editable
    assert dm_nox.device_matrix_requirement() == ["-e", str(REPO)]


def test_a_copy_that_is_neither_installed_nor_a_source_tree_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "vendored" / "device_matrix"
    package.mkdir(parents=True)
    monkeypatch.setattr(dm_nox, "__file__", str(package / "nox.py"))
    with pytest.raises(dm_nox.EnvironmentProblem) as info:
        dm_nox.device_matrix_requirement()
    assert "pip install" in (info.value.tip or "")


# --- nox itself, in a project of its own ---------------------------------------------------
