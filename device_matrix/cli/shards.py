"""``run --shard K/N``, ``run --shards N [--parallel]``, ``run --executor ray`` and ``merge``."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from device_matrix.cli.commands import SOURCE_FLAGS
from device_matrix.config import Config, Row
from device_matrix.errors import EXIT_OK, EXIT_TESTS_FAILED, ResultsError, UsageProblem
from device_matrix.output import Output
from device_matrix.records.schema import RunRecord

if TYPE_CHECKING:  # the runner loads only when a row runs: the parser stays light
    from device_matrix.run.plan import RowPlan
    from device_matrix.run.runner import RunOptions
    from device_matrix.run.shards import Shard, ShardPlan


def spread_requested(args: argparse.Namespace) -> bool:
    return bool(args.shard or args.shards or args.executor == "ray")


def run_whole(cfg: Config, plan: RowPlan, options: RunOptions, out: Output) -> RunRecord:
    """The row in one piece: the shards of an earlier split of it are not its results any more."""
    import shutil

    from device_matrix.run.runner import run_row
    from device_matrix.run.shards import SHARDS_DIR

    if not options.resume:
        shutil.rmtree(cfg.results_dir / plan.row.name / SHARDS_DIR, ignore_errors=True)
    _note_gangs(plan, out)
    return run_row(cfg, plan, options, out)


def _note_gangs(plan: RowPlan, out: Output) -> None:
    """A row's gangs need Ray: a run without it says they were left out, never silently."""
    if plan.row.gangs and plan.mode != "unavailable":
        names = ", ".join(gang.name for gang in plan.row.gangs)
        out.note(plan.row.name, f"gang(s) {names} not run: they run only with --executor ray")


def check_spread_args(args: argparse.Namespace) -> None:
    """Wrong combinations of the spreading options, before anything runs."""
    if args.executor == "ray" and not args.address:
        raise UsageProblem(
            "--executor ray needs --address",
            tip="Name the cluster: --address auto (the one started on this machine) or --address HOST:PORT.",
        )
    if args.address and args.executor != "ray":
        raise UsageProblem("--address is for --executor ray", tip="Add --executor ray, or leave --address out.")
    if args.shard and args.shards:
        raise UsageProblem("--shard and --shards together", tip="--shard K/N runs one shard; --shards N runs all N.")
    if args.parallel and not args.shards:
        raise UsageProblem("--parallel needs --shards N", tip="For example: --shards 4 --parallel.")
    if args.slot is not None and not args.shard:
        raise UsageProblem("--slot needs --shard K/N", tip="--shards N --parallel gives each shard a slot itself.")
    if args.shards is not None and args.shards < 1:
        raise UsageProblem(f"--shards {args.shards}: must be >= 1")


def run_spread(args: argparse.Namespace, cfg: Config, plan: RowPlan, options: RunOptions, out: Output) -> RunRecord:
    from device_matrix.run.shards import parse_shard, read_plan, run_shard

    row = plan.row
    durations_from = [Path(p) for p in args.durations or ()]
    if args.executor == "ray":
        from device_matrix.run.ray import run_on_ray

        return run_on_ray(
            cfg,
            plan,
            options,
            out,
            shards=args.shards or row.shards,
            address=args.address,
            forwarded=forwarded_options(args),
            durations_from=durations_from,
        )
    _note_gangs(plan, out)
    if args.shard:
        shard = parse_shard(args.shard)
        if args.slot is not None:
            options = replace(options, slot_env=_slot_env(row, args.slot))
        split_plan = read_plan(Path(args.shard_plan)) if args.shard_plan else None
        return run_shard(
            cfg, plan, options, out, shard, split_plan=split_plan, durations_from=durations_from, slot=args.slot
        )
    return run_shards_here(args, cfg, plan, options, out, durations_from=durations_from)


def _slot_env(row: Row, slot: int) -> dict[str, str]:
    from device_matrix.run.shards import slot_env

    if not row.slot_env:
        raise UsageProblem(
            f"--slot {slot}: row {row.name!r} has no slot_env",
            tip='Give the row a slot_env table (e.g. CUDA_VISIBLE_DEVICES = "{slot}") in pyproject.toml.',
        )
    if slot < 0 or (row.slots and slot >= row.slots):
        raise UsageProblem(f"--slot {slot}: row {row.name!r} has slots 0 to {row.slots - 1}")
    return slot_env(row, slot)


