"""#40: what outlives a changed function's call (a cache, a memo, a wide fixture), what runs
at another module's import, and what a module's import may do to the process: pure rules of
:mod:`device_matrix.changes.namereads`, each a class of change once recorded deselected."""

from __future__ import annotations

import ast
from collections.abc import Callable

import pytest

from device_matrix.changes import namereads
from device_matrix.records.testmap import TestMap


def _body(source: str, name: str) -> tuple[int, int]:
    (fn,) = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name]
    return fn.body[0].lineno, fn.end_lineno or fn.lineno


def _lines(source: str, *names: str) -> frozenset[int]:
    found: set[int] = set()
    for name in names:
        first, last = _body(source, name)
        found.update(range(first, last + 1))
    return frozenset(found)


def _kept(
    sources: dict[str, str],
    ran: dict[str, dict[str, tuple[str, ...]]],
    changed: str,
    *,
    path: str = "pkg/lib.py",
    at_import: dict[str, frozenset[int]] | None = None,
    now: dict[str, str] | None = None,
    sees: Callable[[str, str], bool] = lambda _a, _b: True,
) -> dict[str, str] | None:
    """:func:`namereads.keepers` of a change to the function ``changed`` of ``path``;
    ``ran``: nodeid -> file -> the functions of it the test ran; ``now``: the changed file's
    text now (default: as it was); ``sees``: whether a file may import another."""
    lines = {n: {f: _lines(sources[f], *fns) for f, fns in per.items()} for n, per in ran.items()}
    m = TestMap("cpu", "a" * 40, "2026-12-01T00:00:00+00:00", {n: frozenset(p) for n, p in ran.items()}, {}, lines)
    m = TestMap(m.row, m.commit, m.created, m.tests, at_import or {}, m.lines)
    return namereads.keepers(
        path,
        [_body(sources[path], changed)],
        namereads.Parsed(sources),
        m,
        is_test=lambda f: f.rsplit("/", 1)[-1].startswith("test_"),
        sees=sees,
        **({"now": now[path]} if now else {}),  # type: ignore[arg-type]
    )


CACHED = (
    "import functools\n\n\n@functools.lru_cache(maxsize=None)\ndef table():\n    return (1, 2)\n\n\n"
    "def first():\n    return table()[0]\n\n\ndef plain():\n    return 0\n"
)
CACHED_TESTS = (
    "from pkg.lib import first, plain\n\n\ndef test_a():\n    assert first()\n\n\n"
    "def test_b():\n    assert first()\n\n\ndef test_c():\n    assert plain() == 0\n"
)
RAN: dict[str, dict[str, tuple[str, ...]]] = {
    "pkg/test_lib.py::test_a": {"pkg/lib.py": ("table", "first"), "pkg/test_lib.py": ("test_a",)},
    "pkg/test_lib.py::test_b": {"pkg/lib.py": ("first",), "pkg/test_lib.py": ("test_b",)},
    "pkg/test_lib.py::test_c": {"pkg/lib.py": ("plain",), "pkg/test_lib.py": ("test_c",)},
}


def test_a_cached_function_is_read_by_every_test_that_ran_a_caller() -> None:
    found = _kept({"pkg/lib.py": CACHED, "pkg/test_lib.py": CACHED_TESTS}, RAN, "table")
    assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}
    assert (
        found["pkg/test_lib.py::test_b"] == "it ran code that reads what table keeps of a function pkg/lib.py changes"
    )


def test_a_function_nothing_keeps_the_value_of_adds_no_test() -> None:
    plain = CACHED.replace("@functools.lru_cache(maxsize=None)\n", "")
    assert _kept({"pkg/lib.py": plain, "pkg/test_lib.py": CACHED_TESTS}, RAN, "table") == {}
    for passes_on in ("@staticmethod", "@functools.wraps(f)", "@pytest.mark.slow", "@pytest.fixture", "@property"):
        marked = CACHED.replace("@functools.lru_cache(maxsize=None)", passes_on)
        assert _kept({"pkg/lib.py": marked, "pkg/test_lib.py": CACHED_TESTS}, RAN, "table") == {}, passes_on
    scoped = CACHED.replace("@functools.lru_cache(maxsize=None)", "@pytest.fixture(scope='function')")
    assert _kept({"pkg/lib.py": scoped, "pkg/test_lib.py": CACHED_TESTS}, RAN, "table") == {}


def test_a_decorator_that_may_keep_the_value_keeps_it() -> None:
    for keeps in ("@cache", "@pytest.fixture(scope='module')", "@pytest.fixture('session')", "@register"):
        marked = CACHED.replace("@functools.lru_cache(maxsize=None)", keeps)
        found = _kept({"pkg/lib.py": marked, "pkg/test_lib.py": CACHED_TESTS}, RAN, "table")
        assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}, keeps


MEMO = (
    "_MEMO = {}\n\n\ndef compute():\n    return 1\n\n\n"
    "def get():\n    if 'k' not in _MEMO:\n        _MEMO['k'] = compute()\n    return _MEMO['k']\n\n\n"
    "def peek():\n    return _MEMO.get('k')\n\n\ndef plain():\n    return 0\n"
)
MEMO_TESTS = (
    "from pkg.lib import get, peek, plain\n\n\ndef test_a():\n    assert get()\n\n\n"
    "def test_b():\n    assert peek()\n\n\ndef test_c():\n    assert plain() == 0\n"
)


def test_a_caller_that_writes_the_value_into_its_module_keeps_it_for_what_reads_it_back() -> None:
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_lib.py::test_a": {"pkg/lib.py": ("compute", "get"), "pkg/test_lib.py": ("test_a",)},
        "pkg/test_lib.py::test_b": {"pkg/lib.py": ("peek",), "pkg/test_lib.py": ("test_b",)},
        "pkg/test_lib.py::test_c": {"pkg/lib.py": ("plain",), "pkg/test_lib.py": ("test_c",)},
    }
    found = _kept({"pkg/lib.py": MEMO, "pkg/test_lib.py": MEMO_TESTS}, ran, "compute")
    assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}


def test_a_changed_body_that_now_writes_into_its_module_keeps_it_for_what_reads_it_back() -> None:
    # #40: the write is the change's own: compute() did not write _SEEN at the map's commit,
    # and now does; a later test that reads _SEEN back sees what it wrote
    old = (
        "_SEEN = {'k': 0}\n\n\ndef compute():\n    return 1\n\n\n"
        "def peek():\n    return _SEEN['k']\n\n\ndef plain():\n    return 0\n"
    )
    new = old.replace("def compute():\n    return 1", "def compute():\n    _SEEN['k'] = 2\n    return 1")
    tests = "from pkg.lib import compute, peek, plain\n\n\ndef test_a():\n    assert compute()\n"
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_lib.py::test_a": {"pkg/lib.py": ("compute",)},
        "pkg/test_lib.py::test_b": {"pkg/lib.py": ("peek",)},
        "pkg/test_lib.py::test_c": {"pkg/lib.py": ("plain",)},
    }
    for made in ("{'k': 0}", "collections.defaultdict(int)"):  # a variable, whatever makes it
        before, after = ("import collections\n" + t.replace("{'k': 0}", made) for t in (old, new))
        sources = {"pkg/lib.py": before, "pkg/test_lib.py": tests}
        assert _kept(sources, ran, "compute") == {}, made
        found = _kept(sources, ran, "compute", now={"pkg/lib.py": after})
        assert found is not None and "pkg/test_lib.py::test_b" in found, made
        assert made != "{'k': 0}" or set(found) == {"pkg/test_lib.py::test_b"}


WIDE = "import pytest\nfrom pkg import lib\n\n\n@pytest.fixture(scope='session')\ndef db():\n    return lib.build()\n"
WIDE_TESTS = "def test_a(db):\n    assert db\n\n\ndef test_b(db):\n    assert db\n\n\ndef test_c():\n    assert True\n"


def test_a_wide_fixture_built_by_a_changed_function_is_every_requesting_test_s() -> None:
    sources = {"pkg/lib.py": "def build():\n    return [1]\n", "pkg/conftest.py": WIDE, "pkg/test_x.py": WIDE_TESTS}
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_x.py::test_a": {"pkg/lib.py": ("build",), "pkg/conftest.py": ("db",), "pkg/test_x.py": ("test_a",)},
        "pkg/test_x.py::test_b": {"pkg/test_x.py": ("test_b",)},
        "pkg/test_x.py::test_c": {"pkg/test_x.py": ("test_c",)},
    }
    found = _kept(sources, ran, "build")
    assert found is not None and set(found) == {"pkg/test_x.py::test_a", "pkg/test_x.py::test_b"}


