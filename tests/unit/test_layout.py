"""The package's layout and house rules, read once from the sources (#31, #41).

No import circle, and no import from a lower floor to a higher one: read from every
``import`` (in functions and under TYPE_CHECKING too), so an import that only runs on one
path still counts. The floors follow the data flow of the design: the contract and the
configuration at the bottom, then the record, the diagnosis, the child and the runner, the
reports, the spread of a row over runs, and the command line on top. No room (a top-level
folder or module) and no folder holds over a sixth of the package's lines, and no function
or class grows past what one reading holds: a definition's lines counted one way, from its
first line (its decorators) to its last.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "device_matrix"

# device_matrix.<room> -> its floor; a room imports only rooms of lower floors
FLOORS: dict[str, int] = {
    "errors": 0,
    "redact": 1,
    "wire": 1,
    "names": 1,
    "markup": 1,
    "links": 1,
    "wanted": 2,
    "tomlfile": 1,
    "skips": 2,
    "config": 3,
    "records": 4,
    "devices": 4,
    "workflow": 4,
    "diagnostics": 5,
    "findings": 5,
    # #34: what a change reaches (which file may import which, which code reads a name), pure
    "changes": 5,
    "selection": 6,  # #34: which tests a change can break (the map, the diff), pure
    "output": 5,
    "child": 6,
    "executors": 6,  # #31: where a child runs (this host, a container) and how every child starts
    "issues": 6,
    "run": 7,
    "report": 7,
    "spread": 8,  # #31: a row over many runs uses the runner; the runner never imports it
    "cli": 9,
    "nox": 9,
    "__main__": 10,
}


def _module(path: Path) -> str:
    parts = ["device_matrix", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The package's modules ``name`` imports, and the packages that importing them runs."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(_trees()[path]):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        for target in targets:
            if not target.startswith("device_matrix"):
                continue
            # importing a.b.c runs a.b first, unless the importer is inside a.b already
            parts = target.split(".")
            for k in range(2, len(parts) + 1):
                ancestor = ".".join(parts[:k])
                if ancestor in known and ancestor != name and not name.startswith(ancestor + "."):
                    yield ancestor


@functools.cache  # the sources do not change during a run
def _sources() -> dict[Path, str]:
    return {path: path.read_text() for path in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def _trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(text, str(path)) for path, text in _sources().items()}


@functools.cache
def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: set(_imports(name, path, known)) for name, path in modules.items()}


def _room(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_check_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_every_room_has_a_floor() -> None:
    rooms = {_room(m) for m in _modules()} - {""}
    assert sorted(rooms - set(FLOORS)) == [], "place the new module in FLOORS, by the design's layout"


def test_no_import_runs_back_up() -> None:
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _graph().items()
        for target in targets
        if _room(module) and _room(target) and _room(module) != _room(target)
        if FLOORS[_room(module)] <= FLOORS[_room(target)]
    )
    assert upward == []


def test_the_contract_and_the_toml_reader_import_nothing_of_ours_but_errors() -> None:
    # what the child imports at its start, and what config and skips share
    graph = _graph()
    for module in ("device_matrix.wire", "device_matrix.tomlfile", "device_matrix.errors"):
        assert graph[module] <= {"device_matrix.errors"}, module


def test_the_spread_reaches_the_runner_through_one_door() -> None:
    # #31: every use of the runner by the spread is in spread/door.py
    graph = _graph()
    users = sorted(m for m in graph if _room(m) == "spread" and "device_matrix.run.runner" in graph[m])
    assert users == ["device_matrix.spread.door"]


# --- sizes (#31) ------------------------------------------------------------------------

ROOM_SHARE = 0.17  # of the package's lines, at most, in one room (a top-level folder or module)
FOLDER_SHARE = 0.17  # of the package's lines, at most, in the modules of one folder
MAX_FUNCTION = 80  # lines
MAX_CLASS = 400


def _lines() -> dict[Path, int]:
    return {path: len(text.splitlines()) for path, text in _sources().items()}


def _rooms() -> dict[str, int]:
    """Lines of Python per room: each top-level folder, each top-level module."""
    rooms: dict[str, int] = {}
    for path, lines in _lines().items():
        room = path.relative_to(PACKAGE).parts[0]
        rooms[room] = rooms.get(room, 0) + lines
    return rooms


def _folder_lines() -> dict[str, int]:
    """Each folder's lines, its own modules only (a subfolder is a folder of its own)."""
    sizes: dict[str, int] = {}
    for path, lines in _lines().items():
        folder = path.parent.relative_to(PACKAGE).as_posix()
        sizes[folder] = sizes.get(folder, 0) + lines
    return sizes


