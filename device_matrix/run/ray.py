"""Shards of a row as Ray tasks, on the nodes of a cluster that have the row's device.

``device-matrix run --executor ray --address auto|HOST:PORT``. Each shard is one Ray Core
task that runs the ordinary runner (``device-matrix run --shard K/N``, a process of its
own, so a crash is handled and diagnosed exactly as on a local host) on a node that has
what the row asks for (``ray_resources``, ``ray_num_cpus``, ``ray_labels``), and returns
the shard's results files as bytes: they reach the driver's results folder through the
object store, not a shared filesystem.

The driver places each task on a node itself (node affinity, strict), so it always knows
where a shard runs: a request no node can satisfy is refused before anything is
submitted (Ray would wait forever), a node that dies is named in the record, and its
shard runs again once on another node. Tasks are never retried by Ray (``max_retries=0``),
are cancelled when they overrun the row's ``run_timeout``, and nothing is reported to
Ray's usage statistics. Ray is imported only here, only when asked for.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from device_matrix.config import Config, Row
from device_matrix.errors import EnvironmentProblem, ResultsError
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.schema import RowStatus, RunRecord
from device_matrix.redact import Redactor, redact_file
from device_matrix.run import gang
from device_matrix.run.attempt import Interrupted
from device_matrix.run.plan import RowPlan
from device_matrix.run.runner import Run, RunListener, RunOptions, collect, run_row
from device_matrix.run.shards import (
    PLAN_FILE,
    SHARD_FILE,
    SHARDS_DIR,
    Shard,
    ShardPlan,
    clear_shards,
    make_plan,
    merge,
    plan_part,
    recorded_durations,
    resume_shards,
    shard_folder,
    write_merged,
)
from device_matrix.run.state import RunState, now_iso

_P = ParamSpec("_P")
_R = TypeVar("_R")

TIMEOUT_GRACE = 120.0  # seconds past run_timeout before a shard's task is cancelled
POLL = 0.2  # seconds between looks at the running tasks
PR_SET_PDEATHSIG = 1  # prctl(2)
NODE_LOST = ("NodeDiedError", "WorkerCrashedError", "LocalRayletDiedError", "OwnerDiedError")


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


@dataclass(frozen=True)
class Request:
    """What one shard asks of a node."""

    num_cpus: float
    num_gpus: float
    resources: Mapping[str, float]
    labels: Mapping[str, str]

    def needs(self) -> dict[str, float]:
        need = {"CPU": self.num_cpus, **self.resources}
        if self.num_gpus:
            need["GPU"] = self.num_gpus
        return {k: v for k, v in need.items() if v}

    def describe(self) -> str:
        parts = [f"{k}={v:g}" for k, v in sorted(self.needs().items())]
        parts += [f"label {k}={v}" for k, v in sorted(self.labels.items())]
        return ", ".join(parts)


def request_for(row: Row) -> Request:
    resources = {k: float(v) for k, v in row.ray_resources.items() if k not in ("GPU", "CPU")}
    return Request(
        num_cpus=float(row.ray_num_cpus),
        num_gpus=float(row.ray_resources.get("GPU", 0.0)),
        resources=resources,
        labels=dict(row.ray_labels),
    )


@dataclass
class Node:
    id: str
    host: str
    ip: str
    total: dict[str, float]
    labels: dict[str, str]
    free: dict[str, float] = field(default_factory=dict)
    dead: bool = False

    def name(self) -> str:
        return f"{self.id[:12]} ({self.host}, {self.ip})"

    def can_ever(self, request: Request) -> bool:
        return _fits(self.total, request.needs()) and all(self.labels.get(k) == v for k, v in request.labels.items())

    def can_now(self, request: Request) -> bool:
        return not self.dead and self.can_ever(request) and _fits(self.free, request.needs())

    def take(self, request: Request, sign: float = 1.0) -> None:
        for k, v in request.needs().items():
            self.free[k] = self.free.get(k, 0.0) - sign * v


def _fits(have: Mapping[str, float], need: Mapping[str, float]) -> bool:
    return all(have.get(k, 0.0) + 1e-9 >= v for k, v in need.items())


def cluster_nodes(ray: Any) -> list[Node]:
    nodes = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        total = {str(k): float(v) for k, v in (n.get("Resources") or {}).items()}
        nodes.append(
            Node(
                id=str(n["NodeID"]),
                host=str(n.get("NodeManagerHostname", "?")),
                ip=str(n.get("NodeManagerAddress", "?")),
                total=total,
                labels={str(k): str(v) for k, v in (n.get("Labels") or {}).items()},
                free=dict(total),
            )
        )
    return sorted(nodes, key=lambda node: node.id)  # the same placement for the same cluster


def refuse_unsatisfiable(nodes: Sequence[Node], request: Request, address: str, row: str) -> None:
    if any(node.can_ever(request) for node in nodes):
        return
    have = "; ".join(
        f"{node.name()}: " + ", ".join(f"{k}={v:g}" for k, v in sorted(node.total.items()) if _shown(k))
        for node in nodes
    )
    raise EnvironmentProblem(
        f"no node of the Ray cluster at {address} can run a shard of row {row!r}, which asks for "
        f"{request.describe()} (nodes: {have or 'none alive'})",
        tip="Start a node that has them (ray start --resources ...), or change the row's ray_resources, "
        "ray_num_cpus or ray_labels.",
    )


def _shown(resource: str) -> bool:
    return not resource.startswith(("node:", "accelerator_type:")) and resource not in ("memory", "object_store_memory")


def connect(ray: Any, address: str) -> None:
    if address != "auto":
        host, _, port = address.rpartition(":")
        try:
            # ray.init retries an address where nothing listens for minutes: ask first
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=5).close()
        except (OSError, ValueError) as exc:
            raise EnvironmentProblem(
                f"--address {address}: no Ray cluster answers there ({exc})",
                tip="Start one (ray start --head --port PORT) or give the address `ray start` printed.",
            ) from None
    # Ray's core worker takes SIGTERM for itself (it logs and exits 1): give the signals back,
    # so an interrupted driver cancels its tasks, writes what it knows and exits 128+N
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, configure_logging=False)
    except ConnectionError as exc:
        raise EnvironmentProblem(
            f"--address {address}: {exc}",
            tip="Start a cluster on this machine (ray start --head) or give its HOST:PORT.",
        ) from None
    finally:
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)


# --- what runs on the nodes ------------------------------------------------------------


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child only
    # the task's worker may be killed (cancelled, its node lost): the runner must not outlive
    # it; SIGTERM lets the runner end its pytest child and write what it knows
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def collect_on_node(
    project_root: str, row: str, options: RunOptions, force: str | None
) -> tuple[list[str] | None, str | None]:
    """The row's tests, collected on a node that has the row's software."""
    from device_matrix import config
    from device_matrix.output import Output
    from device_matrix.run.plan import plan_row

    cfg = config.load(Path(project_root))
    plan = plan_row(cfg, cfg.row(row), force=force)  # type: ignore[arg-type]
    found = collect(Run(cfg, plan, options, Output(verbose=False)))
    # what leaves the node is redacted with the node's own secrets (#22): each nodeid as
    # an identifier, as the shards redact their own collection to find it in the plan
    redactor = Redactor()
    tests = None if found.nodeids is None else [redactor.ident(t) for t in found.nodeids]
    return tests, (found.problem and redactor.text(found.problem))


def shard_on_node(
    project_root: str,
    split_plan: ShardPlan,
    row: str,
    index: int,
    forwarded: Sequence[str],
    *,
    previous: Mapping[str, bytes] | None = None,
) -> dict[str, Any]:
    """Run one shard with the runner, in a process of its own; its results files as bytes.

    ``previous``: the files of the shard's interrupted run, which this one resumes.
    """
    context = import_ray().get_runtime_context()
    node = str(context.get_node_id())
    tmp = Path(tempfile.mkdtemp(prefix="device-matrix-shard-"))
    try:
        plan_path = tmp / "plan.json"
        write_json_atomic(plan_path, split_plan)
        folder = tmp / "results" / row / "shards" / str(index)
        for rel, data in (previous or {}).items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        command = ["--device", row, "--shard", f"{index}/{split_plan['of']}", "--shard-plan", str(plan_path)]
        command += ["--results", str(tmp / "results"), *(["--resume"] if previous is not None else []), *forwarded]
        proc = subprocess.run(
            [sys.executable, "-m", "device_matrix", "--project", project_root, "run", *command],
            cwd=project_root,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            preexec_fn=_die_with_parent,
            check=False,
        )
        files = {
            str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".lock"
        }
        # the runner's files are redacted by it; what it printed is, here, before it leaves (#22)
        files["console.log"] = Redactor().text((proc.stdout + proc.stderr).decode("utf-8", "replace")).encode()
        return {"node": node, "host": socket.gethostname(), "returncode": proc.returncode, "files": files}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- the driver ------------------------------------------------------------------------


@dataclass
class _Running:
    shard: int
    node: Node
    started: float


def _unwrapping_interrupts(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """An interrupt raised while Ray's own code waits comes back wrapped in a SystemError."""

    @functools.wraps(func)
    def unwrapped(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return func(*args, **kwargs)
        except SystemError as exc:
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, Interrupted):
                raise cause from None
            raise

    return unwrapped


