"""Which tests read the names a change to what runs at import binds (#34): pure, on sources.

A change to a module's import (a constant, a default, a class attribute, a new function)
reaches a test only through a name: ``RATE = 3`` becomes ``RATE = 4``, and whatever reads
``RATE`` (or a name bound from it) sees the change. The test map holds the lines each test
ran, so a test that ran no function that reads such a name, and whose module reads none at
import, cannot see it; :func:`readers` finds the tests that can, or says it cannot tell.

Use::

    found = readers("pkg/core.py", old, new, sources, test_map, is_test=is_test_file)
    found  # None (cannot tell: every importer runs), or {nodeid: why it runs}

A name is read by a mention (``RATE``, ``core.RATE``, ``"RATE"`` in a string, a parameter
named so: a fixture requested), and what is bound from a read is read in turn, to a fixed
point: a module-level binding that mentions a read name (``LIMIT = RATE * 2``, ``from
pkg.core import RATE as R``, a default, a decorator, a class body); a function whose body
mentions one (its callers read what it returns, which a cache or a wide fixture may hand
to tests that never ran its lines). A function that reads names by a computed one
(``getattr(x, name)``, ``globals()``, ``vars()``, ``__dict__``, ``eval``) reads every name.

It cannot tell, and says so (None), when the change is more than bindings (a call at module
level, an ``if``, an import of a module outside the project), when a module-level
statement that reads a name does more than bind it, or when a function that reads one ran
at import. A test module or ``conftest.py`` that reads a name at module level has all its
tests read it (a conftest's: the tests under its folder), and so does an ``autouse`` fixture
that reads one. A class made with a metaclass, or a change to a class of a project that
defines ``__init_subclass__`` (which may register a subclass where no name reads it), cannot
be told.
"""

from __future__ import annotations

import ast
import builtins
import codecs
import functools
import re
import sys
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from device_matrix.changes.importgraph import guards, main_guard, outermost
from device_matrix.records.testmap import TestMap

CONFTEST = "conftest.py"
# calls a module may make at import that bind a value and do nothing else
PURE_CALLS = frozenset(
    {
        "bool",
        "bytes",
        "dict",
        "field",
        "float",
        "frozenset",
        "int",
        "list",
        "namedtuple",
        "NamedTuple",
        "NewType",
        "object",
        "range",
        "set",
        "str",
        "tuple",
        "TypeVar",
        "compile",  # re.compile
        "cast",  # typing.cast: its value, unchanged
        "staticmethod",  # #40: a descriptor of what it is given, nothing called
        "classmethod",
        "property",
        "timedelta",
        "Path",
        "PurePosixPath",
        # #40: the standard library's values (a test module's `NOW = datetime(...)`)
        "datetime",
        "date",
        "Decimal",
        "Fraction",
        "OrderedDict",
        "defaultdict",
        "deque",
        "Counter",
        "partial",
        # #40: the standard library's values a module makes at import and no code of its
        # own runs for: a thread's storage, its locks, a context variable, gettext's
        # translations of none (humanize's ``i18n``: ``local()``, ``NullTranslations()``)
        "local",
        "Lock",
        "RLock",
        "ContextVar",
        "NullTranslations",
    }
)
# calls known by their module alone, whose last name a project's own function may have too
PURE_DOTTED = frozenset({"itertools.count", "itertools.cycle", "itertools.repeat"})
# decorators that only wrap or mark what they decorate (a fixture's name is read by the tests
# that request it)
PURE_DECORATORS = frozenset(
    {
        "abstractmethod",
        "cache",
        "cached_property",
        "classmethod",
        "dataclass",
        "fixture",
        "final",
        "lru_cache",
        "overload",
        "property",
        "setter",
        "staticmethod",
        "total_ordering",
        "wraps",
    }
)
# what reads names by a computed one: a function that mentions it reads every name
DYNAMIC = frozenset(
    {
        "globals",
        "vars",
        "dir",
        "__dict__",
        "eval",
        "exec",
        "__getattribute__",
        "locals",
        "attrgetter",
        "methodcaller",
        "getmembers",
        "getattr_static",
        # #40: help(module) and pydoc print what a module binds (its constants, __version__)
        "help",
        "pydoc",
        "render_doc",
    }
)
# #40: calls through a module from outside the project that only read what they are given
# or the process's state (any other such call at import may write the process's state)
READ_CALLS = frozenset(
    {
        "get",
        "getenv",
        "getLogger",
        "join",
        "dirname",
        "basename",
        "abspath",
        "realpath",
        "expanduser",
        "exists",
        "isfile",
        "isdir",
        "resolve",
        "with_name",
        "with_suffix",
        "joinpath",
        "getpid",
        "cpu_count",
        "import_module",
        "partial",
        "version",
        "find_spec",
    }
)
TYPING = frozenset({"typing", "typing_extensions"})
ATTR_CALLS = frozenset({"getattr", "hasattr", "setattr", "delattr"})  # dynamic when the name is computed
# the words of a file that make its code read names whatever names are followed: by a computed
# one, or the installed metadata (:func:`_metadata_names`)
ALWAYS_READ = DYNAMIC | ATTR_CALLS | {"metadata", "importlib_metadata", "pkg_resources"}
# an escape in a string (``\\n``, ``\\x41``, a backslash at a line's end), and where two
# literals meet (``"RA" "TE"`` is ``"RATE"``): what may hide a string's word from its file's text
ESCAPE_RE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|N\{[^}]*\}|[0-7]{1,3}|.)", re.DOTALL)
# (a comment runs to its line's end: each way through the gap is the only one, never a search)
LITERALS_MEET_RE = re.compile(r"""['"]{1,3}(?:\s|\\\n|#[^\n]*(?![^\n]))*[rRbBfFuU]{0,2}['"]{1,3}""")
Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class _Unit:
    """One thing a module binds at import: a top-level statement, or a class's member."""

    key: tuple[str, ...]
    node: ast.stmt
    within: tuple[str, ...]  # the classes it is in, outermost first