def run_shards_here(
    args: argparse.Namespace,
    cfg: Config,
    plan: RowPlan,
    options: RunOptions,
    out: Output,
    *,
    durations_from: list[Path],
) -> RunRecord:
    """All N shards on this host, one after another or (``--parallel``) at once, then merged."""
    from device_matrix.run.runner import Run, collect, run_row
    from device_matrix.run.shards import (
        Shard,
        clear_shards,
        make_plan,
        merge,
        recorded_durations,
        resume_shards,
        run_shard,
        write_merged,
    )

    row = plan.row
    count: int = args.shards
    folder = cfg.results_dir / row.name
    if plan.mode == "unavailable":
        return run_row(cfg, plan, options, out)
    if args.parallel and row.slots == 0 and row.pjrt_device != "CPU":
        raise UsageProblem(
            f"row {row.name!r} has no device slots: {count} shards at once would share every {row.pjrt_device} device",
            tip="Set the row's `slots` (devices on one host) and `slot_env`, or leave out --parallel.",
        )
    if options.resume:
        state = resume_shards(folder, count)
        split_plan = state.plan
        out.note(row.name, f"resuming shard(s) {_listed(state.resume)}; starting shard(s) {_listed(state.fresh)}")
        todo = dict.fromkeys(state.resume, True) | dict.fromkeys(state.fresh, False)
    else:
        durations = recorded_durations(durations_from or [cfg.results_dir], row.name)
        found = collect(Run(cfg, plan, options, out))
        tests, reason = (list(found.nodeids) if found.nodeids is not None else None), found.problem
        clear_shards(folder)
        split_plan = make_plan(row.name, Shard(1, count), tests, durations, reason)
        todo = dict.fromkeys(range(1, count + 1), False)
    tests = split_plan["tests"]
    if tests is not None and not options.resume:
        out.note(
            row.name,
            f"{len(tests)} tests in {count} shard(s); {split_plan['durations_known']} with a recorded duration; "
            f"estimated seconds per shard: {', '.join(f'{s:.1f}' for s in split_plan['estimated_seconds'])}",
        )
    if args.parallel and count > 1:
        _run_children(args, cfg, row, split_plan, out, todo=todo)
    else:
        for k, resume in sorted(todo.items()):
            run_shard(cfg, plan, replace(options, resume=resume), out, Shard(k, count), split_plan=split_plan)
    merged = merge(folder)
    write_merged(folder, merged)
    for problem in merged.problems:
        out.line(f"  {row.name}: {problem}")
    return merged.record


def _listed(shards: list[int]) -> str:
    return ", ".join(map(str, sorted(shards))) or "none"


def _run_children(
    args: argparse.Namespace, cfg: Config, row: Row, split_plan: ShardPlan, out: Output, *, todo: dict[int, bool]
) -> None:
    """One ``device-matrix run --shard K/N`` process per shard of ``todo`` (True: resume it), one per free slot."""
    from device_matrix.records.atomic import write_json_atomic
    from device_matrix.run.attempt import Interrupted
    from device_matrix.run.shards import PLAN_FILE, SHARDS_DIR, Shard, shard_folder

    count = split_plan["of"]
    plan_path = cfg.results_dir / row.name / SHARDS_DIR / PLAN_FILE
    write_json_atomic(plan_path, split_plan)
    width = min(count, row.slots) if row.slots else count
    free = list(range(width))
    waiting = sorted(todo)
    running: dict[int, tuple[subprocess.Popen[bytes], int]] = {}
    try:
        while waiting or running:
            while waiting and free:
                k, slot = waiting.pop(0), free.pop(0)
                folder = shard_folder(cfg, row.name, k)
                folder.mkdir(parents=True, exist_ok=True)
                argv = _child_argv(
                    args, cfg, row, Shard(k, count), plan_path=plan_path, slot=slot if row.slot_env else None
                )
                if todo[k]:
                    argv.insert(argv.index("--shard"), "--resume")
                with (folder / "console.log").open("ab" if todo[k] else "wb") as console:
                    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT)
                running[k] = (proc, slot)
                where = f" on slot {slot}" if row.slot_env else ""
                out.note(row.name, f"shard {k}/{count} started{where}")
            for k, (proc, slot) in list(running.items()):
                if proc.poll() is None:
                    continue
                del running[k]
                free.append(slot)
                out.note(row.name, f"shard {k}/{count} ended (exit {proc.returncode})")
            time.sleep(0.05)
    except Interrupted:
        for proc, _ in running.values():
            proc.terminate()  # each shard writes its own `interrupted` record
        for proc, _ in running.values():
            proc.wait()
        raise


