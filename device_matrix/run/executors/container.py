"""Run the pytest child in the row's container image (docker or podman).

The project is mounted at the same path inside, so nodeids, paths in stacks and the
results folder are the same on both sides and results are written straight back to the
host. The container gets the row's variables, the runner's ``DEVICE_MATRIX_*`` ones and
an allowlist of host variables: never the whole host environment, so tokens stay out.
Inside, ``DEVICE_MATRIX_IN_IMAGE`` names the row, so a nested call runs locally.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

from device_matrix.config import Row
from device_matrix.errors import EnvironmentProblem
from device_matrix.run.executors.base import FAULTHANDLER_FROM_START, ExecutorName, LaunchSpec, PopenChild

ENGINES = ("docker", "podman")
CONTAINER_PYTHON = "python"
# this package, mounted read-only so the plugin loads in images that lack device-matrix
PACKAGE_MOUNT = "/opt/device-matrix"
PACKAGE_DIR = Path(__file__).resolve().parents[2]
ENGINE_CHECK_TIMEOUT = 20.0


def find_engine(choice: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The engine executable to use, or None when none is installed."""
    env = os.environ if environ is None else environ
    path = env.get("PATH")
    names = ENGINES if choice == "auto" else (choice,)
    for name in names:
        found = shutil.which(name, path=path)
        if found:
            return found
    return None


