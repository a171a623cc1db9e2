"""A gang: ``world_size`` ranks of one worker started together as Ray tasks, recorded as one test.

A row's ``[[gangs]]`` entry names a worker module; under ``--executor ray`` each gang runs
once, after the row's shards: a placement group with one bundle per rank (each the row's
per-shard request) makes every rank start at once or not at all, a probe on rank 0's bundle
picks ``MASTER_ADDR`` (that node's IP) and a free ``MASTER_PORT`` there, and each rank runs
``python -X faulthandler -m MODULE ARGS`` with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` (the launcher contract torchrun
keeps). The gang is one test in the row's record, ``gang::NAME``: passed when every rank
exits 0; a rank killed by a signal or past ``test_timeout`` is diagnosed from its own output
exactly as a crashed test is; each rank's output is kept (``gangs/NAME/rankR.log``).

A gang's ``xfail`` takes ``xfail_device``'s arguments; ``raises`` restricts it to ranks
that end with one of those exceptions (the last traceback of each failing rank), so any
other failure, and every crash, stays a failure. It is strict unless ``strict = false``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from device_matrix import diagnostics
from device_matrix.config import Config, Gang, Row
from device_matrix.diagnostics.parse import clean_lines
from device_matrix.errors import EnvironmentProblem
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.schema import AttemptRecord, CrashRecord, Outcome, RowStatus, RunRecord, SkipInfo
from device_matrix.redact import Redactor, remember_secrets
from device_matrix.run.executors.base import die_with_parent
from device_matrix.run.selection import selecting_options
from device_matrix.run.shards import GANGS_DIR
from device_matrix.run.state import RunState, now_iso

READY_TIMEOUT = 60.0  # seconds for the placement group to hold every rank (others may be using the nodes)
TIMEOUT_GRACE = 60.0  # seconds past test_timeout before a rank's task is cancelled
_EXCEPTION_RE = re.compile(r"([A-Za-z_][\w.]*)(?::\s.*)?")


def nodeid(gang: Gang) -> str:
    return f"gang::{gang.name}"


def gang_folder(cfg: Config, row: str, gang: Gang) -> Path:
    return cfg.results_dir / row / GANGS_DIR / gang.name


def selected(row: Row, *, tests: Sequence[str], suites: Sequence[str] | None, pytest_args: Sequence[str]) -> str | None:
    """Why a run that selects tests leaves the row's gangs out (None: the whole row runs, gangs too).

    A gang belongs to the row, not to a suite or a test: ``--test``, ``--suite`` and
    pytest's own selections (``-k``, ``-m``, ``--deselect``, nodeids) ask for less than the row.
    """
    if not row.gangs:
        return None
    if tests:
        return "--test names tests"
    if suites:
        return "--suite names suites"
    chosen = selecting_options(pytest_args)
    if chosen:
        return f"pytest's {chosen[0][0]} selects tests"
    for arg in pytest_args:
        if not arg.startswith("-") and ("::" in arg or arg.endswith(".py")):
            return f"{arg} names tests"
    return None


# --- up front: can the cluster hold the gang at all ------------------------------------


def capacity(total: Mapping[str, float], need: Mapping[str, float]) -> int:
    """How many bundles of ``need`` one node with ``total`` holds."""
    counts = [int((total.get(k, 0.0) + 1e-9) // v) for k, v in need.items() if v > 0]
    return min(counts) if counts else 0


def refuse_unsatisfiable(
    nodes: Sequence[Any], need: Mapping[str, float], labels: Mapping[str, str], row: Row, address: str
) -> None:
    """Every gang of ``row`` fits the cluster's nodes, or the run is refused before anything starts."""
    fitting = [n for n in nodes if all(n.labels.get(k) == v for k, v in labels.items())]
    room = sum(capacity(n.total, need) for n in fitting)
    for gang in row.gangs:
        if gang.world_size > room:
            wants = ", ".join(f"{k}={v:g}" for k, v in sorted(need.items()))
            raise EnvironmentProblem(
                f"gang {gang.name!r} of row {row.name!r} needs {gang.world_size} ranks at once, each {wants}, "
                f"but the Ray cluster at {address} holds {room} at most ({len(fitting)} node(s) that fit)",
                tip="Add nodes (ray start --resources ...), lower the gang's world_size, or change the row's "
                "ray_resources / ray_num_cpus.",
            )


