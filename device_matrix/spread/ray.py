"""Shards of a row as Ray tasks, on the nodes of a cluster that have the row's device.

``device-matrix run --executor ray --address auto|HOST:PORT``. :class:`RayNodes` is the
spread's scheduler for a cluster (device_matrix.spread.driver holds the driver): each shard
is one Ray Core task that runs the ordinary runner (``device-matrix run --shard K/N``, a
process of its own, so a crash is handled and diagnosed exactly as on a local host) on a
node that has what the row asks for (``ray_resources``, ``ray_num_cpus``, ``ray_labels``),
and returns the shard's results files as bytes: they reach the driver's results folder
through the object store, not a shared filesystem. The row is collected on such a node.
What runs on the nodes is device_matrix.spread.ray_node.

The driver places each task on a node itself (node affinity, strict), so it always knows
where a shard runs: a request no node can satisfy is refused before anything is
submitted (Ray would wait forever), and a node is dead only when Ray says it is: its shard
runs again once on another node. A task's worker that dies while the node lives (a test
that kills it) is a crash of the test that was running, named and diagnosed from what the
shard's folder on that node still holds, and the shard goes on (#23). Tasks are never
retried by Ray (``max_retries=0``), are cancelled when they overrun the row's
``run_timeout``, remove their temp folders in every ending (device_matrix.spread.janitor),
and nothing is reported to Ray's usage statistics. Ray is imported only here and on the
nodes, only when asked for.

A row's gangs run here too (:meth:`RayNodes.run_gang`): one placement group with a bundle
per rank, so every rank starts at once or not at all.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import shutil
import signal
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from device_matrix.config import Config, Gang, Row
from device_matrix.errors import EnvironmentProblem
from device_matrix.records.merge import GANGS_DIR
from device_matrix.records.schema import LostNode, RowStatus, RunRecord
from device_matrix.redact import Redactor, redact_file, remember_secrets
from device_matrix.run.attempt import Interrupted
from device_matrix.run.context import RunListener, RunOptions
from device_matrix.run.plan import RowPlan
from device_matrix.run.state import now_iso
from device_matrix.spread import gang as gangs
from device_matrix.spread.door import Collection, RowRun
from device_matrix.spread.driver import MAX_RUNS, SHARD_GRACE, Job
from device_matrix.spread.postmortem import cut_off, lost, needs_salvage, runner_died
from device_matrix.spread.ray_node import (
    collect_on_node,
    import_ray,
    master_on_node,
    rank_on_node,
    salvage_on_node,
    shard_on_node,
)
from device_matrix.spread.split import Shard, Split, shard_folder

_P = ParamSpec("_P")
_R = TypeVar("_R")

TIMEOUT_GRACE = 120.0  # seconds past run_timeout before a shard's task is cancelled
GANG_GRACE = 60.0  # seconds past test_timeout before a rank's task is cancelled
READY_TIMEOUT = 60.0  # seconds for the placement group to hold every rank (others may be using the nodes)
SALVAGE_WAIT = 90.0  # seconds for what a dead worker's shard left on its node to come back
POLL = 0.2  # seconds between looks at the running tasks
NODE_LOST = ("NodeDiedError", "WorkerCrashedError", "LocalRayletDiedError", "OwnerDiedError")
TEMP_PREFIX = "device-matrix-"


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


def capacity(total: Mapping[str, float], need: Mapping[str, float]) -> int:
    """How many bundles of ``need`` one node with ``total`` holds."""
    counts = [int((total.get(k, 0.0) + 1e-9) // v) for k, v in need.items() if v > 0]
    return min(counts) if counts else 0


def refuse_unsatisfiable_gangs(
    nodes: Sequence[Node],
    need: Mapping[str, float],
    labels: Mapping[str, str],
    row: Row,
    *,
    todo: Sequence[Gang],
    address: str,
) -> None:
    """Every gang of ``row`` fits the cluster's nodes, or the run is refused before anything starts."""
    fitting = [n for n in nodes if all(n.labels.get(k) == v for k, v in labels.items())]
    room = sum(capacity(n.total, need) for n in fitting)
    for entry in todo:
        if entry.world_size > room:
            wants = ", ".join(f"{k}={v:g}" for k, v in sorted(need.items()))
            raise EnvironmentProblem(
                f"gang {entry.name!r} of row {row.name!r} needs {entry.world_size} ranks at once, each {wants}, "
                f"but the Ray cluster at {address} holds {room} at most ({len(fitting)} node(s) that fit)",
                tip="Add nodes (ray start --resources ...), lower the gang's world_size, or change the row's "
                "ray_resources / ray_num_cpus.",
            )


