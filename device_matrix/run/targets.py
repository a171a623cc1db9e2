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


def script_node(script: Script, root: Path) -> str:
    """The script's file as its nodeids name it: relative to the project root, normalised."""
    path = Path(os.path.normpath(root / script.file))
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def names_program(test: str, script: Script, root: Path) -> bool:
    """Whether ``test`` (a ``--test`` argument) names this program: its nodeid, or its file
    (each program entry of a file, as a file names its tests)."""
    if script.kind != "program" or "::" in test:
        return False
    path, bracket, rest = test.partition("[")
    named = Path(os.path.normpath(root / path))
    named_node = named.relative_to(root).as_posix() if named.is_relative_to(root) else str(named)
    return named_node == script_node(script, root) and (not bracket or bracket + rest == script.suffix)


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


def names_script_test(test: str, script: Script, scripts: Iterable[Script], root: Path) -> bool:
    """Whether ``test`` (a ``--test`` argument) names a test of this unittest script
    (``FILE::Class::test``): it runs through the script, never through pytest (#29)."""
    if script.kind != "unittest" or "::" not in test:
        return False
    path, sep, rest = test.partition("::")
    named = Path(os.path.normpath(root / path))
    node = named.relative_to(root).as_posix() if named.is_relative_to(root) else str(named)
    return of_script(node + sep + rest, script, scripts, root)
