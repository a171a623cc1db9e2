"""Container rows through a fake engine that records argv and runs the inner command.

The part of these tests that starts no process; the rest is in tests/integration/test_container.py (#41)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from device_matrix.config import Row
from device_matrix.executors.container import expand_options
from tests.conftest import FIXTURES


def test_device_globs_expand_on_the_host(tmp_path: Path) -> None:
    for n in (0, 1):
        (tmp_path / f"neuron{n}").touch()
    opts = expand_options([f"--device={tmp_path}/neuron*", "--cap-add=SYS_ADMIN"])
    assert opts == [
        f"--device={tmp_path}/neuron0",
        f"--device={tmp_path}/neuron1",
        "--cap-add=SYS_ADMIN",
    ]
    assert Row(name="n", pjrt_device="NEURON").container_options == ()


def test_container_runs_as_the_invoking_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from device_matrix.executors.base import LaunchSpec
    from device_matrix.executors.container import ContainerExecutor, user_options
    from device_matrix.executors.engine import Engine

    docker = Engine("/usr/bin/docker", "docker", "28.2.2", rootless=False)
    spec = LaunchSpec(pytest_args=[], env={}, workdir=tmp_path, project_root=tmp_path, core_limit=None)
    row = Row(name="r", pjrt_device="CPU", image="img", container_options=("--shm-size=1g",))
    monkeypatch.setattr(os, "getuid", lambda: 1001)
    monkeypatch.setattr(os, "getgid", lambda: 1002)
    argv = ContainerExecutor(docker, row, host_env={}).argv(spec)
    assert argv[argv.index("--user") + 1] == "1001:1002" and "HOME=/tmp" in argv
    assert argv.index("--user") < argv.index("img")  # an engine option, not the command's
    # a rootless engine (as its info says) maps the invoking user to the container's root already
    assert user_options(Engine("/usr/bin/podman", "podman", "4.3.1", rootless=True), (), 1001, 1002) == []
    assert user_options(Engine("docker", "docker", "28.2.2", rootless=True), (), 1001, 1002) == []
    # a rootful podman (a root service behind CONTAINER_HOST) writes as root: the user is passed
    rootful = Engine("podman", "podman", "4.3.1", rootless=False)
    assert user_options(rootful, (), 1001, 1002) == ["--user", "1001:1002", "-e", "HOME=/tmp"]
    # root stays root; a row's own --user wins
    assert user_options(docker, (), 0, 0) == []
    assert user_options(docker, ("--user=0:0",), 1001, 1002) == []
    assert user_options(docker, ("-u", "5"), 1001, 1002) == []


def test_the_engine_is_read_from_its_own_info() -> None:
    from device_matrix.executors.engine import Engine, NoEngine, read_info

    podman = {"host": {"security": {"rootless": True}}, "version": {"Version": "4.3.1"}}
    assert read_info("/usr/bin/podman", podman) == Engine("/usr/bin/podman", "podman", "4.3.1", rootless=True)
    # podman's docker-compatible command is podman, whatever its name
    assert read_info("/usr/bin/docker", podman).name == "podman"
    docker = {"ServerVersion": "28.2.2", "SecurityOptions": ["name=seccomp,profile=builtin", "name=rootless"]}
    assert read_info("docker", docker) == Engine("docker", "docker", "28.2.2", rootless=True)
    assert read_info("docker", {**docker, "SecurityOptions": []}).rootless is False
    down = read_info("docker", {"ServerVersion": "", "ServerErrors": ["Cannot connect to the Docker daemon"]})
    assert down == NoEngine("`docker info`: Cannot connect to the Docker daemon")
    assert isinstance(read_info("docker", {"ID": ""}), NoEngine)


def test_what_an_image_interpreter_lacks_is_said() -> None:
    from device_matrix.executors.container import ImagePython, _image_python

    def found(python: str = "3.11.2", pytest: str | None = "8.0.0", **kw: object) -> ImagePython:
        return ImagePython(name="python3", version=python, executable="/usr/bin/python3.11", pytest=pytest, **kw)

    assert found().problem(needs_pytest=True) is None
    assert found(pytest="9.1.0.dev3+g1a2b").problem(needs_pytest=True) is None
    assert found(pytest="8.0.0rc1").problem(needs_pytest=True) is None
    assert "pytest 7.4.4 (needs pytest >= 8.0" in (found(pytest="7.4.4").problem(needs_pytest=True) or "")
    assert found(python="3.9.18").problem(needs_pytest=False) == "Python 3.9.18 (device-matrix needs Python >= 3.10)"
    assert "Python 2.7.18" in (found(python="2.7.18", pytest=None).problem(needs_pytest=False) or "")
    lacking = found(pytest=None, pytest_error="ModuleNotFoundError: No module named 'pytest'")
    assert "without pytest (ModuleNotFoundError" in (lacking.problem(needs_pytest=True) or "")
    assert lacking.problem(needs_pytest=False) is None  # a row of scripts runs without pytest
    broken = found(import_errors={"device_matrix.child.plugin": "ImportError: x"})
    assert "device_matrix.child.plugin does not import (ImportError: x)" in (broken.problem(needs_pytest=True) or "")
    assert found(pytest="unknown").problem(needs_pytest=True) is not None  # no version is not a new one
    # what the image's interpreter printed, read defensively
    text = '{"python": "3.11.2", "executable": "/usr/bin/python3.11", "pytest": "8.0.0"}'
    assert _image_python("python", text) == ImagePython("python", "3.11.2", "/usr/bin/python3.11", "8.0.0")
    assert "unreadable" in str(_image_python("python", "{not json"))
    assert "unreadable" in str(_image_python("python", '{"python": "3.11"}'))


def test_the_image_needs_what_the_package_declares() -> None:
    import tomllib

    from device_matrix.executors.container import MIN_PYTEST, MIN_PYTHON

    project = tomllib.loads((FIXTURES.parent.parent / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=" + ".".join(map(str, MIN_PYTHON))
    assert "pytest>=" + ".".join(map(str, MIN_PYTEST)) in project["dependencies"]