# --- the driver's side: the cluster as a scheduler ---------------------------------------------


@dataclass
class _Running:
    shard: int
    node: Node
    started: float
    name: str  # the task's temp folder on its node


def wait_for(ray: Any, refs: Sequence[Any], timeout: float) -> tuple[list[Any], list[Any]]:
    """``ray.wait`` for every one of ``refs`` within ``timeout``, in looks of :data:`POLL` seconds.

    Ray raises a signal's exception only when its own wait ends (measured: a SIGTERM 3 s into
    a 25 s ``ray.wait`` or ``ray.get`` came back after 25 s), so one long wait kept an
    interrupted driver alive for a gang's whole test_timeout (#31)."""
    deadline = time.monotonic() + timeout
    done: list[Any] = []
    pending = list(refs)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, pending = ray.wait(pending, num_returns=len(pending), timeout=min(POLL, left))
        done += ready
    return done, pending


def get_one(ray: Any, ref: Any) -> Any:
    """``ray.get`` of one task that has no deadline of its own, a signal taken within :data:`POLL` s."""
    while not wait_for(ray, [ref], POLL)[0]:
        pass
    return ray.get(ref)


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


@dataclass
class _Tasks:
    """The shards of one split on the cluster: waiting, running, how often each ran, the nodes each lost."""

    waiting: list[Job]
    runs: dict[int, int] = field(default_factory=dict)
    dead: dict[int, list[LostNode]] = field(default_factory=dict)
    running: dict[Any, _Running] = field(default_factory=dict)


@contextlib.contextmanager
def on_ray(
    cfg: Config, plan: RowPlan, options: RunOptions, listener: RunListener, *, address: str, forwarded: Sequence[str]
) -> Iterator[RayNodes]:
    """The cluster at ``address`` as the spread's scheduler; disconnected in every ending."""
    if plan.mode == "unavailable":  # nothing runs: the row's record says why, Ray is not asked
        yield RayNodes(None, cfg, plan, options, listener, address=address, forwarded=forwarded, nodes=[])
        return
    ray = import_ray()
    connect(ray, address)
    try:
        nodes = cluster_nodes(ray)
        yield RayNodes(ray, cfg, plan, options, listener, address=address, forwarded=forwarded, nodes=nodes)
    finally:
        ray.shutdown()


