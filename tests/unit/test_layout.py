"""The package's layout: no import circle, and no import from a lower floor to a higher one.

Read from the sources (every ``import``, in functions and under TYPE_CHECKING too), so
an import that only runs on one path still counts. The floors follow the data flow of
the design: the contract and the configuration at the bottom, then the record, the
diagnosis, the child and the runner, the reports, the spread of a row over runs, and the
command line on top. No folder holds a sixth of the package, and no function or class
grows past what one reading holds (#31).
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
    "importgraph": 1,  # #34: which project files each Python file may import (ast), pure
    "skips": 2,
    "config": 3,
    "records": 4,
    "devices": 4,
    "workflow": 4,
    "diagnostics": 5,
    "findings": 5,
    "selection": 5,  # #34: which tests a change can break (the map, the diff), pure
    "namereads": 5,  # #34: which tests read the names a change to what runs at import binds, pure
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
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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

FOLDER_SHARE = 0.17  # of the package's lines, at most, in the modules of one folder
MAX_FUNCTION = 80  # lines
MAX_CLASS = 400
# longer today, each to be cut by its own change: a name here may only leave the list
LONG_TODAY = {
    "cli/__init__.py:build_parser",
    "config.py:load",
    "issues/github.py:GitHubTracker",
    "issues/sync.py:collect",
    "report/history.py:History",
    "report/history.py:History.record",
    "report/model.py:build",
    "report/verdicts.py:judge_test",
    "report/verdicts.py:judge",
    "run/attempt.py:run_attempt",
}


def _folder_lines() -> dict[str, int]:
    """Each folder's lines, its own modules only (a subfolder is a folder of its own)."""
    sizes: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        folder = path.parent.relative_to(PACKAGE).as_posix()
        sizes[folder] = sizes.get(folder, 0) + len(path.read_text().splitlines())
    return sizes


def _too_long(tree: ast.AST, where: str) -> Iterator[str]:
    """``where:name`` of each function over MAX_FUNCTION lines and class over MAX_CLASS in ``tree``."""

    def walk(node: ast.AST, prefix: str) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                if lines > (MAX_CLASS if isinstance(child, ast.ClassDef) else MAX_FUNCTION):
                    yield f"{where}:{name}"
                yield from walk(child, f"{name}.")
            else:
                yield from walk(child, prefix)

    return walk(tree, "")


def test_no_folder_holds_more_than_its_share_of_the_package() -> None:
    sizes = _folder_lines()
    total = sum(sizes.values())
    over = {f"{folder}/": f"{lines / total:.1%}" for folder, lines in sizes.items() if lines > FOLDER_SHARE * total}
    assert over == {}, "a folder that holds two layers: give the second its own room"


def test_no_function_or_class_grows_past_one_reading() -> None:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        found.update(_too_long(ast.parse(path.read_text(), str(path)), path.relative_to(PACKAGE).as_posix()))
    assert sorted(found - LONG_TODAY) == []


def test_the_size_check_sees_a_long_function_and_a_long_class() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION))
    short = "".join(f"    def m{i}(self) -> None:\n" + "".join(["        pass\n"] * 70) for i in range(6))
    source = f"def long():\n{body}\ndef fine():\n    pass\nclass Big:\n{short}"
    assert list(_too_long(ast.parse(source), "m.py")) == ["m.py:long", "m.py:Big"]
