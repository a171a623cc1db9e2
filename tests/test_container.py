"""Container rows through a fake engine that records argv and runs the inner command."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from device_matrix.config import Row
from device_matrix.run.executors.container import expand_options
from tests.conftest import FIXTURES, Project

pytestmark = pytest.mark.slow

ROW = """run_in = "container"
image = "registry.example/xla:r2.9@sha256:abc"
container_options = ["--shm-size=16g", "--gpus", "all"]
"""


def engine_down(env: dict[str, str], down: bool) -> dict[str, str]:
    settings = Path(env["FAKE_ENGINE_SETTINGS"])
    data = json.loads(settings.read_text())
    data["down"] = down
    settings.write_text(json.dumps(data))
    return env


@pytest.fixture
def engine(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").symlink_to(FIXTURES / "fake_engine.py")
    settings = bin_dir / "fake-engine.json"
    settings.write_text(json.dumps({"log": str(tmp_path / "engine.log"), "state": str(tmp_path / "engine-state")}))
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_ENGINE_SETTINGS": str(settings),
        "GITHUB_TOKEN": "ghp_" + "HostOnlySecret12" * 3,
    }


def calls(env: dict[str, str]) -> list[list[str]]:
    log = Path(json.loads(Path(env["FAKE_ENGINE_SETTINGS"]).read_text())["log"])
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_container_row_runs_through_the_engine(project: Callable[..., Project], engine: dict[str, str]) -> None:
    p = project("passing", row=ROW)
    proc = p.run("run", "--device", "fixture", env=engine)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = p.record()
    assert rec["mode"] == "container" and rec["summary"]["passed"] == 40
    assert rec["environment"]["container_image"] == "registry.example/xla:r2.9@sha256:abc"
    info, run = calls(engine)
    assert info[0] == "info"
    assert run[:3] == ["run", "--rm", "--init"]
    assert "--shm-size=16g" in run and run[run.index("--gpus") + 1] == "all"
    root = str(p.root.resolve())
    assert f"{root}:{root}" in run
    assert "PJRT_DEVICE=CPU" in run and "DEVICE_MATRIX_IN_IMAGE=fixture" in run
    assert not any("HostOnlySecret" in a for a in run)  # the host's token stays out
    assert not any(a.startswith("GITHUB_TOKEN=") for a in run)
    image_at = run.index("registry.example/xla:r2.9@sha256:abc")
    assert run[image_at + 1 : image_at + 7] == ["python", "-X", "faulthandler", "-m", "pytest", "-p"]


def test_crash_in_container_is_diagnosed(project: Callable[..., Project], engine: dict[str, str]) -> None:
    p = project("segv", row=ROW)
    proc = p.run("run", "--device", "fixture", "--reruns", "0", env=engine)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = p.record()["crashes"]
    assert crash["diagnosis"]["signal_name"] == "SIGSEGV"
    assert crash["diagnosis"]["exit_code"] == 139
    assert "in test_c_dies" in crash["diagnosis"]["python_stack"]
    assert crash["repro"].startswith("docker run --rm -w ")  # the container, its folder and image
    assert "registry.example/xla:r2.9@sha256:abc python -m pytest" in crash["repro"].splitlines()[0]
    assert "suites/segv/test_segv.py::test_c_dies" in crash["repro"]


def test_hang_in_container_is_killed_through_the_engine(
    project: Callable[..., Project], engine: dict[str, str]
) -> None:
    p = project("hang", row=ROW)
    proc = p.run("run", "--device", "fixture", "--test-timeout", "3", env=engine)
    assert proc.returncode == 1
    assert p.record()["crashes"][0]["kind"] == "timeout"
    kills = [c for c in calls(engine) if c[0] == "kill"]
    assert kills and kills[0][:3] == ["kill", "--signal", "SIGUSR1"]


def test_engine_down_is_a_clear_environment_error(project: Callable[..., Project], engine: dict[str, str]) -> None:
    p = project("passing", row=ROW)
    proc = p.run("run", "--device", "fixture", env=engine_down(engine, True))
    assert proc.returncode == 5
    assert "Cannot connect to the Docker daemon" in proc.stderr
    assert "--local" in proc.stderr  # the tip


def test_auto_falls_back_to_the_host_and_in_image_runs_locally(
    project: Callable[..., Project], engine: dict[str, str]
) -> None:
    p = project("passing", row=ROW.replace('run_in = "container"', 'run_in = "auto"'))
    down = p.run("plan", "--device", "fixture", "--json", env=engine_down(engine, True))
    plan = json.loads(down.stdout)
    assert plan["mode"] == "local" and "Cannot connect" in plan["reason"]
    inside = p.run("plan", "--device", "fixture", "--json", env={**engine, "DEVICE_MATRIX_IN_IMAGE": "fixture"})
    assert json.loads(inside.stdout)["mode"] == "local"
    up = p.run("plan", "--device", "fixture", "--json", env=engine_down(engine, False))
    assert json.loads(up.stdout)["mode"] == "container"


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
    from device_matrix.run.executors.base import LaunchSpec
    from device_matrix.run.executors.container import ContainerExecutor, user_options

    spec = LaunchSpec(pytest_args=[], env={}, workdir=tmp_path, project_root=tmp_path, core_limit=None)
    row = Row(name="r", pjrt_device="CPU", image="img", container_options=("--shm-size=1g",))
    monkeypatch.setattr(os, "getuid", lambda: 1001)
    monkeypatch.setattr(os, "getgid", lambda: 1002)
    argv = ContainerExecutor("/usr/bin/docker", row, host_env={}).argv(spec)
    assert argv[argv.index("--user") + 1] == "1001:1002" and "HOME=/tmp" in argv
    assert argv.index("--user") < argv.index("img")  # an engine option, not the command's
    # rootless engines map the invoking user to the container's root already
    assert user_options("/usr/bin/podman", (), {}, 1001, 1002) == []
    assert user_options("docker", (), {"DOCKER_HOST": "unix:///run/user/1001/docker.sock"}, 1001, 1002) == []
    # root stays root; a row's own --user wins
    assert user_options("docker", (), {}, 0, 0) == []
    assert user_options("docker", ("--user=0:0",), {}, 1001, 1002) == []
    assert user_options("docker", ("-u", "5"), {}, 1001, 1002) == []


def test_fake_engine_run_as_root_passes_no_user(project: Callable[..., Project], engine: dict[str, str]) -> None:
    p = project("passing", row=ROW)
    assert p.run("run", "--device", "fixture", env=engine).returncode == 0
    run = calls(engine)[1]
    assert ("--user" in run) is (os.getuid() != 0)
    if os.getuid() != 0:
        assert run[run.index("--user") + 1] == f"{os.getuid()}:{os.getgid()}"


def test_allowlisted_secrets_are_named_in_the_repro_never_their_values(
    project: Callable[..., Project], engine: dict[str, str]
) -> None:
    secret = "hf_" + "AllowListedContainerToken" * 2
    p = project("segv", row=ROW, top='env_allowlist = ["HF_TOKEN"]')
    proc = p.run("run", "--device", "fixture", "--reruns", "0", env={**engine, "HF_TOKEN": secret})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = p.record()["crashes"]
    assert " -e HF_TOKEN " in crash["repro"] and "HF_TOKEN=" not in crash["repro"]
    # the container did get it (the engine's argv), and no file or output holds it
    (run,) = [c for c in calls(engine) if c[0] == "run"][:1]
    assert f"HF_TOKEN={secret}" in run
    assert secret not in proc.stdout + proc.stderr
    # (the fake engine's own log of its argv is the engine's, not ours)
    leaked = [str(f) for f in p.results.rglob("*") if f.is_file() and secret.encode() in f.read_bytes()]
    assert leaked == []