class RayNodes:
    """Shards and gangs as Ray tasks, each placed by the driver on a node that can run it."""

    def __init__(
        self,
        ray: Any,
        cfg: Config,
        plan: RowPlan,
        options: RunOptions,
        listener: RunListener,
        *,
        address: str,
        forwarded: Sequence[str],
        nodes: list[Node],
    ) -> None:
        self.ray, self.cfg, self.plan, self.options, self.listener = ray, cfg, plan, options, listener
        self.run_ = RowRun(cfg, plan, options)
        self.row = plan.row
        self.address = address
        self.forwarded = list(forwarded)
        self.nodes = nodes
        self.request = request_for(self.row)
        self.task_options = _ray_options(self.request)
        self.run_id = f"{TEMP_PREFIX}{os.getpid()}-{time.monotonic_ns()}"

    def where(self) -> str:
        return (
            f"on the Ray cluster at {self.address} ({len(self.nodes)} node(s); "
            f"each shard asks for {self.request.describe()})"
        )

    def refuse_unsatisfiable(self, todo: Sequence[Gang]) -> None:
        refuse_unsatisfiable(self.nodes, self.request, self.address, self.row.name)
        if todo:
            refuse_unsatisfiable_gangs(
                self.nodes, self.request.needs(), self.request.labels, self.row, todo=todo, address=self.address
            )

    @_unwrapping_interrupts
    def collect(self) -> Collection:
        """The row collected on a node that can run it (its nodeids as its records name them)."""
        ray = self.ray
        force = "local" if self.plan.mode == "local" else "container"
        first = next(node for node in self.nodes if node.can_ever(self.request))
        try:
            collected = get_one(
                ray,
                ray.remote(max_retries=0)(collect_on_node)
                .options(**self.task_options, scheduling_strategy=_on(first))
                .remote(str(self.cfg.project_root), self.row.name, self.options, force),
            )
        except ray.exceptions.RayError as exc:
            raise _task_failed("collecting the row's tests", first, exc) from None
        tests = collected["tests"]
        return Collection(None if tests is None else tuple(tests), collected["reason"])

    def _alive(self, node: Node) -> bool:
        """Whether Ray says ``node`` is alive (it is dead only when Ray says so)."""
        for entry in self.ray.nodes():
            if str(entry.get("NodeID")) == node.id:
                return bool(entry.get("Alive"))
        return False

    @_unwrapping_interrupts
    def run(self, jobs: Sequence[Job], split: Split) -> None:
        tasks = _Tasks(list(jobs))
        try:
            while tasks.waiting or tasks.running:
                self._submit(tasks, split)
                if tasks.waiting and not tasks.running and not any(n.can_now(self.request) for n in self.nodes):
                    for job in tasks.waiting:  # every node that could run it is gone
                        k = job.shard.index
                        self._lost(split, k, tasks.dead.get(k, []), "no node left that can run it")
                    tasks.waiting.clear()
                    break
                if tasks.running:
                    self._take_ready(tasks, split)
                    self._cancel_overrun(tasks, split)
        except BaseException as exc:
            self._stopped(tasks, split, exc)
            raise

    def _submit(self, tasks: _Tasks, split: Split) -> None:
        """Each waiting shard onto a node that has room for it now, while there is one."""
        row, request = self.row, self.request
        task = self.ray.remote(max_retries=0)(shard_on_node)
        for job in list(tasks.waiting):
            node = next((n for n in self.nodes if n.can_now(request)), None)
            if node is None:
                break
            tasks.waiting.remove(job)
            k = job.shard.index
            tasks.runs[k] = tasks.runs.get(k, 0) + 1
            node.take(request)
            folder = shard_folder(self.cfg, row.name, k)
            previous = _shard_files(folder) if job.resume else None
            name = f"{self.run_id}-{k}-{tasks.runs[k]}"
            ref = task.options(**self.task_options, scheduling_strategy=_on(node)).remote(
                str(self.cfg.project_root),
                split,
                row.name,
                k,
                self.forwarded,
                name=name,
                timeout=row.run_timeout,
                previous=previous,
            )
            tasks.running[ref] = _Running(k, node, time.monotonic(), name)
            self.listener.note(row.name, f"shard {k}/{split.of} on node {node.name()}")

    def _take_ready(self, tasks: _Tasks, split: Split) -> None:
        """The shards whose tasks came back: their files, or what their worker's death means."""
        row, of = self.row, split.of
        ready, _ = self.ray.wait(list(tasks.running), num_returns=1, timeout=POLL)
        for ref in ready:
            job = tasks.running.pop(ref)
            job.node.take(self.request, -1.0)
            k = job.shard
            try:
                result = self.ray.get(ref)
            except Exception as exc:
                if type(exc).__name__ not in NODE_LOST:
                    raise _task_failed(f"shard {k}/{of}", job.node, exc) from None
                again = self._after_death(job, split, exc, tasks)
                if again is not None:
                    tasks.waiting.append(again)
                continue
            folder = shard_folder(self.cfg, row.name, k)
            _receive(folder, result["files"])
            split.write_shard_file(folder, k, node=job.node.name(), lost=tasks.dead.get(k, []))
            self.listener.note(row.name, f"shard {k}/{of} done on node {job.node.name()}")

    def _cancel_overrun(self, tasks: _Tasks, split: Split) -> None:
        """A task past the row's run_timeout (and the graces) is cancelled: its shard came back from no node."""
        timeout = self.row.run_timeout + TIMEOUT_GRACE
        now = time.monotonic()
        for ref, job in list(tasks.running.items()):
            if now - job.started > timeout + SHARD_GRACE:
                self.ray.cancel(ref, force=True)  # its worker goes; the janitor removes its folder
                tasks.running.pop(ref)
                job.node.take(self.request, -1.0)
                self._lost(
                    split,
                    job.shard,
                    tasks.dead.get(job.shard, []),
                    f"its task ran past run_timeout + {TIMEOUT_GRACE:.0f} s on node {job.node.name()} "
                    "and was cancelled",
                )

    def _stopped(self, tasks: _Tasks, split: Split, exc: BaseException) -> None:
        """The run ended early: an interrupt records what it cut off; any other end cancels the tasks."""
        # an interrupt while Ray's own code waits comes wrapped (see _unwrapping_interrupts)
        cause = exc if isinstance(exc, Interrupted) else (exc.__cause__ or exc.__context__)
        if isinstance(cause, Interrupted):
            # what was cut off is recorded here, so `--resume` continues it and the rest stands;
            # its tasks go with this driver (Ray ends the tasks of a driver that leaves): a
            # cancel racing their replies can abort the driver's own Ray worker
            cut = [job.shard for job in tasks.running.values()] + [j.shard.index for j in tasks.waiting]
            for k in sorted(cut):
                cut_off(self.run_, split, Shard(k, split.of), cause)
        else:
            for ref in tasks.running:
                with contextlib.suppress(Exception):
                    self.ray.cancel(ref, force=True)

    def _after_death(self, job: _Running, split: Split, exc: BaseException, tasks: _Tasks) -> Job | None:
        """A task that died with its worker: the node's death, or a crash of the test that ran (#23)."""
        row, k, of = self.row, job.shard, split.of
        shard = Shard(k, of)
        error = type(exc).__name__
        files = None
        if error != "NodeDiedError" and self._alive(job.node):
            files = self._salvage(job)
        if files is None:
            job.node.dead = True
            tasks.dead.setdefault(k, []).append(LostNode(node=job.node.id, name=job.node.name(), error=error))
            self.listener.note(row.name, f"shard {k}/{of}: node {job.node.name()} died ({error})")
            if len(tasks.dead[k]) < 2:
                return Job(shard, resume=False)  # once more, elsewhere
            self._lost(split, k, tasks.dead[k], "it was run twice")
            return None
        folder = shard_folder(self.cfg, row.name, k)
        _receive(folder, files)
        split.write_shard_file(folder, k, node=job.node.name(), lost=tasks.dead.get(k, []))
        how = f"its Ray worker on node {job.node.name()} died ({error}; the node is alive)"
        self.listener.note(row.name, f"shard {k}/{of}: {how}")
        if not needs_salvage(folder) and _status(folder) != "interrupted":
            return None
        left = runner_died(self.run_, split, shard, how=how, returncode=None)
        return Job(shard, resume=True) if left and tasks.runs.get(k, 0) < MAX_RUNS else None

    def _salvage(self, job: _Running) -> dict[str, bytes] | None:
        """What the dead worker's shard left on its node; None when the node does not answer."""
        ray = self.ray
        ref = (
            ray.remote(max_retries=0)(salvage_on_node)
            .options(num_cpus=0, scheduling_strategy=_on(job.node))
            .remote(job.name, self.row.name, job.shard, SALVAGE_WAIT / 2)
        )
        ready, _ = wait_for(ray, [ref], SALVAGE_WAIT)
        if not ready:
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
            return None
        try:
            files: dict[str, bytes] | None = ray.get(ref)["files"]
        except Exception:
            return None
        return files

    def _lost(self, split: Split, k: int, nodes: list[LostNode], why: str) -> None:
        """The record of a shard whose results never came back: its tests not_run, the nodes named."""
        died = "; ".join(f"node {entry['name']} died while it ran ({entry['error']})" for entry in nodes)
        message = f"shard {k}/{split.of} came back from no node: {died + '; ' if died else ''}{why}"
        folder = shard_folder(self.cfg, self.row.name, k)
        lost(self.run_, split, Shard(k, split.of), message)
        split.write_shard_file(folder, k, node=None, lost=nodes)

    @_unwrapping_interrupts
    def run_gang(self, entry: Gang, folder: Path) -> None:
        run_gang(self, entry, folder)


