"""``run --shard K/N``, ``run --shards N [--parallel]``, ``run --executor ray`` and ``merge``.

The arguments are checked here, read once into plain values (:class:`Spreading`), and the
row handed to device_matrix.spread's driver; nothing of a spread happens in this module.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from device_matrix.cli.run_options import forwarded_options, resume_argv, row_command, spread_argv
from device_matrix.config import Config, Row
from device_matrix.errors import UsageProblem
from device_matrix.output import Output
from device_matrix.records.schema import RunRecord

if TYPE_CHECKING:  # the runner loads only when a row runs: the parser stays light
    from device_matrix.run.plan import RowPlan
    from device_matrix.run.runner import RunOptions


def spread_requested(args: argparse.Namespace) -> bool:
    return bool(args.shard or args.shards or args.executor == "ray")


def run_whole(cfg: Config, plan: RowPlan, options: RunOptions, out: Output) -> RunRecord:
    """The row in one piece: straight to the runner (device_matrix.run.whole), or through the
    spread's driver when it has gangs to run or fold (#41: spread/ only to spread)."""
    from device_matrix.run import whole

    if not whole.has_gangs(cfg, plan):
        return whole.run_whole(cfg, plan, options, out)
    from device_matrix.spread import driver

    return driver.run_whole(cfg, plan, options, out)


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
    if args.shard and args.executor == "ray":
        raise UsageProblem(
            "--shard with --executor ray", tip="--shard K/N runs one shard here; --executor ray runs --shards N."
        )
    if args.parallel and not args.shards:
        raise UsageProblem("--parallel needs --shards N", tip="For example: --shards 4 --parallel.")
    if args.slot is not None and not args.shard:
        raise UsageProblem("--slot needs --shard K/N", tip="--shards N --parallel gives each shard a slot itself.")
    if args.shards is not None and args.shards < 1:
        raise UsageProblem(f"--shards {args.shards}: must be >= 1")
    if args.shard:
        from device_matrix.spread.split import parse_shard

        parse_shard(args.shard)


@dataclass(frozen=True)
class Spreading:
    """What the spreading options ask for, as plain values: all the driver is given of them (#31)."""

    shard: str | None  # --shard K/N
    count: int  # --shards N, else the row's own `shards`
    parallel: bool
    slot: int | None
    address: str | None  # --executor ray: the cluster
    durations_from: tuple[Path, ...]
    given_plan: Path | None  # --shard-plan: a driver's child
    forwarded: tuple[str, ...]  # the options each shard's own `run` takes too
    command: tuple[str, ...]  # how the spread was asked for (its record's command)


def spreading_of(args: argparse.Namespace, row: Row) -> Spreading:
    """The spreading options of ``args``, read once."""
    count: int = args.shards or row.shards
    return Spreading(
        shard=args.shard,
        count=count,
        parallel=bool(args.parallel),
        slot=args.slot,
        address=args.address if args.executor == "ray" else None,
        durations_from=tuple(Path(p) for p in args.durations or ()),
        given_plan=Path(args.shard_plan) if args.shard_plan else None,
        forwarded=tuple(forwarded_options(args)),
        command=tuple(spread_command(args, row.name, count)),
    )


def run_spread(args: argparse.Namespace, cfg: Config, plan: RowPlan, options: RunOptions, out: Output) -> RunRecord:
    """The row spread as the command line asks; past here no one reads ``args``."""
    return spread_row(spreading_of(args, plan.row), cfg, plan, options, out)


def spread_row(ask: Spreading, cfg: Config, plan: RowPlan, options: RunOptions, out: Output) -> RunRecord:
    """One shard (``--shard``), or every shard on Ray's nodes or this host's slots (``--shards``)."""
    from dataclasses import replace

    from device_matrix.spread import driver

    row = plan.row
    if ask.shard:
        from device_matrix.spread.split import parse_shard

        if ask.slot is not None:
            options = replace(options, slot_env=_slot_env(row, ask.slot))
        return driver.run_shard(
            cfg,
            plan,
            options,
            out,
            parse_shard(ask.shard),
            given_plan=ask.given_plan,
            durations_from=ask.durations_from,
            slot=ask.slot,
        )
    count = ask.count
    if ask.address is not None:
        from device_matrix.spread.ray import on_ray

        with on_ray(cfg, plan, options, out, address=ask.address, forwarded=ask.forwarded) as nodes:
            return driver.spread(
                cfg, plan, options, out, nodes, count=count, command=ask.command, durations_from=ask.durations_from
            )
    if ask.parallel and row.slots == 0 and row.pjrt_device != "CPU":
        raise UsageProblem(
            f"row {row.name!r} has no device slots: {count} shards at once would share every {row.pjrt_device} device",
            tip="Set the row's `slots` (devices on one host) and `slot_env`, or leave out --parallel.",
        )
    from device_matrix.spread.local import Slots

    width = (min(count, row.slots) if row.slots else count) if ask.parallel else 1
    slots = Slots(cfg, plan, options, out, width=width, forwarded=ask.forwarded)
    return driver.spread(
        cfg, plan, options, out, slots, count=count, command=ask.command, durations_from=ask.durations_from
    )


def _slot_env(row: Row, slot: int) -> dict[str, str]:
    from device_matrix.spread.slots import slot_env

    if not row.slot_env:
        raise UsageProblem(
            f"--slot {slot}: row {row.name!r} has no slot_env",
            tip='Give the row a slot_env table (e.g. CUDA_VISIBLE_DEVICES = "{slot}") in pyproject.toml.',
        )
    if slot < 0 or (row.slots and slot >= row.slots):
        raise UsageProblem(f"--slot {slot}: row {row.name!r} has slots 0 to {row.slots - 1}")
    return slot_env(row, slot)


def spread_command(args: argparse.Namespace, row: str, count: int) -> list[str]:
    """How the spread was asked for: what its record's ``command`` says."""
    return [*row_command(row), *spread_argv(args, shards=count)]


def resume_tip(args: argparse.Namespace, row: str) -> str:
    """The command that continues this interrupted run of ``row``, exactly as it was asked for (#23)."""
    return shlex.join(resume_argv(args, row))


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
    g.add_argument("--shard-plan", help=argparse.SUPPRESS)  # a driver's child: the split the driver made