def test_what_keeps_a_value_cannot_be_told_when_a_caller_ran_at_import_or_the_map_has_no_lines() -> None:
    sources = {"pkg/lib.py": CACHED, "pkg/test_lib.py": CACHED_TESTS}
    first = _lines(CACHED, "first")
    assert _kept(sources, RAN, "table", at_import={"pkg/lib.py": first}) is None
    m = TestMap("cpu", "a" * 40, "2026-12-01T00:00:00+00:00", {}, {}, None)
    assert namereads.keepers("pkg/lib.py", [(6, 6)], namereads.Parsed(sources), m, is_test=bool) is None
    plain = {"pkg/lib.py": "def table():\n    return 1\n", "pkg/test_lib.py": CACHED_TESTS}
    assert namereads.keepers("pkg/lib.py", [(2, 2)], namereads.Parsed(plain), m, is_test=bool) == {}


def test_a_function_reading_names_by_a_computed_one_that_ran_at_import_keeps_no_unrun_change() -> None:
    # #40: toolz's module __getattr__ ran at import; a change to partition_all's body, which
    # never ran at import, ran every test. The body's lines did not run at import, so nothing
    # that function made then holds them; a named caller that ran at import still cannot be told
    lazy = "def __getattr__(name):\n    return globals()['_' + name]\n"
    sources = {"pkg/__init__.py": lazy, "pkg/lib.py": CACHED, "pkg/test_lib.py": CACHED_TESTS}
    at_import = {"pkg/__init__.py": _lines(lazy, "__getattr__")}
    found = _kept(sources, RAN, "table", at_import=at_import)
    assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}
    plain = {**sources, "pkg/lib.py": CACHED.replace("@functools.lru_cache(maxsize=None)\n", "")}
    assert _kept(plain, RAN, "table", at_import=at_import) == {}
    at_import["pkg/lib.py"] = _lines(CACHED, "first")
    assert _kept(sources, RAN, "table", at_import=at_import) is None


def test_a_caller_that_ran_at_import_holds_an_unrun_change_only_through_what_a_keeper_keeps() -> None:
    # #40: toolz: a function that names a followed name (``__doc__``) ran at import, and a
    # change to partition_all's body ran every test. Without a keeper among the names it
    # reads, what it made at import cannot hold lines that never ran at import
    plain = CACHED.replace("@functools.lru_cache(maxsize=None)\n", "")
    sources = {"pkg/lib.py": plain, "pkg/test_lib.py": CACHED_TESTS}
    assert _kept(sources, RAN, "table", at_import={"pkg/lib.py": _lines(plain, "first")}) == {}
    # a keeper between them: a value kept before the recording may be the changed code's
    kept = plain.replace("def first():", "@functools.lru_cache(maxsize=None)\ndef first():")
    sources = {"pkg/lib.py": kept, "pkg/test_lib.py": CACHED_TESTS, "pkg/use.py": USE}
    ran = {**RAN, "pkg/test_lib.py::test_c": {"pkg/use.py": ("second",)}}
    assert _kept(sources, ran, "table", path="pkg/lib.py", at_import={"pkg/use.py": _lines(USE, "second")}) is None


USE = "from pkg.lib import first\n\n\ndef second():\n    return first()\n"


REGISTRY = (
    "import importlib\n\nSIGS = {}\n\n\ndef register(names=('plain',)):\n"
    "    mod = importlib.import_module('pkg.lib')\n    for n in names:\n        SIGS[getattr(mod, n)] = n\n\n\n"
    "def lookup(f):\n    return SIGS.get(f)\n\n\nregister()\n"
)


def test_a_lookup_by_a_computed_name_no_test_ran_keeps_nothing_of_an_unrun_change() -> None:
    # #40: toolz: create_signature_registry() runs at the package's import alone, looks names
    # up by a computed one and writes a registry; every change to partition_all's body, which
    # never ran at import, ran every test. What it kept was made at import, before the changed
    # lines ever ran, and holds no keeper of them: no test reading the registry can see them
    plain = CACHED.replace("@functools.lru_cache(maxsize=None)\n", "")
    sources = {"pkg/lib.py": plain, "pkg/reg.py": REGISTRY, "pkg/test_lib.py": CACHED_TESTS}
    ran = {**RAN, "pkg/test_lib.py::test_c": {"pkg/reg.py": ("lookup",)}}
    at_import = {"pkg/reg.py": _lines(REGISTRY, "register")}
    assert _kept(sources, ran, "table", at_import=at_import) == {}
    # a test ran it: where it runs it reads every name, and what it keeps may be the change's
    tested = {**ran, "pkg/test_lib.py::test_b": {"pkg/reg.py": ("register",)}}
    found = _kept(sources, tested, "table", at_import=at_import)
    assert found is None or "pkg/test_lib.py::test_c" in found
    # a keeper the names reach: the registry may hold it, and a test reaching it through the
    # registry gets what it kept of the change
    sources["pkg/lib.py"] = CACHED
    found = _kept(sources, ran, "table", at_import=at_import)
    assert found is None or "pkg/test_lib.py::test_c" in found


def test_a_changed_body_that_ran_at_import_is_every_importer_s() -> None:
    # a parametrize list, a decorator, TABLE = make(): the body ran at another module's import
    old = "def cases():\n    return [1, 2]\n"
    new = "def cases():\n    return [1, 20]\n"
    sources = {"pkg/lib.py": old, "pkg/test_p.py": "from pkg import lib\n\n\ndef test_p():\n    pass\n"}
    m = TestMap("cpu", "a" * 40, "2026-12-01T00:00:00+00:00", {"pkg/test_p.py::test_p": frozenset()}, {}, {})
    read = {"is_test": lambda f: "test_" in f, "internal": lambda n: n.startswith("pkg")}
    assert namereads.readers("pkg/lib.py", old, new, sources, m, **read) == {}  # type: ignore[arg-type]
    ran = TestMap(m.row, m.commit, m.created, m.tests, {"pkg/lib.py": frozenset({1, 2})}, {})
    assert namereads.readers("pkg/lib.py", old, new, sources, ran, **read) is None  # type: ignore[arg-type]
    at_def = TestMap(m.row, m.commit, m.created, m.tests, {"pkg/lib.py": frozenset({1})}, {})
    assert namereads.readers("pkg/lib.py", old, new, sources, at_def, **read) == {}  # type: ignore[arg-type]


def _internal(name: str) -> bool:
    return name.split(".", 1)[0] == "pkg"


def test_a_call_at_import_through_a_module_from_outside_may_write_the_process_s_state() -> None:
    base = (
        "import logging\nimport os\nimport sys\nimport warnings\nimport random\nfrom os import putenv\n"
        "LOG = logging.getLogger(__name__)\nX = 1\n"
    )
    for write in (
        "os.environ.setdefault('A', '1')",
        "os.environ.update(A='1')",
        "putenv('A', '1')",
        "sys.path.insert(0, 'x')",
        "warnings.filterwarnings('ignore')",
        "random.seed(0)",
        "Y = random.random()",
        "class C:\n    os.environ.pop('A')",
        "LOG.setLevel(10)",
    ):
        said = namereads.process_write(base, base + write + "\n", _internal)
        assert said == write.splitlines()[-1].strip() or said == write.splitlines()[0], write
        assert namereads.process_write(base + write + "\n", base, _internal) is not None  # removed: every test saw it


