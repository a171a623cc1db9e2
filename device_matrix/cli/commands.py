"""The subcommands beyond `run`: their arguments only. Implementations load on use."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

from device_matrix.output import Output
from device_matrix.records.schema import SourceInfo


def _lazy(target: str) -> Callable[[argparse.Namespace, Output], int]:
    """Import ``module:function`` when the command runs, not when the parser is built."""

    def call(args: argparse.Namespace, out: Output) -> int:
        module, _, name = target.partition(":")
        func: Callable[[argparse.Namespace, Output], int] = getattr(import_module(module), name)
        return func(args, out)

    return call


def add_skips_commands(sub: Any) -> None:
    skips = sub.add_parser("skips", help="device skips and xfails: check and list")
    skips_sub = skips.add_subparsers(dest="skips_command", required=True)
    chk = skips_sub.add_parser("check", help="fail on any device skip that cites no issue or has expired")
    chk.add_argument("paths", nargs="*", help="files or folders to scan (default: where the rows' tests are)")
    chk.add_argument("--verbose", "-v", action="store_true")
    chk.set_defaults(func=_lazy("device_matrix.cli.skips:cmd_skips_check"))
    lst = skips_sub.add_parser("list", help="every declared device skip and xfail")
    lst.add_argument("paths", nargs="*")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=_lazy("device_matrix.cli.skips:cmd_skips_list"))


def add_issues_commands(sub: Any) -> None:
    issues = sub.add_parser("issues", help="link skips and crashes to issues")
    issues_sub = issues.add_subparsers(dest="issues_command", required=True)
    s = issues_sub.add_parser(
        "sync",
        help="file or link an issue for every skip and crash without one; read cited issues' states",
        description="Dry run by default for GitHub (shows what it would file); the local ledger is written directly.",
    )
    s.add_argument("results", nargs="?", help="results folder (default from config)")
    s.add_argument("--tracker", choices=("ledger", "github"), help="override tracker.kind")
    s.add_argument("--repository", help="owner/name for the github tracker (overrides tracker.repository)")
    group = s.add_mutually_exclusive_group()
    group.add_argument("--apply", dest="apply", action="store_true", default=None, help="file and comment for real")
    group.add_argument("--dry-run", dest="apply", action="store_false", help="only say what would be filed")
    s.add_argument(
        "--history", help="run history a crash is placed by, read-only (default .device-matrix/history.sqlite)"
    )
    s.add_argument("--no-history", action="store_true", help="place crashes by this run's rows only")
    s.set_defaults(func=_lazy("device_matrix.cli.issues:cmd_issues_sync"))
    lst = issues_sub.add_parser(
        "list", help="the embedded ledger's issues: the seed file's and those filed in the results folder"
    )
    lst.add_argument("results", nargs="?", help="results folder whose ledger.sqlite to read (default from config)")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=_lazy("device_matrix.cli.issues:cmd_issues_list"))
    show = issues_sub.add_parser("show", help="one ledger issue: its state, labels, body and comments")
    show.add_argument("issue", help="ledger:N, or N")
    show.add_argument("results", nargs="?", help="results folder whose ledger.sqlite to read (default from config)")
    show.set_defaults(func=_lazy("device_matrix.cli.issues:cmd_issues_show"))


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is not at least {minimum}")
        return value

    return parse


SOURCE_FLAGS = ("commit", "branch", "pr", "base", "base_commit")


def add_source_flags(parser: Any) -> None:
    """Where the code came from (#25), over what Actions or git tell; the same for run and triage."""
    group = parser.add_argument_group("source", "the commit under test (default: from GitHub Actions, else git)")
    group.add_argument("--commit", help="the commit tested")
    group.add_argument("--branch", help="the branch tested (a pull request's head branch)")
    group.add_argument("--pr", type=whole_number(1), help="the pull request number: the run is a pull request's")
    group.add_argument("--base", help="the branch the verdicts compare with (a pull request's base)")
    group.add_argument("--base-commit", help="the base commit (default: the merge-base with --base, where git knows)")


def source_from_args(args: argparse.Namespace, cwd: Path | None) -> SourceInfo:
    from device_matrix.records.source import detect, override

    return override(
        detect(cwd=cwd),
        commit=args.commit,
        branch=args.branch,
        pull_request=args.pr,
        base=args.base,
        base_commit=args.base_commit,
        cwd=cwd,
    )


def add_triage_command(sub: Any) -> None:
    tr = sub.add_parser("triage", help="one report (md, html, json) over every row's run.json")
    tr.add_argument("results", nargs="?", help="results folder (default from config), or downloaded artifacts")
    tr.add_argument("--out", help="where to write the reports (default RESULTS/triage)")
    tr.add_argument("--history", help="run history database (default .device-matrix/history.sqlite)")
    tr.add_argument("--no-history", action="store_true", help="do not compare with or record into the history")
    tr.add_argument("--label", help="name of this run in the history (default: the time)")
    tr.add_argument(
        "--history-runs", type=whole_number(1), default=30, help="runs of the history the trends cover (default 30)"
    )
    tr.add_argument(
        "--history-read-only",
        action="store_true",
        help="read the history, never write it (a pull request reading its base branch's)",
    )
    tr.add_argument(
        "--fail-on",
        metavar="VERDICTS",
        help="exit 1 when a failure of a pull request gets one of these verdicts (comma-separated, e.g. new)",
    )
    tr.add_argument(
        "--pr-comment",
        action="store_true",
        help="post the verdicts as one comment on the pull request, updated in place (GitHub)",
    )
    tr.add_argument("--repository", help="owner/name for --pr-comment (default: tracker.repository, or the run's)")
    add_source_flags(tr)
    tr.set_defaults(func=_lazy("device_matrix.cli.triage:cmd_triage"))


def add_diagnose_command(sub: Any) -> None:
    dg = sub.add_parser(
        "diagnose",
        help="diagnose the crash in a log (a CI job log, a pasted log, output.log) and name its issue",
    )
    dg.add_argument("logs", nargs="+", metavar="LOG", help="log files to read")
    dg.add_argument("--results", help="results folder whose issue links and ledger to search (default from config)")
    dg.add_argument("--returncode", type=int, help="the process's exit status, when the log does not say it")
    dg.add_argument("--json", action="store_true")
    dg.set_defaults(func=_lazy("device_matrix.cli.diagnose:cmd_diagnose"))


def add_compare_command(sub: Any) -> None:
    cp = sub.add_parser(
        "compare",
        help="run a row's scripts as scripts and through device-matrix; per test: the same outcome or not",
        description="Each [[scripts]] entry of the row runs as `VARS python FILE ARGS`, then the row runs "
        "through `device-matrix run`: per test the outcomes side by side, per invocation the time ratio.",
    )
    cp.add_argument("--device", "-d", required=True, help="the row whose scripts to compare")
    cp.add_argument("--python", help="interpreter for both ways (default: this one)")
    cp.add_argument("--results", help="results folder of the device-matrix run (default RESULTS/compare)")
    cp.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds one plain run may take (default: the row's test_timeout for a program, its run_timeout "
        "for a unittest file, as through device-matrix)",
    )
    cp.add_argument("--all", action="store_true", help="print every test, not only those that differ")
    cp.add_argument("--json", action="store_true", help="print the comparison as JSON too")
    cp.set_defaults(func=_lazy("device_matrix.cli.compare:cmd_compare"))


def add_more_commands(sub: Any) -> None:
    add_skips_commands(sub)
    add_issues_commands(sub)
    add_triage_command(sub)
    from device_matrix.cli.ci import add_ci_commands

    add_ci_commands(sub)
    add_diagnose_command(sub)
    add_compare_command(sub)
