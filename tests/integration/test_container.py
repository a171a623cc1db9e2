"""Container rows through a fake engine that records argv and runs the inner command."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from device_matrix.executors.container import PACKAGE_DIR
from tests.conftest import FIXTURES, Project, clean_env

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
    """A fake docker that answers, and a fake podman without its service: a real engine
    installed on this host is never the one a test talks to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").symlink_to(FIXTURES / "fake_engine.py")
    (bin_dir / "podman").symlink_to(FIXTURES / "fake_engine.py")
    settings = bin_dir / "fake-engine.json"
    settings.write_text(
        json.dumps({"log": str(tmp_path / "engine.log"), "state": str(tmp_path / "engine-state"), "down": ["podman"]})
    )
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_ENGINE_SETTINGS": str(settings),
        "GITHUB_TOKEN": "ghp_" + "HostOnlySecret12" * 3,
    }


def calls(env: dict[str, str]) -> list[list[str]]:
    log = Path(json.loads(Path(env["FAKE_ENGINE_SETTINGS"]).read_text())["log"])
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_container_row_runs_through_the_engine(project: Callable[..., Project], engine: dict[str, str]) -> None:
    p = project("passing", row=ROW)
    proc = p.run("run", "--device", "fixture", env=engine)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = p.record()
    assert rec["mode"] == "container" and rec["summary"]["passed"] == 40
    assert rec["environment"]["container_image"] == "registry.example/xla:r2.9@sha256:abc"
    info, check, run = calls(engine)
    assert info[:3] == ["info", "--format", "{{json .}}"]
    # the image's interpreter and its pytest, asked before the first attempt
    assert check[check.index("registry.example/xla:r2.9@sha256:abc") + 1 :][:2] == ["python", "-c"]
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
    assert crash["repro"].startswith("docker run --rm --init ")  # the container, its folder and image
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


def test_each_attempt_has_its_own_container_and_an_ended_one_is_removed(
    project: Callable[..., Project], engine: dict[str, str]
) -> None:
    # on podman the --rm of a container whose client was ended is left to conmon: the next
    # attempt, under the same name, was refused with "the container name ... is already in use"
    p = project("hang", row=ROW)
    proc = p.run("run", "--device", "fixture", "--test-timeout", "3", "--reruns", "0", env=engine)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert p.record()["summary"]["passed"] == 3  # the attempt after the kill ran
    log = calls(engine)
    names = [c[c.index("--name") + 1] for c in log if c[0] == "run" and "pytest" in c]
    assert len(names) == 2 and len(set(names)) == 2
    assert ["rm", "-f", names[0]] in log  # the one the runner ended
    assert ["rm", "-f", names[1]] not in log  # the one that ended by itself went with its --rm


