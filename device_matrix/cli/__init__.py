"""The ``device-matrix`` command. Every error ends as an ERROR line, a TIP and its exit code."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import os
import re
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from device_matrix import __version__
from device_matrix import config as config_mod
from device_matrix.cli.commands import (
    Parser,
    a_folder,
    add_map_flag,
    add_source_flags,
    source_from_args,
    whole_number,
)
from device_matrix.config import Config, check_results_dir
from device_matrix.devices import detect, install_hint
from device_matrix.errors import (
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    DeviceMatrixError,
    UsageProblem,
)
from device_matrix.output import Output
from device_matrix.records.outcomes import REPORTED_FAILURES, STATUS_EXIT, combine_exit_codes
from device_matrix.records.schema import RunRecord, SourceInfo

if TYPE_CHECKING:
    from device_matrix.selection import Plan


def _load(args: argparse.Namespace) -> Config:
    from device_matrix.cli.run_options import config_overrides

    overrides = config_overrides(args)  # each from its option's one declaration
    if getattr(args, "select", None) == "changed":
        overrides["record_map"] = False  # #34: a run that selects records no map (a map comes from a run of every test)
    return config_mod.load(Path(args.project) if args.project else None, **overrides)


def _rows(cfg: Config, names: Sequence[str] | None) -> list[str]:
    if names is None:
        return list(cfg.rows)
    out = []
    for name in names:
        for raw in name.split(","):
            part = raw.strip()
            if part:
                cfg.row(part)  # raises a ConfigError naming the allowed rows
                out.append(part)
    if not out:
        raise UsageProblem(
            f"--device {' '.join(map(repr, names))} names no row",
            tip=f"Name one or more of: {', '.join(cfg.rows)} (or leave --device out for every row).",
        )
    return out


# --- run ------------------------------------------------------------------------------


def _run_config(args: argparse.Namespace) -> tuple[Config, SourceInfo]:
    """A run's configuration, its results folder checked, its source, and the code it runs
    (``--worktree``).

    #41: the digest of the code is decided before the run starts, and is what --resume
    compares; a spread's shards are given the driver's (forwarded), so the files their tests
    write meanwhile do not make a shard the driver continues another run of other code. The
    commit git names is asked once: the source's, where it came from git.
    """
    from device_matrix.records.source import detect
    from device_matrix.run import worktree

    cfg = _load(args)
    check_results_dir(cfg.results_dir)
    detected = detect(cwd=cfg.project_root)
    source = source_from_args(args, detected, cfg.project_root)  # a bad flag is refused before the tree is read
    head = detected["commit"] if detected["origin"] == "git" else None  # HEAD, never a --commit
    args.worktree = args.worktree or worktree.digest(cfg.project_root, cfg.own_folders, head=head)
    return cfg, source


def _test_plan(args: argparse.Namespace, cfg: Config, row: str, source: SourceInfo | None) -> Plan | None:
    """The row's selection plan for ``--select``; the selection engine loads only then (#41)."""
    if args.select is None:
        return None
    from device_matrix.cli.select import plan_for

    return plan_for(args, cfg, row, source)


