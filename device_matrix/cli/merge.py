"""``device-matrix merge``: each row's shards into its record, as the driver merges them."""

from __future__ import annotations

import argparse
from pathlib import Path

from device_matrix.cli.commands import a_folder
from device_matrix.errors import EXIT_OK, EXIT_TESTS_FAILED, ResultsError
from device_matrix.output import Output


def cmd_merge(args: argparse.Namespace, out: Output) -> int:
    from device_matrix import config as config_mod
    from device_matrix.records.merge import has_shards, load_spread, merge, write_merged
    from device_matrix.records.summary import fold

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
        merged = merge(load_spread(folder), command=["device-matrix", "merge", str(folder)])
        write_merged(folder, merged)
        r = merged.record
        shards = len(r["environment"].get("shards", []))
        out.line(
            # counted by the one fold, as every report counts (an xpass is a failure there)
            f"{r['row']}: {out.paint(r['status'], r['status'])}: {r['summary']['total']} tests from "
            f"{shards} shard(s): {fold(r).counts.phrase()} -> {folder / 'run.json'}"
        )
        for problem in merged.problems:
            out.line(f"  {problem}")
        if merged.problems or r["status"] != "passed":
            code = EXIT_TESTS_FAILED
    return code


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    m = sub.add_parser(
        "merge",
        help="merge each row's shards (results/<row>/shards/K) into results/<row>/run.json",
        description="A test in no shard, or in two, a missing shard and a part of another row or split "
        "are reported and keep the row from green.",
    )
    m.add_argument(
        "results", nargs="?", type=a_folder, help="results folder (default from config), or downloaded artifacts"
    )
    m.add_argument("--device", "-d", action="append", help="only this row (repeatable)")
    m.set_defaults(func=cmd_merge)