@_unwrapping_interrupts
def run_on_ray(
    cfg: Config,
    plan: RowPlan,
    options: RunOptions,
    listener: RunListener,
    *,
    shards: int,
    address: str,
    forwarded: Sequence[str],
    durations_from: Sequence[Path] = (),
) -> RunRecord:
    """Run the row as ``shards`` Ray tasks and merge their results into ``results/<row>/``."""
    row = plan.row
    if plan.mode == "unavailable":
        return run_row(cfg, plan, options, listener)
    ray = import_ray()
    connect(ray, address)
    try:
        request = request_for(row)
        nodes = cluster_nodes(ray)
        refuse_unsatisfiable(nodes, request, address, row.name)
        if row.gangs:
            gang.refuse_unsatisfiable(nodes, request.needs(), request.labels, row, address)
        remote = ray.remote(max_retries=0)
        options_ = _ray_options(ray, request)
        folder = cfg.results_dir / row.name
        resumed: set[int] = set()
        if options.resume:
            state = resume_shards(folder, shards)
            split_plan, resumed, waiting = state.plan, set(state.resume), sorted(state.resume + state.fresh)
            listener.note(row.name, f"resuming shard(s) {sorted(resumed) or 'none'} of {shards} on {address}")
        else:
            split_plan = _split_on_node(
                ray,
                cfg,
                plan,
                options=options,
                shards=shards,
                request=request,
                nodes=nodes,
                durations_from=durations_from,
            )
            waiting = list(range(1, shards + 1))
            clear_shards(folder)
            listener.note(
                row.name,
                f"{len(split_plan['tests'] or ())} tests in {shards} shard(s) on the Ray cluster at {address} "
                f"({len(nodes)} node(s); each shard asks for {request.describe()})",
            )
        # the split, kept here: an interrupted run resumes from it even if no shard came back
        write_json_atomic(folder / SHARDS_DIR / PLAN_FILE, split_plan)
        task = remote(shard_on_node)
        deadline_after = row.run_timeout + TIMEOUT_GRACE
        tries: dict[int, int] = dict.fromkeys(waiting, 0)
        lost: dict[int, list[dict[str, str]]] = {}
        running: dict[Any, _Running] = {}
        try:
            while waiting or running:
                for k in list(waiting):
                    node = next((n for n in nodes if n.can_now(request)), None)
                    if node is None:
                        break
                    waiting.remove(k)
                    tries[k] += 1
                    node.take(request)
                    previous = _shard_files(shard_folder(cfg, row.name, k)) if k in resumed else None
                    ref = task.options(**options_, scheduling_strategy=_on(ray, node)).remote(
                        str(cfg.project_root), split_plan, row.name, k, list(forwarded), previous=previous
                    )
                    running[ref] = _Running(k, node, time.monotonic())
                    listener.note(row.name, f"shard {k}/{shards} on node {node.name()}")
                if waiting and not running and not any(n.can_now(request) for n in nodes):
                    for k in waiting:  # every node that could run it is gone
                        _write_lost(cfg, plan, split_plan, k, lost=lost.get(k, []), why="no node left that can run it")
                    waiting.clear()
                    break
                if not running:
                    continue
                ready, _ = ray.wait(list(running), num_returns=1, timeout=POLL)
                for ref in ready:
                    job = running.pop(ref)
                    job.node.take(request, -1.0)
                    try:
                        result = ray.get(ref)
                    except Exception as exc:
                        if type(exc).__name__ not in NODE_LOST:
                            raise _task_failed(f"shard {job.shard}/{shards}", job.node, exc) from None
                        job.node.dead = True
                        lost.setdefault(job.shard, []).append(
                            {"node": job.node.id, "name": job.node.name(), "error": type(exc).__name__}
                        )
                        listener.note(
                            row.name, f"shard {job.shard}/{shards}: node {job.node.name()} died ({type(exc).__name__})"
                        )
                        if tries[job.shard] < 2:
                            waiting.append(job.shard)  # once more, elsewhere
                        else:
                            _write_lost(cfg, plan, split_plan, job.shard, lost=lost[job.shard], why="it was run twice")
                        continue
                    _receive(cfg, row.name, job, result, lost.get(job.shard, []))
                    listener.note(row.name, f"shard {job.shard}/{shards} done on node {job.node.name()}")
                now = time.monotonic()
                for ref, job in list(running.items()):
                    if now - job.started > deadline_after:
                        ray.cancel(ref, force=True)
                        running.pop(ref)
                        job.node.take(request, -1.0)
                        _write_lost(
                            cfg,
                            plan,
                            split_plan,
                            job.shard,
                            lost=lost.get(job.shard, []),
                            why=f"its task ran past run_timeout + {TIMEOUT_GRACE:.0f} s on node {job.node.name()} "
                            "and was cancelled",
                        )
        except BaseException as exc:
            for ref in running:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
            if isinstance(exc, Interrupted) or isinstance(exc.__cause__ or exc.__context__, Interrupted):
                # what was cut off is recorded here, so `--resume` continues it and the rest stands
                for k in sorted([job.shard for job in running.values()] + waiting):
                    _write_lost(
                        cfg,
                        plan,
                        split_plan,
                        k,
                        lost=lost.get(k, []),
                        why="device-matrix was interrupted",
                        status="interrupted",
                    )
                with contextlib.suppress(ResultsError):
                    write_merged(folder, merge(folder))
            raise
        # the row's own pytest_args are part of the whole row: only this command line selects
        left_out = gang.selected(row, tests=options.tests, suites=options.suites, pytest_args=options.pytest_args)
        if left_out is not None:
            names = ", ".join(entry.name for entry in row.gangs)
            listener.note(row.name, f"gang(s) {names} not run: {left_out}, and a gang belongs to the whole row")
        for entry in row.gangs if left_out is None else ():
            if options.resume and (gang.gang_folder(cfg, row.name, entry) / "run.json").is_file():
                continue  # it ran before the interruption
            gang.run_gang(
                ray,
                cfg,
                row,
                plan.mode,
                entry,
                options=options_,
                labels=request.labels,
                test_timeout=row.test_timeout,
                note=listener.note,
            )
        merged = merge(folder)
        write_merged(folder, merged)
        for problem in merged.problems:
            listener.note(row.name, problem)
        return merged.record
    finally:
        ray.shutdown()