def test_a_read_a_pure_call_a_project_call_or_a_body_is_no_write_of_the_process() -> None:
    base = "import os\nimport functools\nfrom pkg import helpers\nX = 1\n"
    for same in (
        "V = os.environ.get('A')",
        "P = os.path.join('a', 'b')",
        "T = tuple([1])",
        "@functools.lru_cache(maxsize=None)\ndef f():\n    return 1",
        "def g():\n    os.environ.setdefault('A', '1')",
        "H = helpers.build()",
    ):
        assert namereads.process_write(base, base + same + "\n", _internal) is None, same
    # unchanged at import: a def whose body alone changed, a statement that was there before
    was = base + "os.environ.setdefault('A', '1')\ndef f():\n    return 1\n"
    assert namereads.process_write(was, was.replace("return 1", "return 2"), _internal) is None
    assert namereads.process_write("X = (\n", "os.environ.setdefault('A', '1')\n", _internal) is None
    assert namereads.process_write(None, "import os\nos.environ.setdefault('A', '1')\n", _internal) is not None
    # a file deleted: what its import wrote every test saw
    assert namereads.process_write("import os\nos.environ.setdefault('A', '1')\n", None, _internal) is not None
    # a dotted import binds its first name: what is reached through it is from outside
    dotted = "import xml.etree.ElementTree\n"
    said = namereads.process_write(dotted, dotted + "xml.etree.ElementTree.register_namespace('a', 'b')\n", _internal)
    assert said == "xml.etree.ElementTree.register_namespace('a', 'b')"


def test_a_test_that_reads_a_changed_function_s_code_without_calling_it_runs() -> None:
    lib = "def f():\n    return 1\n\n\ndef g():\n    return 0\n"
    tests = (
        "import inspect\nfrom pkg.lib import f, g\n\n\ndef test_code():\n    assert 1 in f.__code__.co_consts\n\n\n"
        "def test_source():\n    assert 'return 1' in inspect.getsource(f)\n\n\n"
        "def test_g():\n    assert g() == 0\n"
    )
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_lib.py::test_code": {"pkg/test_lib.py": ("test_code",)},
        "pkg/test_lib.py::test_source": {"pkg/test_lib.py": ("test_source",)},
        "pkg/test_lib.py::test_g": {"pkg/lib.py": ("g",), "pkg/test_lib.py": ("test_g",)},
    }
    found = _kept({"pkg/lib.py": lib, "pkg/test_lib.py": tests}, ran, "f")
    assert found == {
        "pkg/test_lib.py::test_code": "it reads the code of a function pkg/lib.py changes",
        "pkg/test_lib.py::test_source": "it reads the code of a function pkg/lib.py changes",
    }
    # one that reads code but names no changed function sees nothing of it
    assert _kept({"pkg/lib.py": lib, "pkg/test_lib.py": tests}, ran, "g") == {}


def test_a_pytest_mark_or_param_at_import_builds_a_mark_and_writes_no_process_state() -> None:
    # #40: on a real repository every commit that added a parametrize case ran every test
    base = "import pytest\nfrom pytest import mark, param as P\nimport pytest as pt\n\n"
    for same in (
        "@pytest.mark.parametrize('x', [1, pytest.param(2, id='two')])\ndef test_a(x):\n    pass",
        "@mark.skipif(True, reason='no')\ndef test_b():\n    pass",
        "@pt.mark.slow.with_args(3)\ndef test_c():\n    pass",
        "CASES = [P(1, marks=pytest.mark.xfail(strict=True))]",
        "pytestmark = pytest.mark.filterwarnings('error')",
    ):
        assert namereads.process_write(base, base + same + "\n", _internal) is None, same
    # pytest's other calls, and a mark's value then called, are not marks
    for write in ("pytest.register_assert_rewrite('pkg.helpers')", "pytest.mark.slow(3)(print)('x')"):
        assert namereads.process_write(base, base + write + "\n", _internal) is not None, write


def test_typing_cast_at_import_returns_its_value_and_writes_nothing() -> None:
    # #40: itsdangerous's `_bytes_to_int = t.cast(...)` ran every test
    base = "import typing as t\nimport struct\n\n_S = struct.Struct('>Q')\n"
    same = "_unpack = t.cast('t.Callable[[bytes], tuple[int]]', _S.unpack)"
    assert namereads.process_write(base, base + same + "\n", _internal) is None


# #40 (a new user's trial): a caller that keeps a changed function's value where its module's
# variables are not (on its object, through a local alias, in a default, in another module)
# kept it for the tests that read it back, which ran none of the changed function
KEEPERS_ELSEWHERE = {
    "on its object": (
        "class Registry:\n    def __init__(self):\n        self._cache = None\n\n"
        "    def compute(self):\n        return 42\n\n"
        "    def get(self):\n        if self._cache is None:\n            self._cache = self.compute()\n"
        "        return self._cache\n\n\nREG = Registry()\n\n\ndef plain():\n    return 0\n"
    ),
    "through a local alias": (
        "_CACHE = {}\n\n\ndef compute():\n    return 1\n\n\n"
        "def get():\n    c = _CACHE\n    if 'k' not in c:\n        c['k'] = compute()\n    return c['k']\n\n\n"
        "def plain():\n    return 0\n"
    ),
    "in a default": (
        "def compute():\n    return 1\n\n\n"
        "def get(_memo={}):\n    if 'k' not in _memo:\n        _memo['k'] = compute()\n    return _memo['k']\n\n\n"
        "def plain():\n    return 0\n"
    ),
    "in another module": (
        "from pkg import other\n\n\ndef compute():\n    return 1\n\n\n"
        "def get():\n    if 'k' not in other.CACHE:\n        other.CACHE['k'] = compute()\n"
        "    return other.CACHE['k']\n\n\ndef plain():\n    return 0\n"
    ),
    "by a method it hands the value to": (
        "class Registry:\n    def compute(self):\n        return 42\n\n"
        "    def get(self):\n        if not self.has():\n            self.store(self.compute())\n"
        "        return self.stored()\n\n\nREG = Registry()\n\n\ndef plain():\n    return 0\n"
    ),
}
KEEPERS_TESTS = (
    "from pkg.lib import get, plain\n\n\ndef test_a():\n    assert get()\n\n\n"
    "def test_b():\n    assert get()\n\n\ndef test_c():\n    assert plain() == 0\n"
)
RAN_GET: dict[str, dict[str, tuple[str, ...]]] = {
    "pkg/test_lib.py::test_a": {"pkg/lib.py": ("compute", "get"), "pkg/test_lib.py": ("test_a",)},
    "pkg/test_lib.py::test_b": {"pkg/lib.py": ("get",), "pkg/test_lib.py": ("test_b",)},  # the kept value
    "pkg/test_lib.py::test_c": {"pkg/lib.py": ("plain",), "pkg/test_lib.py": ("test_c",)},
}


def test_a_caller_keeping_the_value_anywhere_that_outlives_its_call_keeps_it() -> None:
    for how, source in KEEPERS_ELSEWHERE.items():
        sources = {"pkg/lib.py": source, "pkg/other.py": "CACHE = {}\n", "pkg/test_lib.py": KEEPERS_TESTS}
        found = _kept(sources, RAN_GET, "compute")
        assert found is not None and {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"} <= set(found), how
        # a method's class is read too (what it keeps in its instance is read by protocols):
        # `REG = Registry()` reads it at import and does more than bind, so its importers run
        assert ("pkg/test_lib.py::test_c" in found) == ("REG = Registry()" in source), how


def test_a_caller_filling_only_what_it_made_itself_keeps_nothing() -> None:
    fresh = (
        "def compute():\n    return 1\n\n\n"
        "def get():\n    out = {}\n    out['k'] = compute()\n    seen = []\n    seen.append(out)\n"
        "    return out['k']\n\n\ndef plain():\n    return 0\n"
    )
    assert _kept({"pkg/lib.py": fresh, "pkg/test_lib.py": KEEPERS_TESTS}, RAN_GET, "compute") == {}
    rebound = fresh.replace("    seen = []\n", "    seen = []\n    seen = out\n")  # no longer its own
    assert _kept({"pkg/lib.py": rebound, "pkg/test_lib.py": KEEPERS_TESTS}, RAN_GET, "compute") != {}


def test_an_object_made_at_import_keeps_what_a_method_stores_on_it_for_later_readers() -> None:
    # the trial's shape end to end: `REG = Registry()` ran `__init__` at import, which assigns
    # `self._cache = None`; assigning an attribute is no read of what is kept in it
    source = KEEPERS_ELSEWHERE["on its object"]
    init = _lines(source, "__init__")
    top = frozenset(i + 1 for i, line in enumerate(source.splitlines()) if line and not line.startswith(" "))
    sources = {"pkg/lib.py": source, "pkg/test_lib.py": KEEPERS_TESTS}
    found = _kept(sources, RAN_GET, "compute", at_import={"pkg/lib.py": top | init})
    assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"} | {
        "pkg/test_lib.py::test_c"  # it imports the module whose import reads Registry, a keeper's class
    }


