"""Helpers for the tests that run a row end to end: its outcomes, a suite of its own, a process's life."""

from __future__ import annotations

import enum
import re
import types
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

import pytest

from device_matrix.run.context import RunSetup
from tests.conftest import Project


def outcomes_of(record: dict[str, Any]) -> dict[str, str]:
    """Each test's outcome by its last nodeid part."""
    return {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}


def write_suite(p: Project, name: str, files: dict[str, str]) -> None:
    """A suite of its own, written into the project; the row runs only it."""
    folder = p.root / "suites" / name
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    text = (p.root / "pyproject.toml").read_text()
    (p.root / "pyproject.toml").write_text(text.replace('suites = ["passing"]', f'suites = ["{name}"]'))


def is_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie is dead for our purposes)."""
    try:
        Path(f"/proc/{pid}").stat()
    except OSError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


# #41: what a run's plan names but holds no value of: who is told (a terminal counts what it
# showed) and the redactor, which learns the secrets the run meets (#30: an image's own)
PLAN_CHANNELS = ("listener", "redactor")
_PLAIN = (type(None), bool, int, float, complex, str, bytes, enum.Enum)
_NAMED = (PurePath, re.Pattern, types.FunctionType, types.MethodType, types.BuiltinFunctionType, type, types.ModuleType)


def deep_state(value: object, within: frozenset[int] = frozenset()) -> object:
    """``value`` as plain data: every item, field and attribute of it and of every object it
    holds, recursively (an object met again inside itself: its type's name). Two states differ
    when anything reachable from ``value`` was assigned or mutated."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, _NAMED):
        return repr(value)
    if id(value) in within:
        return ("again", type(value).__qualname__)
    inside = within | {id(value)}
    if isinstance(value, (list, tuple, bytearray)):
        return (type(value).__name__, [deep_state(item, inside) for item in value])
    if isinstance(value, (set, frozenset)):
        return (type(value).__name__, sorted(repr(deep_state(item, inside)) for item in value))
    if isinstance(value, Mapping):
        items = [(repr(deep_state(k, inside)), deep_state(v, inside)) for k, v in value.items()]
        return (type(value).__name__, sorted(items, key=lambda item: item[0]))
    return (type(value).__qualname__, attributes(value, inside))


def attributes(value: object, within: frozenset[int] = frozenset(), *, but: tuple[str, ...] = ()) -> dict[str, object]:
    """Each attribute ``value`` holds (its ``__dict__`` and its slots, ``but`` those), as
    :func:`deep_state`; an object that holds neither (a lock, a file) is its type alone."""
    names = set(getattr(value, "__dict__", {}))
    for klass in type(value).__mro__:
        slots = getattr(klass, "__slots__", ())
        names.update([slots] if isinstance(slots, str) else slots)
    names -= {"__dict__", "__weakref__", *but}
    return {name: deep_state(getattr(value, name), within) for name in sorted(names) if hasattr(value, name)}


def plan_state(setup: object) -> dict[str, object]:
    """#41: a run's plan as plain data, every object it holds to the bottom, its channels
    (:data:`PLAN_CHANNELS`) left out."""
    return attributes(setup, frozenset({id(setup)}), but=PLAN_CHANNELS)


def watch_plans(monkeypatch: pytest.MonkeyPatch) -> list[tuple[RunSetup, dict[str, object]]]:
    """Every run's plan made from now on, with its :func:`plan_state` as its maker made it."""
    made: list[tuple[RunSetup, dict[str, object]]] = []
    maker = RunSetup.open

    def open_and_keep(*args: Any, **kwargs: Any) -> RunSetup:
        setup = maker(*args, **kwargs)
        made.append((setup, plan_state(setup)))
        return setup

    monkeypatch.setattr(RunSetup, "open", staticmethod(open_and_keep))
    return made
