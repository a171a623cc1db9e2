"""Static scan for ``device-matrix skips list`` and ``skips check``.

It finds, without importing anything, every skip the run-time recorder would record:

- ``skip_device`` / ``xfail_device`` marks and ``only_on`` (by design);
- ``unittest.skip/skipIf/skipUnless`` (also imported by name), on tests and classes;
- ``pytest.mark.skip/skipif/xfail``, and ``pytest.skip``, ``pytest.xfail``,
  ``self.skipTest`` and ``raise SkipTest`` inside tests, under the ``if`` they sit in.

Messages are read from literals, f-strings, ``reason=`` and module constants. Devices
come from the conditions it understands: ``xr.device_type()``, ``xm.xla_device_hw()``,
``xu.getenv_as('PJRT_DEVICE', ...)``, ``os.environ.get('PJRT_DEVICE')`` and friends
compared with device names, through ``not``/``and``/``or``, module constants and
one-line helper functions (also in a sibling module imported by bare name, as upstream's
``import test_utils``). A skip whose condition says nothing about the device and cites
no issue is not a device skip and is not listed.
"""

from __future__ import annotations

import ast
import datetime as dt
import operator
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from device_matrix.errors import ConfigError
from device_matrix.skips.by_design import BY_DESIGN_COMMENT, BY_DESIGN_CONSTANT_PREFIX
from device_matrix.skips.model import BY_DESIGN_MARK, PJRT_ALIASES, DeviceSkip, SkipMode, SkipSource, from_marker
from device_matrix.skips.refs import LEDGER_REF_RE, find_issue_in_text

KNOWN_DEVICES = frozenset({"cpu", "tpu", "cuda", "neuron"})
EVERYWHERE = ("*",)
NOT_IN_LEDGER = "which is not in the ledger"  # a ledger:N that neither the seed nor the ledger holds
_RESOLVE_DEPTH = 12  # constants and helpers that refer to each other, cycles included
_SKIPPED_DIRS = frozenset({".nox", ".venv", "venv", "node_modules", ".git", "__pycache__"})

Devices = frozenset[str] | None  # where a condition holds; None when it is not understood
_UNKNOWN = ast.Name(id="<unknown>", ctx=ast.Load())  # a local whose value the scan cannot know


@dataclass(frozen=True)
class ScanFinding:
    skip: DeviceSkip
    problem: str | None  # None when the declaration is fine


# --- one module: its constants, helpers and imports -------------------------------------