def _status(folder: Path) -> str | None:
    from device_matrix.errors import ResultsError
    from device_matrix.records.schema import load_run

    try:
        return load_run(folder / "run.json")["status"]
    except ResultsError:
        return None


def _shard_files(folder: Path) -> dict[str, bytes]:
    """The files of a shard's interrupted run, for the node that resumes it."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and not p.is_symlink()
        and p.name not in (".lock", "console.log")
        and GANGS_DIR not in p.relative_to(folder).parts[:1]
    }


def _task_failed(what: str, node: Node, exc: BaseException) -> EnvironmentProblem:
    """A task that failed as Python, not as a lost node: the node lacks something."""
    text = str(exc).strip().splitlines()
    return EnvironmentProblem(
        f"{what} failed on Ray node {node.name()}: {type(exc).__name__}: {text[-1] if text else ''}",
        tip="Every node needs device-matrix (and the row's packages) installed and the project at the same path.",
    )


def _ray_options(request: Request) -> dict[str, Any]:
    options: dict[str, Any] = {"num_cpus": request.num_cpus, "max_retries": 0}
    if request.num_gpus:
        options["num_gpus"] = request.num_gpus
    if request.resources:
        options["resources"] = dict(request.resources)
    return options


def _on(node: Node) -> Any:
    strategies = importlib.import_module("ray.util.scheduling_strategies")
    return strategies.NodeAffinitySchedulingStrategy(node_id=node.id, soft=False)


def _receive(folder: Path, files: Mapping[str, bytes]) -> None:
    """A shard's files from its node into ``folder`` (its gangs' records stay)."""
    if folder.is_symlink():
        folder.unlink()  # a link is not the shard's folder: nothing is written through it
    folder.mkdir(parents=True, exist_ok=True)
    for entry in folder.iterdir():
        if entry.name == GANGS_DIR and entry.is_dir() and not entry.is_symlink():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    root = folder.resolve()
    redactor = Redactor()
    for rel, data in files.items():
        path = (folder / rel).resolve()
        if not path.is_relative_to(root) or path == root:
            continue  # a name that climbs out of the shard's folder is not ours to write
        path.parent.mkdir(parents=True, exist_ok=True)
        # redacted by the node with its secrets; here again with the driver's (#22)
        path.write_bytes(redact_file(rel, data, redactor))


# --- gangs on the cluster ------------------------------------------------------------------


@dataclass
class _RayGang:
    """A gang's ranks on the cluster as they start and come back."""

    ranks: list[gangs.RankResult] = field(default_factory=list)
    master: tuple[str, int] | None = None
    refs: dict[Any, int] = field(default_factory=dict)  # each rank's task, to its rank


