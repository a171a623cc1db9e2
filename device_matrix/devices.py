"""Is a row's device present on this host? An ordered list of checks decides.

Each check is one of:

``env:VAR``        decides when VAR is set: ``1/true/yes`` present, anything else absent
``glob:PATTERN``   present when the pattern matches a path (``/dev/accel*``)
``command:ARGV``   present when the command exits 0 within 10 s (``nvidia-smi -L``)
``always``         present
``never``          absent

The first check that decides wins; an ``env`` check whose variable is unset, a glob
that matches nothing and a command that fails or is missing do not decide, and the
next check runs. When no check decides, the device is absent and the reason lists
what was tried.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shlex
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from device_matrix.config import Row

TRUTHY = frozenset({"1", "true", "yes", "on"})
COMMAND_TIMEOUT = 10.0  # seconds a ``command:`` check is given


@dataclass(frozen=True)
class Presence:
    present: bool
    reason: str


def ask_tool(
    argv: list[str], timeout: float, *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> tuple[int | None, str]:
    """A tool asked on this host (a presence check, a driver tool, pip), an untrusted child
    (#30): its own process group, ended with what it started when it does not answer in
    ``timeout``. (exit code or None when it did not end in ``timeout``, its stdout or else its stderr)."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.kill()
        # the group is gone; a pipe a daemon it started still holds open is not waited on
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        return None, ""
    text = (stdout or stderr).decode("utf-8", "replace").strip()
    return proc.returncode, text


def _command_succeeds(argv: list[str]) -> tuple[bool, str]:
    if not argv or shutil.which(argv[0]) is None:
        return False, f"{argv[0] if argv else '(empty)'} not found"
    try:
        # #30: in its own process group, ended with what it started when it hangs
        code, _ = ask_tool(argv, COMMAND_TIMEOUT)
    except OSError as exc:
        return False, f"{argv[0]}: {exc}"
    if code is None:
        return False, f"`{shlex.join(argv)}` did not answer in {COMMAND_TIMEOUT:g} s"
    if code == 0:
        return True, f"`{shlex.join(argv)}` succeeded"
    return False, f"`{shlex.join(argv)}` exited {code}"


def detect(row: Row, environ: Mapping[str, str] | None = None) -> Presence:
    env = os.environ if environ is None else environ
    tried: list[str] = []
    for check in row.presence:
        kind, _, arg = check.partition(":")
        if kind == "always":
            return Presence(True, "always present")
        if kind == "never":
            return Presence(False, "marked never present")
        if kind == "env":
            value = env.get(arg) if arg else None
            if value is None:
                tried.append(f"${arg} unset")
                continue
            present = value.strip().lower() in TRUTHY
            return Presence(present, f"${arg}={value}")
        if kind == "glob":
            matches = sorted(glob.glob(arg))  # noqa: PTH207 - absolute patterns (/dev/accel*)
            if matches:
                return Presence(True, f"{arg} matches {', '.join(matches[:3])}")
            tried.append(f"no {arg}")
            continue
        if kind == "command":
            try:
                argv = shlex.split(arg)
            except ValueError as exc:  # the configuration rejects these; a Row built in code may not
                tried.append(f"`{arg}` cannot be split ({exc})")
                continue
            ok, why = _command_succeeds(argv)
            if ok:
                return Presence(True, why)
            tried.append(why)
            continue
    reason = "; ".join(tried) if tried else "no presence checks configured"
    return Presence(False, f"{row.pjrt_device} device not found ({reason})")


def install_hint(row: Row) -> str:
    """What a user does to get this row's device software, for `device-matrix doctor`."""
    pieces = []
    if row.install:
        pip = " ".join(shlex.quote(x) for x in (*row.install, *row.install_args))
        pieces.append(f"pip install {pip}")
    if row.image:
        pieces.append(f"or run in its image: {row.image}")
    return "; ".join(pieces) or "nothing to install"
