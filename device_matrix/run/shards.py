"""A row in shards: split by recorded durations, run each with the runner, merge back.

A shard is one ``device-matrix run --shard K/N``: the row's tests are collected (a
``--collect-only`` attempt, with the journal, so a module whose import kills the process
is left out exactly as a whole run does), split into ``N`` parts by the durations in
earlier ``run.json`` files, and part ``K`` runs through the ordinary runner (journal,
resume, crash reruns) into ``results/<row>/shards/K/``. ``shard.json`` beside its
``run.json`` says how the row was split, so :func:`merge` can tell a test that ran in no
shard, or in two, from one that was never collected.

The split is greedy, longest first, each test to the least-loaded shard (ties: fewer
tests, then the lower shard); a test without a recorded duration weighs the mean of the
known ones, so with no durations at all the split is by count. Every tie is broken by
the nodeid, so the same durations give the same split on every machine.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import heapq
import json
import re
import shutil
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

from device_matrix.config import Config, Row
from device_matrix.errors import ResultsError, UsageProblem
from device_matrix.records import jsonreport
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.junit import write_junit
from device_matrix.records.schema import (
    FAILING_OUTCOMES,
    AttemptRecord,
    CrashRecord,
    RowStatus,
    RunRecord,
    TestRecord,
    load_run,
    summarize,
)
from device_matrix.run.plan import RowPlan
from device_matrix.run.runner import (
    Run,
    RunListener,
    RunOptions,
    Verdict,
    collect,
    opened,
    prepare,
    run_row,
    write_record,
)

SHARD_FILE = "shard.json"
SHARD_SCHEMA = "device-matrix/shard"
SHARDS_DIR = "shards"
PLAN_FILE = "plan.json"  # shards/plan.json: the split every shard of one `run --shards N` shares
GANGS_DIR = "gangs"  # device_matrix.run.gang: each gang's record, beside the shards'
BASE_PORT = 8476  # {port} in slot_env: one port per slot from here (TPU_PROCESS_PORT's default)
# the most serious status of the shards wins the merged row
STATUS_ORDER: tuple[RowStatus, ...] = ("running", "interrupted", "error", "crashed", "failed", "unavailable", "passed")


@dataclass(frozen=True)
class Shard:
    index: int  # 1..count
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``K/N`` with 1 <= K <= N, as ``--shard`` takes it."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is None or not 1 <= int(match[1]) <= int(match[2]):
        raise UsageProblem(
            f"--shard {text!r}: expected K/N with 1 <= K <= N",
            tip="For example --shard 2/4 runs the second of four shards.",
        )
    return Shard(int(match[1]), int(match[2]))


# --- the split --------------------------------------------------------------------------


def recorded_durations(paths: Iterable[Path], row: str) -> dict[str, float]:
    """Each test's duration in the newest readable record of ``row`` among ``paths``.

    A path is a ``run.json``, a row folder (its ``run.json`` and its shards') or a
    results folder (its folder ``row``). Tests that never ran (``not_run``) say nothing
    about how long they take.
    """
    found: list[tuple[str, str, RunRecord]] = []
    for given in paths:
        path = given / row if (given / row).is_dir() else given
        files = [path] if path.is_file() else [path / "run.json", *sorted(path.glob(f"{SHARDS_DIR}/*/run.json"))]
        for file in files:
            try:
                record = load_run(file)
            except ResultsError:
                continue
            found.append((record.get("finished_at") or "", str(file), record))
    durations: dict[str, float] = {}
    for _, _, record in sorted(found, key=lambda f: (f[0], f[1])):  # newer records win
        if record["row"] != row:
            continue
        for test in record["tests"]:
            if test["outcome"] != "not_run":
                durations[test["nodeid"]] = max(0.0, float(test["duration"]))
    return durations


def split(nodeids: Sequence[str], durations: Mapping[str, float], count: int) -> list[list[str]]:
    """``count`` parts, each in the collection order of ``nodeids``."""
    if count < 1:
        raise ValueError(f"count must be >= 1, not {count}")
    tests = list(dict.fromkeys(nodeids))
    weights = estimated(tests, durations)
    heap = [(0.0, 0, k) for k in range(count)]  # (load, tests, shard): a total order
    owner: dict[str, int] = {}
    for nodeid in sorted(tests, key=lambda n: (-weights[n], n)):
        load, size, k = heapq.heappop(heap)
        owner[nodeid] = k
        heapq.heappush(heap, (load + weights[nodeid], size + 1, k))
    parts: list[list[str]] = [[] for _ in range(count)]
    for nodeid in tests:
        parts[owner[nodeid]].append(nodeid)
    return parts


def estimated(tests: Sequence[str], durations: Mapping[str, float]) -> dict[str, float]:
    """Each test's weight: its recorded duration, else the mean of the recorded ones."""
    known = [durations[n] for n in tests if n in durations]
    mean = sum(known) / len(known) if known else 1.0
    return {n: durations.get(n, mean) for n in tests}


def balance(parts: Sequence[Sequence[str]], durations: Mapping[str, float]) -> float:
    """Longest estimated shard / mean shard (1.0 is perfect)."""
    weights = estimated([n for part in parts for n in part], durations)
    loads = [sum(weights[n] for n in part) for part in parts]
    mean = sum(loads) / len(loads) if loads else 0.0
    return max(loads) / mean if mean else 1.0


# --- slots ------------------------------------------------------------------------------


def slot_env(row: Row, slot: int) -> dict[str, str]:
    """The row's ``slot_env`` for device slot ``slot`` (0-based)."""
    return {name: value.format(slot=slot, port=BASE_PORT + slot) for name, value in row.slot_env.items()}


# --- the plan of a split, kept beside each shard's record ------------------------------


class ShardPlan(TypedDict):
    schema: str
    row: str
    shard: int
    of: int
    host: str
    tests: list[str] | None  # every collected test in collection order; None: collection failed
    parts: list[list[int]] | None  # indexes into tests, one list per shard
    durations_known: int
    estimated_seconds: list[float]  # what each shard should take by the recorded durations
    reason: str | None
    node: str | None  # the Ray node that ran the shard
    lost: list[dict[str, str]]  # Ray nodes that died while they ran it


def make_plan(
    row: str, shard: Shard, tests: Sequence[str] | None, durations: Mapping[str, float], reason: str | None = None
) -> ShardPlan:
    parts_idx: list[list[int]] | None = None
    estimates: list[float] = []
    if tests is not None:
        position = {n: i for i, n in enumerate(tests)}
        parts = split(tests, durations, shard.count)
        parts_idx = [[position[n] for n in part] for part in parts]
        weights = estimated(list(tests), durations)
        estimates = [round(sum(weights[n] for n in part), 3) for part in parts]
    return ShardPlan(
        schema=SHARD_SCHEMA,
        row=row,
        shard=shard.index,
        of=shard.count,
        host=socket.gethostname(),
        tests=None if tests is None else list(tests),
        parts=parts_idx,
        durations_known=sum(1 for n in tests or () if n in durations),
        estimated_seconds=estimates,
        reason=reason,
        node=None,
        lost=[],
    )


def plan_part(plan: ShardPlan, index: int) -> list[str] | None:
    """The nodeids of shard ``index`` (1-based); None when the row could not be collected."""
    if plan["tests"] is None or plan["parts"] is None:
        return None
    tests = plan["tests"]
    return [tests[i] for i in plan["parts"][index - 1]]


def read_plan(path: Path) -> ShardPlan:
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing", tip="The shard did not finish writing its results.") from None
    except (OSError, ValueError) as exc:
        raise ResultsError(f"{path}: unreadable ({exc})") from exc
    if not isinstance(data, dict) or data.get("schema") != SHARD_SCHEMA:
        raise ResultsError(f"{path}: not a device-matrix shard plan")
    data.setdefault("node", None)
    data.setdefault("lost", [])
    return data  # type: ignore[return-value]  # checked by its schema field


# --- one shard --------------------------------------------------------------------------


def shard_folder(cfg: Config, row: str, index: int) -> Path:
    return cfg.results_dir / row / SHARDS_DIR / str(index)


def shard_command(row: str, shard: Shard, slot: int | None = None) -> list[str]:
    """The command that runs this shard again: what its record's ``command`` says."""
    command = ["device-matrix", "run", "--device", row, "--shard", str(shard)]
    return command if slot is None else [*command, "--slot", str(slot)]


def run_shard(
    cfg: Config,
    plan: RowPlan,
    options: RunOptions,
    listener: RunListener,
    shard: Shard,
    *,
    split_plan: ShardPlan | None = None,
    durations_from: Sequence[Path] = (),
    slot: int | None = None,
) -> RunRecord:
    """Run shard ``K/N`` of the row into ``results/<row>/shards/K/``.

    ``split_plan``: a split made elsewhere (the driver of parallel or Ray shards collects
    once); without it the row is collected here and split by the durations recorded in
    ``durations_from`` (default: this row's results folder).
    """
    opts = replace(
        options, results_subdir=f"{SHARDS_DIR}/{shard.index}", command=shard_command(plan.row.name, shard, slot)
    )
    if plan.mode == "unavailable":
        return run_row(cfg, plan, opts, listener)  # nothing to split: the record says why
    folder = shard_folder(cfg, plan.row.name, shard.index)
    if options.resume:
        # the shard's own part of the split it ran with, and only that part, whatever its
        # record got to before it stopped
        try:
            split_plan = split_plan or read_plan(folder / SHARD_FILE)
        except ResultsError as exc:
            raise ResultsError(f"nothing to resume: {exc.message}", tip="Run the shard without --resume.") from None
        part = plan_part(split_plan, shard.index)
        return run_row(cfg, plan, replace(opts, select=part if part is not None else []), listener)
    if split_plan is None:
        found = collect(Run(cfg, plan, opts, listener))
        tests = list(found.nodeids) if found.nodeids is not None else None
        durations = recorded_durations(durations_from or [cfg.results_dir], plan.row.name)
        split_plan = make_plan(plan.row.name, shard, tests, durations, found.problem)
    else:
        split_plan = ShardPlan(**{**split_plan, "shard": shard.index, "host": socket.gethostname()})
    part = plan_part(split_plan, shard.index)
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / SHARD_FILE, split_plan)
    if part is not None and not part:
        with opened(cfg, plan, opts, listener) as run:
            prepare(run)
            why = f"shard {shard} has no tests ({len(split_plan['tests'] or ())} in the row)"
            return write_record(run, Verdict("passed", why))
    # collection failed: the shard's run selects nothing, and records why as a whole run would
    return run_row(cfg, plan, replace(opts, select=part if part is not None else []), listener)