# --- what runs on the nodes ------------------------------------------------------------


def master_on_node() -> tuple[str, int]:
    """Rank 0's node: its IP and a port free there now."""
    ray = importlib.import_module("ray")
    with socket.socket() as s:
        s.bind(("", 0))
        port = int(s.getsockname()[1])
    return str(ray.util.get_node_ip_address()), port


def rank_on_node(project_root: str, argv: Sequence[str], env: Mapping[str, str], timeout: float) -> dict[str, Any]:
    """One rank, a process group of its own; its output, exit status and where it ran."""
    ray = importlib.import_module("ray")
    context = ray.get_runtime_context()
    started = time.monotonic()
    proc = subprocess.Popen(  # the rank dies with its task's worker (cancelled, its node lost)
        [sys.executable, *argv],
        cwd=project_root,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=functools.partial(die_with_parent, signal.SIGTERM),  # noqa: PLW1509 - prctl only
    )
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGABRT)  # faulthandler dumps every thread's stack, then it dies
        try:
            output, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # nothing of the rank outlives it
    # redacted here, with this node's own secrets, before it leaves the node (#22)
    output = Redactor({**os.environ, **env}).text(output.decode("utf-8", "replace")).encode("utf-8")
    return {
        "node": str(context.get_node_id()),
        "host": socket.gethostname(),
        "ip": str(ray.util.get_node_ip_address()),
        "returncode": proc.returncode,
        "timed_out": timed_out,
        "duration": time.monotonic() - started,
        "output": output,
    }


# --- the record ------------------------------------------------------------------------


@dataclass
class RankResult:
    rank: int
    env: dict[str, str]
    node: str = ""
    host: str = ""
    ip: str = ""
    returncode: int | None = None
    timed_out: bool = False
    duration: float = 0.0
    output: str = ""
    lost: str | None = None  # why no result came back (the node died, the task was cancelled)


def last_exception(output: str) -> str | None:
    """The type of the last uncaught Python exception in ``output`` (its traceback's last line)."""
    lines = clean_lines(output)  # torch.distributed prefixes a rank's traceback with [rankN]:
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith("Traceback (most recent call last):")]
    if not starts:
        return None
    header = lines[starts[-1]]
    indent = len(header) - len(header.lstrip())  # what a prefix left; the frames are indented further
    for line in lines[starts[-1] + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            match = _EXCEPTION_RE.fullmatch(line.strip())
            return match[1] if match else None
    return None


def _raised(name: str | None, allowed: Sequence[str]) -> bool:
    return name is not None and any(name == a or name.rsplit(".", 1)[-1] == a.rsplit(".", 1)[-1] for a in allowed)


def expected_failure(gang: Gang, row: Row) -> SkipInfo | None:
    """The gang's xfail, when it applies to this row."""
    xfail = gang.xfail
    if xfail is None:
        return None
    names = {row.name.lower(), row.pjrt_device.lower()}
    devices = [str(d) for d in xfail["devices"]]
    if not any(d.lower() in names or d == "*" for d in devices):
        return None
    from device_matrix.skips.refs import normalize_issue

    return SkipInfo(
        mode="xfail",
        devices=devices,
        issue=normalize_issue(str(xfail["issue"])),
        reason=str(xfail.get("reason", "")),
        source="marker",
        expires=None,
        file=None,
        line=None,
    )


def repro(gang: Gang, rank: RankResult) -> str:
    assigns = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(rank.env.items()))
    return f"{assigns} {shlex.join(['python', '-X', 'faulthandler', '-m', gang.module, *gang.args])}"


