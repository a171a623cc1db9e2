"""#42: a command's options go anywhere among its positionals, as in every other CLI.

``issues disable TEST --device cpu --reason R RESULTS`` was refused ("unrecognized
arguments: RESULTS") while ``issues disable TEST RESULTS --device cpu`` worked: argparse
fills the positionals it sees before the first option and has none left for the rest.
Each command with positionals is checked here with each of its options at each place.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Iterator

import pytest

from device_matrix.cli import build_parser


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, (*path, name))


def _leaf(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _words(parser: argparse.ArgumentParser) -> list[str]:
    """A value for each positional (two for one that takes several)."""
    positionals = [a for a in parser._actions if not a.option_strings]
    return [f"w{i}" for i in range(sum(2 if a.nargs in ("*", "+") else 1 for a in positionals))]


def _options(parser: argparse.ArgumentParser) -> list[list[str]]:
    out = []
    for a in parser._actions:
        if not a.option_strings or isinstance(a, argparse._HelpAction | argparse._VersionAction):
            continue
        value = [] if a.nargs == 0 else [str(next(iter(a.choices)))] if a.choices else ["7"]
        out.append([a.option_strings[-1], *value])
    return out


COMMANDS = [
    p
    for p in _leaves(build_parser())
    if _words(_leaf(p)) and not any(a.nargs == argparse.REMAINDER for a in _leaf(p)._actions)
]


def _parse(argv: list[str]) -> argparse.Namespace | str:
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            return build_parser().parse_args(argv)
        except SystemExit:
            return err.getvalue().strip().splitlines()[-1]


def test_every_command_with_positionals_is_checked() -> None:
    names = {" ".join(p) for p in COMMANDS}
    assert {"issues disable", "issues enable", "issues show", "skips list", "diagnose", "triage"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_an_option_may_come_before_between_or_after_the_positionals(path: tuple[str, ...]) -> None:
    words = _words(_leaf(path))
    for option in _options(_leaf(path)):
        first = _parse([*path, *words, *option])
        assert isinstance(first, argparse.Namespace), (path, option, first)
        for i in range(len(words)):
            got = _parse([*path, *words[:i], *option, *words[i:]])
            assert got == first, (path, option, i, got)


def test_issues_disable_reads_its_results_folder_after_its_options() -> None:
    got = _parse(["issues", "disable", "a.py::t", "--device", "cpu", "--reason", "R", "res"])
    assert isinstance(got, argparse.Namespace)
    assert (got.test, got.device, got.reason, got.results) == ("a.py::t", ["cpu"], "R", "res")


def test_a_stray_word_is_still_refused() -> None:
    got = _parse(["issues", "show", "1", "res", "--json"])
    assert isinstance(got, str) and "unrecognized arguments" in got
    got = _parse(["issues", "show", "1", "res", "extra"])
    assert isinstance(got, str) and "unrecognized arguments: extra" in got