# --- resuming every shard of a row ---------------------------------------------------------


@dataclass(frozen=True)
class Resume:
    plan: ShardPlan  # the split the interrupted run made
    resume: list[int]  # shards whose record says they were cut off
    fresh: list[int]  # shards that wrote no record: they never started


def resume_shards(folder: Path, count: int | None) -> Resume:
    """What ``run --shards N --resume`` continues: every shard cut off, none that finished."""
    shards = folder / SHARDS_DIR
    found = sorted(shards.glob(f"*/{SHARD_FILE}"))
    plan: ShardPlan | None = None
    for path in [shards / PLAN_FILE, *found]:
        with contextlib.suppress(ResultsError):
            plan = read_plan(path)
            break
    if plan is None:
        raise ResultsError(
            f"nothing to resume: {shards} holds no split of the row", tip="Run the row with --shards N first."
        )
    if count is not None and count != plan["of"]:
        raise UsageProblem(
            f"--shards {count} --resume: the run it continues had {plan['of']} shards",
            tip=f"Resume with --shards {plan['of']}, or run the row again without --resume.",
        )
    resume, fresh = [], []
    for k in range(1, plan["of"] + 1):
        try:
            record = load_run(shards / str(k) / "run.json")
        except ResultsError:
            fresh.append(k)
            continue
        if record["status"] in ("interrupted", "running"):
            resume.append(k)
    return Resume(plan, resume, fresh)