def cmd_run(args: argparse.Namespace, out: Output) -> int:
    from device_matrix.cli.run_options import check_select_args
    from device_matrix.cli.shards import check_spread_args, resume_tip, run_spread, run_whole, spread_requested
    from device_matrix.run.attempt import Interrupted, interrupts_raise
    from device_matrix.run.plan import plan_row
    from device_matrix.run.runner import RunOptions
    from device_matrix.run.selection import NothingSelected

    check_spread_args(args)
    check_select_args(args, spread=spread_requested(args))
    cfg, source = _run_config(args)
    force: Literal["local", "container"] | None = "local" if args.local else ("container" if args.container else None)
    options = RunOptions(
        suites=args.suite or None,
        tests=args.test or (),
        pytest_args=args.pytest_args,
        python=args.python,
        use_gdb=not args.no_gdb,
        keep_cores=args.keep_cores,
        run_url=args.run_url or _actions_run_url(),
        source=source,
        worktree=args.worktree,
        resume=args.resume,
        command=("device-matrix", *args.argv),
    )
    if args.rerun_disabled or args.times is not None:  # #33: the re-enable check
        from device_matrix.cli.disabled import cmd_rerun_disabled

        with interrupts_raise():
            return cmd_rerun_disabled(args, cfg, options, rows=_rows(cfg, args.device), out=out, force=force)
    codes = []
    records: list[RunRecord] = []
    with interrupts_raise():
        for name in _rows(cfg, args.device):
            row = cfg.row(name)
            plan = plan_row(cfg, row, force=force)
            if plan.mode == "unavailable":
                out.line(f"{name}: {out.paint('unavailable', 'UNAVAILABLE')} - {plan.reason}")
            try:
                if spread_requested(args):
                    record = run_spread(args, cfg, plan, options, out)
                else:
                    # #34: --select: the tests this change can break, decided per row
                    chosen = dataclasses.replace(options, test_plan=_test_plan(args, cfg, name, options.source))
                    record = run_whole(cfg, plan, chosen, out)
            except Interrupted as exc:
                out.error(
                    f"{name}: interrupted by {exc}; what finished is in {cfg.results_dir / name / 'run.json'}",
                    f"Continue with `{resume_tip(args, name)}`.",
                )
                return 128 + exc.signum
            except NothingSelected as exc:
                # another row may have what the selection names: the rows go on
                out.error(f"{name}: {exc.message}", exc.tip)
                records.append(exc.record)
                codes.append(exc.exit_code)
                continue
            records.append(record)
            code = STATUS_EXIT[record["status"]]
            if record["status"] == "unavailable":
                # a row the user named must be here; a bare run runs the rows present here and
                # reports the others, as nox skips them (#20): `run && triage` holds
                code = EXIT_ENVIRONMENT if args.require_device else (EXIT_UNAVAILABLE if args.device else EXIT_OK)
            codes.append(code)
    linking = cfg.tracker.kind == "ledger" and bool(records) and not args.shard_plan  # the parent of shards links
    print_summary(out, records, cfg, linked_here=linking)
    if linking:
        try:
            _link_with_ledger(cfg, out)
        except DeviceMatrixError as exc:
            # the tests ran and their exit code stands; the ledger's problem is reported
            out.error(f"issues not linked: {exc.message}", exc.tip)
    if out.github:  # in GitHub Actions: the row job's own report (#20); the report's modules load only there
        from device_matrix.report.actions import row_job

        row_job(records, out, cfg.results_dir, cfg.project_root)
    return combine_exit_codes(codes)


