"""Which of the project's Python files each file may import (#34): its static import graph.

A change to what runs when a module is imported (a constant, a decorator, a class body)
ran once, for whichever test module imported the module first, so the test map cannot say
which tests rely on it; the import statements can. :mod:`device_matrix.selection` runs
the test modules from which a changed module is reachable here (and the tests under a
``conftest.py`` from which it is), instead of every test. Pure: the files' text in, the
graph out (``run --select changed`` reads the files, :func:`device_matrix.cli.select.import_graph`).

Use::

    g = build({"pkg/a.py": "from pkg import b\\n", "pkg/b.py": "X = 1\\n"})
    g.imports["pkg/a.py"]      # frozenset({"pkg/b.py", ...}): the files it may import
    g.importers("pkg/b.py")     # every file from which pkg/b.py is reachable, itself too
    g.unknown                   # file -> why what it imports cannot be known

What counts, wherever it is written (a function's body too: it runs when called):
``import a.b``, ``from a import b`` (``b`` a module or a name), relative imports,
``from a import *`` (a package's submodules too), a name written out where a module is
imported or asked for by name (``importlib.import_module("a.b")``, ``__import__``,
``pytest.importorskip``, ``importlib.util.find_spec``, ``pkgutil.resolve_name("a.b:C")``,
``pydoc.locate``), a dotted name in a string (``mock.patch("a.b.X")`` imports
``a.b``), ``pytest_plugins`` (a plugin: every test). A file imports the ``__init__.py``
of each folder above it (a package's import runs them first).

An absolute name ``a.b`` is every file whose path ends in ``a/b.py`` or ``a/b/__init__.py``
(where ``a`` is not inside a package: a name starts at a package's top): which folder is on
``sys.path`` (pytest's rootdir, a ``conftest.py`` that inserts its own, ``src/``) the graph
does not guess, so it never misses a file a name may mean. What it
cannot know is ``unknown``: a module imported by a name computed at run time, code loaded
from a path (``spec_from_file_location``, ``runpy``) or run from a string (``exec``), entry
points, a file that does not parse or cannot be read; the selection runs the tests that
reach such a file whatever changed at import.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeGuard

# a module imported (or asked for: ``find_spec``) by the name given as the call's first argument
BY_NAME = frozenset({"import_module", "__import__", "importorskip", "find_spec", "find_loader", "get_loader"})
# #40: an object imported by a dotted name, its module the name's longest part that is one
# (``pkgutil.resolve_name("a.b:C")``, ``pydoc.locate("a.b.C")``, frameworks' ``import_string``)
BY_OBJECT_NAME = frozenset({"resolve_name", "locate", "import_string"})
# code loaded from a path, a spec, an entry point or a string: what it imports is unknown
LOADERS = frozenset(
    {
        "spec_from_file_location",
        "spec_from_loader",
        "module_from_spec",
        "exec_module",
        "load_module",
        "load_source",
        "SourceFileLoader",
        "run_module",
        "run_path",
        "walk_packages",
        "entry_points",
        "iter_entry_points",
        "load_entry_point",
    }
)
BUILTIN_LOADERS = frozenset({"exec", "eval"})  # only as builtins: ``model.eval()`` loads nothing
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\Z")
PLUGINS = "pytest_plugins"


def module_parts(path: str) -> tuple[str, ...]:
    """The dotted name's parts of a project-relative ``.py`` path (a package is its folder)."""
    parts = tuple(path.removesuffix(".py").split("/"))
    return parts[:-1] if parts[-1] == "__init__" else parts