# --- merge ------------------------------------------------------------------------------


@dataclass
class Merged:
    record: RunRecord
    problems: list[str] = field(default_factory=list)
    reports: dict[int, dict[str, Any]] = field(default_factory=dict)  # each shard's report.json


def merge_row(folder: Path) -> RunRecord:
    """Merge ``folder/shards/*`` into ``folder/run.json`` (and junit.xml, report.json).

    For triage and ``device-matrix merge``: what disagrees (a test in no shard, or in
    two, a missing shard) is in the record's ``reason`` and keeps the row from green.
    """
    merged = merge(folder)
    write_merged(folder, merged)
    return merged.record


def has_shards(folder: Path) -> bool:
    return any(p.is_dir() and p.name.isdigit() for p in (folder / SHARDS_DIR).glob("*"))


def merge(folder: Path) -> Merged:
    dirs = sorted(
        (p for p in (folder / SHARDS_DIR).glob("*") if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)
    )
    if not dirs:
        raise ResultsError(f"{folder}: no shards to merge", tip="Run the row with --shard K/N first.")
    whole = folder / "run.json"
    if _is_whole_run(whole):
        raise ResultsError(
            f"{folder} holds a whole run of the row and shards of another",
            tip=f"Keep one: remove {whole} or {folder / SHARDS_DIR}.",
        )
    problems: list[str] = []
    records: dict[int, RunRecord] = {}
    plans: dict[int, ShardPlan] = {}
    reports: dict[int, dict[str, Any]] = {}
    for d in dirs:
        k = int(d.name)
        try:
            records[k] = load_run(d / "run.json")
        except ResultsError as exc:
            problems.append(f"shard {k}: {exc.message}")
        with contextlib.suppress(ResultsError):
            plans[k] = read_plan(d / SHARD_FILE)
        with contextlib.suppress(OSError, ValueError):
            reports[k] = json.loads((d / "report.json").read_text("utf-8"))
    if not records:
        raise ResultsError(f"{folder}: no shard has a readable run.json ({'; '.join(problems)})")

    reference = _reference_plan(plans, problems)
    count = max([p["of"] for p in plans.values()] + [max(records)])
    for k in range(1, count + 1):
        if k not in records and f"shard {k}:" not in " ".join(problems):
            problems.append(f"shard {k}/{count}: no results")
    owner: dict[str, int] = {}
    order: list[str] = []
    if reference is not None and reference["tests"] is not None and reference["parts"] is not None:
        tests = reference["tests"]
        order = list(tests)
        for k, part in enumerate(reference["parts"], 1):
            for i in part:
                owner[tests[i]] = k

    row = records[min(records)]["row"]
    seen: dict[str, list[tuple[int, TestRecord]]] = {}
    crash_ids: dict[tuple[int, str], str] = {}
    crashes: list[CrashRecord] = []
    crash_keys: set[tuple[str, str | None, str]] = set()
    attempts: list[AttemptRecord] = []
    attempt_offset: dict[int, int] = {}
    for k, rec in sorted(records.items()):
        attempt_offset[k] = len(attempts)
        for a in rec["attempts"]:
            attempts.append(
                AttemptRecord(
                    **{
                        **a,
                        "index": a["index"] + attempt_offset[k],
                        "journal": f"{SHARDS_DIR}/{k}/{a['journal']}",
                        "log": f"{SHARDS_DIR}/{k}/{a['log']}",
                    }
                )
            )
        for c in rec["crashes"]:
            key = (c["phase"], c["nodeid"], c["diagnosis"]["fingerprint"])
            new_id = f"{row}-{k}.{c['id'].rsplit('-', 1)[-1]}"
            crash_ids[(k, c["id"])] = new_id
            if c["phase"] != "test" and key in crash_keys:
                continue  # every shard imports every module: one crash, seen by each shard
            crash_keys.add(key)
            crashes.append(CrashRecord(**{**c, "id": new_id, "attempt": c["attempt"] + attempt_offset[k]}))
        for t in rec["tests"]:
            if t["nodeid"] not in seen and t["nodeid"] not in owner:
                order.append(t["nodeid"])
            seen.setdefault(t["nodeid"], []).append((k, t))

    merged_tests: list[TestRecord] = []
    for nodeid in order:
        entries = seen.get(nodeid, [])
        if not entries:
            k = owner[nodeid]
            why = f"in no shard's results (assigned to shard {k}/{count})"
            problems.append(f"{nodeid}: {why}")
            merged_tests.append(
                TestRecord(
                    nodeid=nodeid,
                    outcome="not_run",
                    duration=0.0,
                    message=f"not run: {why}",
                    skip=None,
                    crash=None,
                    attempt=0,
                )
            )
            continue
        shards_of = [k for k, _ in entries]
        # a module that fails (or dies) on import: every shard imports it and says so
        module = nodeid not in owner and "::" not in nodeid
        if len(entries) > 1 and not module:
            problems.append(f"{nodeid}: ran in shards {', '.join(map(str, shards_of))}")
        elif owner and nodeid not in owner and not module:
            problems.append(f"{nodeid}: ran in shard {shards_of[0]} but is in no shard of the split")
        k, test = entries[0] if module else max(entries, key=lambda e: _severity(e[1]))
        crash = crash_ids.get((k, test["crash"])) if test["crash"] else None
        merged_tests.append(TestRecord(**{**test, "crash": crash, "attempt": test["attempt"] + attempt_offset[k]}))

    gangs = _merge_gangs(folder, row, tests=merged_tests, crashes=crashes, attempts=attempts, problems=problems)
    status = _merged_status([r["status"] for r in records.values()], merged_tests, crashes, problems)
    first = records[min(records)]
    reasons = [f"shard {k}: {r['reason']}" for k, r in sorted(records.items()) if r["reason"]]
    for k, p in sorted(plans.items()):
        for entry in p["lost"] if k in records and records[k]["status"] != "error" else ():
            reasons.append(f"shard {k}: node {entry['name']} died while it ran; it ran again on node {p['node']}")
    if problems:
        reasons.insert(0, f"shards disagree: {'; '.join(problems[:20])}" + (" ..." if len(problems) > 20 else ""))
    started = min(r["started_at"] for r in records.values())
    finished = max(r["finished_at"] for r in records.values())
    environment = dict(first["environment"])
    environment["shards"] = [
        {
            "shard": k,
            "of": count,
            "status": r["status"],
            "duration": r["duration"],
            "tests": len(r["tests"]),
            "host": plans[k]["host"] if k in plans else r["environment"].get("host"),
            "node": plans[k]["node"] if k in plans else None,
            "lost": [entry["name"] for entry in plans[k]["lost"]] if k in plans else [],
        }
        for k, r in sorted(records.items())
    ]
    if gangs:
        environment["gangs"] = gangs
    record = RunRecord(
        schema=first["schema"],
        version=first["version"],
        row=row,
        pjrt_device=first["pjrt_device"],
        status=status,
        reason=" | ".join(reasons) or None,
        mode=first["mode"],
        image=first["image"],
        suites=first["suites"],
        started_at=started,
        finished_at=finished,
        duration=_span(started, finished, [r["duration"] for r in records.values()]),
        command=["device-matrix", "merge", str(folder)],
        repro=first["repro"],
        environment=environment,
        tests=merged_tests,
        crashes=crashes,
        attempts=attempts,
        summary=summarize(merged_tests),
        run_url=next((r["run_url"] for r in records.values() if r["run_url"]), None),
        runner_pid=None,
        # a shard that came back from no node has no source: any other shard's is the row's
        source=next((r["source"] for r in records.values() if r.get("source")), None),
    )
    return Merged(record, problems, reports)