def run_gang(nodes: RayNodes, entry: Gang, folder: Path) -> None:
    """Run one gang on the cluster; write its record into ``folder``."""
    row = nodes.row
    remember_secrets({**row.env, **entry.env})  # the ranks' variables (the node redacts with its own too: #22)
    redactor = Redactor()
    started_at, t0 = now_iso(), time.monotonic()
    pg_mod = importlib.import_module("ray.util.placement_group")
    need, labels, world = dict(nodes.request.needs()), nodes.request.labels, entry.world_size
    pg = pg_mod.placement_group(
        [dict(need) for _ in range(world)],
        strategy="PACK",
        bundle_label_selector=[dict(labels) for _ in range(world)] if labels else None,
    )
    gang = _RayGang()

    def finish(why_not_run: str | None, status: RowStatus = "error") -> RunRecord:
        return gangs.finish_gang(
            folder,
            row,
            nodes.plan.mode,
            entry,
            gang.ranks,
            started_at=started_at,
            t0=t0,
            master=gang.master,
            redactor=redactor,
            why_not_run=why_not_run,
            status=status,
        )

    why_not_run: str | None = None
    try:
        if not wait_for(nodes.ray, [pg.ready()], READY_TIMEOUT)[0]:
            why_not_run = f"the cluster did not free room for its {world} ranks at once within {READY_TIMEOUT:.0f} s"
        else:
            _start_ranks(nodes, entry, pg, gang)
            _gather_ranks(nodes, gang)
    except BaseException as exc:
        # an interrupt while Ray's own code waits comes wrapped (see _unwrapping_interrupts)
        cause = exc if isinstance(exc, Interrupted) else (exc.__cause__ or exc.__context__)
        if not isinstance(cause, Interrupted):
            for ref in gang.refs:
                with contextlib.suppress(Exception):
                    nodes.ray.cancel(ref, force=True)
            raise
        # the ranks' tasks go with this driver (see RayNodes.run): the record first
        finish(f"interrupted by {cause} while it ran; `--resume` runs it", "interrupted")
        raise
    finally:
        with contextlib.suppress(Exception):
            pg_mod.remove_placement_group(pg)
    record = finish(why_not_run)
    nodes.listener.note(row.name, gangs.outcome_line(entry, record))