def _split_on_node(
    ray: Any,
    cfg: Config,
    plan: RowPlan,
    *,
    options: RunOptions,
    shards: int,
    request: Request,
    nodes: Sequence[Node],
    durations_from: Sequence[Path],
) -> ShardPlan:
    """The row collected on a node that can run it, split by the recorded durations."""
    row = plan.row
    force = "local" if plan.mode == "local" else "container"
    durations = recorded_durations(durations_from or [cfg.results_dir], row.name)
    first = next(node for node in nodes if node.can_ever(request))
    try:
        tests, reason = ray.get(
            ray.remote(max_retries=0)(collect_on_node)
            .options(**_ray_options(ray, request), scheduling_strategy=_on(ray, first))
            .remote(str(cfg.project_root), row.name, options, force)
        )
    except ray.exceptions.RayError as exc:
        raise _task_failed("collecting the row's tests", first, exc) from None
    return make_plan(row.name, Shard(1, shards), tests, durations, reason)


def _shard_files(folder: Path) -> dict[str, bytes]:
    """The files of a shard's interrupted run, for the node that resumes it."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in (".lock", "console.log")
    }


def _task_failed(what: str, node: Node, exc: BaseException) -> EnvironmentProblem:
    """A task that failed as Python, not as a lost node: the node lacks something."""
    text = str(exc).strip().splitlines()
    return EnvironmentProblem(
        f"{what} failed on Ray node {node.name()}: {type(exc).__name__}: {text[-1] if text else ''}",
        tip="Every node needs device-matrix (and the row's packages) installed and the project at the same path.",
    )


def _ray_options(ray: Any, request: Request) -> dict[str, Any]:
    options: dict[str, Any] = {"num_cpus": request.num_cpus, "max_retries": 0}
    if request.num_gpus:
        options["num_gpus"] = request.num_gpus
    if request.resources:
        options["resources"] = dict(request.resources)
    return options


def _on(ray: Any, node: Node) -> Any:
    strategies = importlib.import_module("ray.util.scheduling_strategies")
    return strategies.NodeAffinitySchedulingStrategy(node_id=node.id, soft=False)


def _receive(cfg: Config, row: str, job: _Running, result: Mapping[str, Any], lost: list[dict[str, str]]) -> None:
    folder = shard_folder(cfg, row, job.shard)
    shutil.rmtree(folder, ignore_errors=True)
    redactor = Redactor()
    for rel, data in result["files"].items():
        path = (folder / rel).resolve()
        if not path.is_relative_to(folder.resolve()):
            continue  # a name that climbs out of the shard's folder is not ours to write
        path.parent.mkdir(parents=True, exist_ok=True)
        # redacted by the node with its secrets; here again with the driver's (#22)
        path.write_bytes(redact_file(rel, data, redactor))
    _note_node(folder, job.node, lost)


def _note_node(folder: Path, node: Node, lost: list[dict[str, str]]) -> None:
    path = folder / SHARD_FILE
    with contextlib.suppress(OSError, ValueError):
        data = json.loads(path.read_text("utf-8"))
        data["node"] = node.name()
        data["lost"] = lost
        write_json_atomic(path, data)


def _write_lost(
    cfg: Config,
    plan: RowPlan,
    split_plan: ShardPlan,
    index: int,
    *,
    lost: list[dict[str, str]],
    why: str,
    status: RowStatus = "error",
) -> None:
    """The record of a shard whose results never came back: its tests not_run, the nodes named."""
    folder = shard_folder(cfg, plan.row.name, index)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    died = "; ".join(f"node {entry['name']} died while it ran ({entry['error']})" for entry in lost)
    message = f"not run: shard {index}/{split_plan['of']} came back from no node: {died + '; ' if died else ''}{why}"
    state = RunState(Redactor())
    state.expect(plan_part(split_plan, index) or [])
    state.mark_not_run(message)
    record = state.to_record(
        row=plan.row.name,
        pjrt_device=plan.row.pjrt_device,
        status=status,
        reason=message,
        mode=plan.mode,
        image=plan.row.image or None,
        suites=list(plan.row.suites),
        started_at=now_iso(),
        duration=0.0,
        run_url=None,
        runner_pid=None,
    )
    write_json_atomic(folder / "run.json", record)
    data = dict(split_plan)
    data.update(shard=index, node=None, lost=lost)
    write_json_atomic(folder / SHARD_FILE, data)