PATTERNED = (
    "import re\n\nQUOTE = re.compile(r'&(%s);' % '|'.join(NAMES))\n"
    "SEP = '-'\nPARTS = ('a', ('b', 1))\n_SEEN = set()\n\n\n"
    "def slug(text):\n    return QUOTE.sub(SEP, SEP.join(text.split())) + PARTS.index('a') * SEP\n\n\n"
    "def helper():\n    return SEP\n"
)
PATTERNED_TESTS = (
    "from pkg.lib import helper, slug\n\n\ndef test_a():\n    assert slug('x y')\n\n\n"
    "def test_b():\n    assert helper() == '-'\n"
)


def test_a_method_of_a_value_no_method_can_change_is_no_write_into_the_module() -> None:
    # slug calls QUOTE.sub, SEP.join, PARTS.index: a compiled pattern, a string and a tuple of
    # constants have no method that changes them, so slug keeps nothing of its own change for
    # test_b, which reads SEP (#40: python-slugify's regexes made slugify() a memo)
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_lib.py::test_a": {"pkg/lib.py": ("slug",), "pkg/test_lib.py": ("test_a",)},
        "pkg/test_lib.py::test_b": {"pkg/lib.py": ("helper",), "pkg/test_lib.py": ("test_b",)},
    }
    sources = {"pkg/lib.py": PATTERNED, "pkg/test_lib.py": PATTERNED_TESTS}
    assert _kept(sources, ran, "slug") == {}
    # a value a method can change (a set) is still written: its readers run
    mutable = PATTERNED.replace("return QUOTE.sub", "_SEEN.add(text)\n    return QUOTE.sub").replace(
        "return SEP\n", "return len(_SEEN)\n"
    )
    found = _kept({**sources, "pkg/lib.py": mutable}, ran, "slug")
    assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}
    # a global statement binds the name anew, whatever it held
    rebinds = PATTERNED.replace("    return QUOTE.sub", "    global SEP\n    SEP = text\n    return QUOTE.sub")
    found = _kept({**sources, "pkg/lib.py": rebinds}, ran, "slug")
    assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}
    # a name bound twice, once to a value a method can change, may be that one
    twice = PATTERNED.replace("SEP = '-'\n", "SEP = '-'\nSEP = []\n")
    found = _kept({**sources, "pkg/lib.py": twice}, ran, "slug")
    assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}


def test_a_memo_made_by_any_call_is_written_by_what_fills_it() -> None:
    # the memo's value is built by a call of outside code (defaultdict, OrderedDict): what
    # fills it still keeps the changed function's value for the test that reads it back (#40)
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_lib.py::test_a": {"pkg/lib.py": ("compute", "get"), "pkg/test_lib.py": ("test_a",)},
        "pkg/test_lib.py::test_b": {"pkg/lib.py": ("peek",), "pkg/test_lib.py": ("test_b",)},
        "pkg/test_lib.py::test_c": {"pkg/lib.py": ("plain",), "pkg/test_lib.py": ("test_c",)},
    }
    for made in ("collections.defaultdict(int)", "OrderedDict()", "make_memo()"):
        memo = "import collections\nfrom collections import OrderedDict\n" + MEMO.replace(
            "_MEMO = {}", f"_MEMO = {made}"
        )
        found = _kept({"pkg/lib.py": memo, "pkg/test_lib.py": MEMO_TESTS}, ran, "compute")
        # (the memo's own binding does more than bind: its importers run too)
        assert found is not None and {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"} <= set(found), made


def test_a_local_bound_to_a_copy_is_the_function_s_own() -> None:
    # `s = s.copy(); s.add(x)` changes the function's own copy, nothing that outlives the call
    own_copy = (
        "def compute():\n    return 1\n\n\n"
        "def get(given):\n    s = given.copy()\n    s.add(compute())\n    return len(s)\n\n\n"
        "def plain():\n    return 0\n"
    )
    assert _kept({"pkg/lib.py": own_copy, "pkg/test_lib.py": KEEPERS_TESTS}, RAN_GET, "compute") == {}
    handed = own_copy.replace("    s = given.copy()\n", "    s = given\n")  # the caller's set
    assert _kept({"pkg/lib.py": handed, "pkg/test_lib.py": KEEPERS_TESTS}, RAN_GET, "compute") != {}


def test_a_value_of_the_standard_library_made_at_import_is_no_write_of_the_process() -> None:
    # this repository's own replay: `NOW = datetime(2026, 12, 1, tzinfo=UTC)` and `_STARTS =
    # itertools.count()` at a test module's import ran every test, as possible writes
    base = (
        "import itertools\nimport collections\nimport functools\nimport decimal\n"
        "from datetime import UTC, date, datetime, timezone\nX = 1\n"
    )
    for value in (
        "NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)",
        "DAY = date(2026, 12, 1)",
        "ZONE = timezone.utc",
        "STARTS = itertools.count()",
        "SEEN = collections.OrderedDict()",
        "BY = collections.defaultdict(list)",
        "TWICE = functools.partial(max, 2)",
        "CENT = decimal.Decimal('0.01')",
    ):
        assert namereads.process_write(base, base + value + "\n", _internal) is None, value
    # what is not a value still may write: a clock set, a seed
    for write in ("itertools.count().__next__()", "decimal.getcontext().prec = 4"):
        assert namereads.process_write(base, base + write + "\n", _internal) is not None, write


# #40 (an adversarial probe): a memo a nested scope keeps in a local of the function that made
# it. The local lives in a cell the nested function holds (or its default holds the local's
# object), past the call that bound it: test_b hits what test_a filled and runs no line of the
# changed function. pkg/test_plain.py imports nothing of pkg/lib.py
CLOSURES = {
    "a nested def's cell": (
        "def compute(unit):\n    return 1\n\n\n"
        "def _make():\n    store = {}\n\n    def get(unit):\n        if unit not in store:\n"
        "            store[unit] = compute(unit)\n        return store[unit]\n\n    return get\n\n\n"
        "get = _make()\n"
    ),
    "a lambda's cell": (
        "def compute(unit):\n    return 1\n\n\n"
        "def _make():\n    store = {}\n    return lambda unit: store.setdefault(unit, compute(unit))\n\n\n"
        "get = _make()\n"
    ),
    "a lambda's default": (
        "def compute(unit):\n    return 1\n\n\n"
        "def _make():\n    store = {}\n    return lambda unit, _s=store: _s.setdefault(unit, compute(unit))\n\n\n"
        "get = _make()\n"
    ),
    "a nested class's method": (
        "def compute(unit):\n    return 1\n\n\n"
        "def _make():\n    store = []\n\n    class Get:\n        def __call__(self, unit):\n"
        "            if not store:\n                store.append(compute(unit))\n            return store[0]\n\n"
        "    return Get()\n\n\nget = _make()\n"
    ),
}
PLAIN = {"pkg/plain.py": "def plain():\n    return 0\n", "pkg/test_plain.py": "def test_c():\n    assert True\n"}
RAN_PLAIN: dict[str, dict[str, tuple[str, ...]]] = {
    "pkg/test_plain.py::test_c": {"pkg/plain.py": ("plain",), "pkg/test_plain.py": ("test_c",)}
}


def _apart(importer: str, imported: str) -> bool:
    """Whether a file may import another of the project: any, but pkg/lib.py for pkg/test_plain.py."""
    files = {"pkg/lib.py", "pkg/test_lib.py", *PLAIN}
    return imported in files and not (importer == "pkg/test_plain.py" and imported == "pkg/lib.py")


def _made_at_import(source: str, *names: str) -> dict[str, frozenset[int]]:
    """The lines of ``pkg/lib.py`` its import ran: its top-level lines, the bodies of ``names``."""
    top = frozenset(i + 1 for i, line in enumerate(source.splitlines()) if line and not line.startswith(" "))
    return {"pkg/lib.py": top | _lines(source, *names)}


def test_a_memo_a_nested_scope_keeps_in_its_maker_s_local_outlives_the_call() -> None:
    tests = "from pkg.lib import get\n\n\ndef test_a():\n    assert get('k')\n\n\ndef test_b():\n    assert get('k')\n"
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_lib.py::test_a": {"pkg/lib.py": ("compute",), "pkg/test_lib.py": ("test_a",)},
        "pkg/test_lib.py::test_b": {"pkg/test_lib.py": ("test_b",)},  # the memo's hit
        **RAN_PLAIN,
    }
    for how, source in CLOSURES.items():
        sources = {"pkg/lib.py": source, "pkg/test_lib.py": tests, **PLAIN}
        found = _kept(sources, ran, "compute", at_import=_made_at_import(source, "_make"), sees=_apart)
        assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}, how