def _merge_gangs(
    folder: Path,
    row: str,
    *,
    tests: list[TestRecord],
    crashes: list[CrashRecord],
    attempts: list[AttemptRecord],
    problems: list[str],
) -> list[dict[str, Any]]:
    """Each gang's one test, its crashes and its ranks' attempts, after the shards'."""
    gangs = []
    for path in sorted((folder / GANGS_DIR).glob("*/run.json")):
        name = path.parent.name
        try:
            rec = load_run(path)
        except ResultsError as exc:
            problems.append(f"gang {name}: {exc.message}")
            continue
        offset = len(attempts)
        for a in rec["attempts"]:
            attempts.append(
                AttemptRecord(**{**a, "index": a["index"] + offset, "log": f"{GANGS_DIR}/{name}/{a['log']}"})
            )
        ids = {}
        for c in rec["crashes"]:
            ids[c["id"]] = f"{row}-{name}.{c['id'].rsplit('-', 1)[-1]}"
            crashes.append(CrashRecord(**{**c, "id": ids[c["id"]], "attempt": c["attempt"] + offset}))
        for t in rec["tests"]:
            crash = ids.get(t["crash"]) if t["crash"] else None
            tests.append(TestRecord(**{**t, "crash": crash, "attempt": t["attempt"] + offset}))
        gangs.append(dict(rec["environment"].get("gang") or {"name": name}))
    return gangs


