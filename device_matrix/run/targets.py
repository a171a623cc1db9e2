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
    """Each invocation once: the same file with the same arguments and variables is one."""
    seen: dict[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]], Script] = {}
    for script in scripts:
        seen.setdefault((os.path.normpath(script.file), script.args, tuple(sorted(script.env.items()))), script)
    return tuple(seen.values())
