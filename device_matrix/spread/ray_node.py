"""What runs on the nodes of a Ray cluster: the tasks of a spread row (#23).

Each task runs in a temp folder of its own on its node, removed in every ending of the
task (its own ``finally``, or device_matrix.spread.janitor when its worker is killed): the
row collected, a shard through the ordinary runner (``device-matrix run --shard K/N``, a
process of its own), what a dead worker's shard left, a gang's master address and ranks.
What leaves a node is redacted there with the node's own secrets (#22). Ray is imported
only here and in device_matrix.spread.ray, only when asked for.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from device_matrix.errors import EnvironmentProblem
from device_matrix.executors.base import PopenChild, become_subreaper, spawn
from device_matrix.redact import Redactor, redact_file
from device_matrix.run.context import RunOptions
from device_matrix.spread import gang as gangs
from device_matrix.spread.door import RowRun, collect
from device_matrix.spread.driver import SHARD_GRACE
from device_matrix.spread.janitor import CHILD, ENDED
from device_matrix.spread.split import Split

HOLD = 30.0  # seconds a dead worker's temp folder waits on its node for the driver to fetch it


def import_ray() -> Any:
    """Ray, with its usage statistics off; a clear error where it is not installed."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise EnvironmentProblem(
            "--executor ray: Ray is not installed here",
            tip="pip install 'device-matrix[ray]' on the driver and on every node of the cluster.",
        ) from None


@contextlib.contextmanager
def _task_folder(name: str) -> Iterator[Path]:
    """The task's temp folder on its node, removed in every ending of the task.

    The task's own ``finally`` removes it; the janitor (a process of its own) when the
    task's worker is killed before that ``finally`` runs.
    """
    folder = Path(tempfile.gettempdir()) / name
    folder.mkdir(mode=0o700)
    # the worker adopts no orphan (a collection here made it a subreaper): the janitor's
    # own process must escape the worker, whose children Ray ends with it
    become_subreaper(on=False)
    # started as every child is (#31), but it outlives the worker it watches: no death
    # signal, no token for a sweep to find, and waited for, never ended
    with Path(os.devnull).open("wb") as devnull:
        janitor = spawn(
            [sys.executable, "-m", "device_matrix.spread.janitor", str(os.getpid()), str(folder), str(HOLD)],
            env=os.environ,
            cwd=folder.parent,
            output=devnull,
            token="",
            death_signal=None,
            adopt=False,
            carry_token=False,
        )
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(subprocess.TimeoutExpired):
            janitor.wait(5)  # its first process exits at once; the one it forked sees the folder gone


def _run_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    folder: Path,
    log: Path,
    timeout: float,
    grace: float,
    abort: bool = False,
) -> tuple[int | None, bool]:
    """The task's process: spawned as every child is, waited for at most ``timeout``.

    Returns its exit status and whether the timeout ended it (``abort``: SIGABRT first, so
    faulthandler dumps its stacks).
    """
    with log.open("wb") as out:
        child = spawn(
            argv,
            env=env,
            cwd=Path(cwd),
            output=out,
            token=f"{folder.name}-{time.monotonic_ns()}",
            grace=grace,
            death_signal=signal.SIGTERM,
            adopt=False,  # the worker stays no subreaper: see _task_folder
        )
        (folder / CHILD).write_text(str(child.pid))
        return _wait(child, timeout, abort=abort)


def _wait(child: PopenChild, timeout: float, *, abort: bool) -> tuple[int | None, bool]:
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while child.poll() is None:
            if time.monotonic() > deadline and not timed_out:
                timed_out = True
                if not abort:
                    break
                child.send(signal.SIGABRT)
                deadline = time.monotonic() + gangs.ABORT_GRACE
            elif timed_out and time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        code = child.end()  # its group, what carries its token, its orphans (#23)
    return code, timed_out


def collect_on_node(project_root: str, row: str, options: RunOptions, force: str | None) -> dict[str, Any]:
    """The row's tests, collected on a node that has the row's software."""
    from device_matrix import config
    from device_matrix.run.plan import plan_row

    cfg = config.load(Path(project_root))
    plan = plan_row(cfg, cfg.row(row), force=force)  # type: ignore[arg-type]
    found = collect(RowRun(cfg, plan, options))
    # what leaves the node is redacted with the node's own secrets (#22): each nodeid as an
    # identifier, as the shards' records name it (the plan is made of these), the reason as text
    redactor = Redactor()
    tests = None if found.nodeids is None else [redactor.ident(t) for t in found.nodeids]
    return {"tests": tests, "reason": found.problem and redactor.text(found.problem)}