@dataclass(frozen=True)
class Graph:
    """The project's Python files and which of them each may import (:func:`build`)."""

    imports: Mapping[str, frozenset[str]]  # file -> the project files it may import, directly
    unknown: Mapping[str, str] = field(default_factory=dict)  # file -> why what it imports is unknown
    # #40: of ``unknown``, the files whose every dynamic import is in a function's body -> the
    # body spans: it imports only when one runs (the tests that ran one, by the map's lines)
    unknown_in: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    plugins: Mapping[str, str] = field(default_factory=dict)  # file -> "the pytest plugin X (where)": every test's
    everywhere: str | None = None  # why no file's importers can be known (plugins by a computed name)

    @cached_property
    def _importers_of(self) -> Mapping[str, frozenset[str]]:
        reverse: dict[str, set[str]] = defaultdict(set)
        for source, targets in self.imports.items():
            for target in targets:
                reverse[target].add(source)
        return {k: frozenset(v) for k, v in reverse.items()}

    def importers(self, target: str) -> frozenset[str]:
        """Every file from which ``target`` is reachable by imports, ``target`` itself too."""
        seen, todo = {target}, [target]
        while todo:
            for source in self._importers_of.get(todo.pop(), frozenset()):
                if source not in seen:
                    seen.add(source)
                    todo.append(source)
        return frozenset(seen)


class _Index:
    """The project's files by the dotted names that may mean them."""

    def __init__(self, files: Iterable[str]) -> None:
        self.files = frozenset(files)
        self.by_suffix: dict[tuple[str, ...], set[str]] = defaultdict(set)
        self.children: dict[str, set[str]] = defaultdict(set)  # a folder -> its modules and packages
        for f in self.files:
            parts = module_parts(f)
            for i in range(self._top(f) + 1):
                self.by_suffix[parts[i:]].add(f)
            if parts:
                self.children["/".join(parts[:-1])].add(f)

    def _top(self, path: str) -> int:
        """Where the names of ``path`` may start: at any folder above the packages it is in,
        or at its top package (``a/b/c.py`` in packages ``a`` and ``b``: only ``a.b.c``; in
        folders without ``__init__.py``: ``a.b.c``, ``b.c`` or ``c``, whichever folder is on
        ``sys.path``). A name starting inside a package would need ``sys.path`` to point into
        it: ``import ray`` does not mean ``pkg/spread/ray.py``."""
        folders = path.split("/")[:-1]
        top = len(folders)
        while top and "/".join([*folders[:top], "__init__.py"]) in self.files:
            top -= 1
        return min(top, len(module_parts(path)) - 1)

    def named(self, parts: tuple[str, ...]) -> set[str]:
        """The files an absolute name may mean."""
        return set(self.by_suffix.get(parts, ())) if parts else set()

    def at(self, parts: tuple[str, ...]) -> set[str]:
        """The file a name relative to a known folder means (its module or its package)."""
        base = "/".join(parts)
        return {p for p in (f"{base}.py", f"{base}/__init__.py") if p in self.files}

    def packages_above(self, path: str) -> set[str]:
        """The ``__init__.py`` of each folder above ``path``, that exist."""
        folders = path.split("/")[:-1]
        found = {"/".join([*folders[:i], "__init__.py"]) for i in range(1, len(folders) + 1)}
        return (found & self.files) - {path}

    def submodules(self, packages: Iterable[str]) -> set[str]:
        """The modules and packages directly inside each of ``packages`` (``__init__.py`` files)."""
        return {c for p in packages if p.endswith("/__init__.py") for c in self.children[p[: -len("/__init__.py")]]}