def _parsed(source: str) -> ast.Module | None:
    """``source`` parsed as it runs, each ``if TYPE_CHECKING:`` block left out (None: not Python)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    flags = _type_checking(tree)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and any(_checker_only(s, flags) for s in stmts):
                setattr(
                    node, field, [ast.copy_location(ast.Pass(), s) if _checker_only(s, flags) else s for s in stmts]
                )
    return tree


def _type_checking(tree: ast.Module) -> frozenset[str]:
    """How the module names ``typing.TYPE_CHECKING``: ``TYPE_CHECKING`` imported from
    typing (or typing_extensions), ``t.TYPE_CHECKING`` of ``import typing as t``; or its own
    ``TYPE_CHECKING = False`` (#40: a module that spares itself typing's import), where
    nothing else binds that name."""
    found: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module in TYPING and not stmt.level:
            found.update(a.asname or a.name for a in stmt.names if a.name == "TYPE_CHECKING")
        elif isinstance(stmt, ast.Import):
            found.update(f"{a.asname or a.name}.TYPE_CHECKING" for a in stmt.names if a.name in TYPING)
    own = [s for s in tree.body if isinstance(s, ast.Assign) and [_dotted_name(t) for t in s.targets] == [FLAG]]
    if len(own) == 1 and _is_false(own[0].value) and _bound_once(tree, FLAG):
        found.add(FLAG)
    return frozenset(found)


FLAG = "TYPE_CHECKING"


def _is_false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _bound_once(tree: ast.Module, name: str) -> bool:
    """Whether ``name`` is bound once in the module, and nowhere declared ``global``."""
    stores = 0
    for node in ast.walk(tree):
        named = node.id if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) else None
        if isinstance(node, ast.alias):
            named = node.asname or node.name
        if named == name:
            stores += 1
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return False
    return stores == 1


def _checker_only(stmt: ast.stmt, flags: Collection[str]) -> bool:
    """#40: ``if TYPE_CHECKING:`` without an ``else``: typing.TYPE_CHECKING is False when the
    code runs, so the block never does (a type checker alone reads it)."""
    return isinstance(stmt, ast.If) and not stmt.orelse and _dotted_name(stmt.test) in flags


def _name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""


def _pure_expr(node: ast.expr | None, reads: Collection[str] = (), foreign: Collection[str] = ()) -> bool:
    """An expression that computes a value and does nothing else (no call but :data:`PURE_CALLS`,
    and one through a name of ``reads``: the installed metadata's readers, :func:`_metadata_names`;
    none through a name of ``foreign``, :func:`_foreign`)."""
    if node is None:
        return True
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and not _pure_call(sub, reads, foreign):
            return False
        if isinstance(sub, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
    return True


# #40: builtin types no method of which changes a value: one called through the type
# (``str.maketrans(...)``, ``int.from_bytes(...)``, ``bytes.fromhex(...)``) computes a value
IMMUTABLE_TYPES = frozenset({"bool", "bytes", "complex", "float", "frozenset", "int", "range", "str", "tuple"})


def _pure_call(call: ast.Call, reads: Collection[str], foreign: Collection[str] = ()) -> bool:
    """A call that computes a value: of :data:`PURE_CALLS`, through an immutable builtin type
    (:data:`IMMUTABLE_TYPES`), or a read of the installed metadata (:func:`_through`); never
    one through a name the module binds to its own code or a package's (``foreign``: a
    project's ``Lock(name)`` that registers itself is no ``threading.Lock``, #40)."""
    if _through(call, reads):
        return True
    if _root(call.func) in foreign or ANY in foreign:
        return False
    func = call.func
    of_type = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in IMMUTABLE_TYPES
    return _name(call) in PURE_CALLS or _dotted_name(func) in PURE_DOTTED or of_type


def _through(call: ast.Call, names: Collection[str]) -> bool:
    """Whether ``call`` reads the installed metadata (:data:`METADATA_READS`) through one of
    ``names`` (``version(...)``, ``importlib.metadata.version(...)``, ``md.metadata(...)``)."""
    return _name(call) in METADATA_READS and any(
        (isinstance(n, ast.Name) and n.id in names) or (isinstance(n, ast.Attribute) and n.attr in names)
        for n in ast.walk(call.func)
    )


def _header(fn: Function | ast.ClassDef) -> list[ast.expr]:
    """What a def or class statement runs at import: decorators, defaults, annotations, bases."""
    found: list[ast.expr] = list(fn.decorator_list)
    if isinstance(fn, ast.ClassDef):
        return [*found, *fn.bases, *(k.value for k in fn.keywords)]
    a = fn.args
    found += [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
    found += [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.annotation is not None]
    found += [x.annotation for x in (a.vararg, a.kwarg) if x is not None and x.annotation is not None]
    return [*found, *([fn.returns] if fn.returns is not None else [])]


def _pure_decorator(d: ast.expr, foreign: Collection[str] = ()) -> bool:
    if _name(d) not in PURE_DECORATORS or _root(d) in foreign or ANY in foreign:
        return False
    args = (*d.args, *(k.value for k in d.keywords)) if isinstance(d, ast.Call) else ()
    return all(_pure_expr(a, foreign=foreign) for a in args)


# a module-level name bound by whatever the module's code or a package's may be (:func:`_foreign`)
ANY = "*"
# the modules whose values :data:`PURE_CALLS` and :data:`PURE_DECORATORS` name
KNOWN_MODULES = frozenset(sys.stdlib_module_names) | {"pytest", "_pytest", "typing_extensions"}


def _foreign(tree: ast.Module | None, internal: Callable[[str], bool]) -> frozenset[str]:
    """#40: the names the module binds (a def, a class, an assignment, an import of a module
    that is neither the standard library's nor pytest's, a ``global``), each of which may
    be the project's own code or an installed package's: a call or a decorator by one is
    never a value by its name alone. A module ``internal`` says is the project's is never
    the standard library's (a project package named ``profile``). :data:`ANY` where a star
    import of such a module may bind any name."""
    if tree is None:
        return frozenset({ANY})
    found: set[str] = set()
    for node in _module_scope(tree):
        if isinstance(node, ast.Import):
            found.update((a.asname or a.name).split(".")[0] for a in node.names if _unknown(a.name, internal))
        elif isinstance(node, ast.ImportFrom):
            if node.level or _unknown(node.module or "", internal):
                found.update(a.asname or a.name for a in node.names)  # a star's name is ANY
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            found.add(node.id)
    found.update(n for node in ast.walk(tree) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names)
    return frozenset(found)


def _module_scope(tree: ast.Module) -> Iterator[ast.AST]:
    """Every node of the module's own scope: a def or a class itself, none of what it holds."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _unknown(module: str, internal: Callable[[str], bool]) -> bool:
    return module.split(".", 1)[0] not in KNOWN_MODULES or internal(module)


def _binds(stmt: ast.stmt, reads: Collection[str] = (), foreign: Collection[str] = ()) -> frozenset[str] | None:
    """The names ``stmt`` binds at module level when binding is all it does (``reads``: the
    names of readers of the installed metadata it may call, :func:`_metadata_names`;
    ``foreign``: its module's names no call is a value by, :func:`_foreign`); None otherwise."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return frozenset((a.asname or a.name).split(".", 1)[0] for a in stmt.names if a.name != "*")
    if isinstance(stmt, ast.Expr):
        return frozenset() if isinstance(stmt.value, ast.Constant) else None
    if isinstance(stmt, ast.Pass):
        return frozenset()
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names: set[str] = set()
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, (ast.Attribute, ast.Subscript, ast.Starred)):
                    return None  # it changes another object, not a name of its own
                if isinstance(sub, ast.Name):
                    names.add(sub.id)
        return frozenset(names) if _pure_expr(stmt.value, reads, foreign) else None
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        rest = _header(stmt)[len(stmt.decorator_list) :]
        pure = all(_pure_decorator(d, foreign) for d in stmt.decorator_list)
        if isinstance(stmt, ast.ClassDef) and stmt.keywords:
            return None  # a metaclass runs what it likes when the class is made
        return frozenset({stmt.name}) if pure and all(_pure_expr(e, foreign=foreign) for e in rest) else None
    return None


# #40: the names of a module Python, or a test runner, reads by itself (the import system, a
# star import, ``dir()``, doctest, pytest's collection and tracebacks, the warnings registry);
# any other module-level dunder (``__version__``, ``__author__``) is read by its name alone
MODULE_DUNDERS = frozenset(
    {"__all__", "__annotate__", "__annotations__", "__builtins__", "__cached__", "__class__", "__dict__", "__dir__"}
    | {"__doc__", "__file__", "__getattr__", "__loader__", "__name__", "__package__", "__path__", "__spec__"}
    | {"__test__", "__tracebackhide__", "__warningregistry__"}
)


def _special(bound: Iterable[str], *, member: bool) -> bool:
    """Whether a name of ``bound`` is one Python reads by itself: any dunder of a class (a
    special method, ``__slots__``, ``__hash__``), and a module's of :data:`MODULE_DUNDERS`."""
    dunders = [n for n in bound if n.startswith("__") and n.endswith("__")]
    return bool(dunders) and (member or not MODULE_DUNDERS.isdisjoint(dunders))


def _autouse(fn: Function) -> bool:
    """A fixture every test under its file uses without naming it."""
    return any(
        isinstance(d, ast.Call) and _name(d) == "fixture" and any(k.arg == "autouse" for k in d.keywords)
        for d in fn.decorator_list
    )


def _imported(stmt: ast.Import | ast.ImportFrom, names: set[str]) -> frozenset[str]:
    """The names an import binds to what ``names`` holds: each alias alone (``from m import
    a, b`` binds ``b`` to ``m.b`` whatever ``a`` is)."""
    bound = set()
    for a in stmt.names:
        if not names.isdisjoint(a.name.split(".")):
            bound.add((a.asname or a.name).split(".", 1)[0])
    return frozenset(bound)


@dataclass(frozen=True)
class _Said:
    """What code mentions: ``bound`` names that are the module's own or an import's (a name,
    ``mod.NAME`` of a module it imports), which a name of a file it may not import cannot be;
    ``loose`` ones any object may hold (``obj.NAME`` of a parameter, a string's words, a
    parameter's name: a fixture requested)."""

    bound: frozenset[str]
    loose: frozenset[str]
    # #40: those of ``bound`` read as ``mod.NAME`` of a module it imports (not by the bare name)
    through: frozenset[str] = frozenset()
    # #40: those of ``loose`` its docstrings alone give (their doctest examples, their
    # template fields): read where a doctest runs them or a template is filled, never by the
    # code itself as it runs (a call made, what it made at import)
    doc: frozenset[str] = frozenset()

    @property
    def code(self) -> _Said:
        """What the code mentions, its docstrings aside."""
        return _Said(self.bound, self.loose - self.doc, self.through) if self.doc else self

    def reads(self, seen: Collection[str], every: Collection[str]) -> bool:
        return not self.bound.isdisjoint(seen) or not self.loose.isdisjoint(every)


WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _mentions(nodes: Iterable[ast.AST], aliases: Collection[str]) -> _Said:
    """What ``nodes`` mention (:class:`_Said`); ``aliases``: the names the module's imports bind."""
    return _said([sub for node in nodes for sub in ast.walk(node)], aliases)


def _text_words(text: str) -> frozenset[str] | None:
    """Every word a file's code may mention (:func:`_said`): the words of its text, read
    with its escapes as escapes and as text, and with literals that meet joined and not
    (a raw string keeps its backslashes); None: any (a file not in ASCII, whose names Python
    normalizes)."""
    if not text.isascii():
        return None
    variants = [text]
    if "\\" in text:
        variants.append(ESCAPE_RE.sub(_unescaped, text))
    words: set[str] = set()
    for variant in variants:
        words.update(WORD_RE.findall(variant), WORD_RE.findall(LITERALS_MEET_RE.sub("", variant)))
    return frozenset(words | ({"*"} if "*" in text else set()))  # ``from m import *`` names ``*``


def _unescaped(escape: re.Match[str]) -> str:
    """An escape as a string holds it: the letter, digit or ``_`` it stands for, nothing for
    a backslash at a line's end, else a space (no part of a word)."""
    kind = escape[0][1]
    if kind == "\n":
        return ""
    if kind not in "xuUN01234567":
        return " "  # \\n, \\t, a quote, a backslash; an unknown one keeps its letter (the text has it)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an octal escape out of range
            char = codecs.decode(escape[0], "unicode_escape")
    except UnicodeDecodeError:
        return " "
    return char if WORD_RE.fullmatch(char) else " "


def _said(walked: Iterable[ast.AST], aliases: Collection[str]) -> _Said:
    """:func:`_mentions` of every node ``walked`` (each once)."""
    bound: set[str] = set()
    loose: set[str] = set()
    through: set[str] = set()
    doc: set[str] = set()
    walked = list(walked)
    # #40: a name only bound (``LABEL = 'w'``) reads nothing of it; ``LABEL += 'w'`` does
    read_too = {id(sub.target) for sub in walked if isinstance(sub, ast.AugAssign)}
    # #40: a string standing as a statement (a docstring) is read only as doctest's examples
    # and as a template's fields: its prose names nothing (toolz: "if func has **kwargs")
    docs = {id(sub.value) for sub in walked if isinstance(sub, ast.Expr) and isinstance(sub.value, ast.Constant)}
    for sub in walked:
        if isinstance(sub, ast.Name):
            if isinstance(sub.ctx, ast.Load) or id(sub) in read_too:
                bound.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            own = isinstance(sub.value, ast.Name) and sub.value.id in aliases
            (bound if own else loose).add(sub.attr)
            if own:
                through.add(sub.attr)
        elif isinstance(sub, ast.arg):
            loose.add(sub.arg)
        elif isinstance(sub, ast.alias):
            bound.update((sub.asname or sub.name).split("."), sub.name.split("."))
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and id(sub) in docs:
            doc.update(_doc_words(sub.value))
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            loose.update(WORD_RE.findall(sub.value))  # "{0.RATE}", "c.RATE" in a program's text
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(sub.name)
    return _Said(frozenset(bound), frozenset(loose | doc), frozenset(through), frozenset(doc - loose))


# a doctest example's lines, and a template's fields (``{0.RATE}``, ``%(RATE)s``, ``$RATE``)
EXAMPLE_RE = re.compile(r"^[ \t]*(?:>>>|\.\.\.)(.*)$", re.MULTILINE)
FIELD_RE = re.compile(r"\{[^{}]*\}|%\([^()]*\)|\$\{?[A-Za-z_][A-Za-z0-9_]*")


def _doc_words(text: str) -> list[str]:
    """The words of a docstring code may read by: its doctest examples (run by pytest's
    ``--doctest-modules``, ``doctest.testmod``) and its template fields (a docstring
    formatted as one); none of its prose (#40)."""
    found = [w for line in EXAMPLE_RE.findall(text) for w in WORD_RE.findall(line)]
    return found + [w for field in FIELD_RE.findall(text) for w in WORD_RE.findall(field)]


# #40: functions of the standard library that change the object handed as their first
# argument (``bisect.insort(_TIERS, v)`` keeps ``v`` in ``_TIERS``, as ``_TIERS.append(v)``)
MUTATING_CALLS = frozenset(
    {"insort", "insort_left", "insort_right", "heappush", "heappushpop", "heapreplace", "heapify"}
    | {"setitem", "delitem", "iadd", "iconcat", "ior", "iand", "ixor", "isub", "imul"}
    | {"setattr", "delattr", "shuffle", "update_wrapper", "next", "islice"}
)
# #40: types whose methods, called through the type (``list.append(_L, v)``), change the object
# handed first
MUTABLE_TYPES = frozenset({"list", "dict", "set", "bytearray", "deque", "OrderedDict", "defaultdict", "Counter"})


def _changed_first(call: ast.Call) -> ast.expr | None:
    """The argument ``call`` may change, handed first: to a function of :data:`MUTATING_CALLS`
    (``bisect.insort(_T, v)``, ``next(_IT)``) or to a method called through its type."""
    if not call.args:
        return None
    func = call.func
    typed = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in MUTABLE_TYPES
    # a special method through its type keeps on the name it is given (:func:`_handed_to`)
    method = func.attr if isinstance(func, ast.Attribute) else ""
    if typed and method not in READ_METHODS and not method.startswith("__"):
        return call.args[0]
    return call.args[0] if _name(call) in MUTATING_CALLS else None


def _writes(fn: Function) -> frozenset[str]:
    """The names whose object ``fn`` may change: ``global`` ones, and the bases of what it
    assigns into (``_STATE[k] = ...``, ``CACHE.x = ...``), calls a method of (``SEEN.add(x)``,
    ``REG.items.append(x)``) or hands first to a function that changes it
    (``bisect.insort(_TIERS, x)``: :data:`MUTATING_CALLS`)."""
    found: set[str] = set()
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Global):
            found.update(sub.names)
        elif isinstance(sub, (ast.Subscript, ast.Attribute)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            base, _ = _stored_into(sub)
            if isinstance(base, ast.Name):
                found.add(base.id)
        elif isinstance(sub, ast.Call) and (first := _changed_first(sub)) is not None:
            base = _stored_into(first)[0]
            if isinstance(base, ast.Name):
                found.add(base.id)
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            # ``SEEN.add(x)``, and what an object holds: ``REG.items.append(x)`` (#40)
            value = sub.func.value
            root = _stored_into(value)[0]
            if isinstance(root, ast.Name):
                found.add(root.id)
    return frozenset(found)


# calls that make a new container: a local bound only to one (or a display) is the call's own
FRESH_CALLS = frozenset({"Counter", "OrderedDict", "defaultdict", "deque", "dict", "frozenset", "list", "set", "tuple"})
FRESH_VALUES = (ast.Constant, ast.Dict, ast.DictComp, ast.GeneratorExp, ast.List, ast.ListComp, ast.Set, ast.SetComp)


def _fresh_locals(fn: Function) -> tuple[frozenset[str], dict[str, set[str]]]:
    """The locals of ``fn`` that only ever hold what ``fn`` made (every binding a display or
    a new container) and that no other scope in it names (:func:`_shared`), and for every
    other name it binds, the names its values were read from (``c = _CACHE``: ``c`` may be
    ``_CACHE``; a loop's or a ``with``'s name: what it walks)."""
    bound: dict[str, int] = {}
    fresh: dict[str, int] = {}
    roots: dict[str, set[str]] = {}
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            bound[sub.id] = bound.get(sub.id, 0) + 1
        value = sub.value if isinstance(sub, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) else None
        value = sub.iter if isinstance(sub, (ast.For, ast.AsyncFor, ast.comprehension)) else value
        targets = [sub.target] if isinstance(sub, (ast.AnnAssign, ast.NamedExpr, ast.For, ast.AsyncFor)) else []
        targets = sub.targets if isinstance(sub, ast.Assign) else targets
        targets = [sub.target] if isinstance(sub, ast.comprehension) else targets
        if isinstance(sub, (ast.With, ast.AsyncWith)):
            for item in sub.items:
                for n in ast.walk(item.optional_vars) if item.optional_vars is not None else ():
                    if isinstance(n, ast.Name):
                        roots.setdefault(n.id, set()).update(_roots(item.context_expr))
        if value is None:
            continue
        own = len(targets) == 1 and isinstance(targets[0], ast.Name) and _fresh(value)
        for target in targets:
            for n in ast.walk(target):
                if isinstance(n, ast.Name):
                    roots.setdefault(n.id, set()).update(_roots(value))
                    fresh[n.id] = fresh.get(n.id, 0) + own
    shared = _shared(fn)
    return frozenset(n for n, count in bound.items() if fresh.get(n, 0) == count and n not in shared), roots


# scopes a function may hold that outlive its call: what one of them names of another lives in
# a cell (a comprehension runs within the call, and is of the scope it is in)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _shared(fn: Function) -> frozenset[str]:
    """The names more than one scope of ``fn`` mentions (its own, and each def, lambda or
    class body in it, a default or a decorator with it): a local a nested function names lives
    in a cell that function holds, past the call that bound it (#40: ``store = {}`` of a
    function that returns a closure filling it)."""
    scopes: dict[str, set[int]] = {}
    todo: list[tuple[ast.AST, int]] = [(fn, id(fn))]
    while todo:
        node, scope = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Name):
                scopes.setdefault(child.id, set()).add(scope)
            todo.append((child, id(child) if isinstance(child, SCOPES) else scope))
    return frozenset(n for n, seen in scopes.items() if len(seen) > 1)


def _fresh(value: ast.expr) -> bool:
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
        return value.func.attr == "copy" and not value.args  # ``s = s.copy()``: its own copy
    if isinstance(value, ast.Call):
        return _name(value) in FRESH_CALLS and isinstance(value.func, ast.Name)
    return isinstance(value, FRESH_VALUES)


def _roots(value: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}


def _stores(fn: Function, own: Collection[str] = ()) -> tuple[frozenset[str] | None, frozenset[str]]:
    """Where ``fn`` may keep what it makes other than in its module's variables (#40): into
    an object it was given or reaches (``self._cache = ...``, a default's ``_memo[k] = ...``,
    another module's ``other.CACHE[k] = ...``, a local alias's ``c[k] = ...``), a ``nonlocal``,
    or handed with arguments to a method of such an object (``self.store(v)``; :func:`_handed_to`):
    the attribute names it stores on (read back by name), or None when it keeps nothing there;
    and the names the aliases it stores through were bound from (``c = _CACHE``). A local that
    only ever holds what ``fn`` made keeps nothing past the call, and so does ``own``, the
    parameters holding an object of the call's own; a def or a lambda in it is given its
    arguments as ``fn`` is (a default it holds outlives the call)."""
    fresh, roots = _fresh_locals(fn)
    given = {
        p
        for sub in ast.walk(fn)
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for p in _params(sub)
    }
    attrs: set[str] = set()
    through: set[str] = set()
    keeps = False
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Nonlocal):
            keeps = True
        elif isinstance(sub, (ast.Subscript, ast.Attribute)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            base, names = _stored_into(sub)
            attrs.update(names)
            # a test method's ``self.x = v``: on an instance of its test's own (#40)
            mine = isinstance(base, ast.Name) and base.id in own and isinstance(sub, ast.Attribute) and len(names) == 1
            if not (mine or (isinstance(base, ast.Name) and base.id in fresh)):
                keeps = True
                through.update(roots.get(base.id, ()) if isinstance(base, ast.Name) else ())
        elif isinstance(sub, ast.Call) and (sub.args or sub.keywords):
            objects, names = _handed_to(sub)
            attrs.update(names)
            for obj in objects:
                # ``self.items.append(v)``: kept in what ``self`` holds, on ``items``
                root, chain = _stored_into(obj)
                held = root.id if isinstance(root, ast.Name) else None
                if isinstance(root, ast.Call) and _name(root) == "super":
                    keeps = True  # a method of the instance's own (``super().__setitem__(k, v)``)
                elif held is not None and held in own and not chain:
                    continue  # a method of a test's own instance (``self.assertEqual(...)``)
                elif held is not None and held not in fresh and (held in roots or held in given):
                    # handed to a method of what it was given or an alias (a module's: writes): any
                    # method may keep what it is given, whatever its name (``registry.remember(v)``)
                    keeps = True
                    attrs.update(chain)
                    through.update(roots.get(held, ()))
    return (frozenset(attrs) if keeps else None), frozenset(through)


def _handed_to(call: ast.Call) -> tuple[list[ast.expr], list[str]]:
    """What ``call`` may keep its arguments in: the object of a method (``obj`` of ``obj.m(v)``,
    ``super()`` of ``super().m(v)``), and the first argument of a function that changes it
    (:data:`MUTATING_CALLS`), of ``setattr`` or of a special method called through a type
    (``object.__setattr__(obj, "n", v)``, ``dict.__setitem__(obj, k, v)``: #40), with the name
    it stores on there (``n``) when written out."""
    objects = [call.func.value] if isinstance(call.func, ast.Attribute) else []
    first = _changed_first(call) if _name(call) != "setattr" else None
    if first is not None:
        return [*objects, first], []  # ``heapq.heappush(heap, v)``, ``list.append(heap, v)``: kept in ``heap``
    if _name(call) != "setattr" and not (objects and _special([_name(call)], member=True)):
        return objects, []
    names = [a.value for a in call.args[1:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return [*objects, *call.args[:1]], names


def _stored_into(target: ast.expr) -> tuple[ast.expr, list[str]]:
    """What an assignment's ``target`` (``a.b[k].c``) stores into at its root (``a``), and the
    attribute names on the way (``c``, ``b``); through what names its object after all
    (#40: ``(n := a).b``, ``getattr(a, "b")``, ``vars(a)[k]``)."""
    base: ast.expr = target
    names: list[str] = []
    while True:
        if isinstance(base, ast.Attribute):
            names.append(base.attr)
            base = base.value
        elif isinstance(base, (ast.Subscript, ast.NamedExpr)):
            base = base.value
        elif isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id in ("getattr", "vars"):
            if not base.args:
                break
            names += [a.value for a in base.args[1:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            base = base.args[0]
        else:
            break
    return base, names


def _params(fn: Function | ast.Lambda) -> set[str]:
    a = fn.args
    return {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, [a.vararg, a.kwarg])]}


def _units(body: list[ast.stmt], within: tuple[str, ...] = ()) -> list[_Unit] | None:
    """A module's (or class's) units by key; None when two units share a key (a name bound twice)."""
    units: list[_Unit] = []
    stubs: dict[str, int] = {}
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and _overload(stmt):
            # #40: a typed overload binds its function's name for typing alone (get_overloads
            # reads it by that name), and the def after it binds the name: the stubs are apart
            stubs[stmt.name] = stubs.get(stmt.name, 0) + 1
            key = (*within, stmt.name, f"@overload {stubs[stmt.name]}")
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            key = (*within, stmt.name)
        elif not within and main_guard(stmt):
            stubs[GUARD] = stubs.get(GUARD, 0) + 1
            key = (GUARD, str(stubs[GUARD]))  # #40: a body, by its place among the module's guards
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            key = (*within, *sorted(ast.dump(t) for t in targets))  # a dump is never a name
        else:
            key = (*within, ast.dump(stmt))
        units.append(_Unit(key, stmt, within))
        if isinstance(stmt, ast.ClassDef):
            inner = _units(stmt.body, (*within, stmt.name))
            if inner is None:
                return None
            units += inner
    return units if len({u.key for u in units}) == len(units) else None


def _overload(fn: Function) -> bool:
    return any(_name(d) == "overload" and not isinstance(d, ast.Call) for d in fn.decorator_list)


def _skeleton(stmt: ast.stmt) -> str:
    """A unit as it runs at import: a function without its body, a class without its members."""
    if isinstance(stmt, ast.If) and main_guard(stmt):
        return GUARD  # #40: nothing of it runs at import
    if isinstance(stmt, ast.ClassDef):
        parts: list[object] = [stmt.decorator_list, stmt.bases, stmt.keywords]
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        # its docstring is made at import (f.__doc__, help, argparse's text), its body is not
        parts = [stmt.decorator_list, stmt.args, stmt.returns, ast.Constant(ast.get_docstring(stmt, clean=False))]
    else:
        return ast.dump(stmt)
    return repr([type(stmt).__name__, *(_dumped(p) for p in parts)])


def _dumped(part: object) -> object:
    if isinstance(part, list):
        return [ast.dump(x) for x in part]
    return ast.dump(part) if isinstance(part, ast.AST) else None


@dataclass(frozen=True)
class Change:
    """What a change to one module's import binds anew, and the function bodies it changed."""

    names: frozenset[str]
    bodies: tuple[tuple[int, int], ...]  # lines, in the old file, of the bodies that changed
    # the project's modules an import the change added or removed names (dotted, absolute):
    # their import runs their code, which must bind names and do nothing else
    modules: tuple[str, ...] = ()


def _body_span(fn: Function | ast.If) -> tuple[int, int]:
    return fn.body[0].lineno, fn.end_lineno or fn.lineno


def changed_names(old: str, new: str, internal: Callable[[str], bool], package: str = "") -> Change | None:
    """The names a change from ``old`` to ``new`` binds anew at import, and the bodies it
    changed; None when the change does more than bind names (a call, an ``if``, an import
    of a module ``internal`` does not call the project's), or no name can be told."""
    old_tree, new_tree = _parsed(old), _parsed(new)
    if old_tree is None or new_tree is None:
        return None
    before, after = _units(old_tree.body), _units(new_tree.body)
    if before is None or after is None:
        return None
    was, now = {u.key: u.node for u in before}, {u.key: u.node for u in after}
    foreign = _foreign(old_tree, internal) | _foreign(new_tree, internal)
    within = {u.key: u.within for u in (*before, *after)}
    if [u.key for u in before if u.key in now] != [u.key for u in after if u.key in was]:
        return None  # moved: an Enum's members, a dataclass's fields, what a binding sees are in order
    names: set[str] = set()
    bodies: list[tuple[int, int]] = []
    modules: list[str] = []
    for key in sorted(set(was) | set(now)):
        a, b = was.get(key), now.get(key)
        if a is not None and b is not None and ast.dump(a) == ast.dump(b):
            continue
        if a is not None and b is not None and _skeleton(a) == _skeleton(b):
            if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.If)):
                bodies.append(_body_span(a))  # its body alone: the tests that ran it see it
            continue  # a class whose members changed: each member is a unit of its own
        for stmt in (a, b):
            if stmt is None:
                continue
            if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
                return None  # how every annotation of the module is compiled: no name tells who reads one
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                if not _imports_within(stmt, internal):
                    return None
                modules += _dotted(stmt, package)
            bound = _binds(stmt, foreign=foreign)
            if bound is None or _special(bound, member=bool(within[key])):
                return None  # Python reads it by itself (__all__, __eq__...), no name of the code
            names |= bound | set(within[key])  # a class member: its classes are read where it is
            if not within[key] and _annotation_changed(a, b):
                names |= ANNOTATION_READERS  # #40: the module's __annotations__ changed
        outer = within[key]
        for cls in (was.get(outer[: i + 1]) or now.get(outer[: i + 1]) for i in range(len(outer))):
            if cls is None or _binds(cls, foreign=foreign) is None:
                return None  # a member of a class made by more than its statement (a metaclass)
    if not names and not bodies:
        return None
    if names and (_reads_by_computed_name(old_tree) or _reads_by_computed_name(new_tree)):
        return None  # #40: what its import made from every name (globals(), dir()) changed too
    return Change(frozenset(names), tuple(bodies), tuple(modules))


# #40: what reads a module's annotations without naming one of them
ANNOTATION_READERS = frozenset({"__annotations__", "get_type_hints", "get_annotations"})


def _annotation_changed(a: ast.AST | None, b: ast.AST | None) -> bool:
    """Whether two versions of a module-level statement annotate differently (one added, one
    removed, or another annotation)."""
    was, now = (s.annotation if isinstance(s, ast.AnnAssign) else None for s in (a, b))
    return (was is None) != (now is None) or (was is not None and now is not None and ast.dump(was) != ast.dump(now))


def _reads_by_computed_name(tree: ast.Module) -> bool:
    """Whether the module's import reads names by a computed one (:func:`_dynamic`): its own
    scope, with each def's and class's header (:func:`_header`), not their bodies."""
    walked: list[ast.AST] = []
    for node in _module_scope(tree):
        walked.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            walked += [n for part in _header(node) for n in ast.walk(part)]
    return _dynamic(walked)


# bases that do nothing when a class is made from them (no registry, no metaclass of the project's)
PLAIN_BASES = frozenset(
    {"ABC", "Enum", "Flag", "Generic", "IntEnum", "IntFlag", "NamedTuple", "Protocol", "StrEnum", "TypedDict"}
    | {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)}
)