def _add_run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`run` and its options (the spreading ones from cli/shards.py)."""
    run = sub.add_parser(
        "run",
        help="run device rows",
        description="Run one or more device rows: their suites, their scripts, or what plain pytest runs here.",
    )
    run.add_argument(
        "--device",
        "-d",
        action="append",
        help="row name (repeat, or comma-separate); default: every row present here (the others are reported "
        "unavailable; a row named here that is absent is exit 4)",
    )
    run.add_argument("--suite", "-s", action="append", help="run only this suite of the row (repeatable)")
    run.add_argument(
        "--test",
        "-t",
        action="append",
        help="run this nodeid or path instead of the suites (repeatable)",
    )
    where = run.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true", help="run on this host even if the row has an image")
    where.add_argument("--container", action="store_true", help="run in the row's image")
    run.add_argument("--engine", choices=config_mod.ENGINE_CHOICES, help="container engine")
    run.add_argument("--results", type=a_folder, help="results folder (default from config: results)")
    run.add_argument("--python", help="interpreter for local runs (default: this one)")
    run.add_argument("--test-timeout", type=_seconds, help="seconds one test may take before it is ended as hung")
    run.add_argument("--run-timeout", type=_seconds, help="seconds the whole row may take")
    run.add_argument(
        "--reruns", type=whole_number(0), help="times each crashed test is rerun alone (default from config)"
    )
    run.add_argument("--max-restarts", type=whole_number(0), help="resumes after crashes before giving up")
    run.add_argument("--no-gdb", action="store_true", help="do not read core files with gdb")
    run.add_argument("--keep-cores", action="store_true", help="keep core files (deleted once read by default)")
    run.add_argument(
        "--require-device",
        action="store_true",
        help="an absent device is an error (exit 5), as on a CI runner that should have it",
    )
    run.add_argument("--run-url", help="link to this CI run, quoted in issues")
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue the last run of each row (interrupted, or stopped by crashes): run its not_run tests",
    )
    # a driver's child: the code the driver's run runs (its digest), what a shard's record
    # and the shard's own resume say, so that a shard the driver continues keeps what stands
    run.add_argument("--worktree", help=argparse.SUPPRESS)
    run.add_argument(
        "--rerun-disabled",
        action="store_true",
        help="the re-enable check: run only the tracker's disabled tests of each row, each --times times "
        "(evidence for `issues sync`)",
    )
    run.add_argument(
        "--times",
        type=whole_number(1),
        help="runs of each disabled test with --rerun-disabled (default: the configuration's reenable_times)",
    )
    from device_matrix.cli.run_options import add_select_options
    from device_matrix.cli.shards import add_run_options

    add_select_options(run)
    add_source_flags(run)
    add_map_flag(run)
    add_run_options(run)
    run.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: arguments for pytest")
    run.set_defaults(func=cmd_run)


def _link_with_ledger(cfg: Config, out: Output) -> None:
    """The embedded ledger is local and offline: link findings at the end of every run.

    New issues are filed only when asked (``tracker.file_on_run``); else the run says how
    many ``issues sync`` would file (#24).
    """
    from device_matrix.cli.results import load_records
    from device_matrix.issues.sync import collect
    from device_matrix.skips import uncited

    records, _ = load_records(cfg.results_dir)
    findings, cited = collect(records)
    declared = uncited(cfg.project_root, cfg.suite_folders())
    if not findings and not cited and not declared:
        return  # nothing to link: no ledger to open, and what opens one is not loaded (#41)
    from device_matrix.cli.results import crash_placements
    from device_matrix.issues import open_tracker
    from device_matrix.issues.sync import sync
    from device_matrix.report.history import DEFAULT_PATH

    tracker = open_tracker(cfg, cfg.results_dir, note=out.line)
    report = sync(
        records,
        tracker,
        apply=cfg.tracker.file_on_run,
        labels=cfg.tracker.labels,
        results_dir=cfg.results_dir,
        declared=declared,
        on_recurrence=cfg.tracker.on_recurrence,
        placements=crash_placements(records, cfg.project_root / DEFAULT_PATH, out),
    )
    for line in report.lines():
        if not line.startswith("  would file:"):  # listed by `issues sync`, not by every run
            out.line(line)
    if report.would_file:
        out.line(
            f"  {len(report.would_file)} issue(s) to file: run `device-matrix issues sync` "
            "(or set tracker.file_on_run = true)"
        )


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0 (nan or inf would disable a timeout)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a finite number of seconds above 0")
    return value


def _actions_run_url() -> str | None:
    env = os.environ
    if env.get("GITHUB_ACTIONS") == "true" and env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return None


def print_summary(out: Output, records: Sequence[RunRecord], cfg: Config, *, linked_here: bool = False) -> None:
    """The terminal's table: counts, labels and crash headlines from the one fold.
    ``linked_here``: the run links its findings to the ledger next, so nobody is sent to
    ``issues sync`` for them."""
    from device_matrix.records.outcomes import BUCKETS
    from device_matrix.records.summary import failed_before, fold

    if not records:
        return
    out.line("")
    names = [b.replace("_", " ") for b in BUCKETS]
    header = f"{'row':<10} {'status':<12} " + " ".join(f"{n:>8}" for n in names) + f" {'time':>8}"
    out.line(header)
    out.line("-" * len(header))
    folds = [fold(r) for r in records]
    for r, f in zip(records, folds, strict=True):
        label = out.paint(r["status"], f"{f.label:<12}")
        cells = " ".join(f"{f.counts.bucket(b):>8}" for b in BUCKETS)
        out.line(f"{r['row']:<10} {label} {cells} {r['duration']:>7.1f}s")
    for r, f in zip(records, folds, strict=True):
        if r["reason"]:
            out.line(f"  {r['row']}: {r['reason']}")
        for c, headline in zip(r["crashes"], f.headlines, strict=True):
            d = c["diagnosis"]
            out.line(f"  {r['row']}: {out.paint('crashed', headline)}, fingerprint {d['fingerprint']}")
            if d["hint"]:
                out.line(f"      hint: {d['hint']}")
            for line in failed_before(c):
                out.line(f"      before it ended: {line}")  # the test's own failure, beside its crash
            if d.get("python_stack_missing"):
                # #39: said where it is read: a fingerprint without it tells few crashes apart
                out.line(f"      no Python stack: {d.get('python_stack_missing')}")
            if d.get("gdb_frames_missing") and not d["gdb_frames"]:
                # #21: the terminal shows no frames; a reader learns here that none were recorded, and why
                out.line(f"      no gdb stack: {d.get('gdb_frames_missing')}")
            out.line(f"      repro: {c['repro'].splitlines()[0]}")
        _print_failures(out, r, cfg)
        unlinked = [t for t in r["tests"] if t["skip"] and not t["skip"]["issue"] and t["skip"]["source"] != "pytest"]
        if unlinked:
            advice = "" if linked_here else ": run `device-matrix issues sync`"
            out.line(f"  {r['row']}: {len(unlinked)} device skip(s) cite no issue{advice}")
    out.line(f"results: {cfg.results_dir}")


FAILURES_SHOWN = 10


def _print_failures(out: Output, r: RunRecord, cfg: Config) -> None:
    """Each failing test's cause and place, as triage has them: a terminal that showed only
    ``FAILED nodeid`` sent the user to run.json to learn why (crashes have their own lines)."""
    failing = [t for t in r["tests"] if t["outcome"] in REPORTED_FAILURES]
    if not failing:
        return
    from device_matrix.report.model import failure_view  # triage's view, loaded where a test failed (#41)

    for t in failing[:FAILURES_SHOWN]:
        f = failure_view(t, r["row"])
        where = f" at {f['file']}:{f['line']}" if f["file"] and f["line"] else ""
        why = f": {f['message']}" if f["message"] else ""
        out.line(f"  {r['row']}: {out.paint(t['outcome'])} {t['nodeid']}{where}{why}")
        # #29: what to do, where the record says it (a scripts entry that is no unittest file)
        lines = (line.strip() for line in (t["message"] or "").splitlines())
        tip = next((line.removeprefix("TIP:").strip() for line in lines if line.startswith("TIP:")), None)
        if tip:
            out.line(f"      tip: {tip}")
    if len(failing) > FAILURES_SHOWN:
        more, record = len(failing) - FAILURES_SHOWN, cfg.results_dir / r["row"] / "run.json"
        out.line(f"  {r['row']}: {more} more failure(s): {record}, or `device-matrix triage`")


# --- plan / list / doctor / matrix ------------------------------------------------------


def cmd_plan(args: argparse.Namespace, out: Output) -> int:
    from device_matrix.run.plan import plan_row

    cfg = _load(args)
    force: Literal["local", "container"] | None = "local" if args.local else ("container" if args.container else None)
    plans = []
    for name in _rows(cfg, args.device):
        plan = plan_row(cfg, cfg.row(name), force=force)
        plans.append(
            {
                "row": name,
                "mode": plan.mode,
                "reason": plan.reason,
                "engine": plan.engine.path if plan.engine else None,
                "engine_name": plan.engine.name if plan.engine else None,
                "engine_version": plan.engine.version if plan.engine else None,
                "install": list(plan.row.install),
                "install_args": list(plan.row.install_args),
                "image": plan.row.image,
            }
        )
    if args.json:
        out.line(json.dumps(plans if len(plans) != 1 else plans[0]))
    else:
        for p in plans:
            out.line(f"{p['row']:<10} {p['mode']:<12} {p['reason']}")
    return EXIT_OK


def _add_plan_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    plan = sub.add_parser("plan", help="say where each row would run here (local, container, unavailable)")
    plan.add_argument("--device", "-d", action="append")
    plan.add_argument("--json", action="store_true")
    where2 = plan.add_mutually_exclusive_group()
    where2.add_argument("--local", action="store_true")
    where2.add_argument("--container", action="store_true")
    plan.add_argument("--engine", choices=config_mod.ENGINE_CHOICES)
    plan.set_defaults(func=cmd_plan)


def cmd_list(args: argparse.Namespace, out: Output) -> int:
    cfg = _load(args)
    rows: list[dict[str, Any]] = []
    for name, row in cfg.rows.items():
        presence = detect(row)
        rows.append(
            {
                "row": name,
                "pjrt_device": row.pjrt_device,
                "present": presence.present,
                "presence": presence.reason,
                "image": row.image,
                "run_in": row.run_in,
                "runner_labels": list(row.runner_labels),
                "suites": list(row.suites),
                "scripts": [s.file for s in row.scripts],
                "tests": list(cfg.row_tests(row)),
                # what every test process of the row gets (#20): the row's own variables
                "env": {"PJRT_DEVICE": row.pjrt_device, **row.env},
                "settings": dict(row.settings),
            }
        )
    if args.json:
        out.line(json.dumps(rows, indent=1))
        return EXIT_OK
    out.line(f"configuration: {', '.join(cfg.sources)}")
    for r in rows:
        mark = out.paint("passed", "present") if r["present"] else out.paint("unavailable", "absent ")
        out.line(f"{r['row']:<8} {r['pjrt_device']:<7} {mark}  {r['image'] or '(no image)'}")
        out.line(f"{'':<17}tests: {_tests_text(r)}; runner: {', '.join(r['runner_labels'])}")
        out.line(f"{'':<17}env: {' '.join(f'{k}={v}' for k, v in sorted(r['env'].items()))}")
        out.line(f"{'':<17}{r['presence']}")
    return EXIT_OK


def _add_list_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lst = sub.add_parser("list", help="rows, their images, and whether each device is present here")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_list)


def _tests_text(row: dict[str, Any]) -> str:
    """What the row runs, in words: its suites, its scripts, or the project's tests."""
    parts = []
    if row["suites"]:
        parts.append(f"suites {', '.join(row['suites'])}")
    if row["scripts"]:
        parts.append(f"scripts {', '.join(row['scripts'])}")
    if parts:
        return " and ".join(parts)
    if row["tests"] == ["."]:
        return ". (the project root: no testpaths configured)"
    return f"{', '.join(row['tests'])} (the project's testpaths)"


def cmd_doctor(args: argparse.Namespace, out: Output) -> int:
    from device_matrix.executors.engine import Engine, find_engine

    cfg = _load(args)
    problems = 0
    engine = find_engine(cfg.container_engine)
    engine_problem = None if isinstance(engine, Engine) else engine.reason
    if isinstance(engine, Engine):
        rootless = ", rootless" if engine.rootless else ""
        out.line(f"container engine: {engine.path} ({engine.name} {engine.version}{rootless}, answers)")
    else:
        out.line(f"container engine: none ({engine.reason})")
    out.line(f"gdb: {shutil.which('gdb') or 'missing (crash backtraces from core files are skipped)'}")
    for name in _rows(cfg, args.device):
        row = cfg.row(name)
        presence = detect(row)
        out.line(f"{name}:")
        if presence.present:
            out.line(f"  device: present ({presence.reason})")
        else:
            # as `run`: a row named with --device must be here; the others are said (#20)
            problems += bool(args.device)
            out.line(f"  device: absent - {presence.reason}")
            out.line(
                f"  to get it: run on a host with a {row.pjrt_device} device, or set "
                f"DEVICE_MATRIX_{name.upper()}_PRESENT=1 if it is there but not detected"
            )
        missing = [s for s in row.suites if not cfg.suite_path(s).exists()]
        if missing:
            problems += 1
            out.line(f"  suites missing: {', '.join(missing)} (looked in {cfg.suites_dir})")
        if row.run_in != "host" and row.image and engine_problem:
            out.line(f"  container: cannot run {row.image}: {engine_problem}")
        software = _software_problem(row.install)
        if software:
            out.line(f"  software here: {software}; {install_hint(row)}")
        else:
            out.line("  software here: installed")
    problems += _project_install_problems(cfg, out)
    return EXIT_OK if problems == 0 else EXIT_UNAVAILABLE


# seconds pip may take to resolve one step of project_install (it may build metadata)
DRY_RUN_TIMEOUT = 600.0


def _project_install_problems(cfg: Config, out: Output) -> int:
    """Whether each step of ``project_install`` resolves here, as pip says with --dry-run
    (#30: one dependency that cannot be had here made the whole install fail); how many do not."""
    from device_matrix.devices import ask_tool

    problems = 0
    steps = cfg.project_install
    for k, step in enumerate(steps, 1):
        which = f"step {k} " if len(steps) > 1 else ""
        command = shlex.join(["pip", "install", "--dry-run", *step])
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check", *step]
        code, said = ask_tool(argv, DRY_RUN_TIMEOUT, cwd=cfg.project_root)
        if code == 0:
            out.line(f"project install: {which}resolves here ({command})")
            continue
        problems += 1
        why = f"no answer in {DRY_RUN_TIMEOUT:g} s" if code is None else (pip_cause(said) or f"exit {code}")
        out.line(f"project install: {which}does not resolve here ({command}): {why}")
    if problems and len(steps) == 1:
        # #42: what to do where one command holds it all: one that cannot be had here fails alone
        out.line(
            "  tip: project_install can be several pip commands, each resolved on its own: "
            'project_install = [["--no-deps", "-e", "."], ["-r", "requirements-ci.txt"]] installs the project '
            "without the dependency this host cannot have (docs/configuration.md, project_install)"
        )
    return problems


# pip's lines that follow its cause: a note, a hint, the closing of a subprocess's output
_PIP_AFTERWORDS = ("note:", "hint:", "[end of output]", "\u2570\u2500> See above")
# pip's mark (U+00D7) of the command that failed: "<mark> git clone ... did not run successfully."
_PIP_FAILED = re.compile(r"^\s*\u00d7 (?P<what>.+?)(?: did not run successfully\.)?$")
_PIP_EXIT = re.compile(r"^\s*\u2502 (?P<code>exit code: -?\d+)$")


def pip_cause(said: str) -> str:
    """What a failed ``pip install`` says its cause is (#42): where a subprocess failed (a git
    clone, a build), that command, its exit code and the last line it printed; else pip's last
    line that is no note or hint. pip's very last line is often "note: This error originates
    from a subprocess ...", which says nothing."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    failed = next((m for line in lines if (m := _PIP_FAILED.match(line))), None)
    if failed is not None:
        start = lines.index(failed.group(0).strip())
        block = lines[start:]
        code = next((m.group("code") for line in block if (m := _PIP_EXIT.match(line))), None)
        end = next((k for k, line in enumerate(block) if line == "[end of output]"), None)
        output = [x for x in block[:end] if not x.startswith(("\u00d7", "\u2502", "\u2570"))] if end else []
        return failed.group("what") + (f" ({code})" if code else "") + (f": {output[-1]}" if output else "")
    kept = [line for line in lines if not line.startswith(_PIP_AFTERWORDS)]
    return kept[-1] if kept else ""


def _add_doctor_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = sub.add_parser(
        "doctor",
        help="what is missing for each row and how to get it",
        description="What each row lacks here and how to get it. Exit 4 when a row's suites are "
        "missing, or a row named with --device is absent; an absent row not named is only reported.",
    )
    doctor.add_argument("--device", "-d", action="append", help="only these rows (repeat, or cpu,tpu)")
    doctor.set_defaults(func=cmd_doctor)


def _software_problem(requirements: Sequence[str]) -> str | None:
    """What of a row's ``install`` this environment lacks, as pip would judge it: the
    version asked (a specifier, or a wheel URL's version) and an extra's packages (#20)."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    problems = []
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            # a wheel file pip takes by its path: its name says the package and version
            try:
                name, version, _, _ = parse_wheel_filename(text.replace("\\", "/").rsplit("/", 1)[-1])
            except InvalidWheelFilename:
                problems.append(f"{text} cannot be checked here (a folder or an archive)")
                continue
            req = Requirement(f"{name}=={version}")
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            here = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            problems.append(f"{req.name} missing")
            continue
        if req.url:
            try:
                _, wanted, _, _ = parse_wheel_filename(req.url.rsplit("/", 1)[-1])
            except InvalidWheelFilename:
                wanted = None  # a folder or an sdist: its version is not in its name
            if wanted is not None and here != str(wanted):
                problems.append(f"{req.name} {here} installed, the row needs {wanted} ({req.url})")
                continue
        elif req.specifier and not req.specifier.contains(here, prereleases=True):
            problems.append(f"{req.name} {here} installed, the row needs {req.specifier}")
            continue
        for extra in sorted(req.extras):
            for dep in _extra_requirements(req.name, extra):
                try:
                    metadata.version(dep)
                except metadata.PackageNotFoundError:
                    problems.append(f"{req.name}[{extra}] needs {dep}, missing")
    return "; ".join(problems) if problems else None


def _extra_requirements(name: str, extra: str) -> list[str]:
    """The packages ``name[extra]`` adds, from the installed package's metadata."""
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement

    found = []
    for text in metadata.requires(name) or []:
        try:
            dep = Requirement(text)
        except InvalidRequirement:
            continue
        if dep.marker is not None and "extra" in str(dep.marker) and dep.marker.evaluate({"extra": extra}):
            found.append(dep.name)
    return found


def cmd_matrix(args: argparse.Namespace, out: Output) -> int:
    from device_matrix.workflow import actions_matrix

    cfg = _load(args)
    names = _rows(cfg, args.device)
    out.line(json.dumps(actions_matrix(cfg, names), separators=(",", ":")))
    return EXIT_OK


def _add_matrix_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    matrix = sub.add_parser("matrix", help="the GitHub Actions matrix (JSON) for the configured rows")
    matrix.add_argument("--device", "-d", action="append")
    matrix.set_defaults(func=cmd_matrix)


# --- parser ---------------------------------------------------------------------------


# each command -> the module that declares its parser and holds its handler, and the
# function there that adds the parser; a command's module is imported only when that
# command runs (or for the whole list: --help, no command, a word that is none) (#41)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("device_matrix.cli", "_add_run_parser"),
    "plan": ("device_matrix.cli", "_add_plan_parser"),
    "list": ("device_matrix.cli", "_add_list_parser"),
    "doctor": ("device_matrix.cli", "_add_doctor_parser"),
    "matrix": ("device_matrix.cli", "_add_matrix_parser"),
    "skips": ("device_matrix.cli.skips", "add_parser"),
    "issues": ("device_matrix.cli.issues", "add_parser"),
    "triage": ("device_matrix.cli.triage", "add_parser"),
    "ci": ("device_matrix.cli.ci", "add_ci_commands"),
    "diagnose": ("device_matrix.cli.diagnose", "add_parser"),
    "compare": ("device_matrix.cli.compare", "add_parser"),
    "merge": ("device_matrix.cli.merge", "add_parser"),
}


def command_of(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word after the options of ``device-matrix``
    itself), or None where it names none of :data:`COMMANDS`."""
    words = iter(argv)
    for word in words:
        if word == "--project":
            next(words, None)
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of ``command`` alone (its module only is imported), or of every command."""
    import importlib

    # every command's parser is of the top parser's class: each takes options among its words (#42)
    parser: argparse.ArgumentParser = Parser(
        prog="device-matrix",
        description="Run XLA test suites across a matrix of devices; diagnose crashes; link skips to issues.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--project", type=a_folder, help="project folder (default: nearest pyproject.toml above cwd)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, add) in COMMANDS.items():
        if command in (None, name):
            getattr(importlib.import_module(module), add)(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    typed = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(command_of(typed))
    args = parser.parse_args(typed)
    # what was typed, for the record's `command` and `repro`: the command that ran (#24)
    args.argv = typed
    if getattr(args, "pytest_args", None) and args.pytest_args[:1] == ["--"]:
        args.pytest_args = args.pytest_args[1:]
    for stream in (sys.stdout, sys.stderr):
        # a nodeid may hold a lone surrogate (a file name that is not UTF-8): printed as its
        # escape, never an error of the terminal in the middle of a run
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    out = Output(verbose=False)
    try:
        code: int = args.func(args, out)
    except DeviceMatrixError as exc:
        out.error(exc.message, exc.tip)
        return exc.exit_code
    except KeyboardInterrupt:
        out.error("interrupted")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:
        import traceback

        # what it says may come from a record or a test: redacted and inert as any output (#22)
        sys.stderr.write(out.untrusted(traceback.format_exc()))
        out.error(
            f"internal error: {exc!r}",
            "This is a bug in device-matrix; please report it with the traceback above.",
        )
        return EXIT_INTERNAL
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

__all__ = ["EXIT_USAGE", "main"]