def test_a_local_only_its_own_scope_names_keeps_nothing_though_a_scope_is_nested() -> None:
    # a comprehension runs within the call; a nested def's own local dies with its call
    own = (
        "def compute(unit):\n    return 1\n\n\n"
        "def get(units):\n    out = {}\n    for unit in units:\n        out[unit] = compute(unit)\n"
        "    return [out[u] for u in out]\n\n\n"
        "def each(units):\n    def one(unit):\n        out = []\n        out.append(compute(unit))\n"
        "        return out[0]\n\n    return [one(u) for u in units]\n"
    )
    tests = (
        "from pkg.lib import each, get\n\n\ndef test_a():\n    assert get('k')\n\n\n"
        "def test_b():\n    assert each('k')\n"
    )
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_lib.py::test_a": {"pkg/lib.py": ("compute", "get"), "pkg/test_lib.py": ("test_a",)},
        "pkg/test_lib.py::test_b": {"pkg/lib.py": ("compute", "each"), "pkg/test_lib.py": ("test_b",)},
    }
    assert _kept({"pkg/lib.py": own, "pkg/test_lib.py": tests}, ran, "compute") == {}
    # the nested def names the outer local: a cell, which a returned `one` would hold
    shared = own.replace("        out = []\n", "").replace("    def one", "    out = []\n\n    def one")
    assert _kept({"pkg/lib.py": shared, "pkg/test_lib.py": tests}, ran, "compute") != {}


# #40 (an adversarial probe): a method that keeps into its instance is reached by Python's
# protocols (`TABLE[k]` calls `__missing__` and reads what it stored; `TABLE(k)` calls
# `__call__`), never by its name: what it keeps is read by whatever reads its class or an
# instance of it. test_b's hit runs no line of the project
PROTOCOLS = {
    "a dict's __missing__": (
        "class _Table(dict):\n    def __missing__(self, key):\n        value = self[key] = compute(key)\n"
        "        return value\n\n\nTABLE = _Table()\n",
        "__missing__",
        "TABLE['ab']",
    ),
    "a method by name filling its instance": (
        "class _Table(dict):\n    def fill(self, key):\n        self[key] = compute(key)\n"
        "        return self[key]\n\n\nTABLE = _Table()\n",
        "fill",
        "TABLE.fill('ab')",
    ),
    "a cached __call__": (
        "class _Table:\n    @functools.lru_cache(maxsize=None)\n    def __call__(self, key):\n"
        "        return compute(key)\n\n\nTABLE = _Table()\n",
        "__call__",
        "TABLE('ab')",
    ),
    # what stores into the instance by a call, as `self[key] = value` does
    "a base's method through super()": (
        "class _Table(dict):\n    def __missing__(self, key):\n        value = compute(key)\n"
        "        super().__setitem__(key, value)\n        return value\n\n\nTABLE = _Table()\n",
        "__missing__",
        "TABLE['ab']",
    ),
    "a special method through a type": (
        "class _Table(dict):\n    def __missing__(self, key):\n        value = compute(key)\n"
        "        dict.__setitem__(self, key, value)\n        return value\n\n\nTABLE = _Table()\n",
        "__missing__",
        "TABLE['ab']",
    ),
    "setattr": (
        "class _Table:\n    def __getattr__(self, name):\n        value = compute(name)\n"
        "        setattr(self, name, value)\n        return value\n\n\nTABLE = _Table()\n",
        "__getattr__",
        "TABLE.ab",
    ),
    "object.__setattr__ of a name written out": (
        "class _Table:\n    def load(self):\n        object.__setattr__(self, 'ab', compute('ab'))\n"
        "        return self.ab\n\n\nTABLE = _Table()\n",
        "load",
        "TABLE.load()",
    ),
}


def test_what_a_method_keeps_is_read_by_the_readers_of_its_class_and_its_instances() -> None:
    for how, (table, method, fills) in PROTOCOLS.items():
        source = "import functools\n\n\ndef compute(key):\n    return key.upper()\n\n\n" + table
        tests = (
            f"from pkg.lib import TABLE\n\n\ndef test_a():\n    assert {fills}\n\n\n"
            f"def test_b():\n    assert {fills.replace('.fill', '').replace('.load()', '.ab')} == 'AB'\n"
        )
        ran: dict[str, dict[str, tuple[str, ...]]] = {
            "pkg/test_lib.py::test_a": {"pkg/lib.py": ("compute", method), "pkg/test_lib.py": ("test_a",)},
            "pkg/test_lib.py::test_b": {"pkg/test_lib.py": ("test_b",)},
            **RAN_PLAIN,
        }
        sources = {"pkg/lib.py": source, "pkg/test_lib.py": tests, **PLAIN}
        found = _kept(sources, ran, "compute", at_import=_made_at_import(source), sees=_apart)
        assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}, how


def test_the_callers_of_a_method_python_calls_by_a_protocol_are_the_readers_of_its_class() -> None:
    # `VIEW[key]` calls `__getitem__`, which keeps nothing; `get` keeps what it returned, and
    # test_b's hit of get's cache runs no line of the project
    source = (
        "import functools\n\n\ndef compute(key):\n    return key.upper()\n\n\n"
        "class _View:\n    def __getitem__(self, key):\n        return compute(key)\n\n\nVIEW = _View()\n\n\n"
        "@functools.lru_cache(maxsize=None)\ndef get(key):\n    return VIEW[key]\n"
    )
    tests = (
        "from pkg.lib import get\n\n\ndef test_a():\n    assert get('ab')\n\n\ndef test_b():\n    assert get('ab')\n"
    )
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_lib.py::test_a": {"pkg/lib.py": ("compute", "__getitem__", "get"), "pkg/test_lib.py": ("test_a",)},
        "pkg/test_lib.py::test_b": {"pkg/test_lib.py": ("test_b",)},
        **RAN_PLAIN,
    }
    sources = {"pkg/lib.py": source, "pkg/test_lib.py": tests, **PLAIN}
    found = _kept(sources, ran, "compute", at_import=_made_at_import(source), sees=_apart)
    assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}
    # a method of a plain name is called by it: a reader of its class calls none of it
    named = source.replace("__getitem__", "item").replace("VIEW[key]", "key * VIEW.size")
    named = named.replace("class _View:\n", "class _View:\n    size = 2\n\n")
    ran["pkg/test_lib.py::test_a"]["pkg/lib.py"] = ("compute", "item", "get")
    found = _kept({**sources, "pkg/lib.py": named}, ran, "compute", at_import=_made_at_import(named), sees=_apart)
    assert found == {}


def _stored(body: str) -> tuple[frozenset[str] | None, frozenset[str]]:
    """What :func:`namereads._stores` tells of a function ``f(self, obj, v)`` of ``body``
    (its lines, indented as a function's)."""
    (fn,) = ast.parse(f"def f(self, obj, v):\n{body}\n").body
    assert isinstance(fn, ast.FunctionDef)
    return namereads._stores(fn)


def _stores(body: str) -> frozenset[str] | None:
    return _stored(body)[0]


def test_a_call_that_stores_into_an_object_keeps_there_what_it_hands_on() -> None:
    assert _stores("    setattr(obj, 'ab', v)") == _stores("    setattr(obj, 'ab', 'cd')") == frozenset({"ab"})
    assert _stores("    object.__setattr__(self, 'ab', v)") == frozenset({"ab"})
    assert _stores("    setattr(obj, v.name, v)") == frozenset()
    assert _stores("    dict.__setitem__(self, 'k', v)") == frozenset({"k"})  # a key read as a name: one more reader
    assert _stores("    super().__setitem__('k', v)") == frozenset()
    assert _stores("    super(type(self), self).update(k=v)") == frozenset()
    assert _stores("    obj.remember(v)") == frozenset()
    # what only reads, or hands the object to a function that is no method of it, keeps nothing
    for reads in (
        "    os.path.join(obj, v)",
        "    str.join(obj, v)",
        "    getattr(obj, 'ab', v)",
        "    isinstance(obj, v)",
        "    super().get()",
        "    str(obj).join(v)",
        "    out = {}\n    dict.__setitem__(out, obj, v)\n    setattr(out, 'k', v)",
    ):
        assert _stores(reads) is None, reads
    # an alias's stores are into what it was bound from: the module's variable is written
    # (a loop's or a with's name holds what it walks, no local of the function's own)
    for alias in (
        "    c = _CACHE\n    c['k'] = v",
        "    c = _CACHE\n    c.update(k=v)",
        "    for c in _CACHE:\n        c.append(v)",
        "    [c.append(v) for c in _CACHE]",
        "    with lock:\n        pass\n    with _CACHE as c:\n        c.append(v)",
    ):
        kept, through = _stored(alias)
        assert kept == frozenset() and "_CACHE" in through, alias
    assert _stored("    del obj['k']\n    make()['k'] = v") == (frozenset(), frozenset())


