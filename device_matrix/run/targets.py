"""What a row's processes are given: each test reached once, however it is named (#20).

A duplicate is the same file reached twice with the same invocation: a file named twice,
a nodeid and its file, a folder and a file inside it, two identical ``scripts`` entries.
pytest's own handling of overlapping arguments differs between versions (8.0 runs a file
named twice twice, and drops the rest of a folder named beside one of its files), so the
runner gives pytest each target once. A file that a ``scripts`` entry runs is left out of
pytest's collection (``--ignore``): it runs as its script says. Two entries for one file
with other arguments or variables are two invocations, not a duplicate.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from device_matrix.config import Script


def _key(target: str, root: Path) -> tuple[str, tuple[str, ...]]:
    path, sep, rest = target.partition("::")
    where = Path(path) if Path(path).is_absolute() else root / path
    return os.path.normpath(where), tuple(rest.split("::")) if sep else ()


def _covers(outer: tuple[str, tuple[str, ...]], inner: tuple[str, tuple[str, ...]]) -> bool:
    """Whether every test ``inner`` names is one ``outer`` names."""
    (outer_path, outer_parts), (inner_path, inner_parts) = outer, inner
    if not outer_parts:
        return inner_path == outer_path or inner_path.startswith(outer_path.rstrip(os.sep) + os.sep)
    if inner_path != outer_path or len(inner_parts) < len(outer_parts):
        return False
    *parents, last = outer_parts
    head, named = inner_parts[: len(parents)], inner_parts[len(parents)]
    # a test covers its parametrized cases: t covers t[1]
    return list(head) == parents and (named == last or named.startswith(last + "["))


def distinct_targets(targets: Sequence[str], root: Path, scripts: Iterable[Script] = ()) -> list[str]:
    """``targets`` with every one that another covers left out, in their order; and those
    inside a file that one of ``scripts`` runs."""
    run_as_scripts = [_key(script.file, root) for script in scripts]
    kept: list[tuple[str, tuple[str, tuple[str, ...]]]] = []
    for target in targets:
        key = _key(target, root)
        if any(_covers(k, key) for _, k in kept) or any(_covers(k, key) for k in run_as_scripts):
            continue
        kept = [(t, k) for t, k in kept if not _covers(key, k)]
        kept.append((target, key))
    return [t for t, _ in kept]


def unique_scripts(scripts: Iterable[Script]) -> tuple[Script, ...]:
    """Each invocation once: the same file with the same arguments, variables and name is one."""
    seen: dict[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...], str, str], Script] = {}
    for script in scripts:
        env = tuple(sorted(script.env.items()))
        key = (os.path.normpath(script.file), script.args, env, script.variant, script.kind)
        seen.setdefault(key, script)
    return tuple(seen.values())


def _node(path: str, root: Path) -> str:
    """A path as nodeids name it: relative to the project root when under it, normalised."""
    named = Path(os.path.normpath(root / path))
    return named.relative_to(root).as_posix() if named.is_relative_to(root) else named.as_posix()


def as_nodeid(test: str, root: Path) -> str:
    """A ``--test`` word as nodeids write it: its path however written (``./``, absolute,
    ``a/../b``, a trailing ``/``) as the root's, then the rest (#39)."""
    path, sep, rest = test.partition("::")
    return _node(path, root) + sep + rest


def script_node(script: Script, root: Path) -> str:
    """The script's file as its nodeids name it: relative to the project root, normalised."""
    return _node(script.file, root)


def of_script(nodeid: str, script: Script, scripts: Iterable[Script], root: Path) -> bool:
    """Whether ``nodeid`` is a test (or the error) of this run of its file, among the row's
    ``scripts``: a file run more than once tells its runs apart by their suffix (#24)."""
    node = script_node(script, root)
    head, sep, _ = nodeid.partition("::")
    if not sep:
        return head == node + script.suffix
    if head != node:
        return False
    if script.variant:
        return nodeid.endswith(script.suffix)
    others = [s for s in scripts if s.variant and script_node(s, root) == node]
    return not any(nodeid.endswith(s.suffix) for s in others)


@dataclass(frozen=True)
class Named:
    """What a ``--test`` word names of one ``scripts`` entry (#39)."""

    # the class or test it names in the script, as the script's nodeids write it (with this
    # run's [NAME]); None: every test of the entry
    tests: str | None
    # the word is the entry's own (its file, or a class or test in it): never pytest's. A
    # folder above the file is not: pytest is given its other files
    own: bool


def names_script(test: str, script: Script, scripts: Iterable[Script], root: Path) -> Named | None:
    """What ``test`` (a ``--test`` argument) names of this entry, which then runs as the row
    runs it, never through pytest (#29, #39): its file however written (``./FILE``, an
    absolute path, ``a/../FILE``), the file with this run's ``[NAME]``, a folder above it,
    or a class or test in it (``FILE::Class``, ``FILE::Class::test``). A class or test without
    a ``[NAME]`` is named in every run of a file the row runs more than once, as a file
    names its tests in each; with one, in that run only. A program is named by its file,
    its nodeid or a folder; it has no class or test in it."""
    path, sep, rest = test.partition("::")
    node = script_node(script, root)
    if not sep:
        bare, bracket, tail = path.partition("[")
        if bracket:
            return Named(None, own=True) if _node(bare, root) == node and bracket + tail == script.suffix else None
        if _node(path, root) == node:
            return Named(None, own=True)
        return Named(None, own=False) if _covers(_key(path, root), _key(script.file, root)) else None
    if script.kind != "unittest" or _node(path, root) != node:
        return None
    if script.variant and rest.endswith(script.suffix):
        return Named(f"{node}::{rest}", own=True)
    if any(s.variant and script_node(s, root) == node and rest.endswith(s.suffix) for s in scripts):
        return None  # another run's
    return Named(f"{node}::{rest}{script.suffix}", own=True)


def of_script_file(test: str, scripts: Iterable[Script], root: Path) -> bool:
    """Whether ``test`` names a file that one of ``scripts`` runs, or a node in it."""
    path = test.partition("::")[0].partition("[")[0]
    return any(_node(path, root) == script_node(s, root) for s in scripts)