def _classes(tree: ast.Module | None) -> tuple[ast.ClassDef, ...]:
    return () if tree is None else tuple(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))


def _bases_known(classes: Iterable[ast.ClassDef], project: Parsed) -> bool:
    """Whether making these classes runs nothing but their statements: every base is a plain
    one (:data:`PLAIN_BASES`) or a class of the project made the same way, and no class of
    the project defines ``__init_subclass__`` (a base of a base may register its subclasses)."""
    classes = list(classes)
    if not classes:
        return True  # no class changed: none is made anew
    defined: dict[str, list[ast.ClassDef]] = {}
    for path in project.sources:
        for node in _classes(project.tree(path)):
            defined.setdefault(node.name, []).append(node)
            if any(isinstance(f, ast.FunctionDef) and f.name == "__init_subclass__" for f in node.body):
                return False
    seen: set[str] = set()

    def plain(cls: ast.ClassDef) -> bool:
        if cls.keywords:
            return False  # a metaclass
        for base in cls.bases:
            name = _name(base.value if isinstance(base, ast.Subscript) else base)
            if name in PLAIN_BASES or name in seen:
                continue
            seen.add(name)
            if name not in defined or not all(plain(c) for c in defined[name]):
                return False
        return True

    return all(plain(c) for c in classes)