def check_engine(engine: str) -> str | None:
    """None when the engine answers; otherwise why it does not (client without daemon...)."""
    try:
        proc = subprocess.run(
            [engine, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=ENGINE_CHECK_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"`{engine} info` did not answer in {ENGINE_CHECK_TIMEOUT:.0f} s"
    except OSError as exc:
        return f"{engine}: {exc}"
    if proc.returncode != 0:
        first = (proc.stderr or proc.stdout).strip().splitlines()
        return f"`{Path(engine).name} info` failed: {first[0] if first else f'exit {proc.returncode}'}"
    return None


def expand_options(options: Sequence[str]) -> list[str]:
    """Expand globs in ``--device=`` options on the host (``/dev/neuron*`` -> one per match)."""
    out: list[str] = []
    for opt in options:
        if opt.startswith("--device=") and any(c in opt for c in "*?["):
            pattern = opt.split("=", 1)[1]
            host_part = pattern.split(":", 1)[0]
            matches = sorted(glob.glob(host_part))  # noqa: PTH207 - absolute patterns
            out.extend(f"--device={m}" for m in matches)
        else:
            out.append(opt)
    return out


def user_options(engine: str, options: Sequence[str], host_env: Mapping[str, str], uid: int, gid: int) -> list[str]:
    """Run as the invoking user, so files written into the mounted project are not root's.

    Nothing when the invoking user is root, when the row sets its own ``--user``/``-u``, or
    when the engine is rootless (podman, or docker on a per-user socket): there the
    container's root already is the invoking user, and ``--user`` would map to a
    subordinate id that owns the files instead. HOME points somewhere writable, since the
    image has no home for an unknown id.
    """
    if uid == 0 or any(o in ("--user", "-u") or o.startswith(("--user=", "-u=")) for o in options):
        return []
    if Path(engine).name == "podman" or "/run/user/" in host_env.get("DOCKER_HOST", ""):
        return []
    return ["--user", f"{uid}:{gid}", "-e", "HOME=/tmp"]


class ContainerExecutor:
    name: ExecutorName = "container"

    def __init__(
        self,
        engine: str,
        row: Row,
        *,
        env_allowlist: Sequence[str] = (),
        extra_mounts: Sequence[Path] = (),
        host_env: Mapping[str, str] | None = None,
    ) -> None:
        if not row.image:
            raise EnvironmentProblem(
                f"row {row.name!r} has no container image",
                tip=f"Set image under [tool.device-matrix.devices.{row.name}], or run it with --local.",
            )
        self.engine = engine
        self.row = row
        self.env_allowlist = tuple(env_allowlist)
        self.extra_mounts = tuple(extra_mounts)
        self.host_env = dict(os.environ if host_env is None else host_env)
        self.container_name = f"device-matrix-{row.name}-{secrets.token_hex(4)}"

    def interpreter(self) -> str:
        return CONTAINER_PYTHON

    def _env_pairs(self, spec: LaunchSpec) -> list[tuple[str, str]]:
        env: dict[str, str] = {}
        for name in self.env_allowlist:
            if name in self.host_env:
                env[name] = self.host_env[name]
        env.update(spec.env)
        env["DEVICE_MATRIX_IN_IMAGE"] = self.row.name
        env["DEVICE_MATRIX_IMAGE"] = self.row.image
        env["PYTHONPATH"] = f"{PACKAGE_MOUNT}:{spec.project_root}"
        return sorted(env.items())

    def argv(self, spec: LaunchSpec, *, name: str | None = None) -> list[str]:
        root = str(spec.project_root)
        argv = [self.engine, "run", "--rm", "--init"]
        if name:
            argv += ["--name", name]
        argv += expand_options(self.row.container_options)
        argv += user_options(self.engine, self.row.container_options, self.host_env, os.getuid(), os.getgid())
        if spec.core_limit is not None:
            argv += ["--ulimit", f"core={spec.core_limit}"]
        argv += ["-v", f"{root}:{root}"]
        argv += ["-v", f"{PACKAGE_DIR}:{PACKAGE_MOUNT}/device_matrix:ro"]
        for mount in self.extra_mounts:
            argv += ["-v", f"{mount}:{mount}"]
        argv += ["-w", str(spec.workdir)]
        for key, value in self._env_pairs(spec):
            argv += ["-e", f"{key}={value}"]
        argv += [self.row.image, CONTAINER_PYTHON, *FAULTHANDLER_FROM_START, "-m", spec.module]
        if spec.module == "pytest":
            # the image may lack device-matrix: the mounted package's plugin, by name
            argv += ["-p", "device_matrix.child.plugin"]
        argv += list(spec.pytest_args)
        return argv

    def launch(self, spec: LaunchSpec, output: BinaryIO) -> ContainerChild:
        spec.workdir.mkdir(parents=True, exist_ok=True)
        # only what the engine client itself needs from the host; the container's
        # environment is given explicitly with -e above
        client_env = {
            k: v
            for k, v in self.host_env.items()
            if k
            in (
                "PATH",
                "HOME",
                "DOCKER_HOST",
                "DOCKER_CONFIG",
                "DOCKER_CONTEXT",
                "XDG_RUNTIME_DIR",
                "CONTAINER_HOST",
                "TMPDIR",
                "LANG",
            )
        }
        proc = subprocess.Popen(
            self.argv(spec, name=self.container_name),
            cwd=spec.workdir,
            env=client_env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return ContainerChild(proc, spec.token, self.engine, self.container_name)

    def command_for(self, spec: LaunchSpec) -> list[str]:
        argv = self.argv(spec)
        argv[0] = Path(self.engine).name
        return argv


class ContainerChild(PopenChild):
    """The engine client in its own group; signals also go to the container by name."""

    # the engine's own helpers (podman's conmon leaves the client's session) outlive the
    # client by design, and the engine ends what ran inside the container
    sweeps_adopted = False

    def __init__(self, proc: subprocess.Popen[bytes], token: str, engine: str, name: str) -> None:
        super().__init__(proc, token)
        self.engine = engine
        self.name = name

    def _engine_kill(self, sig: int) -> None:
        try:
            subprocess.run(
                [self.engine, "kill", "--signal", signal.Signals(sig).name, self.name],
                capture_output=True,
                timeout=ENGINE_CHECK_TIMEOUT,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired):
            pass

    def send(self, sig: int) -> None:
        if self.proc.poll() is None:
            self._engine_kill(sig)

    def kill_group(self, sig: int) -> None:
        if self.proc.poll() is None:
            self._engine_kill(sig)
        super().kill_group(sig)