def test_what_a_nested_scope_names_of_its_maker_s_locals_outlives_the_call() -> None:
    assert _stores("    store = {}\n\n    def g(k):\n        store[k] = v\n\n    return g") == frozenset()
    assert _stores("    store = []\n    return lambda k: store.append(k)") == frozenset()
    assert _stores("    store = []\n    return lambda k, s=store: s.append(k)") == frozenset()
    assert _stores("    store = []\n\n    class C:\n        s = store.append(v)") == frozenset()
    assert _stores("    store = []\n\n    async def g():\n        store.append(v)") == frozenset()
    assert _stores("    n = 0\n\n    def g():\n        nonlocal n\n        n = v\n\n    return g") == frozenset()
    # a local of a nested def that a scope nested in that one names is a cell of it
    inner = "    def g():\n        out = []\n        return lambda: out.append(v)\n\n    return g"
    assert _stores(inner) == frozenset()
    # a comprehension runs within the call, and a nested scope's own local dies with its call
    assert _stores("    store = {}\n    store[1] = v\n    return [store[x] for x in v]") is None
    assert _stores("    def g(k):\n        store = {}\n        store[k] = v\n        return store") is None
    assert _stores("    store = {}\n    store[1] = v\n    return lambda k: k + 1") is None


def test_a_function_handed_to_a_call_at_import_is_kept_by_what_the_call_made() -> None:
    # ``read = functools.lru_cache()(_read)``: the cache decorator applied by a call, at import
    by_call = (
        "import functools\n\n\ndef table():\n    return (1, 2)\n\n\n"
        "cached = functools.lru_cache(maxsize=None)(table)\n\n\n"
        "def first():\n    return cached()[0]\n\n\ndef plain():\n    return 0\n"
    )
    tests, ran = CACHED_TESTS, RAN
    found = _kept({"pkg/lib.py": by_call, "pkg/test_lib.py": tests}, ran, "table")
    assert found is not None and set(found) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}
    assert "what cached keeps" in found["pkg/test_lib.py::test_b"], found
    # handed to a call that binds nothing (``register(table)``): who reads what it keeps is unknown
    registered = by_call.replace("cached = functools.lru_cache(maxsize=None)(table)", "REGISTRY.append(table)")
    registered = "REGISTRY = []\n" + registered.replace("cached()", "REGISTRY[0]()")
    assert _kept({"pkg/lib.py": registered, "pkg/test_lib.py": tests}, ran, "table") is None
    # called at import, not handed on: a value it returned then holds none of an unrun change
    called = by_call.replace("cached = functools.lru_cache(maxsize=None)(table)", "FIRST = table()")
    assert _kept({"pkg/lib.py": called, "pkg/test_lib.py": tests}, ran, "table") == {}
    # its value handed to a call (``print(table())``) is no handing of the function
    printed = by_call.replace("cached = functools.lru_cache(maxsize=None)(table)", "print(table())")
    assert _kept({"pkg/lib.py": printed, "pkg/test_lib.py": tests}, ran, "table") == {}
    for handed in ("functools.partial(table)", "wrap(key=table)", "wrap(mod.table)"):
        kept = by_call.replace("functools.lru_cache(maxsize=None)(table)", handed)
        assert _kept({"pkg/lib.py": kept, "pkg/test_lib.py": tests}, ran, "table") == found, handed


# #40: a caller hands what the changed function made (or the function itself, or nothing: a
# call it makes by what the function returned) to a function of the project that keeps
STORE = (
    "_SEEN = []\n\n\ndef remember(v):\n    _SEEN.append(v)\n\n\ndef keep(f):\n    _SEEN.append(f(2))\n\n\n"
    "def mark():\n    _SEEN.append(1)\n\n\ndef last():\n    return _SEEN[-1]\n\n\n"
    "def shout(v):\n    return str(v)\n\n\nclass Kept:\n    def __init__(self, v):\n        _SEEN.append(v)\n"
)
CORE = "def compute(n):\n    return n * 2\n\n\ndef other():\n    return 0\n"
READER = "from pkg.store import last\n\n\ndef test_b():\n    assert last() == 4\n"


def test_a_value_a_caller_hands_to_a_function_that_keeps_it_is_kept() -> None:
    callers = {
        "handed": ("remember(compute(2))", ("remember",)),
        "a callback": ("keep(compute)", ("keep",)),
        "by what it returned": ("if compute(2):\n        mark()", ("mark",)),
        "through a module": ("store.remember(compute(2))", ("remember",)),
        "handed to a call": ("list(map(remember, [compute(2)]))", ("remember",)),
        "through an alias": ("put = remember\n    put(compute(2))", ("remember",)),
        "by a computed name": ("getattr(store, 'remember')(compute(2))", ("remember",)),
        "to a class": ("Kept(compute(2))", ("__init__",)),
    }
    for label, (call, ran_store) in callers.items():
        head = "from pkg import store\nfrom pkg.core import compute\nfrom pkg.store import *\n\nSEP = 'a-b'\n"
        test_a = f"{head}\n\ndef test_a():\n    {call}\n"
        sources = {"pkg/core.py": CORE, "pkg/store.py": STORE, "pkg/test_a.py": test_a, "pkg/test_b.py": READER}
        ran: dict[str, dict[str, tuple[str, ...]]] = {
            "pkg/test_a.py::test_a": {
                "pkg/core.py": ("compute",),
                "pkg/store.py": ran_store,
                "pkg/test_a.py": ("test_a",),
            },
            "pkg/test_b.py::test_b": {"pkg/store.py": ("last",), "pkg/test_b.py": ("test_b",)},
        }
        found = _kept(sources, ran, "compute", path="pkg/core.py")
        assert found is not None and "pkg/test_b.py::test_b" in found, label
        assert "keeps of a function pkg/core.py changes" in found["pkg/test_b.py::test_b"], label


def test_a_function_a_caller_hands_to_that_keeps_nothing_adds_no_test() -> None:
    test_a = "from pkg.core import compute\nfrom pkg.store import shout\n\n\ndef test_a():\n    shout(compute(2))\n"
    sources = {"pkg/core.py": CORE, "pkg/store.py": STORE, "pkg/test_a.py": test_a, "pkg/test_b.py": READER}
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_a.py::test_a": {
            "pkg/core.py": ("compute",),
            "pkg/store.py": ("shout",),
            "pkg/test_a.py": ("test_a",),
        },
        "pkg/test_b.py::test_b": {"pkg/store.py": ("last",), "pkg/test_b.py": ("test_b",)},
    }
    assert _kept(sources, ran, "compute", path="pkg/core.py") == {}


def test_what_is_handed_down_a_chain_of_callees_is_followed_to_the_one_that_keeps() -> None:
    # each callee is in a file read before its caller's: every pass reaches one more
    sources = {
        "pkg/a.py": "_SEEN = []\n\n\ndef put(v):\n    _SEEN.append(v)\n\n\ndef last():\n    return _SEEN[-1]\n",
        "pkg/b.py": "from pkg.a import put\n\n\ndef pass_on(v):\n    put(v)\n",
        "pkg/c.py": "from pkg.b import pass_on\n\n\ndef remember(v):\n    pass_on(v)\n",
        "pkg/core.py": CORE,
        "pkg/test_a.py": "from pkg.c import remember\nfrom pkg.core import compute\n\n\ndef test_a():\n"
        "    remember(compute(2))\n",
        # another caller of the change, read after test_a, names none of the chain
        "pkg/test_c.py": "from pkg.core import compute\n\n\ndef test_c():\n    assert compute(1)\n",
        "pkg/test_z.py": "from pkg.a import last\n\n\ndef test_z():\n    assert last() == 4\n",
    }
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_a.py::test_a": {
            "pkg/core.py": ("compute",),
            "pkg/c.py": ("remember",),
            "pkg/b.py": ("pass_on",),
            "pkg/a.py": ("put",),
            "pkg/test_a.py": ("test_a",),
        },
        "pkg/test_c.py::test_c": {"pkg/core.py": ("compute",), "pkg/test_c.py": ("test_c",)},
        "pkg/test_z.py::test_z": {"pkg/a.py": ("last",), "pkg/test_z.py": ("test_z",)},
    }
    found = _kept(sources, ran, "compute", path="pkg/core.py")
    assert found is not None and "pkg/test_z.py::test_z" in found