def _is_whole_run(path: Path) -> bool:
    """A readable run.json not written by a merge."""
    try:
        return "shards" not in load_run(path)["environment"]
    except ResultsError:
        return False


def _reference_plan(plans: Mapping[int, ShardPlan], problems: list[str]) -> ShardPlan | None:
    usable = {k: p for k, p in sorted(plans.items()) if p["tests"] is not None}
    if not usable:
        return None
    k0, ref = next(iter(usable.items()))
    for k, p in usable.items():
        if (p["tests"], p["parts"], p["of"]) != (ref["tests"], ref["parts"], ref["of"]):
            problems.append(
                f"shards {k0} and {k} were split differently (their collections or recorded durations differed)"
            )
    return ref


def _severity(test: TestRecord) -> int:
    outcome = test["outcome"]
    if outcome in ("crashed", "timeout"):
        return 3
    if outcome in FAILING_OUTCOMES:
        return 2
    return 0 if outcome == "not_run" else 1


def _merged_status(
    statuses: Sequence[RowStatus], tests: Sequence[TestRecord], crashes: Sequence[CrashRecord], problems: Sequence[str]
) -> RowStatus:
    if all(s == "unavailable" for s in statuses) and not tests:
        return "unavailable"
    outcomes = {t["outcome"] for t in tests}
    computed: RowStatus = "passed"
    if crashes or outcomes & {"crashed", "timeout"}:
        computed = "crashed"
    elif outcomes & FAILING_OUTCOMES or "not_run" in outcomes or problems:
        computed = "failed"
    candidates = [*(s for s in statuses if s != "unavailable"), computed]
    return min(candidates, key=STATUS_ORDER.index)