def _span(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    """A definition's lines, from its first line (its decorators) to its last."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return (node.end_lineno or node.lineno) - first + 1


def _definitions(tree: ast.AST, where: str) -> Iterator[tuple[str, int, bool]]:
    """``where:name`` (nested ones as ``Outer.name``), its lines and whether it is a class,
    for every function and class in ``tree``."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                yield f"{where}:{name}", _span(child), isinstance(child, ast.ClassDef)
                yield from walk(child, f"{name}.")
            else:
                yield from walk(child, prefix)

    return walk(tree, "")


def _too_long(tree: ast.AST, where: str) -> Iterator[str]:
    """``where:name`` of each function over MAX_FUNCTION lines and class over MAX_CLASS in ``tree``."""
    for name, lines, is_class in _definitions(tree, where):
        if lines > (MAX_CLASS if is_class else MAX_FUNCTION):
            yield name


def _package_definitions() -> dict[str, tuple[int, bool]]:
    return {
        name: (lines, is_class)
        for path, tree in _trees().items()
        for name, lines, is_class in _definitions(tree, path.relative_to(PACKAGE).as_posix())
    }


def test_no_room_holds_over_17_percent_of_the_package() -> None:
    rooms = _rooms()
    total = sum(rooms.values())
    big = {room: f"{n / total:.1%}" for room, n in rooms.items() if n > ROOM_SHARE * total}
    assert not big, f"rooms over {ROOM_SHARE:.0%} of the package's {total} lines: {big}"


def test_no_folder_holds_more_than_its_share_of_the_package() -> None:
    sizes = _folder_lines()
    total = sum(sizes.values())
    over = {f"{folder}/": f"{lines / total:.1%}" for folder, lines in sizes.items() if lines > FOLDER_SHARE * total}
    assert over == {}, "a folder that holds two layers: give the second its own room"


def test_no_function_is_over_80_lines() -> None:
    long = {name: n for name, (n, is_class) in _package_definitions().items() if not is_class and n > MAX_FUNCTION}
    assert not long, f"functions over {MAX_FUNCTION} lines: {long}"


def test_no_class_is_over_400_lines() -> None:
    long = {name: n for name, (n, is_class) in _package_definitions().items() if is_class and n > MAX_CLASS}
    assert not long, f"classes over {MAX_CLASS} lines: {long}"


def test_the_size_check_sees_a_long_function_and_a_long_class() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION))
    short = "".join(f"    def m{i}(self) -> None:\n" + "".join(["        pass\n"] * 70) for i in range(6))
    source = f"def long():\n{body}\ndef fine():\n    pass\nclass Big:\n{short}"
    assert list(_too_long(ast.parse(source), "m.py")) == ["m.py:long", "m.py:Big"]
    # a decorator's lines are the definition's: 79 lines of body and one decorator is 81
    decorated = "@dec\ndef f():\n" + "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION - 1))
    assert list(_too_long(ast.parse(decorated), "m.py")) == ["m.py:f"]


def test_the_rules_see_what_they_measure() -> None:
    # the measures are of the package as it is: its rooms and definitions are all read
    rooms = _rooms()
    assert {"run", "cli", "records", "report", "config.py"} <= set(rooms)
    assert sum(rooms.values()) > 10_000
    functions = {name: n for name, (n, is_class) in _package_definitions().items() if not is_class}
    assert any(name.endswith(":build_parser") for name in functions)
    assert max(functions.values()) > 20