def gang_record(
    row: Row,
    mode: str,
    gang: Gang,
    ranks: Sequence[RankResult],
    *,
    started_at: str,
    duration: float,
    master: tuple[str, int] | None,
    redactor: Redactor,
    why_not_run: str | None = None,
) -> RunRecord:
    """The gang as one test: outcome, per-rank crashes diagnosed, one attempt (and log) per rank."""
    test = nodeid(gang)
    state = RunState(redactor)
    state.expect([test])
    crashes: list[CrashRecord] = []
    problems: list[str] = []
    exceptions: list[str | None] = []
    for r in ranks:
        where = f"rank {r.rank} on {r.host or '?'} ({r.ip or '?'})"
        signum = diagnostics.signal_from_returncode(r.returncode)
        state.attempts.append(
            AttemptRecord(
                index=r.rank + 1,
                purpose="run",
                returncode=r.returncode,
                signal_name=diagnostics.signal_name(signum),
                duration=round(r.duration, 3),
                selected=1,
                finished=0 if r.lost or r.timed_out or signum else 1,
                journal="",
                log=f"rank{r.rank}.log",
            )
        )
        if r.lost is not None:
            problems.append(f"{where}: {r.lost}")
            continue
        if r.timed_out or signum is not None:
            diagnosis = diagnostics.diagnose(
                returncode=r.returncode,
                fault_text="",
                output_text=r.output,
                redactor=redactor,
                timed_out=r.timed_out,
            )
            crashes.append(
                CrashRecord(
                    id=f"{row.name}-{len(crashes) + 1}",
                    kind="timeout" if r.timed_out else "crash",
                    phase="test",
                    nodeid=test,
                    when="call",
                    attempt=r.rank + 1,
                    diagnosis=diagnosis,
                    classification="unknown",  # a gang is not rerun: one run says nothing of flakiness
                    reruns=[],
                    repro=redactor.text(repro(gang, r)),
                    issue=None,
                    deadline=row.test_timeout if r.timed_out else None,
                )
            )
            what = "timed out" if r.timed_out else (diagnosis["signal_name"] or f"exit {r.returncode}")
            problems.append(f"{where}: {what} ({diagnosis['hint'] or diagnosis['fingerprint']})")
        elif r.returncode != 0:
            name = last_exception(r.output)
            exceptions.append(name)
            problems.append(f"{where}: exit {r.returncode}" + (f" ({name})" if name else ""))
    xfail = expected_failure(gang, row)
    outcome: Outcome
    if why_not_run is not None:
        outcome, message = "not_run", f"not run: {why_not_run}"
    elif crashes:
        outcome = "timeout" if all(c["kind"] == "timeout" for c in crashes) else "crashed"
        message = f"{outcome}: " + "; ".join(problems)
    elif problems:
        allowed = list((gang.xfail or {}).get("raises", ()))
        if (
            xfail is not None
            and not any(r.lost for r in ranks)
            and (not allowed or all(_raised(name, allowed) for name in exceptions))
        ):
            outcome, message = "xfailed", f"{xfail['reason']} ({'; '.join(problems)})"
        else:
            outcome, message = "failed", "; ".join(problems)
    elif xfail is not None:
        strict = bool((gang.xfail or {}).get("strict", True))
        outcome = "failed" if strict else "xpassed"
        message = f"[XPASS(strict)] {xfail['reason']}" if strict else xfail["reason"]
    else:
        outcome, message = "passed", None
    state.put(
        test,
        outcome,
        duration=max((r.duration for r in ranks), default=0.0),
        message=message,
        crash=crashes[0]["id"] if crashes else None,
        attempt=1,
        skip=dict(xfail) if xfail is not None else None,
    )
    state.crashes.extend(crashes)
    state.environment = {
        "gang": {
            "name": gang.name,
            "module": gang.module,
            "world_size": gang.world_size,
            "master": f"{master[0]}:{master[1]}" if master else None,
            "ranks": [
                {"rank": r.rank, "node": r.node, "host": r.host, "ip": r.ip, "returncode": r.returncode, "lost": r.lost}
                for r in ranks
            ],
        }
    }
    status: RowStatus = "error" if why_not_run else ("crashed" if crashes else "passed")
    if status == "passed" and outcome in ("failed", "xpassed"):
        status = "failed"
    return state.to_record(
        row=row.name,
        pjrt_device=row.pjrt_device,
        status=status,
        reason=why_not_run,
        mode=mode,
        image=row.image or None,
        suites=list(row.suites),
        started_at=started_at,
        duration=duration,
        run_url=None,
        runner_pid=None,
    )


def write_gang(folder: Path, record: RunRecord, ranks: Sequence[RankResult], redactor: Redactor) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for r in ranks:
        (folder / f"rank{r.rank}.log").write_text(redactor.text(r.output), "utf-8")
    write_json_atomic(folder / "run.json", record)


# --- the driver ------------------------------------------------------------------------


