"""``device-matrix skips check|list``: every device skip cites an issue and has not expired."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from device_matrix import config as config_mod
from device_matrix.errors import EXIT_OK, EXIT_TESTS_FAILED
from device_matrix.output import Output
from device_matrix.skips import check, load_disable_list, scan_tree


def _declared(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    cfg = config_mod.load(Path(args.project) if args.project else None)
    paths = [Path(p) for p in args.paths] if args.paths else [cfg.suites_dir]
    declared = scan_tree(cfg.project_root, [p if p.is_absolute() else cfg.project_root / p for p in paths])
    declared.extend(load_disable_list(cfg.disable_list))
    return cfg, declared


def cmd_skips_check(args: argparse.Namespace, out: Output) -> int:
    _, declared = _declared(args)
    findings = check(declared)
    bad = [f for f in findings if f.problem]
    for f in findings:
        s = f.skip
        where = f"{s.file}:{s.line}" if s.line else f"{s.file} ({s.test})"
        if f.problem:
            out.line(f"{where}: {s.mode}_device({', '.join(s.devices)}) {f.problem}")
            out.annotate("error", f"device {s.mode} {f.problem}", file=s.file, line=s.line)
        elif args.verbose:
            out.line(f"{where}: {s.mode}_device({', '.join(s.devices)}) -> {s.issue}")
    out.line(f"{len(findings)} device skip(s)/xfail(s), {len(bad)} problem(s)")
    if bad:
        out.line("Cite an issue with issue='#N' (or a URL, or ledger:N), or let `device-matrix issues sync` file one.")
    return EXIT_TESTS_FAILED if bad else EXIT_OK


def cmd_skips_list(args: argparse.Namespace, out: Output) -> int:
    _, declared = _declared(args)
    rows = [
        {
            "file": s.file,
            "line": s.line,
            "test": s.test,
            "mode": s.mode,
            "devices": list(s.devices),
            "issue": s.issue,
            "reason": s.reason,
            "source": s.source,
            "expires": s.expires.isoformat() if s.expires else None,
        }
        for s in declared
    ]
    if args.json:
        out.line(json.dumps(rows, indent=1))
    else:
        for r in rows:
            where = f"{r['file']}:{r['line']}" if r["line"] else f"{r['file']} ({r['test']})"
            out.line(f"{where}  {r['mode']} on {','.join(r['devices'])}  {r['issue'] or 'NO ISSUE'}  {r['reason']}")
    return EXIT_OK
