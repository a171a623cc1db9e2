"""The command that reruns one crashed test exactly as the run did.

It names the interpreter the run used (``--python`` or the runner's own), the working
directory, and the container when the row ran in one: ``python`` on a maintainer's PATH
is often another interpreter, without torch_xla (issue 10).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Container:
    engine: str  # the engine's command: "docker", "podman"
    image: str
    mounts: tuple[str, ...] = ()  # "host:container" volume specs, as given to -v


def repro_command(
    targets: Sequence[str],
    *,
    python: str,
    workdir: str,
    env: Mapping[str, str | None],
    container: Container | None = None,
    pytest_args: Sequence[str] = ("-p", "no:cacheprovider"),
    nox_session: str | None = None,
) -> str:
    """A shell command (and, with ``nox_session``, a second line with the nox form).

    A variable whose value is None comes from the host as it is (a container's
    allowlisted secrets): the command names it, never its value.
    """
    pytest = [python, "-m", "pytest", *pytest_args, *targets]
    if container is None:
        assigns = [f"{k}={shlex.quote(v)}" for k, v in sorted(env.items()) if v is not None]
        command = f"cd {shlex.quote(workdir)} && " + " ".join([*assigns, shlex.join(pytest)])
    else:
        argv = [container.engine, "run", "--rm", "-w", workdir]
        for mount in container.mounts:
            argv += ["-v", mount]
        for k, v in sorted(env.items()):
            argv += ["-e", k if v is None else f"{k}={v}"]
        command = shlex.join([*argv, container.image, *pytest])
    if nox_session is None:
        return command
    test = " ".join(f"--test {shlex.quote(t)}" for t in targets)
    return f"{command}\n# or: " + f"nox -s {nox_session} -- {test}".strip()
