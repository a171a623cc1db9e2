"""The command that reruns one crashed test exactly as the run did.

It names the interpreter the run used (``--python`` or the runner's own), the working
directory, and the container when the row ran in one: ``python`` on a maintainer's PATH
is often another interpreter, without torch_xla (issue 10). A container's is the engine
command the run used, with the row's options (devices, shm size, ulimits: #21).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence


def repro_command(
    targets: Sequence[str],
    *,
    python: str,
    workdir: str,
    env: Mapping[str, str],
    pytest_args: Sequence[str] = ("-p", "no:cacheprovider"),
    nox_session: str | None = None,
) -> str:
    """A shell command (and, with ``nox_session``, a second line with the nox form)."""
    pytest = [python, "-m", "pytest", *pytest_args, *targets]
    assigns = [f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())]
    command = f"cd {shlex.quote(workdir)} && " + " ".join([*assigns, shlex.join(pytest)])
    return _with_nox(command, targets, nox_session)


def container_repro_command(
    targets: Sequence[str],
    *,
    launcher: Sequence[str],
    pytest_args: Sequence[str] = ("-p", "no:cacheprovider"),
    nox_session: str | None = None,
) -> str:
    """The engine's command as the run gave it (``launcher``: its options, mounts, folder,
    variables and image, through the image's interpreter), then pytest and the targets.

    A variable the container got from the host (an allowlisted secret) is in ``launcher``
    by its name, never its value (``-e HF_TOKEN``).
    """
    return _with_nox(shlex.join([*launcher, "-m", "pytest", *pytest_args, *targets]), targets, nox_session)


def _with_nox(command: str, targets: Sequence[str], nox_session: str | None) -> str:
    if nox_session is None:
        return command
    test = " ".join(f"--test {shlex.quote(t)}" for t in targets)
    return f"{command}\n# or: " + f"nox -s {nox_session} -- {test}".strip()