def _start_ranks(nodes: RayNodes, entry: Gang, pg: Any, gang: _RayGang) -> None:
    """Rank 0's node names the master; then every rank's task, each in its bundle of the placement group."""
    ray, row, options = nodes.ray, nodes.row, nodes.task_options
    strategies = importlib.import_module("ray.util.scheduling_strategies")
    remote = ray.remote(max_retries=0)
    world = entry.world_size

    def on(rank: int) -> Any:
        return strategies.PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=rank)

    gang.master = master = get_one(ray, remote(master_on_node).options(**options, scheduling_strategy=on(0)).remote())
    bundle_nodes = ray.util.placement_group_table(pg).get("bundles_to_node_id", {})
    node_of = [str(bundle_nodes.get(r, "")) for r in range(world)]
    argv = ["-X", "faulthandler", "-m", entry.module, *entry.args]
    for r in range(world):
        local = (node_of[:r].count(node_of[r]), node_of.count(node_of[r]))
        env = gangs.rank_env(row, entry, rank=r, world=world, local=local, master=master)
        gang.ranks.append(gangs.RankResult(rank=r, env=env))
        ref = remote(rank_on_node).options(**options, scheduling_strategy=on(r))
        name = f"{nodes.run_id}-gang-{entry.name}-{r}"
        gang.refs[ref.remote(str(nodes.cfg.project_root), argv, env, row.test_timeout, name=name)] = r
    nodes.listener.note(row.name, f"gang {entry.name}: {world} ranks started, master {master[0]}:{master[1]}")


def _gather_ranks(nodes: RayNodes, gang: _RayGang) -> None:
    """Each rank's result as it came back; a rank past test_timeout (and the grace) is cancelled."""
    ray = nodes.ray
    refs = gang.refs
    done, pending = wait_for(ray, list(refs), nodes.row.test_timeout + GANG_GRACE)
    for ref in pending:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)
        gang.ranks[refs[ref]].lost = f"its task ran past test_timeout + {GANG_GRACE:.0f} s and was cancelled"
    for ref in done:
        result = gang.ranks[refs[ref]]
        try:
            out = ray.get(ref)
        except Exception as exc:  # a lost node or worker: the rank's result never came back
            result.lost = f"no result came back ({type(exc).__name__})"
            continue
        result.node, result.host, result.ip = out["node"], out["host"], out["ip"]
        result.returncode, result.timed_out = out["returncode"], out["timed_out"]
        result.duration = float(out["duration"])
        result.output = out["output"].decode("utf-8", "replace")