def _changed_classes(old: str, new: str) -> list[ast.ClassDef]:
    """The classes of ``new`` whose statement differs from ``old``'s (members included)."""
    was = {ast.dump(n) for n in _classes(_parsed(old))}
    return [n for n in _classes(_parsed(new)) if ast.dump(n) not in was]


def foreign_write(old: str | None, new: str | None, internal: Callable[[str], bool]) -> str | None:
    """The first module-level statement a change touched that writes into what is not the
    module's own (``consts.K = 5``, ``other.TABLE[k] = v``, ``setattr(mod, ...)``): Python
    imports every test module before the first test runs, so such a write reaches every
    test, whoever imports what; None when there is none (the statement, unparsed)."""
    for tree, changed in _changed_statements(old, new):
        assigned = [s for s in tree.body if isinstance(s, (ast.Assign, ast.AnnAssign))]
        own = {n for s in assigned for n in (_binds(s, foreign=_foreign(tree, internal)) or ())}
        held = _held_elsewhere(tree, assigned, internal)
        for stmt, parts in changed:
            if _writes_into(parts, own - held.aliases, held):
                return ast.unparse(stmt).splitlines()[0][:120]
    return None


@dataclass(frozen=True)
class _Held:
    """#40: what a module's names hold of other modules: the names of the project's modules
    it imports (``import pkg.reg as reg``), the names it imports from the project's modules
    (``from pkg.reg import CONFIG``: an object of another, or a module), and its variables
    bound to what another module holds (``ENV = os.environ``, ``R = reg.REGISTRY``)."""

    modules: frozenset[str]
    imported: frozenset[str]
    aliases: frozenset[str]


def _held_elsewhere(tree: ast.Module, assigned: Sequence[ast.stmt], internal: Callable[[str], bool]) -> _Held:
    modules: set[str] = set()
    imported: set[str] = set()
    every: set[str] = set()
    for stmt in (n for n in _module_scope(tree) if isinstance(n, (ast.Import, ast.ImportFrom))):
        for a in stmt.names:
            bound = (a.asname or a.name).split(".", 1)[0]
            every.add(bound)
            if isinstance(stmt, ast.Import) and internal(a.name):
                modules.add(bound)
            elif isinstance(stmt, ast.ImportFrom) and (stmt.level or internal(stmt.module or "")):
                imported.add(bound)
    aliases = {
        t.id
        for s in assigned
        if isinstance(s, ast.Assign) and _root(s.value) in every and not _calls(s.value)
        for t in s.targets
        if isinstance(t, ast.Name)
    }
    return _Held(frozenset(modules), frozenset(imported), frozenset(aliases))


def _calls(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) for n in ast.walk(node))


# #40: calls through a module from outside that change the process's state (its folder,
# its environment, its seeds, its warnings and loggers, its signals)
STATE_CALLS = frozenset(
    {"chdir", "putenv", "unsetenv", "umask", "seed", "manual_seed", "filterwarnings", "simplefilter"}
    | {"resetwarnings", "basicConfig", "disable", "setLevel", "addHandler", "removeHandler", "setlocale"}
    | {"setdefaulttimeout", "tzset", "signal", "setrecursionlimit", "settrace", "setprofile", "set_start_method"}
)
# what of the process's state a method called on it changes (``os.environ.update(...)``)
STATE_OBJECTS = frozenset({"os.environ", "sys.path", "sys.modules", "sys.meta_path", "sys.path_hooks", "sys.argv"})


def fixture_write(old: str | None, new: str | None, internal: Callable[[str], bool]) -> str | None:
    """#40: the first line of a function of a ``conftest.py`` the change touched (a fixture, a
    helper) that writes what outlives the tests that request it: into another module
    (``clock.now = ...``, ``clock.CACHE.clear()``) or the process's state (``os.environ[...] =``,
    ``os.environ.update``, ``sys.path.insert``, ``os.chdir``, a seed); None when none does.
    ``monkeypatch`` restores what it sets, and is no such write."""
    trees = [t for t in (_parsed(old or ""), _parsed(new or "")) if t is not None]
    if len(trees) < 2:
        return None
    before, after = ({f.name: ast.dump(f) for f in outermost(t)} for t in trees)
    for tree in trees:
        held = _held_elsewhere(tree, [], internal)
        imported = {
            (a.asname or a.name).split(".", 1)[0]
            for n in ast.walk(tree)
            if isinstance(n, (ast.Import, ast.ImportFrom))
            for a in n.names
        }
        for fn in outermost(tree):
            if before.get(fn.name) == after.get(fn.name):
                continue
            for node in (n for stmt in fn.body for n in ast.walk(stmt)):
                if _shared_write(node, imported, held):
                    return ast.unparse(node).splitlines()[0][:120]
    return None


def _shared_write(node: ast.AST, imported: Collection[str], held: _Held) -> bool:
    """Whether ``node`` of a function's body writes what outlives its call (:func:`fixture_write`)."""
    if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return _root(node) in imported
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    obj, method = node.func.value, node.func.attr
    if _root(obj) in imported and method in STATE_CALLS:
        return True
    if _dotted_name(obj) in STATE_OBJECTS:
        return method not in READ_METHODS
    return method not in READ_METHODS and _writes_into([node], (), held)


# methods that read what they are called on, and change nothing of it
READ_METHODS = frozenset(
    {"copy", "count", "endswith", "format", "get", "index", "items", "join", "keys", "lower", "split"}
    | {"startswith", "strip", "upper", "values", "match", "search", "fullmatch", "findall", "sub"}
)


def process_write(old: str | None, new: str | None, internal: Callable[[str], bool]) -> str | None:
    """The first module-level statement a change touched that calls, at import, a function
    reached through an import of a module from outside the project (``os.environ.setdefault``,
    ``sys.path.insert``, ``warnings.filterwarnings``, ``random.seed``, ``mock.patch(...).start``)
    other than one that only reads (:data:`READ_CALLS`): it may change the process's state
    (its environment, its path, its filters, its seeds), which every test shares (#40); None
    when there is none. ``internal``: whether a dotted module name is the project's."""
    for tree, changed in _changed_statements(old, new):
        outside = _outside_names(tree, internal)
        marks, params = _pytest_marks(tree)
        for stmt, parts in changed:
            for node in (n for part in parts for n in ast.walk(part)):
                writes = (
                    isinstance(node, ast.Call)
                    and _name(node) not in READ_CALLS | PURE_CALLS | PURE_DECORATORS
                    and _dotted_name(node.func) not in PURE_DOTTED
                )
                if writes and isinstance(node, ast.Call) and _root(node.func) in outside:
                    dotted = _dotted_name(node.func)
                    if dotted in params or any(dotted.startswith(f"{m}.") for m in marks):
                        continue  # #40: pytest.mark.NAME(...), pytest.param(...) build a mark and write nothing
                    return ast.unparse(stmt).splitlines()[0][:120]
    return None


def _pytest_marks(tree: ast.Module) -> tuple[frozenset[str], frozenset[str]]:
    """The names a module reaches pytest's marks by (``pytest.mark``, ``mark`` of ``from
    pytest import mark``) and its ``param`` by (``pytest.param``, ``param``)."""
    marks: set[str] = set()
    params: set[str] = set()
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.name == "pytest":
                    marks.add(f"{a.asname or a.name}.mark")
                    params.add(f"{a.asname or a.name}.param")
        elif isinstance(stmt, ast.ImportFrom) and stmt.module == "pytest" and not stmt.level:
            marks.update(a.asname or a.name for a in stmt.names if a.name == "mark")
            params.update(a.asname or a.name for a in stmt.names if a.name == "param")
    return frozenset(marks), frozenset(params)


def _dotted_name(node: ast.expr) -> str:
    """``a.b.c`` of an expression of names and attributes alone; "" for any other."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else ""


def _outside_names(tree: ast.Module, internal: Callable[[str], bool]) -> frozenset[str]:
    """The names a module's imports bind to what comes from outside the project, and the
    module-level names bound from one of those (``LOG = logging.getLogger(...)``)."""
    found: set[str] = set()
    for stmt in ast.walk(tree):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and not _imports_within(stmt, internal):
            found.update((a.asname or a.name).split(".", 1)[0] for a in stmt.names)
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and _root(stmt.value) in found:
            found.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
    return frozenset(found)


def _root(node: ast.expr) -> str | None:
    """The name an expression of attributes, calls and subscripts starts from."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _changed_statements(
    old: str | None, new: str | None
) -> Iterator[tuple[ast.Module, list[tuple[ast.stmt, list[ast.AST]]]]]:
    """Each tree, ``new``'s then ``old``'s, with its module-level statements (:func:`_top`)
    the other lacks (removed: every test saw it), each with what of it runs at import; a tree
    once, so what is told of the whole module is told once; none when either is not Python
    (the other rules hold)."""
    before = _parsed(old) if old is not None else ast.Module(body=[], type_ignores=[])
    after = _parsed(new) if new is not None else ast.Module(body=[], type_ignores=[])
    if before is None or after is None:
        return
    for tree, other in ((after, before), (before, after)):
        theirs = {_at_import(parts) for _, parts, _ in _top(other.body)}
        changed = [(stmt, parts) for stmt, parts, _ in _top(tree.body) if _at_import(parts) not in theirs]
        if changed:
            yield tree, changed


def _at_import(parts: Iterable[ast.AST]) -> str:
    """What of a statement runs at import, as text to compare (a def's body is not of it)."""
    return repr([ast.dump(p) for p in parts])


def _writes_into(parts: Iterable[ast.AST], own: Collection[str], held: _Held | None = None) -> bool:
    """Whether what runs at import of a statement (``parts``: :func:`_top`'s) writes into
    what is not one of the module's ``own`` variables: an assignment into it, or (with
    ``held``, :func:`_held_elsewhere`) a method that may change it called on what another
    module of the project holds (``reg.REGISTRY.append(x)``, ``CONFIG.update(...)``, ``R.clear()``
    of ``R = reg.REGISTRY``; a function of a module, ``reg.setup()``, is a call of the project's
    code, not followed) or an augmented assignment of a name imported (``REGISTRY += [x]``)."""
    held = held or _Held(frozenset(), frozenset(), frozenset())
    for node in (n for part in parts for n in ast.walk(part)):
        if isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
            base = node.value
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if not (isinstance(base, ast.Name) and base.id in own):
                return True
        if isinstance(node, ast.Call) and _name(node) in {"setattr", "delattr"}:
            return True
        target = node.target if isinstance(node, ast.AugAssign) else None
        if isinstance(target, ast.Name) and target.id in held.imported | held.aliases:
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr not in READ_METHODS:
            obj = node.func.value
            hops, root = 0, obj
            while isinstance(root, (ast.Attribute, ast.Subscript)):
                hops, root = hops + 1, root.value
            name = root.id if isinstance(root, ast.Name) else None
            if name in held.imported | held.aliases or (name in held.modules and hops >= 1):
                return True
    return False