# a function that keeps only in what it is handed: its callers' objects hold what it keeps
TAGS = (
    "SHARED = []\n\n\ndef tag(text, bag):\n    bag.append(text.upper())\n\n\n"
    "def tidy(text):\n    return text.replace('-', ' ')\n\n\ndef shared():\n    return SHARED[-1]\n"
)


def test_what_a_function_keeps_in_what_it_is_handed_is_read_by_the_holders_of_what_is_handed() -> None:
    callers = {
        # a test's own constant: nothing outlives the test; tidy()'s other callers get nothing
        "a constant": ("txt = 'a-b'\n    if compute(2):\n        assert tidy(txt)", set()),
        "a module's constant": ("if compute(2):\n        assert tidy(SEP)", set()),
        # handed a list of the module's: the tests that read SHARED get it
        "a shared list": ("tag(str(compute(2)), store.SHARED)", {"pkg/test_s.py::test_s"}),
    }
    for label, (call, more) in callers.items():
        head = "from pkg import store\nfrom pkg.core import compute\nfrom pkg.store import *\n\nSEP = 'a-b'\n"
        test_a = f"{head}\n\ndef test_a():\n    {call}\n"
        sources = {
            "pkg/core.py": CORE,
            "pkg/store.py": TAGS,
            "pkg/test_a.py": test_a,
            "pkg/test_t.py": "from pkg.store import tidy\n\n\ndef test_t():\n    assert tidy('x-y') == 'x y'\n",
            "pkg/test_s.py": "from pkg.store import shared\n\n\ndef test_s():\n    assert shared() == 'A'\n",
        }
        ran: dict[str, dict[str, tuple[str, ...]]] = {
            "pkg/test_a.py::test_a": {
                "pkg/core.py": ("compute",),
                "pkg/store.py": ("tag", "tidy"),
                "pkg/test_a.py": ("test_a",),
            },
            "pkg/test_t.py::test_t": {"pkg/store.py": ("tidy",), "pkg/test_t.py": ("test_t",)},
            "pkg/test_s.py::test_s": {"pkg/store.py": ("shared",), "pkg/test_s.py": ("test_s",)},
        }
        found = _kept(sources, ran, "compute", path="pkg/core.py")
        assert found is not None and set(found) - {"pkg/test_a.py::test_a"} == more, label


def test_a_test_method_s_own_instance_keeps_nothing_past_its_test() -> None:
    # pytest (and unittest) makes an instance of the class for each test: what a test method
    # stores on self, or hands a method of self (assertEqual), dies with its test
    tests = (
        "class TestA:\n    limit = 1\n\n    def test_one(self):\n        self.seen = 1\n"
        "        self.check(2)\n\n    def check(self, v):\n        return v\n"
    )
    reader = "from pkg.test_a import TestA\n\n\ndef test_b():\n    assert TestA.limit == 1\n"
    sources = {"pkg/test_a.py": tests, "pkg/test_b.py": reader}
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_a.py::TestA::test_one": {"pkg/test_a.py": ("test_one", "check")},
        "pkg/test_b.py::test_b": {"pkg/test_b.py": ("test_b",)},
    }
    assert _kept(sources, ran, "test_one", path="pkg/test_a.py") == {}
    # a method so named of a class of the project's code is no test's: its instance may be shared
    found = _kept({**sources, "pkg/lib.py": tests}, {}, "test_one", path="pkg/lib.py")
    assert found is not None


def test_code_the_map_never_saw_run_reads_and_keeps_nothing() -> None:
    # scripts/tool.py ran neither at import nor in a test: what it does with compute at its
    # top level (a function handed to a call no name binds) is no test's
    tool = "from pkg.core import compute\nfrom pkg.store import remember\n\nremember(compute)\n"
    test_a = "from pkg.core import compute\n\n\ndef test_a():\n    assert compute(1)\n"
    sources = {"pkg/core.py": CORE, "pkg/store.py": STORE, "scripts/tool.py": tool, "pkg/test_a.py": test_a}
    ran: dict[str, dict[str, tuple[str, ...]]] = {
        "pkg/test_a.py::test_a": {"pkg/core.py": ("compute",), "pkg/test_a.py": ("test_a",)},
    }
    at_import = {"pkg/core.py": frozenset({1}), "pkg/test_a.py": frozenset({1})}
    assert _kept(sources, ran, "compute", path="pkg/core.py", at_import=at_import) == {}
    # a map that does not say what ran at import cannot tell it
    assert _kept(sources, ran, "compute", path="pkg/core.py") is None


def test_a_method_called_on_what_an_object_holds_keeps_there() -> None:
    # ``self.items.append(v)``: what the instance (or, for a list made in the class body, every
    # instance) holds; ``self.x = v`` of a test method is its test's own instance alone
    for label, body in {
        "an attribute's method": "self.items.append(v)",
        "deeper": "self.box.items.append(v)",
        "an item's method": "self.items[0].append(v)",
    }.items():
        source = f"class Registry:\n    items = []\n\n    def add(self, v):\n        {body}\n"
        fn = ast.parse(source).body[0].body[1]  # type: ignore[attr-defined]
        stored, _ = namereads._stores(fn)
        assert stored is not None and "items" in stored, label
    # a module's function called on the way keeps nothing on ``path``
    fn = ast.parse("def add(self, v):\n    self.items.append(os.path.join(v, 'x'))\n").body[0]
    assert namereads._stores(fn)[0] == frozenset({"items"})  # type: ignore[arg-type]
    test = "def test_one(self):\n    self.x = 1\n    self.check(2)\n"
    assert namereads._stores(ast.parse(test).body[0], ("self",))[0] is None  # type: ignore[arg-type]
    for leaks in ("self.items.append(2)", "self.items[0] = 2", "self.__class__.x = 2", "type(self).x = 2"):
        test = f"def test_one(self):\n    {leaks}\n"
        assert namereads._stores(ast.parse(test).body[0], ("self",))[0] is not None, leaks  # type: ignore[arg-type]


def test_a_method_called_on_what_a_module_s_object_holds_writes_that_object() -> None:
    fn = ast.parse("def add(v):\n    REG.items.append(v)\n").body[0]
    assert namereads._writes(fn) == {"REG"}  # type: ignore[arg-type]


def test_what_a_caller_changes_of_another_module_s_variable_is_read_there() -> None:
    # SEEN is store.py's: a test that appends to it what compute made, imported by its name or
    # reached through its module, keeps it for the tests that read SEEN back
    store = "SEEN = []\n\n\ndef last():\n    return SEEN[-1]\n"
    test_b = "from pkg.store import last\n\n\ndef test_b():\n    assert last() == 4\n"
    for call in ("SEEN.append(compute(2))", "store.SEEN.append(compute(2))", "store.SEEN[0] = compute(2)"):
        head = "from pkg import store\nfrom pkg.core import compute\nfrom pkg.store import SEEN\n"
        test_a = f"{head}\n\ndef test_a():\n    {call}\n"
        sources = {"pkg/core.py": CORE, "pkg/store.py": store, "pkg/test_a.py": test_a, "pkg/test_b.py": test_b}
        ran: dict[str, dict[str, tuple[str, ...]]] = {
            "pkg/test_a.py::test_a": {"pkg/core.py": ("compute",), "pkg/test_a.py": ("test_a",)},
            "pkg/test_b.py::test_b": {"pkg/store.py": ("last",), "pkg/test_b.py": ("test_b",)},
        }
        found = _kept(sources, ran, "compute", path="pkg/core.py")
        assert found is not None and "pkg/test_b.py::test_b" in found, call
        assert "SEEN" in found["pkg/test_b.py::test_b"], call
    # a module's function called with arguments (json.dumps(v)) changes no variable of it
    test_a = "import json\nfrom pkg.core import compute\n\n\ndef test_a():\n    json.dumps(compute(2))\n"
    sources = {"pkg/core.py": CORE, "pkg/store.py": store, "pkg/test_a.py": test_a, "pkg/test_b.py": test_b}
    assert _kept(sources, ran, "compute", path="pkg/core.py") == {}


