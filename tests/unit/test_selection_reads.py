"""#34: a change to what runs at import (a constant, a default, a class attribute) runs the
tests that read a name it binds anew, by the map's lines and the names the code mentions,
and nothing else; where that cannot be told, the import graph's rule holds (None)."""

from __future__ import annotations

from collections.abc import Callable, Collection

import pytest

from device_matrix.changes import namereads
from device_matrix.records.testmap import TestMap

RATE = "RATE = 3\nOTHER = 1\n"


def _lines(source: str, *names: str) -> frozenset[int]:
    """The body lines of the named functions of ``source`` (a test's run of them)."""
    import ast

    found: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name in names:
            found.update(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))
    return frozenset(found)


def _why(
    sources: dict[str, str],
    ran: dict[str, dict[str, tuple[str, ...]]],
    new: str,
    *,
    path: str = "pkg/consts.py",
    graph: dict[str, set[str]] | None = None,
    at_import: dict[str, frozenset[int]] | None = None,
) -> dict[str, str] | None:
    """What :func:`namereads.readers` says of the change of ``path`` to ``new``; ``ran``:
    nodeid -> file -> the functions of it the test ran; ``graph``: file -> the files it
    imports, a file seeing what it imports transitively (None: every file sees every file);
    ``at_import``: the lines the map saw run at import."""

    def sees(reader: str, origin: str) -> bool:
        assert graph is not None
        todo, seen = [reader], {reader}
        while todo:
            for nxt in graph.get(todo.pop(), set()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return origin in seen

    lines = {n: {f: _lines(sources[f], *fns) for f, fns in per.items()} for n, per in ran.items()}
    tests = {n: frozenset(per) for n, per in ran.items()}
    m = TestMap("cpu", "a" * 40, "2026-12-01T00:00:00+00:00", tests, at_import or {}, lines)
    return namereads.readers(
        path,
        sources[path],
        new,
        sources,
        m,
        is_test=lambda f: f.rsplit("/", 1)[-1].startswith("test_"),
        internal=lambda name: name.split(".", 1)[0] == "pkg",
        **({"sees": sees} if graph is not None else {}),  # type: ignore[arg-type]
    )


def _readers(
    sources: dict[str, str],
    ran: dict[str, dict[str, tuple[str, ...]]],
    new: str,
    *,
    path: str = "pkg/consts.py",
    imports: dict[str, frozenset[int]] | None = None,
) -> set[str] | None:
    """The tests :func:`_why` runs; ``imports``: the lines the map saw run at import."""
    found = _why(sources, ran, new, path=path, at_import=imports)
    return None if found is None else set(found)


API = "from pkg import consts\n\n\ndef rated(x):\n    return x * consts.RATE\n\n\ndef plain(x):\n    return x\n"
TESTS = (
    "from pkg.api import plain, rated\n\n\n"
    "def test_rated():\n    assert rated(1) == 3\n\n\n"
    "def test_plain():\n    assert plain(1) == 1\n"
)
SOURCES = {"pkg/consts.py": RATE, "pkg/api.py": API, "tests/test_api.py": TESTS}
RAN = {
    "tests/test_api.py::test_rated": {"pkg/api.py": ("rated",), "tests/test_api.py": ("test_rated",)},
    "tests/test_api.py::test_plain": {"pkg/api.py": ("plain",), "tests/test_api.py": ("test_plain",)},
}


def test_a_constant_runs_the_tests_that_ran_a_function_reading_it_and_no_other() -> None:
    assert _readers(SOURCES, RAN, RATE.replace("3", "4")) == {"tests/test_api.py::test_rated"}
    # a name nothing reads runs nothing
    assert _readers(SOURCES, RAN, RATE.replace("OTHER = 1", "OTHER = 2")) == set()


def test_a_name_bound_from_a_changed_one_is_read_in_turn() -> None:
    limits = "from pkg.consts import RATE as R\nLIMIT = R * 2\n\n\ndef limit():\n    return LIMIT\n"
    tests = "from pkg.limits import limit\n\n\ndef test_limit():\n    assert limit() == 6\n"
    sources = {**SOURCES, "pkg/limits.py": limits, "tests/test_limits.py": tests}
    ran = {**RAN, "tests/test_limits.py::test_limit": {"pkg/limits.py": ("limit",)}}
    assert _readers(sources, ran, RATE.replace("3", "4")) == {
        "tests/test_api.py::test_rated",
        "tests/test_limits.py::test_limit",
    }


def test_a_value_a_cache_hands_to_a_test_that_never_ran_its_lines_is_read_by_that_test() -> None:
    # table() ran for the first test only; the second got its cached value through get()
    cached = (
        "import functools\nfrom pkg import consts\n\n\n@functools.cache\ndef table():\n    return consts.RATE\n\n\n"
        "def get():\n    return table()\n"
    )
    tests = "from pkg.cached import get\n\n\ndef test_a():\n    assert get()\n\n\ndef test_b():\n    assert get()\n"
    sources = {**SOURCES, "pkg/cached.py": cached, "tests/test_cached.py": tests}
    ran = {
        **RAN,
        "tests/test_cached.py::test_a": {"pkg/cached.py": ("get", "table")},
        "tests/test_cached.py::test_b": {"pkg/cached.py": ("get",)},
    }
    found = _readers(sources, ran, RATE.replace("3", "4"))
    assert found is not None and {"tests/test_cached.py::test_a", "tests/test_cached.py::test_b"} <= found


def test_a_test_module_that_reads_a_name_at_import_runs_all_its_tests() -> None:
    tests = (
        "import pytest\nfrom pkg.consts import RATE\n\n\n@pytest.mark.parametrize('x', [RATE])\n"
        "def test_p(x):\n    assert x\n\n\ndef test_q():\n    assert True\n"
    )
    sources = {**SOURCES, "tests/test_param.py": tests}
    ran = {**RAN, "tests/test_param.py::test_p[3]": {}, "tests/test_param.py::test_q": {}}
    found = _readers(sources, ran, RATE.replace("3", "4"))
    assert found == {"tests/test_api.py::test_rated", "tests/test_param.py::test_p[3]", "tests/test_param.py::test_q"}


def test_a_class_attribute_runs_the_tests_that_read_it_or_use_the_class() -> None:
    shapes = (
        "class Box:\n    size = 3\n\n    def area(self):\n        return self.size ** 2\n\n"
        "    def name(self):\n        return 'box'\n\n\ndef named():\n    return 'x'\n"
    )
    tests = (
        "from pkg.shapes import Box, named\n\n\ndef test_area():\n    assert Box().area() == 9\n\n\n"
        "def test_named():\n    assert named() == 'x'\n"
    )
    sources = {"pkg/shapes.py": shapes, "tests/test_shapes.py": tests}
    ran = {
        "tests/test_shapes.py::test_area": {"pkg/shapes.py": ("area",), "tests/test_shapes.py": ("test_area",)},
        "tests/test_shapes.py::test_named": {"pkg/shapes.py": ("named",), "tests/test_shapes.py": ("test_named",)},
    }
    new = shapes.replace("size = 3", "size = 4")
    assert _readers(sources, ran, new, path="pkg/shapes.py") == {"tests/test_shapes.py::test_area"}


def test_a_changed_default_runs_the_tests_that_ran_the_function() -> None:
    api = "def scaled(x, by=2):\n    return x * by\n\n\ndef other(x):\n    return x\n"
    tests = (
        "from pkg import api\n\n\ndef test_s():\n    assert api.scaled(1)\n\n\ndef test_o():\n    assert api.other(1)\n"
    )
    sources = {"pkg/api.py": api, "tests/test_api.py": tests}
    ran = {
        "tests/test_api.py::test_s": {"pkg/api.py": ("scaled",), "tests/test_api.py": ("test_s",)},
        "tests/test_api.py::test_o": {"pkg/api.py": ("other",), "tests/test_api.py": ("test_o",)},
    }
    assert _readers(sources, ran, api.replace("by=2", "by=3"), path="pkg/api.py") == {"tests/test_api.py::test_s"}


def test_a_function_that_reads_names_by_a_computed_one_reads_every_name() -> None:
    dyn = "from pkg import consts\n\n\ndef value(name):\n    return getattr(consts, name)\n"
    sources = {**SOURCES, "pkg/dyn.py": dyn}
    ran = {**RAN, "tests/test_dyn.py::test_v": {"pkg/dyn.py": ("value",)}}
    found = _readers(sources, ran, RATE.replace("3", "4"))
    assert found is not None and "tests/test_dyn.py::test_v" in found


def test_what_cannot_be_told_by_names_is_none() -> None:
    # a call at module level (it may register anything), an if, an import from outside the project
    assert _readers(SOURCES, RAN, RATE + "print(RATE)\n") is None
    assert _readers(SOURCES, RAN, "if True:\n    RATE = 4\nOTHER = 1\n") is None
    assert _readers(SOURCES, RAN, "import numpy\n" + RATE) is None
    # a name bound twice: which binding a reader sees is not told by the name
    assert _readers(SOURCES, RAN, RATE + "RATE = 5\n") is None
    # a function reading it ran at import: its value is every importer's
    imports = {"pkg/api.py": _lines(API, "rated")}
    assert _readers(SOURCES, RAN, RATE.replace("3", "4"), imports=imports) is None


def test_a_map_without_lines_cannot_tell() -> None:
    m = TestMap("cpu", "a" * 40, "2026-12-01T00:00:00+00:00", {}, {}, None)
    assert namereads.readers("pkg/consts.py", RATE, RATE, SOURCES, m, is_test=bool, internal=bool) is None


def test_the_changed_names_are_the_bindings_that_differ() -> None:
    def names(old: str, new: str) -> frozenset[str] | None:
        change = namereads.changed_names(old, new, lambda name: name.startswith("pkg"))
        return None if change is None else change.names

    assert names(RATE, RATE.replace("3", "4")) == {"RATE"}
    assert names(RATE, RATE + "\n\ndef new(x):\n    return x\n") == {"new"}
    assert names(RATE, "from pkg import api\n" + RATE) == {"api"}
    assert names("class C:\n    a = 1\n    b = 2\n", "class C:\n    a = 1\n    b = 3\n") == {"C", "b"}
    assert names("@register\ndef f():\n    pass\n", "@register\ndef f(x=1):\n    pass\n") is None
    # a body alone changed: no name, its lines
    body = namereads.changed_names("def f():\n    return 1\n", "def f():\n    return 2\n", bool)
    assert body is not None and body.names == frozenset() and body.bodies == ((2, 2),)


@pytest.mark.parametrize(
    "made",
    [
        "H = {n: f for n, f in globals().items()}\n",
        "__all__ = [n for n in dir() if not n.startswith('_')]\n",
        "@register(vars())\ndef g():\n    pass\n",
        "class C(*vars().values()):\n    pass\n",
    ],
    ids=["globals", "dir", "decorator", "bases"],
)
def test_a_name_bound_anew_where_the_import_reads_every_name_cannot_be_told(made: str) -> None:
    old = "def handle_a():\n    return 1\n\n\n" + made
    new = "def handle_b():\n    return 2\n\n\n" + old
    assert namereads.changed_names(old, new, bool) is None
    # a body alone changed: what the lookup made holds the same function
    body = namereads.changed_names(old, old.replace("return 1", "return 3"), bool)
    assert body is not None and body.names == frozenset()


def test_a_name_bound_anew_where_the_import_no_longer_reads_every_name_cannot_be_told() -> None:
    registry = "H = {n: f for n, f in globals().items()}\n"
    old = "def handle_a():\n    return 1\n\n\n" + registry
    assert namereads.changed_names(old, "def handle_b():\n    return 2\n\n\n" + old.replace(registry, ""), bool) is None


def test_how_annotations_compile_or_a_class_made_by_more_than_its_statement_cannot_be_told() -> None:
    assert namereads.changed_names(RATE, "from __future__ import annotations\n" + RATE, bool) is None
    # a member of a class a metaclass makes, however deep; a decorator of the module's own
    nested = "class M(type):\n    pass\n\n\nclass A(metaclass=M):\n    class B:\n        x = 1\n"
    assert namereads.changed_names(nested, nested.replace("x = 1", "x = 2"), bool) is None
    own = "REG = []\n\n\ndef dataclass(c):\n    REG.append(c)\n    return c\n\n\n@dataclass\nclass C:\n    a = 1\n"
    assert namereads.changed_names(own, own.replace("a = 1", "a = 2"), bool) is None
    plain = own.replace("@dataclass\n", "")
    change = namereads.changed_names(plain, plain.replace("a = 1", "a = 2"), bool)
    assert change is not None and change.names == {"C", "a"}


def test_a_module_s_annotation_changed_is_read_where_annotations_are() -> None:
    readers = {"__annotations__", "get_type_hints", "get_annotations"}
    for old, new in (("x: int = 5\n", "x: str = 5\n"), ("X = 1\n", "X = 1\ny: int\n"), ("y: int\nX = 1\n", "X = 1\n")):
        change = namereads.changed_names(old, new, bool)
        assert change is not None and readers <= change.names, (old, new)
    # its value alone: the annotations are as they were
    change = namereads.changed_names("x: int = 5\n", "x: int = 6\n", bool)
    assert change is not None and change.names == {"x"}
    # a class's: read where the class is (get_type_hints(C) names it)
    change = namereads.changed_names("class C:\n    a: int = 1\n", "class C:\n    a: str = 1\n", bool)
    assert change is not None and change.names == {"C", "a"}


def test_a_lookup_by_a_computed_name_in_a_function_s_body_leaves_the_import_told() -> None:
    old = "def handle_a():\n    return 1\n\n\ndef table():\n    return dict(globals())\n"
    change = namereads.changed_names(old, "def handle_b():\n    return 2\n\n\n" + old, bool)
    assert change is not None and change.names == {"handle_b"}


def test_an_autouse_fixture_that_reads_a_name_runs_every_test_under_it() -> None:
    conftest = (
        "import pytest\nfrom pkg import consts\n\n\n@pytest.fixture(scope='session', autouse=True)\n"
        "def env():\n    return consts.RATE\n"
    )
    sources = {**SOURCES, "tests/conftest.py": conftest}
    ran = {
        **RAN,
        "tests/test_api.py::test_plain": {**RAN["tests/test_api.py::test_plain"], "tests/conftest.py": ("env",)},
    }
    found = _readers(sources, ran, RATE.replace("3", "4"))
    assert found == {"tests/test_api.py::test_rated", "tests/test_api.py::test_plain"}
    # one a plugin module holds is any test's
    sources = {**SOURCES, "pkg/plugin.py": conftest}
    assert _readers(sources, RAN, RATE.replace("3", "4")) is None


def test_a_class_a_metaclass_or_a_registering_base_makes_cannot_be_told() -> None:
    shapes = "class Box(Base):\n    size = 3\n"
    sources = {"pkg/shapes.py": shapes, "pkg/base.py": "class Base:\n    def __init_subclass__(cls):\n        pass\n"}
    assert _readers(sources, {}, shapes.replace("3", "4"), path="pkg/shapes.py") is None
    meta = "class Box(metaclass=Meta):\n    size = 3\n"
    assert _readers({"pkg/shapes.py": meta}, {}, meta.replace("3", "4"), path="pkg/shapes.py") is None
    # without either, the class's readers are told
    plain = {"pkg/shapes.py": shapes, "pkg/base.py": "class Base:\n    pass\n"}
    assert _readers(plain, {}, shapes.replace("3", "4"), path="pkg/shapes.py") == set()


def test_two_functions_of_one_name_in_modules_that_do_not_import_each_other_are_two_names() -> None:
    # a.py's reader is named like b.py's function: b's callers do not read what a's returns
    a = "from pkg import consts\n\n\ndef value():\n    return consts.RATE\n"
    b = "def value():\n    return 1\n\n\ndef caller():\n    return value()\n"
    sources = {**SOURCES, "pkg/a.py": a, "pkg/b.py": b}
    ran = {**RAN, "tests/test_b.py::test_b": {"pkg/b.py": ("caller",)}}
    imports = {"pkg/a.py": {"pkg/consts.py"}, "pkg/b.py": set()}
    by_graph = _why(sources, ran, RATE.replace("3", "4"), graph=imports)
    assert by_graph is not None and "tests/test_b.py::test_b" not in by_graph
    by_name = _why(sources, ran, RATE.replace("3", "4"))  # by name alone, every file sees every file
    assert by_name is not None and "tests/test_b.py::test_b" in by_name


def test_an_added_import_of_a_module_that_only_binds_names_is_told_and_any_other_is_not() -> None:
    new = "from pkg import api\n" + RATE
    assert _readers(SOURCES, RAN, new) == set()  # api.py binds names alone: nothing reads `api` here
    loud = {**SOURCES, "pkg/loud.py": "import numpy\n\nREGISTRY = {}\n"}
    assert _readers(loud, RAN, "from pkg import loud\n" + RATE) is None  # its import runs numpy's
    calls = {**SOURCES, "pkg/calls.py": "import os\n\nos.environ['X'] = '1'\n"}
    assert _readers(calls, RAN, "from pkg import calls\n" + RATE) is None  # its import sets a variable
    stdlib = {**SOURCES, "pkg/quiet.py": "import os\n\nX = 1\n"}
    assert _readers(stdlib, RAN, "from pkg import quiet\n" + RATE) == set()
    # a relative import is the project's, and checked the same way
    assert _readers(calls, RAN, "from . import calls\n" + RATE) is None


def test_a_class_of_a_base_from_outside_the_project_cannot_be_told() -> None:
    shapes = "import torch\n\n\nclass Net(torch.nn.Module):\n    width = 3\n"
    assert _readers({"pkg/shapes.py": shapes}, {}, shapes.replace("3", "4"), path="pkg/shapes.py") is None
    # a base of the project's own, of plain bases, is told
    own = "class Base(Exception):\n    pass\n\n\nclass Mine(Base):\n    width = 3\n"
    assert _readers({"pkg/shapes.py": own}, {}, own.replace("3", "4"), path="pkg/shapes.py") == set()


# ------------------------------------------------------------------ what each rule says, exactly


def test_each_test_run_says_which_names_it_reads_and_who_binds_them() -> None:
    assert _why(SOURCES, RAN, RATE.replace("3", "4")) == {
        "tests/test_api.py::test_rated": "it ran code that reads RATE, which pkg/consts.py binds anew at import"
    }
    many = "A = 1\nB = 1\nC = 1\nD = 1\n"
    reader = "from pkg import consts\n\n\ndef f():\n    return consts.A\n"
    sources = {"pkg/consts.py": many, "pkg/r.py": reader}
    found = _why(sources, {"t/test_r.py::t": {"pkg/r.py": ("f",)}}, "A = 2\nB = 2\nC = 2\nD = 2\n")
    assert found == {
        "t/test_r.py::t": "it ran code that reads A, B, C and 1 more, which pkg/consts.py binds anew at import"
    }
    three = _why(sources, {"t/test_r.py::t": {"pkg/r.py": ("f",)}}, "A = 2\nB = 2\nC = 2\nD = 1\n")
    assert three == {"t/test_r.py::t": "it ran code that reads A, B, C, which pkg/consts.py binds anew at import"}


def test_a_test_module_that_reads_at_import_says_so() -> None:
    tests = "from pkg.consts import RATE\n\nCASES = [RATE]\n\n\ndef test_c():\n    assert CASES\n"
    sources = {**SOURCES, "tests/test_cases.py": tests}
    found = _why(sources, {**RAN, "tests/test_cases.py::TestC::test_c": {}}, RATE.replace("3", "4"))
    assert found is not None
    assert (
        found["tests/test_cases.py::TestC::test_c"] == "its module reads RATE at import, which pkg/consts.py binds anew"
    )


def test_a_body_changed_beside_a_constant_runs_the_tests_that_ran_that_body() -> None:
    lib = "RATE = 3\n\n\ndef f():\n    return 1\n\n\ndef g():\n    return 2\n"
    sources = {"pkg/lib.py": lib}
    ran = {"t/test_l.py::test_f": {"pkg/lib.py": ("f",)}, "t/test_l.py::test_g": {"pkg/lib.py": ("g",)}}
    new = lib.replace("RATE = 3", "RATE = 4").replace("return 1", "return 5")
    assert _why(sources, ran, new, path="pkg/lib.py") == {
        "t/test_l.py::test_f": "it ran code that reads RATE, which pkg/lib.py binds anew at import"
    }
    # a body alone, beside a docstring changed: the body's tests, said so
    doc = '"""One."""\n\n\ndef f():\n    return 1\n'
    body = _why({"pkg/lib.py": doc}, ran, doc.replace("One", "Two").replace("return 1", "return 5"), path="pkg/lib.py")
    assert body == {"t/test_l.py::test_f": "it ran a function pkg/lib.py changes"}


def test_a_reader_is_its_body_lines_and_no_line_next_to_them() -> None:
    # no blank line: g's first line follows f's last but one; a test that ran g alone reads nothing
    lib = "from pkg import consts\ndef f():\n    return consts.RATE\ndef g():\n    return 1\ndef h():\n    return 2\n"
    sources = {**SOURCES, "pkg/lib.py": lib}
    ran = {"t/test_l.py::test_g": {"pkg/lib.py": ("g",)}, "t/test_l.py::test_f": {"pkg/lib.py": ("f",)}}
    assert set(_why(sources, ran, RATE.replace("3", "4")) or {}) == {"t/test_l.py::test_f"}
    first = "def f():\n    return 1\nfrom pkg import consts\ndef g():\n    return consts.RATE\n"
    ran = {"t/test_l.py::test_f": {"pkg/first.py": ("f",)}}
    assert _why({**SOURCES, "pkg/first.py": first}, ran, RATE.replace("3", "4")) == {}


def test_a_conftest_that_reads_a_name_at_import_runs_the_tests_under_its_folder_only() -> None:
    conftest = "from pkg.consts import RATE\n\nLIMIT = RATE\n"
    sources = {**SOURCES, "tests/unit/conftest.py": conftest}
    ran = {"tests/unit/test_u.py::test_u": {}, "tests/test_top.py::test_t": {}, "tests/unitx/test_x.py::test_x": {}}
    assert set(_why(sources, ran, RATE.replace("3", "4")) or {}) == {"tests/unit/test_u.py::test_u"}
    top = {**SOURCES, "conftest.py": conftest}
    assert set(_why(top, ran, RATE.replace("3", "4")) or {}) == set(ran)


def test_an_import_in_a_test_module_binds_only_the_names_it_takes() -> None:
    tests = (
        "from pkg.consts import RATE as R, OTHER\n\n\n"
        "def test_r():\n    assert R\n\n\ndef test_o():\n    assert OTHER\n"
    )
    sources = {**SOURCES, "tests/test_ro.py": tests}
    ran = {
        "tests/test_ro.py::test_r": {"tests/test_ro.py": ("test_r",)},
        "tests/test_ro.py::test_o": {"tests/test_ro.py": ("test_o",)},
    }
    assert set(_why(sources, ran, RATE.replace("3", "4")) or {}) == {"tests/test_ro.py::test_r"}
    # `import a.b as c` binds c
    plain = "import pkg.consts as c\n\n\ndef test_c():\n    assert c.X\n"
    sources = {**SOURCES, "tests/test_c.py": plain}
    ran = {"tests/test_c.py::test_c": {"tests/test_c.py": ("test_c",)}}
    assert set(_why(sources, ran, RATE.replace("3", "4")) or {}) == set()
    star = {**SOURCES, "pkg/all.py": "from pkg.consts import *\n\n\ndef f():\n    return RATE\n"}
    ran = {"t/test_a.py::t": {"pkg/all.py": ("f",)}}
    assert set(_why(star, ran, RATE.replace("3", "4")) or {}) == {"t/test_a.py::t"}


def test_an_autouse_fixture_is_told_from_a_plain_one() -> None:
    def fixture(decorator: str) -> set[str] | None:
        conftest = f"import pytest\nfrom pkg import consts\n\n\n{decorator}\ndef env():\n    return consts.RATE\n"
        sources = {**SOURCES, "tests/conftest.py": conftest}
        ran = {**RAN, "tests/test_api.py::test_plain": {"tests/conftest.py": ("env",)}}
        found = _why(sources, ran, RATE.replace("3", "4"))
        return None if found is None else set(found)

    both = {"tests/test_api.py::test_rated", "tests/test_api.py::test_plain"}
    assert fixture("@pytest.fixture(autouse=True)") == both
    assert fixture("@pytest.fixture(scope='session')") == both  # plain: test_plain ran it, test_rated reads RATE
    # one the other test did not run: a plain fixture is its requesters', an autouse one every test's
    conftest = (
        "import pytest\nfrom pkg import consts\n\n\n"
        "@pytest.fixture(scope='session')\ndef env():\n    return consts.RATE\n"
    )
    sources = {**SOURCES, "tests/conftest.py": conftest, "tests/test_e.py": "def test_e():\n    pass\n"}
    ran = {"tests/test_e.py::test_e": {}, "tests/test_z.py::test_z": {"tests/conftest.py": ("env",)}}
    assert set(_why(sources, ran, RATE.replace("3", "4")) or {}) == {"tests/test_z.py::test_z"}
    auto = conftest.replace("scope='session'", "autouse=True")
    assert set(_why({**sources, "tests/conftest.py": auto}, ran, RATE.replace("3", "4")) or {}) == set(ran)


def test_a_computed_getattr_reads_every_name_and_a_written_one_does_not() -> None:
    def dyn(body: str) -> bool:
        sources = {**SOURCES, "pkg/dyn.py": f"from pkg import consts\n\n\ndef value(name):\n    return {body}\n"}
        found = _why(sources, {"t/test_d.py::t": {"pkg/dyn.py": ("value",)}}, RATE.replace("OTHER = 1", "OTHER = 2"))
        return found is not None and "t/test_d.py::t" in found

    assert dyn("getattr(consts, name)")
    assert dyn("getattr(consts)")
    assert not dyn("getattr(consts, 'ELSE')")
    assert dyn("consts.__dict__[name]")
    assert dyn("globals()[name]")
    assert not dyn("hasattr(consts, 'ELSE')")
    assert dyn("hasattr(consts, name)")


def _foreign_write(old: str | None, new: str | None) -> str | None:
    return namereads.foreign_write(old, new, lambda name: name.split(".", 1)[0] == "pkg")


def _names(old: str, new: str, package: str = "pkg") -> frozenset[str] | None:
    change = namereads.changed_names(old, new, lambda name: name.split(".", 1)[0] == "pkg", package)
    return None if change is None else change.names


def test_a_def_s_header_is_its_decorators_arguments_and_annotations() -> None:
    f = "def f(x: int = 1, *a: int, k: int = 2, **kw: int) -> int:\n    return x\n"
    assert _names(f, f.replace("-> int", "-> str")) == {"f"}
    assert _names(f, f.replace("x: int", "x: str")) == {"f"}
    assert _names(f, f.replace("*a: int", "*a: str")) == {"f"}
    assert _names(f, f.replace("**kw: int", "**kw: str")) == {"f"}
    assert _names(f, f.replace("k: int = 2", "k: int = 3")) == {"f"}
    assert _names(f, f.replace("def f", "async def f")) == {"f"}
    assert _names(f, "@property\n" + f) == {"f"}
    assert _names(f, "@staticmethod\n" + f) == {"f"}
    assert _names(f, "@cache(3)\n" + f) == {"f"}
    assert _names(f, "@cache(size())\n" + f) is None  # a call at import
    assert _names(f, f.replace("= 1", "= make()")) is None
    body = namereads.changed_names(f, f.replace("return x", "return 2"), bool)
    assert body is not None and body.names == frozenset() and body.bodies == ((2, 2),)


def test_a_function_s_typed_overloads_bind_its_one_name() -> None:
    # #40: itsdangerous: ``@t.overload`` stubs bind a name several times, which was taken for a
    # name bound twice (cannot be told): each stub is registered for the function's name
    # (typing.get_overloads reads it by that name) and the last def binds it
    stubs = (
        "import typing as t\n\n\n@t.overload\ndef f(x: int) -> int: ...\n\n\n"
        "@t.overload\ndef f(x: str) -> str: ...\n\n\ndef f(x):\n    return x\n\n\nK = 1\n"
    )
    assert _names(stubs, stubs.replace("(x: str) -> str", "(x: bytes) -> bytes")) == {"f"}
    assert _names(stubs, stubs.replace("@t.overload\ndef f(x: int) -> int: ...\n\n\n", "")) == {"f"}
    assert _names(stubs, stubs.replace("K = 1", "K = 2")) == {"K"}
    body = namereads.changed_names(stubs, stubs.replace("return x", "return 2"), bool)
    assert body is not None and body.names == frozenset() and len(body.bodies) == 1
    # a name bound twice otherwise still cannot be told
    twice = "def f():\n    return 1\n\n\ndef f():\n    return 2\n"
    assert _names(twice, twice.replace("return 2", "return 3")) is None


def test_a_class_attribute_wrapped_by_a_builtin_descriptor_is_bound_alone() -> None:
    # #40: itsdangerous: ``default_digest_method = staticmethod(hashlib.sha1)`` was taken for
    # a call at import; staticmethod, classmethod and property build a descriptor, nothing else
    c = "import hashlib\n\n\nclass C:\n    digest = staticmethod(hashlib.sha1)\n"
    for wrap in ("staticmethod", "classmethod", "property"):
        assert _names(c, c.replace("staticmethod(hashlib.sha1)", f"{wrap}(hashlib.sha256)")) == {"C", "digest"}
    assert _names(c, c.replace("staticmethod(hashlib.sha1)", "staticmethod(hashlib.new('sha1'))")) is None


def test_what_only_a_type_checker_runs_binds_nothing() -> None:
    # #40: itsdangerous: an import added under ``if t.TYPE_CHECKING:`` was taken for an ``if``
    # at import; typing.TYPE_CHECKING is False when the code runs, so the block never does
    m = "import typing as t\n\nif t.TYPE_CHECKING:\n    import json\n\nK = 1\n"
    assert _names(m, m.replace("import json", "import json\n    import pickle").replace("K = 1", "K = 2")) == {"K"}
    bare = "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import json\n\nK = 1\n"
    assert _names(bare, bare.replace("json", "pickle").replace("K = 1", "K = 2")) == {"K"}
    # another name, an else, or a flag of the project's own: it runs
    for other in (
        m.replace("t.TYPE_CHECKING", "t.DEBUG"),
        m.replace("K = 1", "K = 1\n").replace("    import json\n", "    import json\nelse:\n    import csv\n"),
        bare.replace("from typing import", "from pkg.flags import"),
    ):
        assert _names(other, other.replace("json", "pickle").replace("K = 1", "K = 2")) is None, other


def test_a_class_s_header_is_its_bases_keywords_and_decorators() -> None:
    c = "class C(Base):\n    a = 1\n\n    def m(self):\n        return 1\n"
    assert _names(c, c.replace("(Base)", "(Base, Other)")) == {"C"}
    assert _names(c, "@dataclass\n" + c) == {"C"}
    assert _names(c, "@register\n" + c) is None
    assert _names(c, c.replace("(Base)", "(Base, metaclass=M)")) is None
    assert _names(c, c.replace("class C", "class D")) == {"C", "D", "a", "m"}
    assert _names(c, c.replace("a = 1", "a = 2")) == {"C", "a"}
    member = namereads.changed_names(c, c.replace("return 1", "return 2"), bool)
    assert member is not None and member.names == frozenset() and member.bodies == ((5, 5),)
    # a member bound twice in its class cannot be told
    assert _names(c, c + "    a = 3\n") is None
    # a member of a class in a class is its classes' too
    nested = "class A:\n    class B:\n        x = 1\n"
    assert _names(nested, nested.replace("1", "2")) == {"A", "B", "x"}


def test_a_binding_is_one_that_changes_a_name_of_its_own() -> None:
    base = "X = 1\n"
    assert _names(base, "X = 2\n") == {"X"}
    # an annotation added: the module's __annotations__ too (read where annotations are)
    assert _names(base, "X: int = 2\n") == {"X"} | namereads.ANNOTATION_READERS
    assert _names(base, base + "Y: int\n") == {"Y"} | namereads.ANNOTATION_READERS
    assert _names(base, base + "X += 1\n") is None  # X bound twice
    assert _names(base, base + "Y = Z = X\n") == {"Y", "Z"}
    assert _names(base, base + "A, B = 1, 2\n") == {"A", "B"}
    assert _names(base, base + "a.b = 1\n") is None
    assert _names(base, base + "d['k'] = 1\n") is None
    assert _names(base, base + "A, *B = 1, 2\n") is None
    assert _names(base, base + "Y = frozenset({1})\n") == {"Y"}
    assert _names(base, base + "Y = compute()\n") is None
    assert _names(base, base + "Y = (Z := 1)\n") is None
    assert _names(base, base + "Y = lambda: (yield)\n") is None
    assert _names(base, base + "pass\n") is None  # nothing bound: no name to tell by
    assert _names(base, '"""doc"""\n' + base) is None
    assert _names(base, base + "del X\n") is None
    assert _names("", "Y = 1\n") == {"Y"}
    assert _names(base, "X = (\n") is None  # not Python


def test_an_import_the_change_adds_is_of_the_project_or_it_cannot_be_told() -> None:
    base = "X = 1\n"
    # how every annotation is compiled changes, and no name says who reads one
    assert _names(base, "from __future__ import annotations\n" + base) is None
    assert _names(base, "import pkg.api\n" + base) == {"pkg"}
    assert _names(base, "import pkg.api, numpy\n" + base) is None
    assert _names(base, "from . import api\n" + base) == {"api"}
    assert _names(base, "from numpy import array\n" + base) is None
    change = namereads.changed_names(base, "from .. import api\nfrom .sub import x\n" + base, bool, "pkg.inner")
    assert change is not None and set(change.modules) == {"pkg", "pkg.api", "pkg.inner.sub", "pkg.inner.sub.x"}
    change = namereads.changed_names(base, "import pkg.a.b\nfrom pkg.c import *\n" + base, bool, "pkg")
    assert change is not None and set(change.modules) == {"pkg.a.b", "pkg.c"}
    change = namereads.changed_names(base, "from . import f\n" + base, bool, "")
    assert change is not None and set(change.modules) == {"", "f"}


def test_an_added_import_runs_the_module_s_code_and_of_what_it_imports() -> None:
    def told(extra: dict[str, str], added: str, path: str = "pkg/consts.py") -> bool:
        sources = {**SOURCES, **extra}
        return _why(sources, {}, added + sources[path], path=path) is not None

    quiet = {"pkg/q.py": "import os\nimport os.path\nX = 1\n"}
    assert told(quiet, "from pkg import q\n")
    assert told(quiet, "import pkg.q\n")
    assert not told({"pkg/q.py": "import yaml\nX = 1\n"}, "from pkg import q\n")
    # what it imports of the project is held the same way, through any depth
    chain = {"pkg/q.py": "from pkg import r\n", "pkg/r.py": "from pkg import s\n", "pkg/s.py": "print(1)\n"}
    assert not told(chain, "from pkg import q\n")
    ring = {"pkg/q.py": "from pkg import r\nX = 1\n", "pkg/r.py": "from pkg import q\nY = 1\n"}
    assert told(ring, "from pkg import q\n")
    # a package's __init__ runs first, and a relative import starts from the file's package
    assert not told({"pkg/sub/__init__.py": "print(1)\n", "pkg/sub/m.py": "X = 1\n"}, "from pkg.sub import m\n")
    nested = {
        "pkg/sub/__init__.py": "",
        "pkg/sub/m.py": "from . import n\n",
        "pkg/sub/n.py": "print(1)\n",
        "pkg/n.py": "",
    }
    assert not told(nested, "from pkg.sub import m\n")
    init = {"pkg/sub/__init__.py": "from . import n\n", "pkg/sub/n.py": "print(1)\n", "pkg/n.py": ""}
    assert not told(init, "import pkg.sub\n")
    up = {"pkg/sub/__init__.py": "", "pkg/sub/m.py": "from .. import n\n", "pkg/n.py": "print(1)\n", "pkg/sub/n.py": ""}
    assert not told(up, "from pkg.sub import m\n")
    src = {"src/pkg/__init__.py": "", "src/pkg/m.py": "from . import n\n", "src/pkg/n.py": "print(1)\n", "pkg/n.py": ""}
    assert not told(src, "from pkg import m\n")
    # a name in a module (not a module of its own), and a folder without __init__.py, are told
    assert told({"pkg/api2.py": "def f():\n    pass\n"}, "from pkg.api2 import f\n")
    assert told({"pkg/ns/m.py": "X = 1\n"}, "from pkg.ns import m\n")
    assert not told({}, "from pkg.nowhere import m\n")
    assert not told({"pkg/bad.py": "X = (\n"}, "from pkg import bad\n")
    # a name is every file its path ends in, at a folder's edge (which folders are on sys.path
    # is not guessed): pkg/mypkg.py is not pkg, pkg/pkg.py may be
    assert told({**quiet, "pkg/mypkg.py": "print(1)\n"}, "from pkg import q\n")
    assert not told({**quiet, "pkg/pkg.py": "print(1)\n"}, "from pkg import q\n")
    assert not told({"pkg/q.py": "from __future__ import annotations\nimport numpy\n"}, "from pkg import q\n")


def _seeing(
    sources: dict[str, str],
    ran: dict[str, dict[str, tuple[str, ...]]],
    new: str,
    imports: dict[str, set[str]],
    *,
    path: str = "pkg/consts.py",
    at_import: dict[str, frozenset[int]] | None = None,
) -> set[str] | None:
    """:func:`_readers` where a file sees only itself and what ``imports`` says it imports
    (transitively)."""
    found = _why(sources, ran, new, path=path, graph=imports, at_import=at_import)
    return None if found is None else set(found)


IMPORTS = {"pkg/api.py": {"pkg/consts.py"}, "tests/test_api.py": {"pkg/api.py"}}


def test_a_name_is_read_where_its_module_is_imported_and_what_is_bound_from_it_too() -> None:
    assert _seeing(SOURCES, RAN, RATE.replace("3", "4"), IMPORTS) == {"tests/test_api.py::test_rated"}
    # rated, read in turn, is api.py's: a module that does not import api.py reads another `rated`
    other = "def rated():\n    return 0\n\n\ndef calls():\n    return rated()\n"
    sources = {**SOURCES, "pkg/other.py": other}
    ran = {**RAN, "t/test_o.py::t": {"pkg/other.py": ("calls",)}}
    assert _seeing(sources, ran, RATE.replace("3", "4"), IMPORTS) == {"tests/test_api.py::test_rated"}
    through = {**IMPORTS, "pkg/other.py": {"pkg/api.py"}}
    assert _seeing(sources, ran, RATE.replace("3", "4"), through) == {"tests/test_api.py::test_rated", "t/test_o.py::t"}


def test_a_star_import_s_importers_read_what_it_takes() -> None:
    hub = "from pkg.consts import *\n"
    user = "from pkg.hub import RATE\n\n\ndef f():\n    return RATE\n"
    sources = {**SOURCES, "pkg/hub.py": hub, "pkg/user.py": user}
    ran = {"t/test_u.py::t": {"pkg/user.py": ("f",)}}
    imports = {"pkg/hub.py": {"pkg/consts.py"}, "pkg/user.py": {"pkg/hub.py"}}
    assert _seeing(sources, ran, RATE.replace("3", "4"), imports) == {"t/test_u.py::t"}
    assert _seeing(sources, ran, RATE.replace("3", "4"), {**imports, "pkg/hub.py": set()}) == set()


def test_a_dunder_python_reads_is_not_told_by_names() -> None:
    # nothing names __getattr__, __all__ or __dir__: Python reads them (an attribute missing,
    # a star import, dir()); a change to one goes by the import graph
    lazy = "def __getattr__(name, default=1):\n    return default\n\n\ndef other():\n    return 2\n"
    sources = {"pkg/lazy.py": lazy}
    assert _seeing(sources, {}, lazy.replace("default=1", "default=3"), {}, path="pkg/lazy.py") is None
    assert _seeing(sources, {}, lazy + "\n\ndef __dir__():\n    return []\n", {}, path="pkg/lazy.py") is None
    star = "__all__ = ['A', 'B']\nA = 1\nB = 2\n"
    assert _seeing({"pkg/s.py": star}, {}, star.replace(", 'B'", ""), {}, path="pkg/s.py") is None
    cls = "class C:\n    def __eq__(self, other):\n        return True\n"
    assert (
        _seeing({"pkg/c.py": cls}, {}, cls.replace("(self, other)", "(self, other=None)"), {}, path="pkg/c.py") is None
    )


def test_a_reader_that_ran_at_import_is_told_by_its_body_lines_alone() -> None:
    # the def lines ran at import (as every definition does), and the line after the body too
    api = "from pkg import consts\n\n\ndef rated(x):\n    return x * consts.RATE\ndef plain(x):\n    return x\n"
    sources = {**SOURCES, "pkg/api.py": api}
    defs = {"pkg/api.py": frozenset({1, 4, 6})}
    found = _seeing(sources, RAN, RATE.replace("3", "4"), IMPORTS, at_import=defs)
    assert found == {"tests/test_api.py::test_rated"}
    # a reader whose body ran at import, its first line or its last, cannot be told
    long = "from pkg import consts\n\n\ndef rated(x):\n    if x:\n        return 1\n    return consts.RATE\n"
    sources = {**SOURCES, "pkg/api.py": long}
    for line in (5, 7):
        at = {"pkg/api.py": frozenset({1, 4, line})}
        assert _seeing(sources, RAN, RATE.replace("3", "4"), IMPORTS, at_import=at) is None, line


def test_an_added_relative_import_starts_from_the_file_s_package() -> None:
    sub = {
        "pkg/sub/__init__.py": "",
        "pkg/sub/consts.py": RATE,
        "pkg/sub/quiet.py": "X = 1\n",
        "pkg/quiet.py": "print(1)\n",
        "pkg/sub/deep/__init__.py": "",
        "pkg/sub/deep/c.py": RATE,
    }
    path = "pkg/sub/consts.py"
    assert _seeing(sub, {}, "from . import quiet\n" + RATE, {}, path=path) == set()
    assert _seeing(sub, {}, "from .. import quiet\n" + RATE, {}, path=path) is None
    assert _seeing(sub, {}, "from .. import quiet\n" + RATE, {}, path="pkg/sub/deep/c.py") == set()
    init = {**sub, "pkg/sub/__init__.py": RATE}
    assert _seeing(init, {}, "from . import quiet\n" + RATE, {}, path="pkg/sub/__init__.py") == set()
    src = {f"src/{p}": t for p, t in sub.items()}
    assert _seeing(src, {}, "from . import quiet\n" + RATE, {}, path="src/pkg/sub/consts.py") == set()
    # a module of the standard library deep in its package is the standard library's
    quiet = {**sub, "pkg/sub/quiet.py": "import xml.etree.ElementTree\nX = 1\n"}
    assert _seeing(quiet, {}, "from . import quiet\n" + RATE, {}, path=path) == set()


def test_the_changed_names_default_to_no_package() -> None:
    change = namereads.changed_names("X = 1\n", "from . import f\nX = 1\n", bool)
    assert change is not None and set(change.modules) == {"", "f"}
    change = namereads.changed_names("X = 1\n", "import a.b as c\nX = 1\n", bool)
    assert change is not None and change.names == {"c"}
    change = namereads.changed_names("X = 1\n", "import a.b\nX = 1\n", bool)
    assert change is not None and change.names == {"a"}


def test_more_of_what_a_header_or_a_binding_runs_at_import_is_held_the_same_way() -> None:
    f = "def f(x, *a, k=2, **kw):\n    return x\n"
    assert _names(f, f.replace("k=2", "k=make()")) is None  # a keyword-only default
    assert _names(f, f.replace("*a", "*a: make()")) is None  # a star argument's annotation
    assert _names(f, f.replace("**kw", "**kw: make()")) is None
    assert _names(f, f.replace("):", ") -> make():")) is None
    assert _names("X = 1\n", "X = fns[0]()\n") is None  # a call of what no name says
    assert _names("X = 1\n", "import pkg.a.b\nX = 1\n") == {"pkg"}
    assert _names("X = 1\n", "from pkg.c import *\nX = 1\n") is None  # it binds names no one can list
    # a __future__ import changes how the module's annotations compile: not told by names
    assert _names("X = 1\n", "from __future__ import annotations\nX = 2\n") is None
    change = namereads.changed_names("X = 1\n", "from .x import f\nX = 1\n", bool)
    assert change is not None and set(change.modules) == {"x", "x.f"}


def test_a_one_line_reader_is_its_own_line_alone() -> None:
    lib = "from pkg import consts\ndef f(): return consts.RATE\ndef g(): return 1\n"
    sources = {**SOURCES, "pkg/lib.py": lib}
    ran = {"t/test_l.py::test_g": {"pkg/lib.py": ("g",)}, "t/test_l.py::test_f": {"pkg/lib.py": ("f",)}}
    assert set(_why(sources, ran, RATE.replace("3", "4")) or {}) == {"t/test_l.py::test_f"}


def test_a_binding_made_from_a_read_name_is_its_module_s_for_what_imports_it() -> None:
    limits = "from pkg import consts\nLIMIT = consts.RATE * 2\n"
    user = "from pkg.limits import LIMIT\n\n\ndef f():\n    return LIMIT\n"
    sources = {**SOURCES, "pkg/limits.py": limits, "pkg/user.py": user}
    ran = {"t/test_u.py::t": {"pkg/user.py": ("f",)}}
    imports = {"pkg/limits.py": {"pkg/consts.py"}, "pkg/user.py": {"pkg/limits.py"}}
    assert _seeing(sources, ran, RATE.replace("3", "4"), imports) == {"t/test_u.py::t"}


def test_the_names_are_followed_until_no_pass_finds_more() -> None:
    # a.py's caller is met before z.py's readers; the second of z's two `m` adds nothing new,
    # and the pass must still be run again for a.py
    a = "def fa(o):\n    return o.m()\n"
    z = (
        "from pkg import consts\n\n\nclass A:\n    def m(self):\n        return consts.RATE\n\n\n"
        "class B:\n    def m(self):\n        return consts.RATE\n"
    )
    sources = {**SOURCES, "pkg/a.py": a, "pkg/z.py": z}
    ran = {"t/test_a.py::t": {"pkg/a.py": ("fa",)}}
    assert _readers(sources, ran, RATE.replace("3", "4")) == {"t/test_a.py::t"}


def test_every_base_of_a_changed_class_is_held_and_one_made_with_a_metaclass_is_not_plain() -> None:
    mixed = "class C(Exception, Thing):\n    a = 1\n"
    assert _readers({"pkg/c.py": mixed}, {}, mixed.replace("1", "2"), path="pkg/c.py") is None
    meta = {"pkg/base.py": "class Base(metaclass=Meta):\n    pass\n", "pkg/c.py": "class C(Base):\n    a = 1\n"}
    assert _readers(meta, {}, meta["pkg/c.py"].replace("1", "2"), path="pkg/c.py") is None
    # a class the change leaves alone is not held: a constant beside it is told
    net = "import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n\n\nRATE = 3\n"
    assert _readers({"pkg/n.py": net}, {}, net.replace("3", "4"), path="pkg/n.py") == set()
    # a file of the project that does not parse holds no class
    broken = {"pkg/c.py": "class C(Exception):\n    a = 1\n", "pkg/broken.py": "class (\n"}
    assert _readers(broken, {}, broken["pkg/c.py"].replace("1", "2"), path="pkg/c.py") == set()


def test_an_imported_module_s_imports_are_held_after_one_of_the_standard_library() -> None:
    def told(extra: dict[str, str]) -> bool:
        sources = {**SOURCES, **extra}
        return _why(sources, {}, "from pkg import q\n" + RATE) is not None

    assert not told({"pkg/q.py": "import os\nfrom pkg import loud\n", "pkg/loud.py": "print(1)\n"})
    assert told({"pkg/q.py": "import os\nfrom pkg import calm\n", "pkg/calm.py": "X = 1\n"})
    # a relative import in the imported module starts from its own package
    sub = {"pkg/sub/__init__.py": "", "pkg/sub/q.py": "from . import n\n", "pkg/sub/n.py": "X = 1\n"}
    assert _why({**SOURCES, **sub}, {}, "from pkg.sub import q\n" + RATE) is not None


def test_a_source_module_whose_import_does_more_than_bind_a_read_name_runs_its_importers() -> None:
    reg = "from pkg.consts import RATE\nREGISTRY = {}\nREGISTRY['r'] = RATE\n"
    sources = {
        **SOURCES,
        "pkg/reg.py": reg,
        "tests/test_reg.py": "from pkg import reg\n\n\ndef test_r():\n    pass\n",
        "tests/sub/conftest.py": "from pkg import reg\n",
        "tests/other/test_o.py": "def test_o():\n    pass\n",
    }
    ran = {
        **RAN,
        "tests/test_reg.py::test_r": {},
        "tests/sub/test_s.py::test_s": {},
        "tests/other/test_o.py::test_o": {},
    }
    imports = {**IMPORTS, "pkg/reg.py": {"pkg/consts.py"}, "tests/test_reg.py": {"pkg/reg.py"}}
    found = _seeing(sources, ran, RATE.replace("3", "4"), {**imports, "tests/sub/conftest.py": {"pkg/reg.py"}})
    assert found == {"tests/test_api.py::test_rated", "tests/test_reg.py::test_r", "tests/sub/test_s.py::test_s"}
    why = _why(sources, ran, RATE.replace("3", "4"))
    assert why is not None
    assert why["tests/other/test_o.py::test_o"] == (
        "it imports a module whose import reads RATE, which pkg/consts.py binds anew"
    )  # every file may import every file here (no graph)


def test_a_function_that_reads_by_a_computed_name_is_read_where_it_runs_not_by_its_callers() -> None:
    dyn = (
        "from pkg import consts\n\n\ndef value(name):\n    return getattr(consts, name)\n\n\n"
        "def caller():\n    return value('X')\n"
    )
    sources = {**SOURCES, "pkg/dyn.py": dyn}
    ran = {
        "t/test_d.py::test_value": {"pkg/dyn.py": ("value", "caller")},
        "t/test_d.py::test_caller": {"pkg/dyn.py": ("caller",)},
    }
    assert _readers(sources, ran, RATE.replace("OTHER = 1", "OTHER = 2")) == {"t/test_d.py::test_value"}


def test_a_name_read_off_an_object_passed_in_is_read_whoever_imports_what() -> None:
    # helpers.py never imports consts: the test hands it the module; `m.RATE` may be anyone's
    helpers = "def rate_of(m):\n    return m.RATE\n\n\ndef name_of(m):\n    return m.__name__\n"
    sources = {**SOURCES, "pkg/helpers.py": helpers}
    ran = {
        **RAN,
        "t/test_h.py::test_r": {"pkg/helpers.py": ("rate_of",)},
        "t/test_h.py::test_n": {"pkg/helpers.py": ("name_of",)},
    }
    found = _seeing(sources, ran, RATE.replace("3", "4"), {**IMPORTS, "pkg/helpers.py": set()})
    assert found == {"tests/test_api.py::test_rated", "t/test_h.py::test_r"}


def test_a_name_in_a_string_is_read_word_by_word() -> None:
    # a program a test starts, a format field, a dotted path for a patch
    for text in ("'import pkg.consts as c; print(c.RATE)'", "'{0.RATE}'.format(m)", "'pkg.consts.RATE'"):
        user = f"def f(m):\n    return {text}\n"
        sources = {**SOURCES, "pkg/user.py": user}
        ran = {**RAN, "t/test_u.py::t": {"pkg/user.py": ("f",)}}
        assert _seeing(sources, ran, RATE.replace("3", "4"), {**IMPORTS, "pkg/user.py": set()}) == {
            "tests/test_api.py::test_rated",
            "t/test_u.py::t",
        }, text


def test_more_lookups_by_a_computed_name_read_every_name() -> None:
    for call in (
        "operator.attrgetter(name)(consts)",
        "inspect.getmembers(consts)",
        "inspect.getattr_static(consts, name)",
    ):
        dyn = f"import inspect, operator\nfrom pkg import consts\n\n\ndef value(name):\n    return {call}\n"
        sources = {**SOURCES, "pkg/dyn.py": dyn}
        found = _readers(
            sources, {"t/test_d.py::t": {"pkg/dyn.py": ("value",)}}, RATE.replace("OTHER = 1", "OTHER = 2")
        )
        assert found == {"t/test_d.py::t"}, call


def test_a_lookup_by_names_written_out_reads_those_names_alone() -> None:
    # #40: toolz: ``map(attrgetter('__name__'), exc)`` was taken for a read of every name, and
    # a property reading it pulled every ``__name__`` of the project into a change's readers
    for call in ("operator.attrgetter('OTHER')(consts)", "operator.methodcaller('OTHER', name)(consts)"):
        dyn = f"import operator\nfrom pkg import consts\n\n\ndef value(name):\n    return {call}\n"
        sources = {**SOURCES, "pkg/dyn.py": dyn}
        ran = {**RAN, "t/test_d.py::t": {"pkg/dyn.py": ("value",)}}
        assert _readers(sources, ran, RATE.replace("3", "4")) == {"tests/test_api.py::test_rated"}, call
        # the name it looks up is read, as a word of a string is
        assert _readers(sources, ran, RATE.replace("OTHER = 1", "OTHER = 2")) == {"t/test_d.py::t"}, call
    # a name computed, or the lookup handed on uncalled, still reads every name
    for call in ("operator.attrgetter(name, 'OTHER')(consts)", "list(map(operator.attrgetter, [name]))"):
        dyn = f"import operator\nfrom pkg import consts\n\n\ndef value(name):\n    return {call}\n"
        sources = {**SOURCES, "pkg/dyn.py": dyn}
        ran = {**RAN, "t/test_d.py::t": {"pkg/dyn.py": ("value",)}}
        assert "t/test_d.py::t" in (_readers(sources, ran, RATE.replace("3", "4")) or set()), call


def test_what_a_reader_writes_into_its_module_is_read_by_what_reads_it_back() -> None:
    # prime() stores a read name in a module dict; peek() reads it back in a later test
    state = (
        "from pkg import consts\n_STATE = {}\nSEEN = set()\n\n\ndef prime():\n    _STATE['k'] = consts.RATE\n"
        "    SEEN.add(1)\n\n\ndef peek():\n    return _STATE['k']\n\n\ndef seen():\n    return len(SEEN)\n"
        "\n\ndef other():\n    return consts.__name__\n"
    )
    sources = {**SOURCES, "pkg/state.py": state}
    ran = {
        "t/test_s.py::test_a": {"pkg/state.py": ("prime",)},
        "t/test_s.py::test_b": {"pkg/state.py": ("peek",)},
        "t/test_s.py::test_c": {"pkg/state.py": ("seen",)},
        "t/test_s.py::test_d": {"pkg/state.py": ("other",)},
    }
    assert _readers(sources, ran, RATE.replace("3", "4")) == {
        "t/test_s.py::test_a",
        "t/test_s.py::test_b",
        "t/test_s.py::test_c",
    }


def test_a_cached_lookup_by_a_computed_name_is_read_by_its_callers() -> None:
    dyn = (
        "import functools\nfrom pkg import consts\n\n\n@functools.cache\ndef value(name):\n"
        "    return getattr(consts, name)\n\n\ndef caller():\n    return value('X')\n"
    )
    sources = {**SOURCES, "pkg/dyn.py": dyn}
    ran = {
        "t/test_d.py::test_value": {"pkg/dyn.py": ("value",)},
        "t/test_d.py::test_caller": {"pkg/dyn.py": ("caller",)},
    }
    assert _readers(sources, ran, RATE.replace("OTHER = 1", "OTHER = 2")) == {
        "t/test_d.py::test_value",
        "t/test_d.py::test_caller",
    }


def test_a_class_member_made_from_a_read_name_makes_the_class_read() -> None:
    # astuple(Opts()), list(Mode), str(Tag()): the member is read by no name, its class is
    opts = (
        "import dataclasses, enum\nfrom pkg import consts\n\n\n@dataclasses.dataclass\nclass Opts:\n"
        "    size: int = consts.RATE\n\n\nclass Tag:\n    __str__ = lambda self: str(consts.RATE)\n"
    )
    tests = (
        "import dataclasses\nfrom pkg.opts import Opts, Tag\n\n\n"
        "def test_o():\n    assert dataclasses.astuple(Opts())\n\n\n"
        "def test_t():\n    assert str(Tag())\n\n\ndef test_none():\n    assert True\n"
    )
    sources = {**SOURCES, "pkg/opts.py": opts, "tests/test_opts.py": tests}
    ran = {
        **RAN,
        "tests/test_opts.py::test_o": {"tests/test_opts.py": ("test_o",)},
        "tests/test_opts.py::test_t": {"tests/test_opts.py": ("test_t",)},
        "tests/test_opts.py::test_none": {"tests/test_opts.py": ("test_none",)},
    }
    found = _readers(sources, ran, RATE.replace("3", "4"))
    assert found == {"tests/test_api.py::test_rated", "tests/test_opts.py::test_o", "tests/test_opts.py::test_t"}


def test_statements_moved_cannot_be_told_by_names() -> None:
    # an Enum's members, a dataclass's fields: their order is read (list(Color), astuple())
    color = "class Color:\n    RED = 1\n    BLUE = 2\n"
    moved = "class Color:\n    BLUE = 2\n    RED = 1\n"
    assert _names(color, moved) is None
    assert _names(color + "X = 1\n", moved + "X = 2\n") is None  # with a name changed beside it too
    assert _names("A = 1\nB = 2\n", "B = 2\nA = 1\n") is None
    assert _names("A = 1\nB = 2\n", "A = 1\nC = 3\nB = 2\n") == {"C"}  # one added between: no move


def test_a_docstring_is_made_at_import_and_read_by_its_function_s_name() -> None:
    f = 'def f():\n    """Say hello."""\n    return 1\n'
    assert _names(f, f.replace("hello", "hi")) == {"f"}
    m = 'class C:\n    def run(self):\n        """Run."""\n        return 1\n'
    assert _names(m, m.replace('"""Run."""', '"""Walk."""')) == {"C", "run"}
    added = "class H:\n    @property\n    def val(self):\n        return 1\n"
    assert _names(added, added.replace("        return 1", '        """The value."""\n        return 1')) == {
        "H",
        "val",
    }
    # a body alone still goes by the tests that ran it
    body = namereads.changed_names(f, f.replace("return 1", "return 2"), bool)
    assert body is not None and body.names == frozenset()


def test_dir_reads_every_name() -> None:
    dyn = "from pkg import consts\n\n\ndef names():\n    return dir(consts)\n"
    sources = {**SOURCES, "pkg/dyn.py": dyn}
    found = _readers(sources, {"t/test_d.py::t": {"pkg/dyn.py": ("names",)}}, RATE + "NEW = 1\n")
    assert found == {"t/test_d.py::t"}


def test_a_write_into_another_module_at_import_is_every_test_s() -> None:
    assert _foreign_write("X = 1\n", "X = 1\nfrom pkg import consts\nconsts.K = 5\n") == "consts.K = 5"
    assert _foreign_write("X = 1\n", "X = 1\nsetattr(consts, 'K', 5)\n") == "setattr(consts, 'K', 5)"
    assert _foreign_write("X = 1\n", "X = 1\nos.environ['A'] = '1'\n") == "os.environ['A'] = '1'"
    assert _foreign_write("X = 1\n", "X = 1\nclass C:\n    gfact.Holder.make = 1\n") == "gfact.Holder.make = 1"
    assert _foreign_write("c.K = 1\n", "") == "c.K = 1"  # removed: every test saw it
    assert _foreign_write(None, "c.K = 1\n") == "c.K = 1"
    # its own: a variable of the module, a function's body (done where it runs), what did not change
    assert _foreign_write("X = 1\n", "X = 1\n_S = {}\n_S['k'] = 2\n_S.k = 1\n") is None
    assert _foreign_write("X = 1\n", "X = 1\ndef f():\n    c.K = 1\n") is None
    assert _foreign_write("c.K = 1\nX = 1\n", "c.K = 1\nX = 2\n") is None
    assert _foreign_write("X = (\n", "c.K = 1\n") is None  # not Python: other rules hold


@pytest.mark.parametrize(
    "write",
    [
        "import pkg.reg as reg\nreg.REGISTRY.append(1)",
        "from pkg.reg import CONFIG\nCONFIG.update(a=1)",
        "from pkg import reg as r\nr.REGISTRY.extend([1])",
        "from pkg.reg import REGISTRY\nREGISTRY += [1]",
        "import pkg.reg\npkg.reg.REGISTRY.clear()",
        "import os\nENV = os.environ\nENV['MODE'] = 'fast'",
        "import pkg.reg\nR = pkg.reg.REGISTRY\nR.append(1)",
    ],
    ids=[
        "method-through-module",
        "method-of-imported",
        "extend-alias",
        "augmented",
        "clear",
        "alias-store",
        "alias-call",
    ],
)
def test_a_change_of_another_module_s_object_in_place_at_import_is_every_test_s(write: str) -> None:
    assert _foreign_write("X = 1\n", f"X = 1\n{write}\n") == write.splitlines()[-1]


def test_a_call_of_a_project_module_s_function_or_a_read_of_its_object_is_no_write_into_it() -> None:
    for code in (
        "import pkg.reg as reg\nreg.setup()",  # a module-level call of the project's code: not followed
        "from pkg.reg import NAMES\nN = NAMES.copy()",
        "import pkg.reg\nK = pkg.reg.CONFIG.get('k')",
        "import os\nHOME = os.environ\nX = HOME.get('HOME')",
    ):
        assert _foreign_write("X = 1\n", f"X = 1\n{code}\n") is None, code


# a package that re-exports its version file's names, as python-slugify's does (#40)
ABOUT = "__title__ = 'pkg'\n__version__ = '8.0.1'\n"
INIT = "from .core import *\nfrom .__version__ import __title__\nfrom .__version__ import __version__\n"
CORE = "def slug(text):\n    return text.lower()\n"
VERSIONED = (
    "import pkg\n\n\n"
    "def test_slug():\n    assert pkg.slug('A') == 'a'\n\n\n"
    "def test_version():\n    assert pkg.__version__.count('.') == 2\n"
)


def test_a_module_dunder_python_does_not_read_is_a_name_like_any_other() -> None:
    # nothing of Python reads __version__ or __title__ by itself: the tests that read them
    # (through the package's re-export) run, and a test that reads neither is left out
    sources = {"pkg/__version__.py": ABOUT, "pkg/__init__.py": INIT, "pkg/core.py": CORE, "tests/test_v.py": VERSIONED}
    ran = {
        "tests/test_v.py::test_slug": {"pkg/core.py": ("slug",), "tests/test_v.py": ("test_slug",)},
        "tests/test_v.py::test_version": {"tests/test_v.py": ("test_version",)},
    }
    imports = {"pkg/__init__.py": {"pkg/__version__.py", "pkg/core.py"}, "tests/test_v.py": {"pkg/__init__.py"}}
    new = ABOUT.replace("8.0.1", "8.0.2")
    assert _seeing(sources, ran, new, imports, path="pkg/__version__.py") == {"tests/test_v.py::test_version"}
    # a dunder Python reads by itself still goes by the import graph: the module's own
    # (__all__, __path__, __doc__, pytest's __test__) and any of a class (a special method)
    for name in ("__all__", "__path__", "__doc__", "__test__"):
        changed = f"{ABOUT}{name} = ['x']\n"
        assert (
            _seeing(
                {**sources, "pkg/__version__.py": changed},
                ran,
                new + f"{name} = ['y']\n",
                imports,
                path="pkg/__version__.py",
            )
            is None
        ), name
    cls = "class C:\n    __version__ = '1'\n"
    assert _seeing({"pkg/c.py": cls}, {}, cls.replace("'1'", "'2'"), {}, path="pkg/c.py") is None


def test_pydoc_reads_every_name_of_what_it_is_given() -> None:
    # help(module) and pydoc print a module's constants and its __version__, __author__:
    # a function that calls them reads every name where it runs (#40)
    for call in ("help(pkg)", "pydoc.render_doc(pkg)", "render_doc(pkg)"):
        doc = f"import pkg\nimport pydoc\nfrom pydoc import render_doc\n\n\ndef test_doc():\n    {call}\n"
        sources = {"pkg/__version__.py": ABOUT, "pkg/__init__.py": INIT, "tests/test_d.py": doc}
        ran = {"tests/test_d.py::test_doc": {"tests/test_d.py": ("test_doc",)}}
        imports = {"pkg/__init__.py": {"pkg/__version__.py"}, "tests/test_d.py": {"pkg/__init__.py"}}
        for new in (ABOUT.replace("8.0.1", "8.0.2"), ABOUT.replace("'pkg'", "'pkg2'")):
            assert _seeing(sources, ran, new, imports, path="pkg/__version__.py") == {"tests/test_d.py::test_doc"}, call
        # a plain constant is printed too (help's DATA)
        plain = {**sources, "pkg/consts.py": RATE, "pkg/__init__.py": "from .consts import *\n"}
        graph = {**imports, "pkg/__init__.py": {"pkg/consts.py"}}
        assert _seeing(plain, ran, RATE.replace("3", "4"), graph) == {"tests/test_d.py::test_doc"}, call


META_TESTS = (
    "from importlib.metadata import version\n\n\n"
    "def test_installed():\n    assert version('pkg').count('.') == 2\n\n\n"
    "def test_other():\n    assert True\n"
)


def test_code_that_reads_the_installed_metadata_reads_what_the_build_may_take_from_a_module() -> None:
    # a build may take the version from the project's files (setup.py reads __version__.py,
    # setuptools' attr:): a test that reads the installed metadata sees a change to any
    # module's names, by whichever module it reaches the metadata through (#40)
    sources = {"pkg/__version__.py": ABOUT, "pkg/__init__.py": INIT, "pkg/core.py": CORE, "tests/test_m.py": META_TESTS}
    ran = {
        "tests/test_m.py::test_installed": {"tests/test_m.py": ("test_installed",)},
        "tests/test_m.py::test_other": {"tests/test_m.py": ("test_other",)},
    }
    imports = {"pkg/__init__.py": {"pkg/__version__.py", "pkg/core.py"}}
    new = ABOUT.replace("8.0.1", "8.0.2")
    assert _seeing(sources, ran, new, imports, path="pkg/__version__.py") == {"tests/test_m.py::test_installed"}
    for reader in (
        "import importlib.metadata\n\n\ndef test_installed():\n    importlib.metadata.version('pkg')\n",
        "def test_installed():\n    from importlib import metadata as md\n    md.metadata('pkg')\n",
        "import pkg_resources\n\n\ndef test_installed():\n    pkg_resources.get_distribution('pkg')\n",
    ):
        found = _seeing({**sources, "tests/test_m.py": reader}, ran, new, imports, path="pkg/__version__.py")
        assert found == {"tests/test_m.py::test_installed"}, reader


def test_a_module_that_binds_the_installed_version_binds_a_name_read_by_name() -> None:
    # __version__ = version("pkg") at import reads the metadata and writes nothing: its
    # readers are the tests that read __version__, not every importer of the module (#40)
    init = "from importlib.metadata import version\n\n__version__ = version('pkg')\n"
    tests = "import pkg\n\n\ndef test_v():\n    assert pkg.__version__\n\n\ndef test_w():\n    assert True\n"
    sources = {**SOURCES, "pkg/__init__.py": init, "tests/test_v.py": tests}
    ran = {
        "tests/test_v.py::test_v": {"tests/test_v.py": ("test_v",)},
        "tests/test_v.py::test_w": {"tests/test_v.py": ("test_w",)},
    }
    imports = {"tests/test_v.py": {"pkg/__init__.py"}, "pkg/__init__.py": set()}
    assert _seeing(sources, ran, RATE.replace("3", "4"), imports) == {"tests/test_v.py::test_v"}
    # a call through the metadata's module that may write (pkg_resources.require activates
    # distributions, on sys.path) is no binding: the module's importers run
    for writes in (
        "import pkg_resources\n\nDIST = pkg_resources.require('pkg')\n__version__ = DIST[0].version\n",
        "import pkg_resources\n\n__version__ = pkg_resources.get_distribution('pkg').version\n",
    ):
        found = _seeing({**sources, "pkg/__init__.py": writes}, ran, RATE.replace("3", "4"), imports)
        assert found == {"tests/test_v.py::test_v", "tests/test_v.py::test_w"}, writes


def test_a_method_of_an_immutable_builtin_called_through_its_type_only_computes_a_value() -> None:
    # #40: humanize's `_SUPERSCRIPT_TRANS = str.maketrans(_SUPERSCRIPT_MAP)` ran every test;
    # str's, bytes', int's, tuple's methods change nothing (their values cannot change)
    api = "from pkg import consts\n\n\ndef rated(x):\n    return x * consts.TABLE\n\n\ndef plain(x):\n    return x\n"
    for made in ("str.maketrans({'0': '1'})", "bytes.fromhex('00')", "int.from_bytes(b'1', 'big')", "str.upper('a')"):
        consts = f"RATE = 3\nTABLE = {made}\n"
        sources = {**SOURCES, "pkg/consts.py": consts, "pkg/api.py": api}
        new = consts.replace("TABLE = ", "TABLE = (1, ) and ")
        assert _seeing(sources, RAN, new, IMPORTS) == {"tests/test_api.py::test_rated"}, made
    # a mutable builtin's method may change what it is given (dict.update(d, ...)): not told
    consts = "RATE = 3\nD = {}\nTABLE = dict.update(D, a=1)\n"
    sources = {**SOURCES, "pkg/consts.py": consts, "pkg/api.py": api}
    assert _seeing(sources, RAN, consts.replace("a=1", "a=2"), IMPORTS) is None


def test_a_file_a_test_read_that_names_a_name_bound_anew_runs_that_test() -> None:
    # #40: a template's {cfg.RATE} is read by the code that formats it, by no word of Python
    asked: list[frozenset[str]] = []

    def in_files(names: Collection[str]) -> dict[str, str]:
        asked.append(frozenset(names))
        return {"tests/test_help.py::test_help": "it read help.txt, which names a name the change binds anew"}

    m = TestMap(
        "cpu",
        "a" * 40,
        "2026-12-01T00:00:00+00:00",
        {n: frozenset(per) for n, per in RAN.items()},
        {},
        {n: {f: _lines(SOURCES[f], *fns) for f, fns in per.items()} for n, per in RAN.items()},
    )

    def readers(files: Callable[[Collection[str]], dict[str, str]]) -> dict[str, str] | None:
        return namereads.readers(
            "pkg/consts.py",
            RATE,
            RATE.replace("3", "4"),
            SOURCES,
            m,
            is_test=lambda f: f.rsplit("/", 1)[-1].startswith("test_"),
            internal=lambda name: name.split(".", 1)[0] == "pkg",
            in_files=files,
        )

    assert readers(in_files) == {
        "tests/test_help.py::test_help": "it read help.txt, which names a name the change binds anew",
        "tests/test_api.py::test_rated": "it ran code that reads RATE, which pkg/consts.py binds anew at import",
    }
    # asked of every name followed: the changed one and those bound from it in turn
    assert len(asked) == 1 and "RATE" in asked[0] and "rated" in asked[0]
    # a test the names' readers run keeps their reason
    assert readers(lambda _names: {"tests/test_api.py::test_rated": "a file"}) == {
        "tests/test_api.py::test_rated": "it ran code that reads RATE, which pkg/consts.py binds anew at import"
    }


def test_a_reader_that_hands_the_change_to_a_function_that_keeps_it_runs_what_reads_it_back() -> None:
    # #40: test_a hands consts.RATE to remember(), which keeps it in _SEEN; test_b reads it
    # back through last() without reading RATE; test_c hands remember() something else
    store = "_SEEN = []\n\n\ndef remember(v):\n    _SEEN.append(v)\n\n\ndef last():\n    return _SEEN[-1]\n"
    test_a = "from pkg import consts\nfrom pkg.store import remember\n\n\ndef test_a():\n    remember(consts.RATE)\n"
    test_b = "from pkg.store import last\n\n\ndef test_b():\n    assert last() == 3\n"
    test_c = "from pkg.store import remember\n\n\ndef test_c():\n    remember(1)\n"
    sources = {
        "pkg/consts.py": RATE,
        "pkg/store.py": store,
        "tests/test_a.py": test_a,
        "tests/test_b.py": test_b,
        "tests/test_c.py": test_c,
    }
    ran = {
        "tests/test_a.py::test_a": {"pkg/store.py": ("remember",), "tests/test_a.py": ("test_a",)},
        "tests/test_b.py::test_b": {"pkg/store.py": ("last",), "tests/test_b.py": ("test_b",)},
        "tests/test_c.py::test_c": {"pkg/store.py": ("remember",), "tests/test_c.py": ("test_c",)},
    }
    found = _readers(sources, ran, RATE.replace("3", "4"))
    # remember() writes _SEEN, which it names: test_c ran it, and is taken for a reader
    assert found == {"tests/test_a.py::test_a", "tests/test_b.py::test_b", "tests/test_c.py::test_c"}
    plain = store.replace("    _SEEN.append(v)\n", "    return [v]\n")
    assert _readers({**sources, "pkg/store.py": plain}, ran, RATE.replace("3", "4")) == {"tests/test_a.py::test_a"}


def test_a_reader_that_writes_the_change_into_another_module_s_variable_runs_its_readers() -> None:
    store = "SEEN = []\n\n\ndef last():\n    return SEEN[-1]\n"
    test_b = "from pkg.store import last\n\n\ndef test_b():\n    assert last() == 3\n"
    for call in ("SEEN.append(consts.RATE)", "store.SEEN.append(consts.RATE)", "store.SEEN[0] = consts.RATE"):
        test_a = f"from pkg import consts, store\nfrom pkg.store import SEEN\n\n\ndef test_a():\n    {call}\n"
        sources = {"pkg/consts.py": RATE, "pkg/store.py": store, "tests/test_a.py": test_a, "tests/test_b.py": test_b}
        ran = {
            "tests/test_a.py::test_a": {"tests/test_a.py": ("test_a",)},
            "tests/test_b.py::test_b": {"pkg/store.py": ("last",), "tests/test_b.py": ("test_b",)},
        }
        assert _readers(sources, ran, RATE.replace("3", "4")) == {"tests/test_a.py::test_a", "tests/test_b.py::test_b"}
