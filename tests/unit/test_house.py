"""The package's house rules (#31): no function the reader cannot hold at once, no class
that is a second package, no room (a top-level folder or module) that is a quarter of
the house. Read from the sources; a line counts from a definition's first line (its
decorators) to its last."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "device_matrix"

MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 400
MAX_ROOM_SHARE = 0.17


def _sources() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


def _span(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return (node.end_lineno or node.lineno) - first + 1


def _definitions(kind: tuple[type[ast.AST], ...]) -> dict[str, int]:
    """``file:name`` -> lines, for every definition of ``kind`` (nested ones too)."""
    found = {}
    for path, text in _sources().items():
        for node in ast.walk(ast.parse(text, str(path))):
            if isinstance(node, kind):
                assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                found[f"{path.relative_to(PACKAGE)}:{node.lineno}:{node.name}"] = _span(node)
    return found


def test_no_function_is_over_80_lines() -> None:
    long = {
        name: n for name, n in _definitions((ast.FunctionDef, ast.AsyncFunctionDef)).items() if n > MAX_FUNCTION_LINES
    }
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_class_is_over_400_lines() -> None:
    long = {name: n for name, n in _definitions((ast.ClassDef,)).items() if n > MAX_CLASS_LINES}
    assert not long, f"classes over {MAX_CLASS_LINES} lines: {long}"


def _rooms() -> dict[str, int]:
    """Lines of Python per room: each top-level folder, each top-level module."""
    rooms: dict[str, int] = {}
    for path, text in _sources().items():
        room = path.relative_to(PACKAGE).parts[0]
        rooms[room] = rooms.get(room, 0) + len(text.splitlines())
    return rooms


def test_no_room_holds_over_17_percent_of_the_package() -> None:
    rooms = _rooms()
    total = sum(rooms.values())
    big = {room: f"{n / total:.1%}" for room, n in rooms.items() if n > MAX_ROOM_SHARE * total}
    assert not big, f"rooms over {MAX_ROOM_SHARE:.0%} of the package's {total} lines: {big}"


def test_the_rules_see_what_they_measure() -> None:
    # the measures are of the package as it is: its rooms and definitions are all read
    rooms = _rooms()
    assert {"run", "cli", "records", "report", "config.py"} <= set(rooms)
    assert sum(rooms.values()) > 10_000
    functions = _definitions((ast.FunctionDef, ast.AsyncFunctionDef))
    assert any(name.endswith(":build_parser") for name in functions)
    assert max(functions.values()) > 20