def rank_env(
    row: Row, gang: Gang, *, rank: int, world: int, local: tuple[int, int], master: tuple[str, int]
) -> dict[str, str]:
    env = {"PJRT_DEVICE": row.env.get("PJRT_DEVICE", row.pjrt_device), **row.env, **gang.env}
    env.update(
        RANK=str(rank),
        WORLD_SIZE=str(world),
        LOCAL_RANK=str(local[0]),
        LOCAL_WORLD_SIZE=str(local[1]),
        MASTER_ADDR=master[0],
        MASTER_PORT=str(master[1]),
    )
    return env


def run_gang(
    ray: Any,
    cfg: Config,
    row: Row,
    mode: str,
    gang: Gang,
    *,
    options: Mapping[str, Any],
    labels: Mapping[str, str],
    test_timeout: float,
    note: Any,
) -> RunRecord:
    """Run one gang on the cluster ``ray`` is connected to; write and return its record."""
    remember_secrets(gang.env)
    redactor = Redactor()
    started_at, t0 = now_iso(), time.monotonic()
    pg_mod = importlib.import_module("ray.util.placement_group")
    strategies = importlib.import_module("ray.util.scheduling_strategies")
    need = {"CPU": options["num_cpus"], **options.get("resources", {})}
    if options.get("num_gpus"):
        need["GPU"] = options["num_gpus"]
    world = gang.world_size
    pg = pg_mod.placement_group(
        [dict(need) for _ in range(world)],
        strategy="PACK",
        bundle_label_selector=[dict(labels) for _ in range(world)] if labels else None,
    )
    ranks: list[RankResult] = []
    master: tuple[str, int] | None = None
    why_not_run: str | None = None
    try:
        if not pg.wait(timeout_seconds=READY_TIMEOUT):
            why_not_run = f"the cluster did not free room for its {world} ranks at once within {READY_TIMEOUT:.0f} s"
        else:
            remote = ray.remote(max_retries=0)

            def on(rank: int) -> Any:
                return strategies.PlacementGroupSchedulingStrategy(
                    placement_group=pg, placement_group_bundle_index=rank
                )

            master = ray.get(remote(master_on_node).options(**options, scheduling_strategy=on(0)).remote())
            bundle_nodes = ray.util.placement_group_table(pg).get("bundles_to_node_id", {})
            node_of = [str(bundle_nodes.get(r, "")) for r in range(world)]
            argv = ["-X", "faulthandler", "-m", gang.module, *gang.args]
            refs = {}
            for r in range(world):
                local = (node_of[:r].count(node_of[r]), node_of.count(node_of[r]))
                env = rank_env(row, gang, rank=r, world=world, local=local, master=master)
                ranks.append(RankResult(rank=r, env=env))
                ref = remote(rank_on_node).options(**options, scheduling_strategy=on(r))
                refs[ref.remote(str(cfg.project_root), argv, env, test_timeout)] = r
            note(row.name, f"gang {gang.name}: {world} ranks started, master {master[0]}:{master[1]}")
            done, pending = ray.wait(list(refs), num_returns=len(refs), timeout=test_timeout + TIMEOUT_GRACE)
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)
                ranks[refs[ref]].lost = f"its task ran past test_timeout + {TIMEOUT_GRACE:.0f} s and was cancelled"
            for ref in done:
                result = ranks[refs[ref]]
                try:
                    out = ray.get(ref)
                except Exception as exc:  # a lost node or worker: the rank's result never came back
                    result.lost = f"no result came back ({type(exc).__name__})"
                    continue
                result.node, result.host, result.ip = out["node"], out["host"], out["ip"]
                result.returncode, result.timed_out = out["returncode"], out["timed_out"]
                result.duration = float(out["duration"])
                result.output = out["output"].decode("utf-8", "replace")
    finally:
        with contextlib.suppress(Exception):
            pg_mod.remove_placement_group(pg)
    record = gang_record(
        row,
        mode,
        gang,
        ranks,
        started_at=started_at,
        duration=time.monotonic() - t0,
        master=master,
        redactor=redactor,
        why_not_run=why_not_run,
    )
    write_gang(gang_folder(cfg, row.name, gang), record, ranks, redactor)
    test = record["tests"][0]
    note(row.name, f"gang {gang.name}: {test['outcome']}" + (f" - {test['message']}" if test["message"] else ""))
    return record
