"""The container engine: which one is installed, whether it answers, and what it is.

docker and podman answer ``info`` with different structures (``{{.ServerVersion}}`` is
docker's field; podman's is ``{{.Version.Version}}``, and a docker-only template is an
error there, #21), so the engine is asked for its whole answer as JSON and the answer
says which engine it is: a ``docker`` that is podman's docker-compatible command is
podman. With ``auto`` the first engine that answers is taken: a docker client without
its daemon does not hide a working podman.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

EngineName: TypeAlias = Literal["docker", "podman"]
ENGINES: tuple[EngineName, ...] = ("docker", "podman")
ENGINE_CHECK_TIMEOUT = 20.0
# one template both engines understand: the whole answer, as JSON
INFO_FORMAT = "{{json .}}"


@dataclass(frozen=True)
class Engine:
    """An engine that answered ``info``."""

    path: str  # the executable run
    name: EngineName  # what answered, from the answer itself
    version: str
    # the engine runs as the invoking user: the container's root already is that user
    rootless: bool

    @property
    def command(self) -> str:
        """The engine's command as a user types it (repro lines)."""
        return Path(self.path).name


@dataclass(frozen=True)
class NoEngine:
    """Why no engine can run a container here."""

    reason: str


def read_info(path: str, info: Mapping[str, Any]) -> Engine | NoEngine:
    """The engine from its ``info`` answer (docker's and podman's structures differ)."""
    version = info.get("version")
    if isinstance(version, Mapping) and isinstance(version.get("Version"), str) and version["Version"]:
        host = info.get("host")
        security = host.get("security") if isinstance(host, Mapping) else None
        rootless = isinstance(security, Mapping) and security.get("rootless") is True
        return Engine(path, "podman", version["Version"], rootless)
    errors = info.get("ServerErrors")
    if isinstance(errors, list) and errors:
        return NoEngine(f"`{Path(path).name} info`: {errors[0]}")
    server = info.get("ServerVersion")
    if isinstance(server, str) and server:
        options = info.get("SecurityOptions")
        rootless = isinstance(options, list) and any("name=rootless" in str(o) for o in options)
        return Engine(path, "docker", server, rootless)
    return NoEngine(f"`{Path(path).name} info` names no engine version (neither docker's nor podman's answer)")


def probe_engine(path: str) -> Engine | NoEngine:
    """Ask the engine at ``path`` for its ``info``: the engine, or why it does not answer."""
    name = Path(path).name
    try:
        proc = subprocess.run(
            [path, "info", "--format", INFO_FORMAT],
            capture_output=True,
            text=True,
            timeout=ENGINE_CHECK_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return NoEngine(f"`{name} info` did not answer in {ENGINE_CHECK_TIMEOUT:.0f} s")
    except OSError as exc:
        return NoEngine(f"{name}: {exc.strerror or exc}")
    if proc.returncode != 0:
        # docker prints a JSON answer and exits 1 when its daemon is down: stderr says why
        first = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        return NoEngine(f"`{name} info` failed: {first[0] if first else f'exit {proc.returncode}'}")
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        return NoEngine(f"`{name} info --format '{INFO_FORMAT}'` did not answer JSON")
    if not isinstance(info, Mapping):
        return NoEngine(f"`{name} info --format '{INFO_FORMAT}'` did not answer a JSON object")
    return read_info(path, info)


def find_engine(choice: str, environ: Mapping[str, str] | None = None) -> Engine | NoEngine:
    """The first engine of ``choice`` (``auto``: docker, then podman) that answers."""
    env = os.environ if environ is None else environ
    names = ENGINES if choice == "auto" else (choice,)
    problems = []
    for name in names:
        found = shutil.which(name, path=env.get("PATH"))
        if found is None:
            continue
        engine = probe_engine(found)
        if isinstance(engine, Engine):
            return engine
        problems.append(engine.reason)
    if not problems:
        return NoEngine(f"no {' or '.join(names)} on PATH")
    return NoEngine("; ".join(problems))