def _child_argv(
    args: argparse.Namespace, cfg: Config, row: Row, shard: Shard, *, plan_path: Path, slot: int | None
) -> list[str]:
    argv = [sys.executable, "-m", "device_matrix", "--project", str(cfg.project_root), "run", "--device", row.name]
    argv += ["--shard", str(shard), "--shard-plan", str(plan_path), "--results", str(cfg.results_dir)]
    if slot is not None:
        argv += ["--slot", str(slot)]
    return argv + forwarded_options(args)


def forwarded_options(args: argparse.Namespace) -> list[str]:
    """The options of this ``run`` that each shard's own ``run`` takes too (pytest's last)."""
    argv = []
    for flag in ("local", "container", "no_gdb", "keep_cores"):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    for name in ("engine", "python", "test_timeout", "run_timeout", "reruns", "max_restarts", "run_url", *SOURCE_FLAGS):
        value = getattr(args, name)
        if value is not None:
            argv += ["--" + name.replace("_", "-"), str(value)]
    for suite in args.suite or ():
        argv += ["--suite", suite]
    for test in args.test or ():
        argv += ["--test", test]
    if args.pytest_args:
        argv += ["--", *args.pytest_args]
    return argv


# --- merge ------------------------------------------------------------------------------


def cmd_merge(args: argparse.Namespace, out: Output) -> int:
    from device_matrix import config as config_mod
    from device_matrix.run.shards import has_shards, merge, write_merged

    cfg = config_mod.load(Path(args.project) if args.project else None)
    results = Path(args.results) if args.results else cfg.results_dir
    folders = (
        [results / name for name in args.device] if args.device else sorted(p for p in results.iterdir() if p.is_dir())
    )
    folders = [f for f in folders if has_shards(f)]
    if not folders:
        raise ResultsError(
            f"{results}: no row has shards to merge",
            tip="Run rows with --shard K/N first, or point at the downloaded shard artifacts.",
        )
    code = EXIT_OK
    for folder in folders:
        merged = merge(folder)
        write_merged(folder, merged)
        r = merged.record
        s = r["summary"]
        shards = len(r["environment"].get("shards", []))
        out.line(
            f"{r['row']}: {out.paint(r['status'], r['status'])}: {s['total']} tests from {shards} shard(s), "
            f"{s['passed']} passed, {s['failed'] + s['error']} failed, {s['crashed'] + s['timeout']} crashed, "
            f"{s['not_run']} not run -> {folder / 'run.json'}"
        )
        for problem in merged.problems:
            out.line(f"  {problem}")
        if merged.problems or r["status"] != "passed":
            code = EXIT_TESTS_FAILED
    return code


def add_merge_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    m = sub.add_parser(
        "merge",
        help="merge each row's shards (results/<row>/shards/K) into results/<row>/run.json",
        description="A test in no shard, or in two, and a missing shard are reported and keep the row from green.",
    )
    m.add_argument("results", nargs="?", help="results folder (default from config), or downloaded artifacts")
    m.add_argument("--device", "-d", action="append", help="only this row (repeatable)")
    m.set_defaults(func=cmd_merge)


def add_run_options(run: argparse.ArgumentParser) -> None:
    g = run.add_argument_group("shards and hosts (see docs/more-than-one-host.md)")
    g.add_argument("--shard", metavar="K/N", help="run shard K of N: the row's tests split by recorded durations")
    g.add_argument("--shards", type=int, metavar="N", help="run all N shards here and merge them")
    g.add_argument("--parallel", action="store_true", help="with --shards: at once, one per device slot")
    g.add_argument("--slot", type=int, metavar="S", help="with --shard: use device slot S (the row's slot_env)")
    g.add_argument(
        "--durations",
        action="append",
        metavar="PATH",
        help="run.json, row folder or results folder with recorded durations (repeatable; default: --results)",
    )
    g.add_argument("--executor", choices=("local", "ray"), default="local", help="where shards run (default local)")
    g.add_argument("--address", help="with --executor ray: the cluster, `auto` or HOST:PORT (always explicit)")
    g.add_argument("--shard-plan", help=argparse.SUPPRESS)  # the split made by `--shards N --parallel`