@dataclass
class _Module:
    path: Path | None
    tree: ast.Module
    lines: list[str]
    constants: dict[str, ast.expr] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    # local name -> dotted origin: `import unittest as ut` -> ut: unittest,
    # `from unittest import skipIf` -> skipIf: unittest.skipIf
    imports: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, source: str, path: Path | None) -> _Module:
        tree = ast.parse(source, filename=str(path or "<string>"))
        mod = cls(path, tree, source.splitlines())
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                mod.constants[stmt.targets[0].id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                mod.constants[stmt.target.id] = stmt.value
            elif isinstance(stmt, ast.FunctionDef):
                mod.functions[stmt.name] = stmt
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    mod.imports[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                for alias in stmt.names:
                    mod.imports[alias.asname or alias.name] = f"{stmt.module}.{alias.name}"
        return mod

    def with_locals(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> _Module:
        """This module as seen from inside ``func``: a name it assigns once is a constant there
        (``device_hw = xm.xla_device_hw(device)``, then ``if device_hw != "TPU"``); its
        parameters and names it assigns more than once hide the module's names."""
        params = func.args
        stores = {
            a.arg: 2
            for a in [*params.posonlyargs, *params.args, *params.kwonlyargs, params.vararg, params.kwarg]
            if a is not None
        }
        values: dict[str, ast.expr] = {}
        for node in ast.walk(func):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stores[node.id] = stores.get(node.id, 0) + 1
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                values[node.targets[0].id] = node.value
        if not stores:
            return self
        local = {name: values[name] if n == 1 and name in values else _UNKNOWN for name, n in stores.items()}
        return replace(self, constants={**self.constants, **local})

    def dotted(self, node: ast.AST) -> str | None:
        """``ut.skipIf`` -> ``unittest.skipIf``, ``skipIf`` -> ``unittest.skipIf``."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        parts.append(self.imports.get(node.id, node.id))
        return ".".join(reversed(parts))


class _Resolver:
    """Looks names up in a module and in sibling modules imported by bare name."""

    def __init__(self) -> None:
        self._siblings: dict[Path, _Module | None] = {}

    def sibling(self, mod: _Module, name: str) -> _Module | None:
        if mod.path is None or "." in name:
            return None
        path = mod.path.parent / f"{name}.py"
        if path not in self._siblings:
            self._siblings[path] = None  # a module that imports itself back stops here
            try:
                self._siblings[path] = _Module.parse(path.read_text("utf-8"), path)
            except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError, MemoryError):
                pass
        return self._siblings[path]

    def constant(self, mod: _Module, node: ast.expr) -> tuple[_Module, ast.expr, str] | None:
        """The expression a module constant stands for, the module it lives in, its name."""
        if isinstance(node, ast.Name):
            if node.id in mod.constants:
                return mod, mod.constants[node.id], node.id
            origin = mod.imports.get(node.id, "")
            if origin.count(".") == 1:
                other = self.sibling(mod, origin.split(".")[0])
                name = origin.split(".")[1]
                if other is not None and name in other.constants:
                    return other, other.constants[name], name
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            other = self.sibling(mod, mod.imports.get(node.value.id, ""))
            if other is not None and node.attr in other.constants:
                return other, other.constants[node.attr], node.attr
        return None

    def function(self, mod: _Module, node: ast.expr) -> tuple[_Module, ast.FunctionDef] | None:
        """The module-level function ``node`` names, here or in a sibling module."""
        if isinstance(node, ast.Name):
            if node.id in mod.functions:
                return mod, mod.functions[node.id]
            origin = mod.imports.get(node.id, "")
            if origin.count(".") == 1:
                other = self.sibling(mod, origin.split(".")[0])
                if other is not None and origin.split(".")[1] in other.functions:
                    return other, other.functions[origin.split(".")[1]]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            other = self.sibling(mod, mod.imports.get(node.value.id, ""))
            if other is not None and node.attr in other.functions:
                return other, other.functions[node.attr]
        return None

    def helper(self, mod: _Module, node: ast.expr) -> tuple[_Module, ast.expr] | None:
        """The returned expression of a one-statement helper function called without arguments."""
        if not isinstance(node, ast.Call) or node.args or node.keywords:
            return None
        found = self.function(mod, node.func)
        if found is None:
            return None
        where, func = found
        body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
            return where, body[0].value
        return None

    def is_pjrt_name(self, mod: _Module, node: ast.expr) -> bool:
        """``"PJRT_DEVICE"``, or a constant that holds it (``xenv.PJRT_DEVICE`` of torch_xla)."""
        if isinstance(node, ast.Constant):
            return node.value == "PJRT_DEVICE"
        if isinstance(node, ast.Attribute) and node.attr == "PJRT_DEVICE":
            return True
        const = self.constant(mod, node)
        return const is not None and isinstance(const[1], ast.Constant) and const[1].value == "PJRT_DEVICE"

    # --- conditions -> devices ------------------------------------------------------

    def is_device(self, mod: _Module, node: ast.expr, depth: int = 0) -> bool:
        """Whether ``node`` evaluates to the name of the device the test runs on."""
        if depth > _RESOLVE_DEPTH:
            return False
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr in ("lower", "upper", "strip", "casefold"):
                return self.is_device(mod, node.func.value, depth + 1)
            name = mod.dotted(node.func) or ""
            last = name.rsplit(".", 1)[-1]
            if last in ("device_type", "xla_device_hw") or name.endswith("runtime.device_type"):
                return True
            if last in ("getenv_as", "getenv", "get") and node.args and self.is_pjrt_name(mod, node.args[0]):
                return last != "get" or name.endswith("environ.get")
            found = self.helper(mod, node)
            return found is not None and self.is_device(found[0], found[1], depth + 1)
        if isinstance(node, ast.Subscript):
            key = node.slice
            return (mod.dotted(node.value) or "").endswith("environ") and self.is_pjrt_name(mod, key)
        const = self.constant(mod, node)
        return const is not None and self.is_device(const[0], const[1], depth + 1)

    def names(self, mod: _Module, node: ast.expr, depth: int = 0) -> frozenset[str] | None:
        """Device names in a string or a tuple/list/set of strings."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value.strip().lower()
            return frozenset({PJRT_ALIASES.get(name, name)})
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            out: set[str] = set()
            for elt in node.elts:
                part = self.names(mod, elt, depth + 1)
                if part is None:
                    return None
                out |= part
            return frozenset(out)
        const = self.constant(mod, node) if depth < _RESOLVE_DEPTH else None
        return self.names(const[0], const[1], depth + 1) if const else None

    def devices(self, mod: _Module, node: ast.expr, depth: int = 0) -> Devices:
        """The devices on which the condition ``node`` is true, or None if not understood."""
        if depth > _RESOLVE_DEPTH:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return KNOWN_DEVICES if node.value else frozenset()
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.devices(mod, node.operand, depth + 1)
            return None if inner is None else KNOWN_DEVICES - inner
        if isinstance(node, ast.BoolOp):
            parts = [self.devices(mod, v, depth + 1) for v in node.values]
            known = [p for p in parts if p is not None]
            if not known:
                return None
            if isinstance(node.op, ast.And):
                # an unknown conjunct only narrows: the known ones bound where it holds
                return frozenset.intersection(*known)
            # an unknown disjunct (`or tpu.version() < 4`) adds what it adds where it holds:
            # the known ones say where the skip applies at least (#24)
            return frozenset().union(*known)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            left, right, op = node.left, node.comparators[0], node.ops[0]
            constant = _constant_comparison(left, op, right)
            if constant is not None:  # `skipIf(1 == 1, ...)`: a skip everywhere, written as a condition
                return KNOWN_DEVICES if constant else frozenset()
            if self.is_device(mod, right, depth + 1) and isinstance(op, ast.Eq | ast.NotEq):
                left, right = right, left
            if not self.is_device(mod, left, depth + 1):
                return None
            values = self.names(mod, right)
            if values is None:
                return None
            if isinstance(op, ast.Eq | ast.In):
                return values
            if isinstance(op, ast.NotEq | ast.NotIn):
                return KNOWN_DEVICES - values
            return None
        found = self.helper(mod, node)
        if found is not None:
            return self.devices(found[0], found[1], depth + 1)
        const = self.constant(mod, node)
        if const is not None:
            return self.devices(const[0], const[1], depth + 1)
        return None

    # --- messages -------------------------------------------------------------------

    def text(self, mod: _Module, node: ast.expr | None, depth: int = 0) -> tuple[str | None, str | None]:
        """A message's text (placeholders for what is not known) and the constant it came from."""
        if node is None or depth > _RESOLVE_DEPTH:
            return None, None
        if isinstance(node, ast.Constant):
            return (node.value if isinstance(node.value, str) else str(node.value)), None
        if isinstance(node, ast.JoinedStr):
            pieces = []
            for value in node.values:
                if isinstance(value, ast.FormattedValue):
                    piece, _ = self.text(mod, value.value, depth + 1)
                    pieces.append(piece if piece is not None else "{...}")
                else:
                    piece, _ = self.text(mod, value, depth + 1)
                    pieces.append(piece or "")
            return "".join(pieces), None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, _ = self.text(mod, node.left, depth + 1)
            right, _ = self.text(mod, node.right, depth + 1)
            if left is None and right is None:
                return None, None
            return (left or "{...}") + (right or "{...}"), None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return self.text(mod, node.left, depth + 1)[0], None
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant | ast.Name | ast.JoinedStr)
        ):
            return self.text(mod, node.func.value, depth + 1)[0], None
        const = self.constant(mod, node)
        if const is not None:
            held, _ = self.text(const[0], const[1], depth + 1)
            return held, const[2]
        return None, None


# --- the forms ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Form:
    name: str  # how it is reported: unittest.skipIf, pytest.skip...
    mode: SkipMode
    source: SkipSource
    condition: int | None  # index of the positional condition, None when unconditional
    negate: bool  # skipUnless: skipped where the condition is false
    message: int  # index of the positional message
    keywords: tuple[str, ...]  # message keywords


_DECORATORS = {
    "unittest.skip": _Form("unittest.skip", "skip", "unittest", None, False, 0, ("reason",)),
    "unittest.skipIf": _Form("unittest.skipIf", "skip", "unittest", 0, False, 1, ("reason",)),
    "unittest.skipUnless": _Form("unittest.skipUnless", "skip", "unittest", 0, True, 1, ("reason",)),
    "pytest.mark.skip": _Form("pytest.mark.skip", "skip", "pytest", None, False, 0, ("reason",)),
    "pytest.mark.skipif": _Form("pytest.mark.skipif", "skip", "pytest", 0, False, 1, ("reason",)),
    "pytest.mark.xfail": _Form("pytest.mark.xfail", "xfail", "pytest", 0, False, 1, ("reason",)),
}
# calls inside a test: the condition is the `if` they sit in
_CALLS = {
    "pytest.skip": _Form("pytest.skip", "skip", "pytest", None, False, 0, ("reason", "msg")),
    "pytest.xfail": _Form("pytest.xfail", "xfail", "pytest", None, False, 0, ("reason",)),
    "unittest.SkipTest": _Form("unittest.SkipTest", "skip", "unittest", None, False, 0, ()),
    "unittest.case.SkipTest": _Form("unittest.SkipTest", "skip", "unittest", None, False, 0, ()),
    "absl.testing.absltest.SkipTest": _Form("unittest.SkipTest", "skip", "unittest", None, False, 0, ()),
}
_BARE_DECORATORS = frozenset({"pytest.mark.skip", "pytest.mark.xfail", "unittest.skip"})
_SKIP_TEST = _Form("self.skipTest", "skip", "unittest", None, False, 0, ("reason",))
_INSIDE_TESTS = frozenset({*_CALLS, "self.skipTest"})
# aliases pytest and unittest re-export under other names
_CANONICAL = {"unittest.case.skip": "unittest.skip", "unittest.case.skipIf": "unittest.skipIf"}
_CANONICAL["unittest.case.skipUnless"] = "unittest.skipUnless"
# absl's absltest re-exports unittest's decorators
_CANONICAL.update({f"absl.testing.absltest.{name}": f"unittest.{name}" for name in ("skip", "skipIf", "skipUnless")})


def _form_of(mod: _Module, call: ast.Call) -> _Form | None:
    name = mod.dotted(call.func) or ""
    name = _CANONICAL.get(name, name)
    if name in _DECORATORS:
        return _DECORATORS[name]
    if name in _CALLS:
        return _CALLS[name]
    if isinstance(call.func, ast.Attribute) and call.func.attr == "skipTest":
        return _SKIP_TEST
    return None


def _is_device_marker(mod: _Module, call: ast.Call) -> str | None:
    name = mod.dotted(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    if last in ("skip_device", "xfail_device") and ".mark." in f".{name}":
        return last
    if last == BY_DESIGN_MARK and (name == last or name.startswith(("device_matrix", "pytest.mark"))):
        return last
    return None


# a skip in one of these skips the tests of its class (or module): it is theirs
_CLASS_SETUP = frozenset({"setUp", "setUpClass", "asyncSetUp", "setup_method", "setup_class"})
_MODULE_SETUP = frozenset({"setUpModule", "setup_module"})
# what a skip's reason says: the test is broken there (it needs an issue), or it is for
# some devices only (by design); read in its message and the comments on its lines (#24)
BROKEN_RE = re.compile(
    r"\b(broken|breaks?|flak(?:y|e|es|iness)|fail(?:s|ed|ing|ures?)?|crash(?:es|ed|ing)?|bugs?|todo|fixme|"
    r"hangs?|hanging|wrong|incorrect|regress\w*|segfaults?|unstable|temporar\w*|re-?enable\w*|disabled?|"
    r"issues?|now|yet|until)\b",
    re.IGNORECASE,
)
APPLIES_RE = re.compile(
    r"\b(only|requires?|required|needs?|not supported|unsupported|not available|unavailable|"
    r"not applicable|specific|exclusive|(?:does not|doesn't|do not|don't|cannot|can't) support)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Use:
    """Where a skip applies: the decorator (or call) at the test, and the module it is read in."""

    node: ast.AST
    mod: _Module


class _Scanner(ast.NodeVisitor):
    def __init__(self, mod: _Module, rel: str, resolver: _Resolver) -> None:
        self.mod, self.rel, self.r = mod, rel, resolver
        self.found: list[DeviceSkip] = []
        # the enclosing classes and functions: (name, "class" | "function")
        self.scope: list[tuple[str, str]] = []
        # enclosing conditions inside the current function: (devices where it holds, negated)
        self.conditions: list[tuple[Devices, bool]] = []
        self.decorating: list[tuple[str, str]] | None = None
        self.marking = False  # in the value of `pytestmark = ...`: the module's or class's mark

    # scopes and the test a decorator belongs to
    def _scoped(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        kind = "class" if isinstance(node, ast.ClassDef) else "function"
        for deco in node.decorator_list:
            self.decorating = [*self.scope, (node.name, kind)]
            dotted = self.mod.dotted(deco)
            if isinstance(deco, ast.Attribute) and _CANONICAL.get(dotted or "", dotted) in _BARE_DECORATORS:
                # @pytest.mark.skip, @unittest.skip without parentheses: a skip with no reason
                self.visit(ast.copy_location(ast.Call(func=deco, args=[], keywords=[]), deco))
            elif isinstance(deco, ast.Call):
                self.visit(deco)
                if _form_of(self.mod, deco) is None and _is_device_marker(self.mod, deco) is None:
                    self._through(deco.func, deco)  # a factory called: @skip_if_tpu("why")
            else:
                self._through(deco, deco)  # an alias (@skipOnTpu) or a decorator function (@onlyOnCPU)
        self.decorating = None
        self.scope.append((node.name, kind))
        outer, self.conditions = self.conditions, []
        outer_mod = self.mod
        if not isinstance(node, ast.ClassDef):
            self.mod = self.mod.with_locals(node)
        for stmt in node.body:
            self.visit(stmt)
        self.mod = outer_mod
        self.conditions = outer
        self.scope.pop()

    def _through(self, target: ast.expr, use: ast.AST) -> None:
        """The skip a decorator stands for: a module constant that holds one, or a function
        that returns one (applied to the test, ``skipIf(...)(fn)``, or not)."""
        try:
            const = self.r.constant(self.mod, target)
            if const is not None and isinstance(const[1], ast.Call):
                self._add(self._skip(const[1], _Use(use, self.mod), const[0]))
                return
            found = self.r.function(self.mod, target)
            if found is None:
                return
            where, func = found
            inside = where.with_locals(func)
            for stmt in func.body:
                value = stmt.value if isinstance(stmt, ast.Return) else None
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Call):
                    value = value.func
                if isinstance(value, ast.Call):
                    self._add(self._skip(value, _Use(use, self.mod), inside))
        except (RecursionError, MemoryError):
            self._add(self._problem(getattr(use, "lineno", 1), "expression nested too deeply to read"))

    def _add(self, skip: DeviceSkip | None) -> None:
        if skip is not None:
            self.found.append(skip)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._scoped(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._scoped(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._scoped(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        self.marking = "pytestmark" in names and all(kind == "class" for _, kind in self.scope)
        self.generic_visit(node)
        self.marking = False

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        cond = self.r.devices(self.mod, node.test)
        self.conditions.append((cond, False))
        for stmt in node.body:
            self.visit(stmt)
        self.conditions[-1] = (cond, True)
        for stmt in node.orelse:
            self.visit(stmt)
        self.conditions.pop()

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        # a skip in an except clause depends on what failed, never on the device
        self.conditions.append((None, False))
        self.generic_visit(node)
        self.conditions.pop()

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        try:
            skip = self._skip(node, _Use(node, self.mod), self.mod)
        except (RecursionError, MemoryError):
            skip = self._problem(node.lineno, "expression nested too deeply to read")
        self._add(skip)

    def _chain(self) -> list[tuple[str, str]]:
        return self.decorating if self.decorating is not None else self.scope

    def _test(self, decorator_form: bool) -> str | None:
        """The test a skip here belongs to, as pytest names it; None where it is no test's.

        A decorator applies to what it decorates; a call to the test it runs in (nested
        functions included), or to a class from its setUp, or to the module at its top
        level. A skip in a helper function, or a decorator form anywhere else (an alias
        assigned at the top level), is no test's: it is listed where it is used.
        """
        chain = self._chain()
        if not chain:
            return self.rel if (self.marking or not decorator_form) else None
        parts: list[str] = []
        for name, kind in chain:
            if kind == "class":
                parts.append(name)
                continue
            if name.startswith("test"):
                parts.append(name)
                break
            if (parts and name in _CLASS_SETUP) or (not parts and name in _MODULE_SETUP):
                break
            return None
        else:
            if self.decorating is None and decorator_form and not self.marking:
                return None  # a class attribute that holds a skip decorator: used elsewhere
        return "::".join([self.rel, *parts])

    def _problem(self, line: int, problem: str) -> DeviceSkip:
        return DeviceSkip(
            mode="skip",
            devices=(),
            issue=None,
            reason="",
            source="pytest",
            file=self.rel,
            line=line,
            test="::".join([self.rel, *(name for name, _ in self._chain())]) if self._chain() else None,
            form="unreadable",
            problem=problem,
        )

    @staticmethod
    def _comments(node: ast.AST, mod: _Module, *, above: bool) -> list[str]:
        """The comments on ``node``'s lines, and on the line above when it is one."""
        first = getattr(node, "lineno", 1)
        last = getattr(node, "end_lineno", None) or first
        lines = mod.lines[first - 1 : last]
        if above and first >= 2 and mod.lines[first - 2].lstrip().startswith("#"):
            lines = [mod.lines[first - 2], *lines]
        return [line.partition("#")[2] for line in lines if "#" in line]

    def _skip(self, node: ast.Call, use: _Use, mod: _Module) -> DeviceSkip | None:
        """The skip ``node`` declares, read in ``mod``, for the test where ``use`` is."""
        marker = _is_device_marker(mod, node)
        if marker == BY_DESIGN_MARK:
            return self._only_on(node, use, mod)
        if marker is not None:
            return self._marker(node, "skip" if marker == "skip_device" else "xfail", use, mod)
        form = _form_of(mod, node)
        if form is None:
            return None
        if form.name in _INSIDE_TESTS and self.decorating is not None:
            return None  # pytest.skip(...) in a decorator's arguments: not a skip of this test
        test = self._test(decorator_form=form.name not in _INSIDE_TESTS)
        if test is None:
            return None
        message_node = next((k.value for k in node.keywords if k.arg in form.keywords), None)
        if message_node is None and len(node.args) > form.message:
            message_node = node.args[form.message]
        message, constant = self.r.text(mod, message_node)
        devices = self._devices(node, form, mod)
        comments = self._comments(use.node, use.mod, above=True)
        if node is not use.node:
            comments += self._comments(node, mod, above=False)  # where the alias is defined
        # an issue cited in the comment beside the skip is cited too: filing another would
        # be its duplicate
        issue = find_issue_in_text(message) or find_issue_in_text(" ".join(comments))
        said = any(BY_DESIGN_COMMENT in c for c in comments)
        by_design = said or bool(constant and constant.startswith(BY_DESIGN_CONSTANT_PREFIX))
        if devices is None and issue is None and not by_design:
            return None  # a skip for some other reason (a missing package, a setting)
        if not by_design and issue is None and form.mode == "skip":
            by_design = _applies_only(devices, " ".join([message or "", *comments]))
        return DeviceSkip(
            mode=form.mode,
            devices=EVERYWHERE if devices is None else devices,
            issue=issue,
            reason=message or "",
            source=form.source,
            test=test,
            file=self.rel,
            line=getattr(use.node, "lineno", node.lineno),
            form=form.name,
            by_design=by_design,
        )

    def _devices(self, node: ast.Call, form: _Form, mod: _Module) -> tuple[str, ...] | None:
        if form.condition is not None:
            cond_node = next((k.value for k in node.keywords if k.arg == "condition"), None)
            if cond_node is None and len(node.args) > form.condition:
                cond_node = node.args[form.condition]
            if cond_node is None:  # pytest.mark.xfail(reason=...): unconditional
                return EVERYWHERE
            where = self.r.devices(mod, cond_node)
            if where is None:
                return None
            return _as_devices(KNOWN_DEVICES - where if form.negate else where)
        if form.name not in _INSIDE_TESTS:
            return EVERYWHERE
        where_all: frozenset[str] = KNOWN_DEVICES
        understood = True
        for cond, negated in self.conditions:
            if cond is None:
                understood = False
                continue
            where_all &= KNOWN_DEVICES - cond if negated else cond
        if not understood and where_all == KNOWN_DEVICES:
            return None
        return _as_devices(where_all)

    def _marker(self, node: ast.Call, mode: SkipMode, use: _Use, mod: _Module) -> DeviceSkip | None:
        test = self._test(decorator_form=True)
        if test is None:
            return None
        args: list[Any] = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                const = self.r.constant(mod, a.value)
                value = _literal(const[1]) if const else None
                args.extend(value if isinstance(value, list | tuple) else [None])
            else:
                args.append(self._value(a, mod))
        kwargs = {k.arg: self._value(k.value, mod) for k in node.keywords if k.arg}
        line = getattr(use.node, "lineno", node.lineno)
        where = f"{self.rel}:{line}"
        problem = None
        try:
            skip = from_marker(mode, [a for a in args if a is not None], kwargs, where=where)
        except ConfigError as exc:
            problem = f"invalid marker: {exc.message}"
            skip = DeviceSkip(
                mode=mode,
                devices=tuple(str(a) for a in args if isinstance(a, str)),
                issue=None,
                reason=problem,
                source="marker",
            )
        return replace(skip, file=self.rel, line=line, test=test, form=f"{mode}_device", problem=problem)

    def _only_on(self, node: ast.Call, use: _Use, mod: _Module) -> DeviceSkip | None:
        test = self._test(decorator_form=True)
        if test is None:
            return None
        wanted = self.r.names(mod, ast.Tuple(elts=list(node.args), ctx=ast.Load()))
        reason, _ = self.r.text(mod, next((k.value for k in node.keywords if k.arg == "reason"), None))
        problem = None if wanted else "only_on() needs device names as literals or module constants"
        return DeviceSkip(
            mode="skip",
            devices=_as_devices(KNOWN_DEVICES - (wanted or frozenset())) if wanted else (),
            issue=None,
            reason=reason or "",
            source="marker",
            file=self.rel,
            line=getattr(use.node, "lineno", node.lineno),
            test=test,
            form=BY_DESIGN_MARK,
            by_design=True,
            problem=problem,
        )

    def _value(self, node: ast.expr, mod: _Module) -> Any:
        const = self.r.constant(mod, node)
        return _literal(const[1] if const else node)


def _applies_only(devices: tuple[str, ...] | None, said: str) -> bool:
    """Whether an uncited skip says where its test applies rather than that it is broken:
    a device condition, no word of breakage, and either a word that says so ("only",
    "requires", "not supported") or a test left to run on fewer devices than it skips on
    (``!= "TPU"``: a TPU test). A skip everywhere is a disabled test, never by design."""
    if devices is None or devices == EVERYWHERE or BROKEN_RE.search(said):
        return False
    if APPLIES_RE.search(said):
        return True
    return 0 < len(KNOWN_DEVICES - set(devices)) < len(devices)


def _constant_comparison(left: ast.expr, op: ast.cmpop, right: ast.expr) -> bool | None:
    """``1 == 1``: the value of a comparison of two literals (None for anything else)."""
    if not (isinstance(left, ast.Constant) and isinstance(right, ast.Constant)):
        return None
    compare: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
        ast.Eq: operator.eq,
        ast.NotEq: operator.ne,
        ast.Lt: operator.lt,
        ast.LtE: operator.le,
        ast.Gt: operator.gt,
        ast.GtE: operator.ge,
    }
    how = compare.get(type(op))
    try:
        return None if how is None else bool(how(left.value, right.value))
    except TypeError:
        return None


def _as_devices(where: frozenset[str]) -> tuple[str, ...]:
    return EVERYWHERE if where >= KNOWN_DEVICES else tuple(sorted(where))


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


# --- files and trees -----------------------------------------------------------------


def scan_source(source: str, rel: str, path: Path | None = None, resolver: _Resolver | None = None) -> list[DeviceSkip]:
    """Every device skip/xfail declared in one module's source."""
    unreadable = DeviceSkip(
        mode="skip", devices=(), issue=None, reason="", source="pytest", file=rel, form="unreadable"
    )
    try:
        mod = _Module.parse(source, path)
    except SyntaxError as exc:
        return [replace(unreadable, line=exc.lineno, problem=f"cannot scan: {exc.msg}")]
    except (RecursionError, MemoryError):
        return [replace(unreadable, problem="cannot scan: an expression is nested too deeply for Python's parser")]
    scanner = _Scanner(mod, rel, resolver or _Resolver())
    for stmt in mod.tree.body:
        # one statement at a time: a monster expression costs its own statement only
        try:
            scanner.visit(stmt)
        except (RecursionError, MemoryError):
            scanner.scope.clear()
            scanner.conditions.clear()
            scanner.decorating = None
            scanner.found.append(
                replace(
                    unreadable,
                    line=min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])]),
                    problem="cannot scan this statement: an expression is nested too deeply to read",
                )
            )
    return scanner.found


def scan_file(path: Path, rel: str, resolver: _Resolver | None = None) -> list[DeviceSkip]:
    try:
        source = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return [
            DeviceSkip(
                mode="skip",
                devices=(),
                issue=None,
                reason="",
                source="pytest",
                file=rel,
                form="unreadable",
                problem=f"cannot read: {exc}",
            )
        ]
    return scan_source(source, rel, path, resolver)


def _python_files(base: Path) -> Iterator[Path]:
    if base.is_file():
        yield base
        return
    for f in sorted(base.rglob("*.py")):
        if not _SKIPPED_DIRS & set(f.relative_to(base).parts):
            yield f


def scan_tree(root: Path, paths: Iterable[Path]) -> list[DeviceSkip]:
    found: list[DeviceSkip] = []
    resolver = _Resolver()
    for base in paths:
        for f in _python_files(base):
            try:
                rel = str(f.resolve().relative_to(root.resolve()))
            except ValueError:
                rel = str(f)
            found.extend(scan_file(f, rel, resolver))
    return found


# What a tracker's lookup of a cited issue may answer (issues.base.CitedState) that leaves the
# skip untracked: gone or never there, or the tracker cannot say it exists (#41)
UNTRACKED_STATES = frozenset({"missing", "deleted", "unknown"})


def attention(issue: str | None, state: str | None, *, by_design: bool) -> str | None:
    """Why a device skip needs attention, None when it needs none: the one rule that triage
    and ``skips check`` share (#32, #41). It cites no issue and is not by design; or the issue
    it cites is closed (it can be re-enabled), missing, deleted, or one the tracker cannot
    look up. ``state``: what the tracker said of ``issue``, None when nobody asked."""
    if not issue:
        return None if by_design else "cites no issue"
    if state == "closed":
        return f"{issue} is closed: can be re-enabled"
    if state == "unknown":
        return f"{issue} is not an issue the tracker can look up: cite one it tracks"
    if state in UNTRACKED_STATES:
        return f"{issue} is {state}: cite an issue that exists"
    return None


def check(
    declared: Iterable[DeviceSkip],
    today: dt.date | None = None,
    ledger: tuple[Collection[int], str] | None = None,
) -> list[ScanFinding]:
    """What is wrong with each declaration: unusable, cites no issue, cites a ledger issue
    that does not exist, or expired. ``ledger``: the ids that exist and where they were
    read from; None checks no ledger reference."""
    out = []
    for skip in declared:
        problem = skip.problem
        cited = LEDGER_REF_RE.match(skip.issue or "")
        missing = ledger is not None and cited is not None and int(cited.group(1)) not in ledger[0]
        if problem is None and (why := attention(skip.issue, "missing" if missing else None, by_design=skip.by_design)):
            problem = f"cites {skip.issue}, {NOT_IN_LEDGER}: {ledger[1]}" if missing and ledger else why
        if problem is None and skip.expired(today):
            problem = f"expired on {skip.expires}"
        out.append(ScanFinding(skip, problem))
    return out


def uncited(root: Path, paths: Iterable[Path]) -> list[DeviceSkip]:
    """Device skips in the sources that cite no issue and are not by design.

    Such a skip never names its devices at run time (``skipIf(xr.device_type() != "TPU",
    ...)`` reads as an ordinary skip there): the sync files an issue for each, and triage
    shows them, from here.
    """
    return [f.skip for f in check(scan_tree(root, paths)) if f.problem == "cites no issue"]