def _fn(source: str, variables: frozenset[str] = frozenset()) -> namereads._Function:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    return namereads._function(node, (), variables, variables)


def test_a_function_keeps_only_in_what_it_is_handed_when_every_store_is_on_a_parameter() -> None:
    given = (
        "def f(text, out):\n    text.replace('a', 'b')\n    out[0] = 1\n    out.x = 2\n    own = {}\n    own['k'] = 1\n"
    )
    assert namereads._into_given(_fn(given))
    assert namereads._into_given(_fn("def f(t):\n    PATTERN.sub('-', t)\n    t.update(k=1)\n"))
    assert namereads._into_given(_fn("@staticmethod\ndef f(t):\n    t.append(1)\n"))
    for label, source in {
        "a module's variable": "def f(v):\n    _SEEN.append(v)\n",
        "a decorator that keeps": "@functools.cache\ndef f(t):\n    return t\n",
        "a lambda": "def f(t):\n    return sorted(t, key=lambda x: x)\n",
        "a nested def": "def f(t):\n    def g():\n        return t\n    return g\n",
        "a nonlocal": "def f(t):\n    nonlocal n\n",
        "a global": "def f(t):\n    global n\n",
        "a store on another's object": "def f(v):\n    other.x = v\n",
        "a store on what a call made": "def f(v):\n    g().x = v\n",
        "an alias's method": "def f(t):\n    u = t\n    u.append(1)\n",
        "an alias's method by keyword": "def f(t):\n    u = t\n    u.update(k=1)\n",
        "super": "def f(self, v):\n    super().put(v)\n",
    }.items():
        assert not namereads._into_given(_fn(source, frozenset({"_SEEN"}))), label


def test_what_callers_hand_a_function_is_told_constant_or_by_the_names_that_reach_it() -> None:
    def handed(body: str) -> tuple[bool, frozenset[str]]:
        return namereads._handed("tidy", [_fn(f"def c(xs):\n{body}")])

    assert handed("    txt = 'a'\n    tidy(txt)\n    tidy('b', n=1)\n    print(SHARED)\n") == (True, frozenset())
    assert handed("    tidy(A)\n    tidy(B)\n") == (False, frozenset({"A", "B"}))
    assert handed("    tidy(A)\n    tidy('x')\n") == (False, frozenset({"A"}))
    assert handed("    store.tidy('a')\n") == (False, frozenset({"store"}))
    assert handed("    return map(tidy, ITEMS)\n") == (False, frozenset({"ITEMS"}))
    assert handed("    getattr(m, 'tidy')('a')\n")[0] is False
    assert handed("    put = tidy\n    put('a')\n")[0] is False


def test_a_local_only_ever_bound_to_a_constant_is_told_apart() -> None:
    source = (
        "def f(p):\n    a = 'x'\n    a = 'y'\n    b = 'x'\n    b = g()\n    c = 1\n    for d in p:\n        pass\n"
        "    e = 'z'\n    p = 'q'\n    return lambda: e\n"
    )
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    assert namereads._constant_locals(node) == {"a", "c"}


def test_what_reaches_an_object_handed_is_named_by_what_is_not_the_caller_s_own() -> None:
    caller = _fn("def c(p):\n    x = g()\n    tidy(x)\n", frozenset({"LIMIT"}))
    expr = ast.parse("x + a.b + LIMIT + p + q", mode="eval").body
    constant = namereads._constant_locals(caller.node) | (caller.variables - caller.changeable)
    own = namereads._bound_here(caller.node)
    assert namereads._holders(expr, constant, own) == frozenset({"a", "b", "LIMIT", "q"})
    assert namereads._holders(ast.parse("x", mode="eval").body, constant, own) == frozenset()
    assert namereads._holders(ast.parse("'s'", mode="eval").body, constant, own) is None
    mutated = _fn("def f(p):\n    x = []\n    x.append(1)\n    p.append(2)\n    G.append(3)\n    m.V[0] = 1\n").node
    assert namereads._mutated(mutated) == {("G", ""), ("m", "V")}


@pytest.mark.parametrize(
    "call",
    ["bisect.insort(_T, v)", "heapq.heappush(_T, v)", "operator.setitem(_T.d, 0, v)", "setattr(_T, 'x', v)"],
)
def test_a_standard_function_that_changes_what_it_is_handed_first_writes_it(call: str) -> None:
    (fn,) = ast.parse(f"def fill(v):\n    {call}\n").body
    assert isinstance(fn, ast.FunctionDef)
    assert namereads._writes(fn) == {"_T"}
    # handed a parameter: kept in what the caller hands it
    (given,) = ast.parse(f"def fill(_T, v):\n    {call}\n").body
    assert isinstance(given, ast.FunctionDef)
    assert namereads._stores(given)[0] is not None


@pytest.mark.parametrize(
    "call",
    [
        "list.append(_T, v)",
        "dict.update(_T, v)",
        "dict.setdefault(_T, 'k', v)",
        "set.add(_T, v)",
        "list.insert(_T, 0, v)",
        "next(_T)",
        "list(itertools.islice(_T, 2))",
    ],
)
def test_a_method_called_through_its_type_or_an_iterator_advanced_writes_what_it_is_handed(call: str) -> None:
    (fn,) = ast.parse(f"def fill(v):\n    {call}\n").body
    assert isinstance(fn, ast.FunctionDef)
    assert "_T" in namereads._writes(fn)


@pytest.mark.parametrize(
    "write",
    [
        "globals()['_LAST'] = v",
        "sys.modules[__name__].__dict__['_LAST'] = v",
        "setattr(sys.modules[__name__], '_LAST', v)",
        "object.__setattr__(sys.modules[__name__], '_LAST', v)",
    ],
)
def test_a_function_that_writes_its_module_by_a_computed_name_may_write_every_variable(write: str) -> None:
    source = f"import sys\n\n_LAST = None\nLIMIT = 3\n\n\ndef keep(v):\n    {write}\n\n\ndef plain(v):\n    return v\n"
    keep, plain = ast.parse(source).body[-2:]
    assert isinstance(keep, ast.FunctionDef) and isinstance(plain, ast.FunctionDef)
    assert namereads._writes_by_computed_name(keep)
    assert not namereads._writes_by_computed_name(plain)


@pytest.mark.parametrize(
    "write",
    ["(lst := _T).append(v)", "getattr(_T, 'items').append(v)", "vars(_T)['v'] = v", "getattr(_T, 'items')[0] = v"],
)
def test_a_write_through_what_names_its_object_after_all_writes_it(write: str) -> None:
    (fn,) = ast.parse(f"def fill(v):\n    {write}\n").body
    assert isinstance(fn, ast.FunctionDef)
    assert "_T" in namereads._writes(fn)


@pytest.mark.parametrize(
    ("write", "written"),
    [
        ("Reg.items.append(v)", {"Reg"}),
        ("getattr(Reg, 'items').append(v)", {"Reg"}),
        ("Reg.last = v", {"Reg"}),
        ("Reg.items[0] = v", {"Reg"}),
        ("bisect.insort(Reg.items, v)", {"Reg"}),
        ("Reg.make(v)", set()),  # a method of the class: the project's code, followed as a call
        ("Other.items.append(v)", set()),  # not a class of the module
        ("x = Reg.items.copy()", set()),
    ],
)
def test_a_function_that_changes_what_a_class_of_its_module_holds_writes_the_class(
    write: str, written: set[str]
) -> None:
    (fn,) = ast.parse(f"def fill(v):\n    {write}\n").body
    assert isinstance(fn, ast.FunctionDef)
    assert namereads._class_writes(fn, {"Reg"}) == written


def test_a_standard_function_handed_a_module_name_but_not_first_writes_nothing() -> None:
    (fn,) = ast.parse("def f(v):\n    return bisect.bisect(_T, v) + len(_T) + heapq.nsmallest(1, _T)[0]\n").body
    assert isinstance(fn, ast.FunctionDef)
    assert "_T" not in namereads._writes(fn)