def test_an_interrupt_while_the_image_is_checked_ends_the_check_and_says_so(
    project: Callable[..., Project], engine: dict[str, str]
) -> None:
    p = project("passing", row=ROW)
    (p.results / "fixture").mkdir(parents=True)
    (p.results / "fixture" / "run.json").write_text('{"status": "passed"}')  # the last run's
    runner = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--device", "fixture"],
        cwd=p.root,
        env={**clean_env(), **with_settings(engine, check_sleep=120)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not [c for c in calls(engine) if c[0] == "run" and "-c" in c] and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 128 + signal.SIGTERM, out + err
    record = p.record()
    assert record["status"] == "interrupted" and "before the first attempt" in record["reason"]
    (check,) = [c for c in calls(engine) if c[0] == "run" and "-c" in c]
    assert ["rm", "-f", check[check.index("--name") + 1]] in calls(engine)  # the check's container goes too
    assert not [c for c in calls(engine) if c[0] == "run" and "pytest" in c]


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
    # the container did get it, by name from the engine's environment (#30: never its
    # value on the engine's command line, which `ps` shows), and no file or output holds it
    (run,) = [c for c in calls(engine) if c[0] == "run"][:1]
    assert run[run.index("HF_TOKEN") - 1] == "-e" and not [a for a in run if secret in a]
    assert secret not in proc.stdout + proc.stderr
    # (the fake engine's own log of its argv is the engine's, not ours)
    leaked = [str(f) for f in p.results.rglob("*") if f.is_file() and secret.encode() in f.read_bytes()]
    assert leaked == []


def with_settings(env: dict[str, str], **changes: object) -> dict[str, str]:
    settings = Path(env["FAKE_ENGINE_SETTINGS"])
    settings.write_text(json.dumps({**json.loads(settings.read_text()), **changes}))
    return env


def test_podman_answers_its_own_info(project: Callable[..., Project], engine: dict[str, str]) -> None:
    # Seen (#21): `podman info --format {{.ServerVersion}}` is a docker-only template
    p = project("passing", row=ROW, top='container_engine = "podman"')
    plan = p.run("plan", "--device", "fixture", "--json", env=with_settings(engine, down=[]))
    assert plan.returncode == 0, plan.stdout + plan.stderr
    planned = json.loads(plan.stdout)
    assert planned["mode"] == "container", planned
    proc = p.run("run", "--device", "fixture", env=engine)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    env = p.record()["environment"]
    assert (env["container_engine"], env["container_engine_version"]) == ("podman", "4.3.1")
    run = next(c for c in calls(engine) if c[0] == "run" and "pytest" in c)
    assert ("--user" in run) is (os.getuid() != 0)  # a rootful podman (its info says so) writes as root


def test_auto_takes_the_engine_that_answers(project: Callable[..., Project], engine: dict[str, str]) -> None:
    # a docker client without its daemon beside a working podman: podman runs the row
    p = project("passing", row=ROW)
    proc = p.run("run", "--device", "fixture", env=with_settings(engine, down=["docker"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.record()["environment"]["container_engine"] == "podman"
    # and when neither answers, both are named
    both = p.run("run", "--device", "fixture", env=with_settings(engine, down=True))
    assert both.returncode == 5
    assert "docker" in both.stderr and "podman" in both.stderr and "Cannot connect" in both.stderr


def test_an_image_with_only_python3_runs(project: Callable[..., Project], engine: dict[str, str]) -> None:
    # Seen (#21): the interpreter was hard-coded to `python`
    p = project("passing", row=ROW)
    proc = p.run("run", "--device", "fixture", env=with_settings(engine, pythons=["python3"]))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = p.record()
    assert rec["summary"]["passed"] == 40 and rec["environment"]["container_python"] == "python3"
    run = next(c for c in calls(engine) if c[0] == "run" and "pytest" in c)
    image_at = run.index("registry.example/xla:r2.9@sha256:abc")
    assert run[image_at + 1] == "python3"


def test_a_missing_container_python_names_the_image(project: Callable[..., Project], engine: dict[str, str]) -> None:
    p = project("passing", row=ROW + 'container_python = "/opt/conda/bin/python"\n')
    proc = p.run("run", "--device", "fixture", env=with_settings(engine, pythons=["python", "python3"]))
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "registry.example/xla:r2.9@sha256:abc" in proc.stderr and "/opt/conda/bin/python" in proc.stderr
    assert "not found" in proc.stderr and "container_python" in proc.stderr  # the tip names the key
    assert not [c for c in calls(engine) if c[0] == "run" and "pytest" in c]  # no attempt started
    assert p.record()["status"] == "error" and "refused" in p.record()["reason"]


def test_repro_is_the_exact_engine_command(project: Callable[..., Project], engine: dict[str, str]) -> None:
    # Seen (#21): the repro left out the row's container_options (ulimits, devices, shm size)
    p = project("segv", row=ROW, top='env_allowlist = ["HF_TOKEN"]')
    proc = p.run("run", "--device", "fixture", "--reruns", "0", env={**engine, "HF_TOKEN": "hf_" + "x" * 30})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = p.record()["crashes"]
    repro = shlex.split(crash["repro"].splitlines()[0])
    launched = next(c for c in calls(engine) if c[0] == "run" and "pytest" in c)
    image = "registry.example/xla:r2.9@sha256:abc"
    # the engine's options as the run gave them, but its container's name
    name_at = launched.index("--name")
    options = [*launched[1:name_at], *launched[name_at + 2 : launched.index(image)]]
    variables = {options[k + 1].split("=", 1)[0] for k in range(len(options)) if options[k] == "-e"}
    others = [o for k, o in enumerate(options) if o != "-e" and (k == 0 or options[k - 1] != "-e")]
    assert repro[:2] == ["docker", "run"]
    repro_opts = repro[2 : repro.index(image)]
    assert [o for k, o in enumerate(repro_opts) if o != "-e" and (k == 0 or repro_opts[k - 1] != "-e")] == others
    assert "--shm-size=16g" in others and "--gpus" in others
    assert f"{PACKAGE_DIR}:/opt/device-matrix/device_matrix:ro" in others
    named = {repro_opts[k + 1] for k in range(len(repro_opts)) if repro_opts[k] == "-e"}
    assert "HF_TOKEN" in named and not any(v.startswith("HF_TOKEN=") for v in named)  # by name only
    assert {v.split("=", 1)[0] for v in named} <= variables
    assert {"PJRT_DEVICE", "PYTHONPATH", "DEVICE_MATRIX_DEVICE"} <= {v.split("=", 1)[0] for v in named}
    after = repro[repro.index(image) + 1 :]
    assert after[0] == "python" and after[after.index("-m") + 1] == "pytest"
    assert after[-1] == "suites/segv/test_segv.py::test_c_dies"


def test_the_row_pythonpath_reaches_the_container_after_the_plugin_and_project(
    project: Callable[..., Project], engine: dict[str, str]
) -> None:
    # Seen: a row's env PYTHONPATH = "src" (a src layout, mounted, not installed in the
    # image) was replaced by the runner's own, and the tests could not import the project
    p = project("passing", row=ROW + 'env = { PJRT_DEVICE = "CPU", PYTHONPATH = "src" }')
    (p.root / "src").mkdir()
    (p.root / "src" / "toy_src_pkg.py").write_text("VALUE = 3\n")
    (p.root / "suites" / "passing" / "test_src_layout.py").write_text(
        "import toy_src_pkg\n\n\ndef test_imports_from_src():\n    assert toy_src_pkg.VALUE == 3\n"
    )
    proc = p.run("run", "--device", "fixture", env=engine)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = p.record()
    assert rec["summary"]["passed"] == 41 and rec["summary"]["error"] == 0
    run = next(c for c in calls(engine) if c[0] == "run" and "pytest" in c)
    given = [run[k + 1] for k in range(len(run)) if run[k] == "-e" and run[k + 1].startswith("PYTHONPATH=")]
    assert given == [f"PYTHONPATH=/opt/device-matrix:{p.root.resolve()}:src"]
    # the record has what the child saw (the fake engine's /opt is a folder of its own)
    assert rec["environment"]["variables"]["PYTHONPATH"].endswith(f"device-matrix:{p.root.resolve()}:src")