def _dotted(stmt: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """The modules an import may run, absolute (``from a import b``: ``a``, and ``a.b`` if a module)."""
    if isinstance(stmt, ast.Import):
        return [a.name for a in stmt.names]
    base = stmt.module or ""
    if stmt.level:
        parts = package.split(".") if package else []
        base = ".".join([*parts[: len(parts) - stmt.level + 1], *([stmt.module] if stmt.module else [])])
    return [base, *(f"{base}.{a.name}" if base else a.name for a in stmt.names if a.name != "*")]


def _package_of(path: str) -> str:
    """The package a file's relative imports start from, as its path names it (``a/b/c.py``
    and ``a/b/__init__.py``: ``a.b``; a name is matched by how a path ends, :func:`_files_of`)."""
    return path.removesuffix(".py").replace("/", ".").rpartition(".")[0]


def _files_of(module: str, sources: Mapping[str, str]) -> list[str]:
    """The project files a dotted module name may be (``a/b.py``, ``a/b/__init__.py``)."""
    tail = module.replace(".", "/")
    return [p for p in sources if p.endswith((f"{tail}.py", f"{tail}/__init__.py")) and _whole(p, tail)]


def _whole(path: str, tail: str) -> bool:
    cut = path.removesuffix(".py").removesuffix("/__init__")
    return cut == tail or cut.endswith(f"/{tail}")


def _binds_only(module: str, project: Parsed, seen: set[str]) -> bool:
    """Whether importing ``module`` (and what it imports of the project) only binds names:
    its statements bind and do nothing else, and its imports are the standard library's or
    such modules of the project (#34: an added import runs the module's code at import)."""
    sources = project.sources
    files = _files_of(module, sources)
    for path in files:
        if path in seen:
            continue
        seen.add(path)
        tree = project.tree(path)
        if tree is None:
            return False
        package, foreign = _package_of(path), _foreign(tree, project.internal)
        for stmt, _, _ in _top(tree.body):
            if _binds(stmt, foreign=foreign) is None:
                return False
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for name in _dotted(stmt, package):
                    top = name.split(".", 1)[0]
                    if top in sys.stdlib_module_names:
                        continue
                    if not _binds_only(name, project, seen):
                        return False
    if files:
        return True
    # a folder without __init__.py (a namespace package: its import runs nothing), or a name
    # in a module of the project (``from a import f``: ``a.f``, whose ``a`` is checked); any
    # other is not the project's, and its import may do anything
    tail = module.replace(".", "/")
    parent = module.rpartition(".")[0]
    return any(f"/{tail}/" in f"/{p}" for p in sources) or bool(parent and _files_of(parent, sources))


def _imports_within(stmt: ast.Import | ast.ImportFrom, internal: Callable[[str], bool]) -> bool:
    if isinstance(stmt, ast.ImportFrom):
        return stmt.level > 0 or internal(stmt.module or "")
    return all(internal(a.name) for a in stmt.names)


def _functions(body: list[ast.stmt]) -> Iterator[Function]:
    """The functions a module defines that no other function holds (methods too)."""
    return (fn for fn, _ in _members(body))


def _members(body: list[ast.stmt], within: tuple[str, ...] = ()) -> Iterator[tuple[Function, tuple[str, ...]]]:
    """:func:`_functions`, each with the classes it is a method of, outermost first."""
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt, within
        elif isinstance(stmt, ast.ClassDef):
            yield from _members(stmt.body, (*within, stmt.name))


def _top(
    body: list[ast.stmt], within: tuple[str, ...] = ()
) -> Iterator[tuple[ast.stmt, list[ast.AST], tuple[str, ...]]]:
    """Each statement a module runs at import, with what of it runs then (a def's header, a
    class's header; a class's members are statements of their own) and the classes it is in."""
    for stmt in body:
        if not within and main_guard(stmt):
            continue  # #40: its body runs where the module is the program, never at import
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield stmt, list(_header(stmt)), within
        elif isinstance(stmt, ast.ClassDef):
            yield stmt, list(_header(stmt)), within
            yield from _top(stmt.body, (*within, stmt.name))
        else:
            yield stmt, [stmt], within


class Parsed:
    """The project's Python files (path -> text), each parsed once for every changed file
    one selection asks :func:`readers` of."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self.sources = sources
        # a module's first name is the project's where a folder or a Python file bears it
        self.tops = frozenset(part.removesuffix(".py") for path in sources for part in path.split("/"))
        self._trees: dict[str, ast.Module | None] = {}
        self._modules: dict[str, _Module | None] = {}
        self._words: dict[str, frozenset[str] | None] = {}

    def tree(self, path: str) -> ast.Module | None:
        if path not in self._trees:
            self._trees[path] = _parsed(self.sources[path])
        return self._trees[path]

    def module(self, path: str) -> _Module | None:
        """The file's statements and functions, with what each mentions (None: not Python)."""
        if path not in self._modules:
            self._modules[path] = _module(path, self.tree(path), self.sources[path], self.internal)
        return self._modules[path]

    def internal(self, module: str) -> bool:
        """Whether a dotted module name may be the project's (:attr:`tops`)."""
        return module.split(".", 1)[0] in self.tops

    def may_mention(self, path: str, names: Collection[str]) -> bool:
        """Whether the file's code may mention one of ``names`` or read names by a computed one
        (:data:`DYNAMIC`, :data:`ATTR_CALLS`) or the installed metadata: a name, an attribute,
        a string's word is a word of its text (:func:`_text_words`). Told without parsing it."""
        if path not in self._words:
            self._words[path] = _text_words(self.sources[path])
        words = self._words[path]
        return words is None or not words.isdisjoint(names) or not words.isdisjoint(ALWAYS_READ)


@dataclass
class _Module:
    path: str
    # each statement run at import, what it mentions, the classes it is a member of
    top: list[tuple[ast.stmt, _Said, tuple[str, ...]]]
    functions: list[_Function]
    metadata: frozenset[str]  # the names it reads the installed metadata by (#40)
    # #40: each name an import binds -> the dotted name it is bound to (``from a.b import C``:
    # ``C`` -> ``a.b.C``; ``import a.b as m``: ``m`` -> ``a.b``)
    imports: dict[str, str]
    # #40: the names its module-level imports alone bind (:func:`_own_imports`): its code's
    # bare ``NAME`` is what its import gave, never another file's ``NAME``
    shadow: frozenset[str] = frozenset()
    # #40: the names Python binds in each module and class by itself (``__doc__``, ``__name__``)
    # that the module never binds by its own statement: a bare one is the module's or class's
    # own (toolz: ``@instanceproperty(classval=__doc__)`` hands on the class's docstring)
    implicit: frozenset[str] = frozenset()
    foreign: frozenset[str] = frozenset()  # the names no call is a value by (:func:`_foreign`)


@dataclass
class _Function:
    node: Function
    said: _Said  # what its body (and its parameters) mention
    dynamic: bool  # it reads names by a computed one (:func:`_dynamic`)
    # the module's variables whose object it may change: those a value no method changes
    # left out (:func:`_unchangeable`), unless it declares them ``global``
    variables: frozenset[str]
    changeable: frozenset[str]
    within: tuple[str, ...] = ()  # the classes it is a method of, outermost first
    in_test: bool = False  # of a test file (told as a follow reaches its module)
    classes: frozenset[str] = frozenset()  # the module's classes, whose attributes it may change

    @functools.cached_property
    def _kept(self) -> tuple[frozenset[str] | None, frozenset[str]]:
        # told only of a function a change reaches: most of a project's never are
        return _stores(self.node, self.own)

    @property
    def own(self) -> frozenset[str]:
        """The parameters that hold an object of its call's own (#40): a test method's
        ``self`` (a ``test*`` method of a class of a test file), an instance pytest (and
        unittest) makes for each test it runs; what a method it calls of its class keeps
        elsewhere is that method's."""
        first = [*self.node.args.posonlyargs, *self.node.args.args][:1]
        return (
            frozenset(a.arg for a in first)
            if self.in_test and self.within and self.node.name.startswith("test")
            else frozenset()
        )

    @property
    def stores(self) -> frozenset[str] | None:
        """The names of what it may keep elsewhere (:func:`_stores`); None: nothing kept there."""
        return self._kept[0]

    @functools.cached_property
    def writes(self) -> frozenset[str]:
        """The module-level names whose object it may change (:func:`_writes`)."""
        if _writes_by_computed_name(self.node):
            return self.variables | self.classes  # #40: ``globals()[name] = v``: any of them
        variables = self.variables & (self.changeable | _globals(self.node))
        return ((_writes(self.node) | self._kept[1]) & variables) | _class_writes(self.node, self.classes)

    @property
    def protocol(self) -> bool:
        """A method Python calls by a protocol, never by its name (a dunder: ``TABLE[k]``
        calls ``__getitem__``, ``Table()`` calls ``__init__``): its callers are the readers of
        its classes, and of every name an instance of one is bound to (#40)."""
        return bool(self.within) and _special([self.node.name], member=True)

    @property
    def kept(self) -> frozenset[str]:
        """The names what it keeps is read by: its own, the module's variables it writes, the
        attributes it stores on, and its classes (what a method keeps in its instance,
        ``self[k] = v`` of ``__missing__``, is read by a protocol: ``TABLE[k]``, #40)."""
        return frozenset({self.node.name, *self.writes, *(self.stores or ()), *self.within})


def _function(
    fn: Function,
    aliases: Collection[str],
    variables: frozenset[str],
    changeable: frozenset[str],
    within: tuple[str, ...] = (),
    *,
    classes: frozenset[str] = frozenset(),
) -> _Function:
    # its body and parameters, walked once for all that is told of every function
    body = [sub for node in [*fn.body, fn.args] for sub in ast.walk(node)]
    header = [sub for node in [*fn.decorator_list, *filter(None, [fn.returns])] for sub in ast.walk(node)]
    said = _said(body, aliases)
    # an attribute it only assigns (``self._cache = None``) is none of what it reads (#40)
    unread = _stored_only([*body, *header])
    dynamic = _dynamic([*body, *header])
    kept = _Said(said.bound - unread, said.loose - unread, said.through - unread, said.doc - unread)
    return _Function(fn, kept, dynamic, variables, changeable, within, classes=classes)


def _stored_only(walked: Iterable[ast.AST]) -> frozenset[str]:
    """The attribute names assigned or deleted and never read (``x.a += 1`` reads ``a``) of
    the nodes ``walked`` (a function's, each once)."""
    stored: set[str] = set()
    read: set[str] = set()
    for sub in walked:
        if isinstance(sub, ast.Attribute):
            (stored if isinstance(sub.ctx, (ast.Store, ast.Del)) else read).add(sub.attr)
        elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Attribute):
            read.add(sub.target.attr)
    return frozenset(stored - read)


def _module(path: str, tree: ast.Module | None, text: str, internal: Callable[[str], bool]) -> _Module | None:
    if tree is None:
        return None
    aliases = {
        (a.asname or a.name).split(".", 1)[0]
        for stmt in tree.body
        if isinstance(stmt, (ast.Import, ast.ImportFrom))
        for a in stmt.names
    }
    top = [(stmt, _mentions(parts, aliases), within) for stmt, parts, within in _top(tree.body)]
    # the module's variables (what an assignment binds): what a function may change the object
    # of, but a name every binding of which is a value no method changes (#40)
    # (whatever makes the value: a memo built by ``defaultdict(list)`` is written as one of ``{}``)
    variables = _variables(tree)
    changeable = frozenset(n for stmt in _assignments(tree) if not _unchangeable(stmt) for n in _targets(stmt))
    classes = frozenset(stmt.name for stmt in tree.body if isinstance(stmt, ast.ClassDef))
    functions = [
        _function(fn, aliases, variables, changeable, within, classes=classes) for fn, within in _members(tree.body)
    ]
    # #40: an ``if __name__ == "__main__":`` is followed as a body: the tests that ran its lines
    none = frozenset[str]()
    functions += [_function(_as_body(stmt), aliases, none, none) for stmt in guards(tree)]
    # a module that names none of the metadata's modules imports none of them
    reads_metadata = any(word in text for word in ("metadata", "pkg_resources"))
    metadata = _metadata_names(tree) if reads_metadata else frozenset()
    targets = _import_targets(tree, _package_of(path))
    implicit = SCOPE_DUNDERS - _bound_anywhere(tree)
    foreign = _foreign(tree, internal)
    return _Module(path, top, functions, metadata, targets, _own_imports(tree, text), implicit, foreign)


def _bound_anywhere(tree: ast.Module) -> set[str]:
    """Every name a statement of the module binds, in any scope: an assignment's, an import's
    (``from pkg._usage import __doc__``), a def's, a class's, a ``global``'s."""
    bound: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            bound.add(n.id)
        elif isinstance(n, ast.alias):
            bound.add(n.asname or n.name.split(".", 1)[0])
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            bound.update(n.names)
    return bound


# the names Python binds by itself in every module or class scope
SCOPE_DUNDERS = frozenset({"__doc__", "__name__", "__module__", "__qualname__", "__file__", "__spec__"})


def _opaque(text: str) -> bool:
    """#40: whether a module may hold names no statement of its own binds by them: by a star
    import, a module ``__getattr__``, ``globals()``, its ``__dict__``, ``setattr``."""
    return bool(STAR_RE.search(text)) or any(word in text for word in ("globals", "__dict__", "setattr", "__getattr__"))


STAR_RE = re.compile(r"\bimport\s*\(?\s*\*")