def _span(started: str, finished: str, durations: Sequence[float]) -> float:
    """Wall time from the first shard's start to the last one's end (never less than one shard)."""
    try:
        span = (dt.datetime.fromisoformat(finished) - dt.datetime.fromisoformat(started)).total_seconds()
    except ValueError:
        span = 0.0
    return round(max([span, *durations]), 3)


def write_merged(folder: Path, merged: Merged) -> None:
    record = merged.record
    phases: dict[str, list[dict[str, Any]]] = {}
    locations: dict[str, tuple[str, int | None]] = {}
    root = ""
    for report in merged.reports.values():
        root = root or str(report.get("root", ""))
        for entry in report.get("tests", []):
            nodeid = entry.get("nodeid")
            if not isinstance(nodeid, str) or nodeid in phases:
                continue
            phases[nodeid] = [
                {"when": when, **entry[when]}
                for when in ("setup", "call", "teardown")
                if isinstance(entry.get(when), dict)
            ]
            locations[nodeid] = (nodeid.split("::", 1)[0], entry.get("lineno"))
    write_junit(folder / "junit.xml", record)
    jsonreport.write(folder / "report.json", jsonreport.build(record, phases, locations, Path(root or folder)))
    write_json_atomic(folder / "run.json", record)


def clear_shards(folder: Path) -> None:
    """A new split of the whole row here: what an earlier run of the row left goes, as with `run`."""
    shutil.rmtree(folder / SHARDS_DIR, ignore_errors=True)
    shutil.rmtree(folder / GANGS_DIR, ignore_errors=True)
    shutil.rmtree(folder / "attempts", ignore_errors=True)
    for name in ("run.json", "junit.xml", "report.json", "output.log"):
        (folder / name).unlink(missing_ok=True)


def artifact_folder(results: Path, artifact: str) -> Path | None:
    """Where a row job's artifact belongs: ``results-<row>@K`` (shard K) or ``results-<row>``.

    The names come from :func:`device_matrix.workflow.actions_matrix`; None for another name.
    """
    if not artifact.startswith("results-"):
        return None
    row, at, shard = artifact.removeprefix("results-").rpartition("@")
    if at and shard.isdigit() and row:
        return results / row / SHARDS_DIR / shard
    return results / artifact.removeprefix("results-")


def merge_results(results: Path) -> list[tuple[str, RunRecord | ResultsError]]:
    """Merge every row folder under ``results`` that has shards (for triage)."""
    out: list[tuple[str, RunRecord | ResultsError]] = []
    for folder in sorted(p for p in results.iterdir() if p.is_dir() and has_shards(p)):
        try:
            out.append((folder.name, merge_row(folder)))
        except ResultsError as exc:
            out.append((folder.name, exc))
    return out


__all__ = [
    "Merged",
    "Shard",
    "artifact_folder",
    "balance",
    "collect",
    "merge",
    "merge_results",
    "merge_row",
    "parse_shard",
    "recorded_durations",
    "run_shard",
    "slot_env",
    "split",
]