def _call_name(node: ast.Call) -> str | None:
    if isinstance(node.func, ast.Name):
        return node.func.id
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _literal_names(value: ast.expr) -> list[str] | None:
    """The strings of a literal string, list or tuple of strings; None for anything else."""
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return [value.value]
    if isinstance(value, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
    ):
        return [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None


@dataclass
class _File:
    """What one file's text says it imports."""

    path: str
    index: _Index
    targets: set[str] = field(default_factory=set)
    unknown: str | None = None
    plugins: list[str] = field(default_factory=list)  # the dotted names its pytest_plugins lists
    hooks: list[str] = field(default_factory=list)  # the pytest hooks it defines (pytest_*), a conftest's
    plugins_unknown: bool = False
    # #40: the body spans of the outermost functions a dynamic import is in; None once one is
    # outside every function (it runs at import)
    unknown_spans: list[tuple[int, int]] | None = field(default_factory=list)

    def absolute(self, name: str) -> None:
        self.targets |= self.index.named(tuple(name.split(".")))

    def relative(self, level: int, module: str | None, names: list[str]) -> None:
        folder = tuple(self.path.split("/")[:-1])
        if level - 1 > len(folder):
            return  # beyond the top: an ImportError when it runs
        base = folder[: len(folder) - (level - 1)] + (tuple(module.split(".")) if module else ())
        found = self.index.at(base) if base else set()
        self.targets |= found
        if "*" in names:
            self.targets |= self.index.submodules(found)
        for name in names:
            self.targets |= self.index.at((*base, name))

    def import_from(self, node: ast.ImportFrom) -> None:
        names = [a.name for a in node.names]
        if node.level:
            self.relative(node.level, node.module, names)
            return
        if node.module is None:
            return
        found = self.index.named(tuple(node.module.split(".")))
        self.targets |= found
        if "*" in names:
            self.targets |= self.index.submodules(found)
        for name in names:
            self.absolute(f"{node.module}.{name}")

    def call(self, node: ast.Call, bodies: list[tuple[int, int]]) -> None:
        name = _call_name(node)
        if name in BY_NAME or name in BY_OBJECT_NAME:
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and not arg.value.startswith("."):
                if name in BY_NAME:
                    self.absolute(arg.value)
                else:
                    self.string(arg.value.split(":", 1)[0])
            else:
                self.unknown = self.unknown or f"imports a module by a name it computes ({name})"
                self._where(node, bodies)
        elif name in LOADERS or (name in BUILTIN_LOADERS and isinstance(node.func, ast.Name)):
            self.unknown = self.unknown or f"loads code from a path, an entry point or a string ({name})"
            self._where(node, bodies)

    def _where(self, node: ast.Call, bodies: list[tuple[int, int]]) -> None:
        span = next(((a, b) for a, b in bodies if a <= node.lineno <= b), None)
        if span is None or self.unknown_spans is None:
            self.unknown_spans = None
        elif span not in self.unknown_spans:
            self.unknown_spans.append(span)

    def string(self, text: str) -> None:
        parts = tuple(text.split("."))
        if not DOTTED.match(text) or parts[-1] == "py":  # "conftest.py" names a file, not a module
            return
        for n in range(len(parts), 0, -1):  # the longest name that is a module: the rest are attributes
            found = self.index.named(parts[:n])
            if found:
                self.targets |= found
                return

    def assign(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id == PLUGINS for t in targets):
            names = _literal_names(node.value) if node.value is not None else []
            if names is None:
                self.plugins_unknown = True
            else:
                self.plugins += names
                for n in names:
                    self.absolute(n)

    def read(self, tree: ast.Module) -> None:
        for stmt in tree.body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self.assign(stmt)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("pytest_"):
                self.hooks.append(stmt.name)
        bodies = [(fn.body[0].lineno, fn.end_lineno or fn.lineno) for fn in outermost(tree)]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.absolute(alias.name)
            elif isinstance(node, ast.ImportFrom):
                self.import_from(node)
            elif isinstance(node, ast.Call):
                self.call(node, bodies)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                self.string(node.value)
        self.targets |= self.index.packages_above(self.path)
        self.targets.discard(self.path)


def main_guard(stmt: ast.stmt) -> TypeGuard[ast.If]:
    """Whether a module's statement is ``if __name__ == "__main__":`` without an ``else``: its
    body runs only where the module is the program (``python FILE``, ``python -m``, ``runpy``
    with that name), never where it is imported, as pytest imports every module (#40)."""
    if not isinstance(stmt, ast.If) or stmt.orelse:
        return False
    test = stmt.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    named = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    main = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(named) == len(main) == 1


def guards(tree: ast.Module) -> list[ast.If]:
    """The module's ``if __name__ == "__main__":`` statements (:func:`main_guard`)."""
    return [stmt for stmt in tree.body if main_guard(stmt)]


def outermost(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions in no other function (methods too)."""
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append(child)
        else:
            found.extend(outermost(child))
    return found


def _read(path: str, text: str | bytes | None, index: _Index) -> _File:
    f = _File(path, index)
    f.targets |= index.packages_above(path)
    if text is None:
        return f  # deleted: it imports nothing, and its importers still name it
    try:
        tree = ast.parse(text, filename=path)  # bytes: decoded as Python does (a coding line)
    except (SyntaxError, ValueError) as exc:
        f.unknown = f"does not parse ({exc.__class__.__name__} at line {getattr(exc, 'lineno', None) or '?'})"
        return f
    f.read(tree)
    return f


def imports_changed(graph: Graph, path: str, old: str | bytes | None, new: str | bytes | None) -> frozenset[str]:
    """#40: the project's files whose import a change of ``path`` (``old`` to ``new``) may
    run where it did not before, or no longer run, or run at another time: those reachable
    from what it imports anew, no longer, or now at import where it did in a function (or
    the other way), and not from an import it kept as it was (the rest of the project as
    ``graph`` has it)."""
    index = _Index([*graph.imports, path])
    before, after = _when(path, old, index), _when(path, new, index)
    moved = {target for target, _ in before ^ after}
    if not moved:
        return frozenset()
    kept = {target for target, _ in before & after}
    return frozenset(_reach(graph, moved) - _reach(graph, kept) - {path})


def _when(path: str, text: str | bytes | None, index: _Index) -> set[tuple[str, bool]]:
    """The files ``text`` imports, each with whether at import (else in a function's body)."""
    every = _read(path, text, index).targets
    try:
        tree = ast.parse(text or "")
    except (SyntaxError, ValueError):
        return {(t, True) for t in every}
    for fn in outermost(tree):
        fn.body = [ast.Pass()]
    at_import = _read(path, ast.unparse(tree), index).targets
    return {(t, t in at_import) for t in every}


def _reach(graph: Graph, start: Iterable[str]) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for target in graph.imports.get(todo.pop(), frozenset()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def build(
    sources: Mapping[str, str | bytes | None],
    plugins: Mapping[str, str] | None = None,
    unreadable: Mapping[str, str] | None = None,
) -> Graph:
    """The graph of ``sources`` (project-relative POSIX path -> its text or bytes; None: it
    was deleted); ``plugins``: the dotted names of pytest plugins loaded for every test (an
    entry point, ``-p``) -> where each is named; ``unreadable``: files that exist but could
    not be read -> why."""
    index = _Index([p for p in [*sources, *(unreadable or {})] if p.endswith(".py")])
    files = {p: _read(p, text, index) for p, text in sources.items() if p.endswith(".py")}
    for p, why in (unreadable or {}).items():
        files[p] = _File(p, index, unknown=f"cannot be read ({why})")
    named: dict[str, str] = {}
    for name, where in (plugins or {}).items():
        for target in index.named(tuple(name.split("."))):
            named[target] = f"the pytest plugin {name} ({where})"
    everywhere = None
    for f in files.values():
        for name in f.plugins:
            for target in index.named(tuple(name.split("."))):
                named.setdefault(target, f"the pytest plugin {name} ({PLUGINS} of {f.path})")
        if f.hooks and f.path.rsplit("/", 1)[-1] == "conftest.py":
            # #34: a conftest's session hooks (pytest_collection_modifyitems) get every test,
            # wherever it is: what it imports is every test's, as a plugin's
            hooks = ", ".join(f.hooks[:3]) + (" ..." if len(f.hooks) > 3 else "")
            named.setdefault(f.path, f"the pytest hooks of {f.path} ({hooks}), which act on every test")
        if f.plugins_unknown and everywhere is None:
            everywhere = f"{f.path} names its {PLUGINS} by a computed value"
    return Graph(
        imports={p: frozenset(f.targets) for p, f in files.items()},
        unknown={p: f"{p} {f.unknown}" for p, f in files.items() if f.unknown},
        unknown_in={p: tuple(f.unknown_spans) for p, f in files.items() if f.unknown and f.unknown_spans},
        plugins=named,
        everywhere=everywhere,
    )
