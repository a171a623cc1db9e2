"""What more than one command's parser shares: argparse types and the source flags."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from device_matrix.records.schema import SourceInfo


class Parser(argparse.ArgumentParser):
    """A parser whose commands take their options anywhere among their positionals (#42):
    ``issues disable TEST --device cpu RESULTS`` as ``issues disable TEST RESULTS --device cpu``.

    Plain argparse fills the positionals it meets before the first option and has none left
    for a word after it ("unrecognized arguments"). A command (a parser without subcommands
    and without a positional that takes the rest of the line, as ``run``'s pytest arguments)
    is parsed intermixed: its options first, then its positionals from what is left.
    """

    _intermixing = False

    # typeshed declares argparse's overloads (with a namespace or without): one signature here
    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._intermixing or not self._intermixable():
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # parse_known_intermixed_args calls back here, twice
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def _intermixable(self) -> bool:
        positionals = [a for a in self._actions if not a.option_strings]
        return bool(positionals) and all(a.nargs not in (argparse.PARSER, argparse.REMAINDER) for a in positionals)


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


def a_folder(text: str) -> str:
    """An argparse type: a path (:func:`a_path`) that is a folder, or can be made one (#42:
    ``triage --out FILE`` was a wrong command line told as the environment's, exit 5)."""
    _of_kind(a_path(text), folder=True)
    return text


def a_file(text: str) -> str:
    """An argparse type: a path (:func:`a_path`) that is a file, or can be made one."""
    _of_kind(a_path(text), folder=False)
    return text


def _of_kind(text: str, *, folder: bool) -> None:
    """Refuse ``text`` where it names a thing of the other kind, or lies under a file: what
    does not exist yet is for the command to make or to find missing."""
    path = Path(text)
    if path.is_dir() and not folder:
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file: give a file")
    if path.exists() and not path.is_dir() and folder:
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder: give a folder")
    above = next((p for p in path.parents if p.exists()), None)
    if not path.exists() and above is not None and not above.is_dir():
        raise argparse.ArgumentTypeError(f"{text} lies under {above}, which is a file: give a path under a folder")


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


def source_from_args(args: argparse.Namespace, detected: SourceInfo, cwd: Path | None) -> SourceInfo:
    """``detected`` (what Actions or git tell) with the fields the source flags name replaced."""
    from device_matrix.records.source import override

    return override(
        detected,
        commit=args.commit,
        branch=args.branch,
        pull_request=args.pr,
        base=args.base,
        base_commit=args.base_commit,
        cwd=cwd,
    )
