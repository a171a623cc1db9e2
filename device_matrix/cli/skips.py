"""``device-matrix skips check|list``: every device skip cites an issue and has not expired.

A skip is "disabled because broken" (it must cite the issue that tracks it) unless it is
marked as by design ("not applicable here": ``only_on``, or a ``# device-matrix:
by-design`` comment in files that cannot import device-matrix).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from device_matrix import config as config_mod
from device_matrix.errors import EXIT_OK, EXIT_TESTS_FAILED
from device_matrix.issues.home import ledger_file
from device_matrix.issues.ledger import known_ids
from device_matrix.output import Output, one_line
from device_matrix.skips import BY_DESIGN_COMMENT, DeviceSkip, check, load_disable_list, scan_tree
from device_matrix.skips.scan import NOT_IN_LEDGER

TIP_NO_ISSUE = (
    "TIP: a test disabled because it is broken cites the issue that tracks it: issue='#N' "
    "(or a URL, owner/name#N, or ledger:N) on skip_device/xfail_device, or in a "
    "unittest/pytest skip message; `device-matrix issues sync` can file one. A test that "
    "does not apply on a device is by design: say where it applies without a word of "
    "breakage ('TPU only', 'requires a TPU'; not broken, flaky, fails, crash, bug, TODO), "
    "or use @only_on('tpu', reason=...) from device_matrix.skips, or a "
    f"'# {BY_DESIGN_COMMENT}' comment on the skip's line."
)
TIP_UNREADABLE = "TIP: fix or simplify the file; skips in it are not checked until it can be read."
TIP_UNKNOWN_LEDGER = (
    "TIP: cite an issue that exists: one in {seed} (the ledger's seed, which every clone has) or one "
    "`device-matrix issues sync` filed in this machine's .device-matrix/ledger.sqlite. A fresh clone has "
    "only the seed: add an issue you cite there ([[issue]] id = N, title = ...)."
)


def _declared(args: argparse.Namespace, out: Output) -> tuple[config_mod.Config, list[DeviceSkip]]:
    from device_matrix.issues import disables

    cfg = config_mod.load(Path(args.project) if args.project else None)
    # by default every place a row runs: suites, or the project's own tests (#20), and scripts (#41)
    paths = [Path(p) for p in args.paths] if args.paths else cfg.suite_folders()
    declared = scan_tree(cfg.project_root, [p if p.is_absolute() else cfg.project_root / p for p in paths])
    declared.extend(load_disable_list(cfg.disable_list))
    # #33: the tracker's open disables, beside the ones in code
    scripts = sorted({s.file for row in cfg.rows.values() for s in row.scripts})
    tracked, note = disables.declared(cfg, scripts)
    declared.extend(tracked)
    if tracked and not getattr(args, "json", False):
        out.line(one_line(f"tracker: {note}"))
    return cfg, declared


def _ledger(cfg: config_mod.Config, out: Output) -> tuple[frozenset[int], str]:
    """The ledger ids a skip may cite: the seed, which every clone has, and the project's
    ledger where there is one (#20, #42)."""
    return known_ids(cfg.project_root / cfg.tracker.ledger_seed, ledger_file(cfg, note=out.line))


def _where(s: DeviceSkip) -> str:
    if s.line:
        return f"{s.file}:{s.line}"
    return f"{s.file} ({s.test})" if s.test else str(s.file)


def _label(s: DeviceSkip) -> str:
    form = s.form or f"{s.mode}_device"
    # an unreadable disable issue (#33) names no devices
    return f"{form}({', '.join(s.devices)})" if s.devices else form


def cmd_skips_check(args: argparse.Namespace, out: Output) -> int:
    cfg, declared = _declared(args, out)
    findings = check(declared, ledger=_ledger(cfg, out))
    bad = [f for f in findings if f.problem]
    for f in findings:
        s = f.skip
        if f.problem:
            what = "" if s.form == "unreadable" else f"{_label(s)} "
            out.line(one_line(f"{_where(s)}: {what}{f.problem}"))
            out.annotate("error", f"device {s.mode} {f.problem}", file=s.file, line=s.line)
        elif args.verbose:
            cite = "by design" if s.by_design and not s.issue else s.issue
            out.line(one_line(f"{_where(s)}: {_label(s)} -> {cite}"))
    out.line(f"{len(findings)} device skip(s)/xfail(s), {len(bad)} problem(s)")
    if any(f.problem == "cites no issue" for f in bad):
        out.line(TIP_NO_ISSUE)
    if any(f.skip.form == "unreadable" for f in bad):
        out.line(TIP_UNREADABLE)
    if any(NOT_IN_LEDGER in (f.problem or "") for f in bad):
        out.line(TIP_UNKNOWN_LEDGER.format(seed=cfg.tracker.ledger_seed))
    return EXIT_TESTS_FAILED if bad else EXIT_OK


def cmd_skips_list(args: argparse.Namespace, out: Output) -> int:
    cfg, declared = _declared(args, out)
    problems = {id(f.skip): f.problem for f in check(declared, ledger=_ledger(cfg, out))}
    rows = [
        {
            "file": s.file,
            "line": s.line,
            "test": s.test,
            "form": s.form,
            "mode": s.mode,
            "devices": list(s.devices),
            "issue": s.issue,
            "by_design": s.by_design,
            "reason": s.reason,
            "source": s.source,
            "expires": s.expires.isoformat() if s.expires else None,
            "problem": problems[id(s)],
        }
        for s in declared
    ]
    if args.json:
        out.line(json.dumps(rows, indent=1))
    else:
        for s, r in zip(declared, rows, strict=True):
            cite = r["issue"] or ("by design" if r["by_design"] else "NO ISSUE")
            # what a tracker or a test's code says, on the line of its skip (#42)
            out.line(one_line(f"{_where(s)}  {s.form} {s.mode} on {','.join(s.devices)}  {cite}  {r['reason']}"))
    return EXIT_OK


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`skips check` and `skips list`."""
    skips = sub.add_parser("skips", help="device skips and xfails: check and list")
    skips_sub = skips.add_subparsers(dest="skips_command", required=True)
    chk = skips_sub.add_parser("check", help="fail on any device skip that cites no issue or has expired")
    chk.add_argument("paths", nargs="*", help="files or folders to scan (default: where the rows' tests are)")
    chk.add_argument("--verbose", "-v", action="store_true")
    chk.set_defaults(func=cmd_skips_check)
    lst = skips_sub.add_parser("list", help="every declared device skip and xfail")
    lst.add_argument("paths", nargs="*")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_skips_list)