def shard_on_node(
    project_root: str,
    split: Split,
    row: str,
    index: int,
    forwarded: Sequence[str],
    *,
    name: str,
    timeout: float,
    previous: Mapping[str, bytes] | None = None,
) -> dict[str, Any]:
    """Run one shard with the runner, in a process of its own; its results files as bytes.

    ``previous``: the files of the shard's interrupted run, which this one resumes;
    ``name``: the task's temp folder, which the driver knows (it fetches what a dead
    worker's shard left there: :func:`salvage_on_node`).
    """
    context = import_ray().get_runtime_context()
    node = str(context.get_node_id())
    with _task_folder(name) as tmp:
        plan_file = tmp / "plan.json"
        split.write(plan_file)
        folder = tmp / "results" / row / "shards" / str(index)
        for rel, data in (previous or {}).items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        command = ["--device", row, "--shard", f"{index}/{split.of}", "--shard-plan", str(plan_file)]
        command += ["--results", str(tmp / "results"), *(["--resume"] if previous is not None else []), *forwarded]
        argv = [sys.executable, "-m", "device_matrix", "--project", project_root, "run", *command]
        code, _ = _run_child(
            argv,
            env=os.environ,
            cwd=project_root,
            folder=tmp,
            log=tmp / "console.log",
            timeout=timeout,
            grace=SHARD_GRACE,
        )
        files = _outgoing(folder, {"console.log": tmp / "console.log"}, Redactor())
        return {"node": node, "host": socket.gethostname(), "returncode": code, "files": files}


def _outgoing(folder: Path | None, extra: Mapping[str, Path], redactor: Redactor) -> dict[str, bytes]:
    """What leaves this node for the driver: every file of ``folder`` (a shard's results) and
    ``extra``, by name. The one place results leave a node (#22, #23): each file redacted
    by its kind (:func:`~device_matrix.redact.redact_file`) with ``redactor``, which knows
    this node's own secrets (the driver, which does not, redacts again with its own)."""
    files = {}
    if folder is not None and folder.is_dir():
        files = {
            str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != ".lock"
        }
    for name, path in extra.items():
        with contextlib.suppress(OSError):
            files[name] = path.read_bytes()
    return {name: redact_file(name, data, redactor) for name, data in files.items()}


def salvage_on_node(name: str, row: str, index: int, wait: float) -> dict[str, Any]:
    """What a dead worker's shard left in its temp folder on this node, once its runner ended.

    The folder goes with it: the janitor keeps it only until then.
    """
    tmp = Path(tempfile.gettempdir()) / name
    end = time.monotonic() + wait
    while tmp.is_dir() and not (tmp / ENDED).exists() and time.monotonic() < end:
        time.sleep(0.1)
    try:
        if not (tmp / ENDED).exists():
            return {"files": None}
        shard = tmp / "results" / row / "shards" / str(index)
        return {"files": _outgoing(shard, {"console.log": tmp / "console.log"}, Redactor())}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def master_on_node() -> tuple[str, int]:
    """Rank 0's node: its IP and a port free there now."""
    ray = importlib.import_module("ray")
    with socket.socket() as s:
        s.bind(("", 0))
        port = int(s.getsockname()[1])
    return str(ray.util.get_node_ip_address()), port


def rank_on_node(
    project_root: str, argv: Sequence[str], env: Mapping[str, str], timeout: float, *, name: str
) -> dict[str, Any]:
    """One rank, as a local gang's rank runs: its own session, its output in a file, its leftovers swept."""
    ray = importlib.import_module("ray")
    context = ray.get_runtime_context()
    started = time.monotonic()
    with _task_folder(name) as tmp:
        log = tmp / "rank.log"
        code, timed_out = _run_child(
            [sys.executable, *argv],
            env={**os.environ, **env},
            cwd=project_root,
            folder=tmp,
            log=log,
            timeout=timeout,
            grace=3.0,
            abort=True,
        )
        return {
            "node": str(context.get_node_id()),
            "host": socket.gethostname(),
            "ip": str(ray.util.get_node_ip_address()),
            "returncode": code,
            "timed_out": timed_out,
            "duration": time.monotonic() - started,
            # the node's own secrets and the rank's (#22)
            "output": _outgoing(None, {"rank.log": log}, Redactor({**os.environ, **env})).get("rank.log", b""),
        }