def _own_imports(tree: ast.Module, text: str) -> frozenset[str]:
    """#40: the names only an import binds, a statement of the module's own body (an import
    in an ``if`` or a ``try`` is a statement the follow reads whole, and which it may take
    from the change: its names are not told so): no assignment, def or class of the module
    binds them, no ``global`` of a function rebinds them, no other import, no star import
    may; none where the module may bind names by a computed one (``globals()``, its
    ``__dict__``, ``setattr`` on a module)."""
    if _opaque(text):
        return frozenset()
    imported: set[str] = set()
    other: set[str] = set()
    top: set[int] = set()
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in stmt.names):
                return frozenset()
            imported |= _binds(stmt) or frozenset()
            top.add(id(stmt))
    for node in _module_scope(tree):  # an import's aliases are no names it stores
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            other.add(node.name)  # its body's names are its own
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            other.add(node.id)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            other.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            other.add(node.rest)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            other.update(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in top:
            other |= _binds(node) or frozenset()  # a function's own import of the name: its to read
    return frozenset(imported - other)


def _import_targets(tree: ast.Module, package: str) -> dict[str, str]:
    """Each name the module's imports bind -> the dotted name it is bound to (:attr:`_Module.imports`)."""
    found: dict[str, str] = {}
    for stmt in (s for s in ast.walk(tree) if isinstance(s, (ast.Import, ast.ImportFrom))):
        base = _dotted(stmt, package)[0] if isinstance(stmt, ast.ImportFrom) else ""
        for a in stmt.names:
            if isinstance(stmt, ast.Import):
                found[a.asname or a.name.split(".", 1)[0]] = a.name if a.asname else a.name.split(".", 1)[0]
            elif a.name != "*":
                found[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
    return found


# the name of a module's ``if __name__ == "__main__":`` followed as a body: no code can say it
GUARD = "<main>"


def _as_body(guard: ast.If) -> ast.FunctionDef:
    """An ``if __name__ == "__main__":`` as a function of no name code can read, its lines its own."""
    none = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    fn = ast.FunctionDef(name=GUARD, args=none, body=guard.body, decorator_list=[], returns=None, type_comment=None)
    return ast.copy_location(fn, guard)


# #40: the modules code reads the installed project's metadata through (its version, its
# description), which a build may take from any of the project's files (setup.py reading
# __version__.py, setuptools' ``attr:``, a build backend's version file)
METADATA_MODULES = frozenset({"importlib.metadata", "importlib_metadata", "pkg_resources"})
# what of them only reads it (``pkg_resources.require``, and ``get_distribution`` through it,
# may activate a distribution, on ``sys.path``: a write)
METADATA_READS = frozenset(
    {"version", "metadata", "distribution", "distributions", "requires", "files", "entry_points"}
    | {"packages_distributions"}
)


def _metadata_names(tree: ast.Module) -> frozenset[str]:
    """The names a module's code reaches the installed metadata by: what its imports of
    :data:`METADATA_MODULES` bind, in a function too (``version`` of ``from importlib.metadata
    import version``; ``metadata`` of ``import importlib.metadata``, read as ``importlib.metadata``)."""
    found: set[str] = set()
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.Import):
            found.update(a.asname or a.name.rsplit(".", 1)[-1] for a in stmt.names if a.name in METADATA_MODULES)
        elif isinstance(stmt, ast.ImportFrom) and not stmt.level:
            whole = stmt.module in METADATA_MODULES
            found.update(
                a.asname or a.name for a in stmt.names if whole or f"{stmt.module}.{a.name}" in METADATA_MODULES
            )
    return frozenset(found)


def _targets(stmt: ast.Assign | ast.AnnAssign | ast.AugAssign) -> frozenset[str]:
    """The names an assignment binds (``A = ...``, ``A, B = ...``; not ``obj.x = ...``)."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return frozenset(
        n.id
        for t in targets
        if not isinstance(t, (ast.Attribute, ast.Subscript))
        for n in ast.walk(t)
        if isinstance(n, ast.Name)
    )


def _class_writes(fn: Function, classes: Collection[str]) -> frozenset[str]:
    """#40: the module's ``classes`` whose attributes ``fn`` may change: assigned into
    (``Reg.x = v``, ``Reg.items[k] = v``), a method called on one of them (``Reg.items.append(v)``),
    handed first to what changes it (``bisect.insort(Reg.items, v)``); a method of the class
    itself called (``Reg.make(v)``) is a call of the project's code, followed as one."""
    found: set[str] = set()
    for sub in ast.walk(fn):
        held: ast.expr | None = None
        if isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            held = sub
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr not in READ_METHODS:
            held = sub.func.value if not isinstance(sub.func.value, ast.Name) else None
        if held is None and isinstance(sub, ast.Call):
            held = _changed_first(sub)
        root = _stored_into(held)[0] if held is not None else None
        if isinstance(root, ast.Name) and root.id in classes:
            found.add(root.id)
    return frozenset(found)


def _writes_by_computed_name(fn: Function) -> bool:
    """#40: whether ``fn`` may write its module by an object that names none of its variables:
    ``globals()``, its module from ``sys.modules`` (``sys.modules[__name__].__dict__[k] = v``,
    ``setattr(sys.modules[__name__], k, v)``)."""
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "globals":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "modules" and _dotted_name(sub) == "sys.modules":
            return True
    return False


def _globals(fn: Function) -> frozenset[str]:
    """The names ``fn`` declares ``global`` (it may bind them anew, whatever they held)."""
    return frozenset(n for sub in ast.walk(fn) if isinstance(sub, ast.Global) for n in sub.names)


def _unchangeable(stmt: ast.Assign | ast.AnnAssign | ast.AugAssign) -> bool:
    """Whether ``stmt`` binds a value no method of which changes it: a constant, a tuple of
    such, a compiled pattern (``re.compile(...)``); a function calling one of its methods
    (``PATTERN.sub``, ``SEP.join``) writes nothing into the module (#40)."""
    return not isinstance(stmt, ast.AugAssign) and stmt.value is not None and _frozen(stmt.value)


def _frozen(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Tuple):
        return all(_frozen(e) for e in node.elts)
    return isinstance(node, ast.Call) and _dotted_name(node.func) == "re.compile"  # a Pattern, whatever it is given


def _dynamic(walked: Sequence[ast.AST]) -> bool:
    """Whether the nodes ``walked`` (a function's, each once) read names by a computed one:
    ``getattr(x, name)`` (a name not written out), ``globals()``, ``vars()``, ``__dict__``,
    ``eval``..."""
    written = {id(n.func) for n in walked if isinstance(n, ast.Call) and _names_written_out(n)}
    for node in walked:
        if isinstance(node, ast.Call) and _name(node) in ATTR_CALLS:
            if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
                return True
        elif id(node) in written:
            continue  # #40: attrgetter('a.b'), methodcaller('m', x): the names are a string's words
        elif (isinstance(node, ast.Name) and node.id in DYNAMIC) or (
            isinstance(node, ast.Attribute) and node.attr in DYNAMIC
        ):
            return True
    return False


def _names_written_out(call: ast.Call) -> bool:
    """A lookup whose names are written out (``attrgetter('a.b', 'c')``, ``methodcaller('m',
    x)``): it reads those names alone, each a word of a string, which a mention counts."""
    if _name(call) == "methodcaller":
        names = call.args[:1]
    elif _name(call) == "attrgetter":
        names = call.args
    else:
        return False
    literal = all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in names)
    return bool(names) and literal and not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)


def readers(
    path: str,
    old: str,
    new: str,
    sources: Mapping[str, str] | Parsed,
    test_map: TestMap,
    *,
    is_test: Callable[[str], bool],
    internal: Callable[[str], bool],
    sees: Callable[[str, str], bool] = lambda _a, _b: True,
    in_files: Callable[[Collection[str]], Mapping[str, str]] = lambda _names: {},
) -> dict[str, str] | None:
    """The tests that can see the change of ``path`` from ``old`` (at the map's commit) to
    ``new``, each with why (nodeid -> reason); None when it cannot be told (see the module).
    ``in_files``: the tests that read a file (not Python: a template's ``{cfg.TIMEOUT}``)
    naming one of the names given, each with why (#40: code reads by the words of a file).
    ``sources``: every project Python file as it was at the map's commit (the map's lines
    are of those; a :class:`Parsed` of them parses each once for all the changed files);
    ``is_test``: whether a path is a test file; ``internal``: whether a dotted module name
    is the project's; ``sees``: whether a file may import another, by
    the import graph (a name is another module's only where that module is imported: two
    functions of one name in two modules are two names; default: every file sees every file)."""
    if test_map.lines is None:
        return None
    change = changed_names(old, new, internal, _package_of(path))
    if change is None or _ran_at_import(change.bodies, test_map.imports.get(path, frozenset())):
        return None
    project = sources if isinstance(sources, Parsed) else Parsed(sources)
    if not all(_binds_only(m, project, set()) for m in change.modules):
        return None
    if not _bases_known(_changed_classes(old, new), project):
        return None  # a base may register the class where no name reads it
    follow = _Follow(path, change, test_map, sees)
    follow.metadata = True  # what a build may take from the file, read back as metadata
    if not follow.run(project, is_test):
        return None
    reach = [f for f in project.sources if any(sees(f, b) for b in follow.blind)]
    found = _tests(follow.spans, whole=follow.whole, names=set(change.names), test_map=test_map, path=path, reach=reach)
    return {**in_files(follow.names), **_doctests(follow.doctested, project, test_map, is_test), **found}


def _doctests(
    doctested: Collection[str], project: Parsed, test_map: TestMap, is_test: Callable[[str], bool]
) -> dict[str, str]:
    """#40: where a docstring's example names a name followed (``doctested``: the files), the
    tests of every test file (or ``conftest.py``) that runs doctests by its own code
    (``doctest.testmod``, ``DocTestSuite``): which modules' it runs is not followed."""
    if not doctested:
        return {}
    runners = {f for f, text in project.sources.items() if (is_test(f) or _is_conftest(f)) and "doctest" in text}
    shown = sorted(doctested)[0]
    why = f"it runs doctests, and an example in {shown} names a name the change binds anew"
    return {n: why for n in test_map.tests if any(_holds(r, n.split("::", 1)[0]) for r in runners)}


def keepers(
    path: str,
    spans: Iterable[tuple[int, int]],
    project: Parsed,
    test_map: TestMap,
    *,
    is_test: Callable[[str], bool],
    sees: Callable[[str, str], bool] = lambda _a, _b: True,
    now: str | None = None,
) -> dict[str, str] | None:
    """The tests that may get what a changed function made without running a line of it (#40):
    a function whose value outlives its call keeps it (a decorator that may cache it,
    ``lru_cache``, a fixture of a wider scope than a test's; a function that writes it into
    its module, a memo, a ``global``), and every test that ran code reading a keeper (its
    name: a caller, a test requesting the fixture; what it writes into its module; a method's
    class, and a name an instance of it is bound to: ``TABLE[k]`` reads what ``__missing__``
    kept) may get it, whoever made it first; and a function that names one and reads its code
    (``f.__code__``, ``inspect.getsource(f)``) sees the change without running it.
    ``spans``: the body lines, in the file at the map's commit (``project``'s), of the
    functions the change is in; {} when no function that reaches one of them keeps a value
    or reads its code; None when it cannot be told (a caller ran at import, a map without
    lines). ``now``: the file's text now, whose changed functions may write into their module
    what they did not at the map's commit (that too is kept)."""
    tree = project.tree(path)
    if tree is None:
        return None
    wanted = set(spans)
    names = frozenset(fn.name for fn in _functions(tree.body) if _body_span(fn) in wanted)
    callers = _Follow(path, Change(names, ()), test_map, sees, unrun=True)
    mine = project.module(path)
    for f in mine.functions if mine else ():
        f.in_test = is_test(path) or _is_conftest(path)  # told before what it keeps is
    callers.keeping.update(f.node.name for f in (mine.functions if mine else ()) if f.node.name in names and _keeps(f))
    fresh = _writes_now(now, names, tree) if now is not None else {}
    if fresh is None:
        return None  # not Python now: what it writes cannot be told
    callers.keeping.update({*fresh, *(n for written in fresh.values() for n in written)})
    if not callers.run(project, is_test):
        return None
    kept = _kept_by(callers, test_map)
    # a function that names it and reads code (f.__code__, getsource(f)) sees the body unrun
    code = [(where, f) for where, f in callers.reached if where != path and _reads_code(f.node)]
    # what a caller changes of another module's variable (``SEEN.append(v)`` of an imported SEEN)
    outside = {w for where, f in callers.reached for w in _outside_writes(f, project.module(where), project)}
    if not kept and not code and not fresh and not callers.handed and not outside:
        return {}
    if test_map.lines is None:
        return None  # which tests ran a reader of what is kept: a map of files cannot say
    held = [
        *(
            (n, where)
            for where, f in kept
            for n in _read_back(f, callee=(where, _body_span(f.node)) in callers.callees, callers=callers)
        ),
        *((n, path) for written in fresh.values() for n in written),
        *((n, where) for where, names in callers.handed for n in names),
        *outside,
    ]
    handed = [n for _, names in callers.handed for n in names]
    shown = sorted({*(f.node.name for _, f in kept or code), *fresh, *handed, *(n for n, _ in outside)})
    said = (
        f"it ran code that reads what {', '.join(shown[:3])} keeps of a function {path} changes"
        if kept or fresh or handed or outside
        else f"it reads the code of a function {path} changes"
    )
    return _read_kept(path, project, test_map, sees, is_test, callers=callers, held=held, code=code, said=(shown, said))


