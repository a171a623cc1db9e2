"""What more than one command's parser shares: argparse types and the source flags."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from device_matrix.records.schema import SourceInfo


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


def a_path(text: str) -> str:
    """An argparse type: a path that is not empty (#30: ``triage "$DIR"`` with DIR unset
    must not read the default folder as if it were the one asked for)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("names no path: give a path, or leave it out for the default")
    return text


def add_map_flag(parser: Any) -> None:
    """#34: ``run --record-map``, the configuration's ``record_map`` for one run."""
    parser.add_argument(
        "--record-map",
        action="store_true",
        default=None,
        help="record which project files each test runs into results/<row>/test-map.json "
        "(needs coverage>=7.10 where the tests run; default from config: record_map)",
    )


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