def _read_kept(
    path: str,
    project: Parsed,
    test_map: TestMap,
    sees: Callable[[str, str], bool],
    is_test: Callable[[str], bool],
    *,
    callers: _Follow,
    held: Sequence[tuple[str, str]],
    code: Sequence[tuple[str, _Function]],
    said: tuple[Sequence[str], str],
) -> dict[str, str] | None:
    """:func:`keepers`' tests: those that ran code reading a name of ``held`` (a name, where
    it is bound), and the functions of ``code`` (which read a changed function's code);
    ``said``: the names the reason shows, and the reason."""
    readers_of = _Follow(path, Change(frozenset(), ()), test_map, sees, unrun=True)
    readers_of.handing = set(callers.handing)
    for name, where in held:
        readers_of.bind(name, where)
        readers_of.keeping.add(name)
    if not readers_of.run(project, is_test):
        return None
    for where, f in code:
        readers_of.spans.setdefault(where, []).append(_body_span(f.node))
    reach = [f for f in project.sources if any(sees(f, b) for b in readers_of.blind)]
    shown, why = said
    return _tests(
        readers_of.spans, whole=readers_of.whole, names=set(shown), test_map=test_map, path=path, reach=reach, why=why
    )


def _writes_now(now: str, names: Collection[str], was: ast.Module) -> dict[str, frozenset[str]] | None:
    """Of the changed functions ``names``, those that write into their module now (``now``,
    the file's text) what they did not at the map's commit (``was``): function -> the
    module's names it writes anew; None when ``now`` is not Python."""
    tree = _parsed(now)
    if tree is None:
        return None
    variables = _variables(was) | _variables(tree)
    before: dict[str, set[str]] = {}
    for fn in _functions(was.body):
        before.setdefault(fn.name, set()).update(_writes(fn))
    found: dict[str, set[str]] = {}
    for fn in (f for f in _functions(tree.body) if f.name in names):
        anew = (_writes(fn) & variables) - before.get(fn.name, set())
        if anew:
            found.setdefault(fn.name, set()).update(anew)
    return {name: frozenset(written) for name, written in found.items()}


def _variables(tree: ast.Module) -> frozenset[str]:
    """The module's variables (the names its assignments bind, whatever the value: ``_MEMO =
    {}``, ``_CACHE = OrderedDict()``): what a function may change the object of."""
    return frozenset(n for stmt in _assignments(tree) for n in _targets(stmt))


def _assignments(tree: ast.Module) -> list[ast.Assign | ast.AnnAssign | ast.AugAssign]:
    return [s for s in tree.body if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign))]


def _kept_by(callers: _Follow, test_map: TestMap) -> list[tuple[str, _Function]]:
    """The functions the callers reached that may keep a value (#40). One reached only as a
    reader by a computed name (it names none followed) that no test of the map ran ran at
    import alone, when the changed lines had never run (a module imported before the
    recording counts every line as run at import): what it kept then holds nothing of them,
    but a reference to another keeper may; so those are left out only when every keeper is one."""
    kept = [(where, f) for where, f in callers.reached if _keeps(f)]
    idle = [(w, f) for w, f in kept if (w, _body_span(f.node)) in callers.computed and not _tested(test_map, w, f)]
    return [] if len(idle) == len(kept) else kept


def _tested(test_map: TestMap, where: str, f: _Function) -> bool:
    """Whether a test of the map ran a line of ``f`` (a map without lines: it may have)."""
    if test_map.lines is None:
        return True
    first, last = _body_span(f.node)
    body = range(first, last + 1)
    return any(not frozenset(body).isdisjoint(ran.get(where, ())) for ran in test_map.lines.values())


def opener_span(project: Parsed, path: str, first: int) -> tuple[int, int] | None:
    """The body lines of the function of ``path`` (at the map's commit) whose code starts at
    line ``first``, its first decorator's or its def's, as Python's code object names it (#40:
    the code that opened a data file); None when no function the module defines (methods
    too) starts there."""
    tree = project.tree(path) if path in project.sources else None
    for fn in _functions(tree.body if tree is not None else []):
        if min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) == first:
            return _body_span(fn)
    return None


# what reads a function's code without calling it (#40)
CODE_READS = frozenset({"__code__", "co_code", "co_consts", "getsource", "getsourcelines", "dis", "disassemble"})
# decorators that keep no value of what they decorate (any other may: a cache, a registry)
TRANSPARENT = frozenset(
    {"abstractmethod", "classmethod", "deleter", "final", "getter", "overload", "override", "property"}
    | {"setter", "staticmethod", "wraps"}
)


def _reads_code(fn: Function) -> bool:
    """Whether ``fn`` reads a function's code or source (``__code__``, ``getsource``...)."""
    return any(
        (isinstance(n, ast.Attribute) and n.attr in CODE_READS) or (isinstance(n, ast.Name) and n.id in CODE_READS)
        for n in ast.walk(fn)
    )


def _keeps(f: _Function) -> bool:
    """Whether what ``f`` makes may outlive its call: it writes into its module, or a
    decorator may keep it (any but :data:`TRANSPARENT`, a test's own fixture, a mark)."""
    return bool(f.writes) or f.stores is not None or not all(_passes_on(d) for d in f.node.decorator_list)


def _passes_on(d: ast.expr) -> bool:
    target = d.func if isinstance(d, ast.Call) else d
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute) and target.value.attr == "mark":
        return True  # @pytest.mark.NAME(...)
    if _name(d) == "fixture":
        call = d if isinstance(d, ast.Call) else None
        scope = next((k.value for k in call.keywords if k.arg == "scope"), None) if call is not None else None
        plain = scope is None or (isinstance(scope, ast.Constant) and scope.value == "function")
        return plain and (call is None or not call.args)
    return _name(d) in TRANSPARENT


def _hands_on(stmt: ast.stmt, names: Collection[str]) -> bool:
    """Whether ``stmt`` hands one of ``names`` to a call as an argument (``lru_cache()(f)``,
    ``partial(f, 1)``, ``register(f)``): the call may keep it, or wrap it in what keeps what
    it returns; calling it (``f()``) hands nothing on. Of a def or a class, only what runs
    at import is (#40: toolz: a test's body handing a function on is no call made at import)."""
    parts = _header(stmt) if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else [stmt]
    calls = [n for part in parts for n in ast.walk(part) if isinstance(n, ast.Call)]
    called = {id(call.func) for call in calls}  # ``sys.exit(read(x))`` calls read, hands on its value
    for call in calls:
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            if any(
                id(n) not in called
                and ((isinstance(n, ast.Name) and n.id in names) or (isinstance(n, ast.Attribute) and n.attr in names))
                for n in ast.walk(arg)
            ):
                return True
    return False


def _read_back(f: _Function, *, callee: bool, callers: _Follow) -> frozenset[str]:
    """The names what keeper ``f`` keeps is read by (:attr:`_Function.kept`). What a function
    only called keeps in what it is handed is read by the holders of what is handed (``tag(v,
    store.SHARED)``: ``SHARED``); handed only constants, and keeping nothing elsewhere, it
    keeps nothing past the call for its other callers (``slugify(txt)`` of a test's own
    string) (#40)."""
    if not callee:
        return f.kept
    constants, handed = _handed(f.node.name, [g for _, g in callers.reached])
    if constants and _into_given(f):
        return (f.kept | handed) - {f.node.name}
    return f.kept | handed


def _into_given(f: _Function) -> bool:
    """Whether all ``f`` may keep past its call it keeps in what its callers hand it (#40): it
    writes nothing into its module, no decorator keeps, it holds no nested scope, and every
    store and every method called with arguments that :func:`_stores` takes to keep is on a
    parameter of its own (``text.replace(a, b)``, ``out[k] = v``), not on an alias of another."""
    fn = f.node
    if f.writes or not all(_passes_on(d) for d in fn.decorator_list):
        return False
    fresh, roots = _fresh_locals(fn)
    params = _params(fn)
    for sub in ast.walk(fn):
        if sub is not fn and isinstance(sub, (*SCOPES, ast.Nonlocal, ast.Global)):
            return False  # a nested scope outlives the call with what it holds
        if isinstance(sub, (ast.Subscript, ast.Attribute)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            base = _stored_into(sub)[0]
            if not (isinstance(base, ast.Name) and (base.id in params or base.id in fresh)):
                return False
        elif isinstance(sub, ast.Call) and (sub.args or sub.keywords):
            for obj in _handed_to(sub)[0]:
                if isinstance(obj, ast.Call) or (isinstance(obj, ast.Name) and obj.id in roots and obj.id not in fresh):
                    return False  # ``super().m(v)``, an alias's method
    return True


def _handed(name: str, callers: Iterable[_Function]) -> tuple[bool, frozenset[str]]:
    """What ``callers`` hand the function ``name``: whether only constants, by calls of it by
    its name (``tidy(txt)``, ``txt = "..."``: nothing is kept in a string, a number) (#40);
    and the names in what else they hand it, or hand with it to a call (``map(name, ITEMS)``)."""
    only = True
    names: set[str] = set()
    for caller in callers:
        # what nothing can be kept in: its constant locals, its module's values no method changes
        constant = _constant_locals(caller.node) | (caller.variables - caller.changeable)
        own = _bound_here(caller.node)
        calls = [c for c in ast.walk(caller.node) if isinstance(c, ast.Call)]
        for call in calls:
            args = [*call.args, *(k.value for k in call.keywords)]
            if _name(call) == name:
                args += [call.func.value] if isinstance(call.func, ast.Attribute) else []
            elif not any(_mentions_name(a, name) for a in args):
                continue
            for arg in args:
                holders = _holders(arg, constant, own)
                only &= holders is None
                names |= holders or set()
        called = {id(c.func) for c in calls}
        for sub in ast.walk(caller.node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and name in WORD_RE.findall(sub.value):
                only = False  # ``getattr(m, "name")``
            elif _is_name(sub, name) and id(sub) not in called:
                only = False  # handed on (``map(name, xs)``), or bound to another name
    return only, frozenset(names - {name})


def _holders(arg: ast.expr, constant: Collection[str], own: Collection[str]) -> frozenset[str] | None:
    """Through which names code other than its caller may reach what the caller hands in
    ``arg`` (#40): None when nothing can be kept in it (a constant, a name of ``constant``:
    a local only ever bound to one, a module value no method changes); none for a local of
    its own (``own``); a name of the module or an import's (``SHARED``), an attribute
    (``store.SHARED``), a function called (``registry()``), and what else ``arg`` names but
    the caller's locals."""
    if isinstance(arg, CONSTANT) or (isinstance(arg, ast.Name) and arg.id in constant):
        return None
    if isinstance(arg, ast.Attribute):
        return frozenset({arg.attr})
    if isinstance(arg, ast.Call):
        return frozenset({_name(arg)} - {""})
    said = _mentions([arg], ())
    return frozenset((said.bound | said.loose) - set(own))


def _bound_here(fn: Function) -> frozenset[str]:
    """The names ``fn`` binds itself: its parameters and the names it assigns."""
    stored = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return frozenset(_params(fn) | stored)


def _is_name(node: ast.AST, name: str) -> bool:
    return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)


def _mentions_name(node: ast.AST, name: str) -> bool:
    return any(_is_name(sub, name) for sub in ast.walk(node))


CONSTANT = (ast.Constant, ast.JoinedStr)  # a value nothing can be kept in: a string, a number


def _constant_locals(fn: Function) -> frozenset[str]:
    """The locals of ``fn`` every binding of which is a plain assignment of a constant, that no
    nested scope names (:func:`_shared`)."""
    bound: dict[str, int] = {}
    constant: dict[str, int] = {}
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            bound[sub.id] = bound.get(sub.id, 0) + 1
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
            constant[sub.targets[0].id] = constant.get(sub.targets[0].id, 0) + isinstance(sub.value, CONSTANT)
    held = _shared(fn) | _params(fn)
    return frozenset(n for n, count in bound.items() if constant.get(n, 0) == count and n not in held)


def _mutated(fn: Function) -> set[tuple[str, str]]:
    """What ``fn`` stores into, or calls a method of with arguments, through a name it does not
    bind itself: (that name, the attribute right after it, or "") (``SEEN.append(v)``:
    (``SEEN``, ""); ``store.SEEN[k] = v``: (``store``, ``SEEN``))."""
    own = _bound_here(fn)
    found: set[tuple[str, str]] = set()
    for sub in ast.walk(fn):
        if isinstance(sub, (ast.Subscript, ast.Attribute)) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            root, chain = _stored_into(sub)
        elif isinstance(sub, ast.Call) and (sub.args or sub.keywords) and isinstance(sub.func, ast.Attribute):
            root, chain = _stored_into(sub.func)
            chain = chain[1:]  # the method's own name is no attribute held
        else:
            continue
        if isinstance(root, ast.Name) and root.id not in own:
            found.add((root.id, chain[-1] if chain else ""))
    return found


def _outside_writes(f: _Function, m: _Module | None, project: Parsed) -> set[tuple[str, str]]:
    """The variables of another module of the project ``f`` (of ``m``) may change (#40): a
    method called with arguments, or a store, on an object it imported (``from store import
    SEEN``; ``SEEN.append(v)``) or reaches through a module it imported (``store.SEEN[k] =
    v``): (the variable, its file)."""
    found: set[tuple[str, str]] = set()
    imports = m.imports if m is not None else {}
    for root, after in _mutated(f.node):
        target = imports.get(root)
        if target is None:
            continue
        for module, name in ((target, after), target.rpartition(".")[::2]):
            files = _files_of(module, project.sources) if module and name else []
            held = [path for path in files if (tree := project.tree(path)) and name in _variables(tree)]
            found.update((name, path) for path in held)
    return found


def _ran_at_import(bodies: Iterable[tuple[int, int]], at_import: Collection[int]) -> bool:
    """Whether a changed body ran at import (#40: a ``parametrize`` list, a decorator, a
    ``TABLE = make()``: what it made is the importing module's, for all its tests)."""
    return any(not frozenset(range(first, last + 1)).isdisjoint(at_import) for first, last in bodies)


class _Follow:
    """The names a change binds, followed through the project's modules (:func:`readers`)."""

    def __init__(
        self,
        path: str,
        change: Change,
        test_map: TestMap,
        sees: Callable[[str, str], bool],
        *,
        unrun: bool = False,
    ) -> None:
        self.path, self.change, self.test_map, self.sees = path, change, test_map, sees
        # #40: the change is in lines that never ran at import (a function body's): what a
        # function made at import can hold it only through a value kept from before the
        # recording, a keeper's (``keeping``: the names such functions bind)
        self.unrun = unrun
        # #40: code that reads the installed metadata reads the change (a change to what runs
        # at import: a build may take the version, the description from any file)
        self.metadata = False
        self.keeping: set[str] = set()
        # each name read, with the files it is bound in: a module sees a name of a file it may import
        self.names: dict[str, set[str]] = {n: {path} for n in change.names}
        self.spans: dict[str, list[tuple[int, int]]] = {path: list(change.bodies)} if change.bodies else {}
        self.whole: set[str] = set()  # test files and conftest.py files that read a name at import
        # source files whose import does more than bind with a name read: their importers' tests run
        self.blind: set[str] = set()
        self.reached: list[tuple[str, _Function]] = []  # each function that reads a name, with its file
        # #40: statements run at import that hand a followed function to a call (file, names
        # bound), and those statements (by id): once told, where the names are bound, not read
        self.handed: set[tuple[str, frozenset[str]]] = set()
        self.handing: set[int] = set()
        # #40: those of them reached only as readers by a computed name (file, body lines)
        self.computed: set[tuple[str, tuple[int, int]]] = set()
        # #40: the names a function reached mentions, each a function it may call
        # (``remember(v)``, ``map(remember, vs)``, ``f = remember``, ``getattr(m, "remember")``),
        # with or without arguments: what it hands on (a value, a function, a call made or not
        # by what it got back) is kept wherever the function called keeps; each function of the
        # project so named is reached
        self.called: set[str] = set()
        # #40: the files the map saw run (in a test, at import), where it knows both and no
        # program a test started may have run others: code of a file never run (a setup.py, a
        # script) reads nothing, keeps nothing
        told = test_map.lines is not None and bool(test_map.imports) and not test_map.unseen
        self.ran = test_map.known() if told else None
        self.callees: set[tuple[str, tuple[int, int]]] = set()  # those reached only so (file, body lines)
        # #40: the files a docstring's example of which names a name followed: a test that runs
        # doctests (``doctest.testmod(module)``) runs the example, and none of its owner's lines
        self.doctested: set[str] = set()

    def run(self, project: Parsed, is_test: Callable[[str], bool]) -> bool:
        """Follow the names through every module until no pass reads more; False: it cannot be told."""
        grown = True
        while grown:
            grown = False
            for path in sorted(project.sources if self.ran is None else self.ran & project.sources.keys()):
                # a module none of whose words is a name followed (or called) reads none: not parsed
                m = project.module(path) if project.may_mention(path, {*self.names, *self.called}) else None
                if m is None:
                    continue
                found = self.module(m, project, test_like=is_test(m.path) or _is_conftest(m.path))
                if found is None:
                    return False
                grown |= found
        return True

    def bind(self, name: str, where: str) -> bool:
        origins = self.names.setdefault(name, set())
        grew = where not in origins
        origins.add(where)
        return grew

    def module(self, m: _Module, project: Parsed, *, test_like: bool) -> bool | None:
        """Follow the names through ``m``: whether more names are read now; None: it cannot be told."""
        seen = {n for n, origins in self.names.items() if any(self.sees(m.path, o) for o in origins)}
        grown = False
        for stmt, said, classes in m.top:
            imports = isinstance(stmt, (ast.Import, ast.ImportFrom))
            if id(stmt) in self.handing:
                continue  # #40: it binds what keeps the change (``cached = lru_cache()(f)``), reads none of it
            visible = seen if imports else seen - self._hidden(m, said)
            if not said.doc.isdisjoint(self.names):
                self.doctested.add(m.path)
            if not (said.reads(visible, self.names) or (not imports and self._metadata(said, m.metadata))):
                continue  # a star import takes nothing new: its importers see what it imports
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                bound: frozenset[str] | None = self._taken(stmt, seen, m, project)
            else:
                bound = _binds(stmt, m.metadata, m.foreign)
            if test_like and not imports:
                self.whole.add(m.path)
            elif bound is None:
                self.blind.add(m.path)  # what its import does with the name is its importers'
                if self.unrun and isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    # #40: what it bound may call a caller later, or hold what a keeper keeps
                    # (``VIEW = _View()``, ``lookup = _make()``): its names are followed too
                    bound = _targets(stmt)
            if self.unrun and not imports and _hands_on(stmt, visible):
                # #40: a function handed to a call at import (``read = lru_cache()(_read)``, a
                # decorator applied by a call): what the call made may keep what it returns
                # for whoever reads the names it is bound to; bound to none (``register(f)``),
                # who reads it cannot be told
                if not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    return None
                self.handed.add((m.path, _targets(stmt)))
                self.keeping.update(_targets(stmt))
                self.handing.add(id(stmt))
            # a member's class is read too: astuple(), an Enum's members, str() read members by no name
            for b in {*(bound or ()), *classes}:
                grown |= self.bind(b, m.path)
        for f in m.functions:
            f.in_test = test_like
            found = self.function(f, m, project, seen, test_like=test_like)
            if found is None:
                return None
            grown |= found
        return grown

    def function(self, f: _Function, m: _Module, project: Parsed, seen: set[str], *, test_like: bool) -> bool | None:
        fn, where = f.node, m.path
        # its body reads a name, or any (dynamic), or it is a changed def of the file itself
        own = where == self.path and fn.name in self.change.names
        if not f.said.doc.isdisjoint(self.names):
            self.doctested.add(where)
        read = own or f.said.reads(seen - self._hidden(m, f.said), self.names) or self._metadata(f.said, m.metadata)
        # a method Python calls by a protocol (``Kept(v)`` calls ``__init__``) by its class's name
        callee = fn.name in self.called or (f.protocol and not self.called.isdisjoint(f.within))
        span = _body_span(fn)
        only_called = callee and not (read or f.dynamic)
        if not (read or f.dynamic or callee) or span in self.spans.setdefault(where, []):
            return False
        if only_called and (where, span) in self.callees:
            return False
        ran_at_import = not self.test_map.imports.get(where, frozenset()).isdisjoint(range(span[0], span[1] + 1))
        if ran_at_import and not self._unheld(f, read, seen):
            return None  # it ran at import: what it read is every importer's
        if _autouse(fn):
            if not test_like:
                return None  # a plugin's fixture: any test's
            self.whole.add(where)
        if only_called:
            self.callees.add((where, span))  # it reads none of the change: its tests do not run for it
        else:
            self.spans[where].append(span)
        self.reached.append((where, f))
        if not (read or callee):
            self.computed.add((where, span))
        named = (f.said.code.bound | f.said.code.loose) - self.called  # a docstring calls nothing
        self.called |= named
        grown = bool(named)
        if only_called and not self.unrun and _keeps(f):
            # #40: what a reader of the change hands on to a function that keeps it is read where
            # that one keeps it (``remember(consts.RATE)``: ``_SEEN``); by its name too where a
            # decorator may keep what it returns
            held = not all(_passes_on(d) for d in fn.decorator_list)
            for b in f.kept - (set() if held else {fn.name}):
                grown |= self.bind(b, where)
        # its callers read what it returns (a cache, a wide fixture may hand it on), and what it
        # changes of its module (a memo) is read; one that reads by a computed name alone is read
        # where it runs, unless a decorator may keep what it returns
        if read and not self.unrun:
            # #40: what a reader of the change writes into another module's variable is read there
            for name, origin in _outside_writes(f, m, project):
                grown |= self.bind(name, origin)
        if read or fn.decorator_list:
            for b in {fn.name, *f.writes, *(f.within if f.protocol else ())}:
                grown |= self.bind(b, where)
            if _keeps(f):
                self.keeping.update(f.kept)
        return grown

    def _taken(self, stmt: ast.Import | ast.ImportFrom, seen: set[str], m: _Module, project: Parsed) -> frozenset[str]:
        """The names an import in ``m`` binds to what a followed name holds (:func:`_imported`),
        but (#40) a name taken from a module of the project that does not bind it with the
        change (``from pkg.words import LABEL`` where ``pkg/consts.py`` changed ``LABEL``):
        that module's own. A module that takes it from the changed one in turn is among the
        name's origins once followed, and the next pass takes it from there."""
        bound = _imported(stmt, seen)
        if not bound or not isinstance(stmt, ast.ImportFrom):
            return bound
        source = _dotted(stmt, _package_of(m.path))[0]
        files = set(_files_of(source, project.sources)) if source else set()
        if not files or any(_opaque(project.sources[f]) for f in files):
            return bound  # not the project's, or one whose names may be any: what it holds is not told
        kept = set()
        for a in stmt.names:
            name = a.asname or a.name
            if name not in bound:
                continue
            if _files_of(f"{source}.{a.name}", project.sources) or files & self.names[a.name]:
                kept.add(name)  # a module of its own, or the name as the change binds it
        return frozenset(kept)

    def _hidden(self, m: _Module, said: _Said) -> set[str]:
        """#40: the names followed that code of ``m`` mentioning ``said`` cannot read: its bare
        ``NAME`` is what ``m``'s own import binds (:attr:`_Module.shadow`), unless that import
        was followed (``m`` is among the name's origins) or it reads ``mod.NAME`` too."""
        hidden = {n for n in m.shadow - said.through if n in self.names and m.path not in self.names[n]}
        return hidden | (m.implicit - said.through)

    def _metadata(self, said: _Said, names: frozenset[str]) -> bool:
        """Whether code that mentions ``said`` reads the installed metadata by its module's
        ``names`` of it (:func:`_metadata_names`), when that counts."""
        return self.metadata and not said.bound.isdisjoint(names)

    def _unheld(self, f: _Function, read: bool, seen: Collection[str]) -> bool:
        """Whether ``f``, which ran at import, made nothing then that holds the change: the
        change's lines never ran at import, and ``f`` reads no name a keeper binds (one that
        reads names by a computed one: names none of those followed)."""
        if not self.unrun:
            return False
        if f.dynamic:
            return not read
        keeping = self.keeping & set(seen)
        return not f.said.code.reads(keeping, keeping)  # its docstring did not run at import


def _tests(
    spans: Mapping[str, list[tuple[int, int]]],
    *,
    whole: set[str],
    names: set[str],
    test_map: TestMap,
    path: str,
    reach: Sequence[str],
    why: str | None = None,
) -> dict[str, str]:
    """The tests that ran a line of ``spans``, of a file or under a conftest.py ``whole``
    names, or of a file that may import one of the ``reach`` (a test file, or a conftest.py
    above it), each with why."""
    assert test_map.lines is not None
    shown = ", ".join(sorted(names)[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    why = why or (
        f"it ran code that reads {shown}, which {path} binds anew at import"
        if names
        else f"it ran a function {path} changes"
    )
    found: dict[str, str] = {}
    ranges = {p: [frozenset(range(a, b + 1)) for a, b in s] for p, s in spans.items()}
    for nodeid, ran in test_map.lines.items():
        own = nodeid.split("::", 1)[0]
        if any(_holds(w, own) for w in whole):
            found[nodeid] = f"its module reads {shown} at import, which {path} binds anew"
        elif any(_holds(r, own) for r in reach):
            found[nodeid] = f"it imports a module whose import reads {shown}, which {path} binds anew"
        elif any(not r.isdisjoint(ran.get(p, ())) for p, rs in ranges.items() for r in rs):
            found[nodeid] = why
    return found


def _is_conftest(path: str) -> bool:
    return path.rsplit("/", 1)[-1] == CONFTEST


def _holds(path: str, test_file: str) -> bool:
    """Whether the tests of ``test_file`` are ``path``'s: its own, or under a conftest.py ``path``."""
    if test_file == path:
        return True
    folder = path.rpartition("/")[0]
    return _is_conftest(path) and (not folder or test_file.startswith(f"{folder}/"))
