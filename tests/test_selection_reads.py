"""#34: a change to what runs at import (a constant, a default, a class attribute) runs the
tests that read a name it binds anew, by the map's lines and the names the code mentions,
and nothing else; where that cannot be told, the import graph's rule holds (None)."""

from __future__ import annotations

from pathlib import Path

from device_matrix import namereads
from device_matrix.records.testmap import TestMap
from tests.builders import SUITE_ON_PATH, git_project
from tests.runs import outcomes_of

RATE = "RATE = 3\nOTHER = 1\n"


def _lines(source: str, *names: str) -> frozenset[int]:
    """The body lines of the named functions of ``source`` (a test's run of them)."""
    import ast

    found: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name in names:
            found.update(range(node.body[0].lineno, (node.end_lineno or node.lineno) + 1))
    return frozenset(found)


def _readers(
    sources: dict[str, str],
    ran: dict[str, dict[str, tuple[str, ...]]],
    new: str,
    *,
    path: str = "pkg/consts.py",
    imports: dict[str, frozenset[int]] | None = None,
) -> set[str] | None:
    """The tests the change of ``path`` to ``new`` runs; ``ran``: nodeid -> file -> the
    functions of it the test ran."""
    lines = {n: {f: _lines(sources[f], *fns) for f, fns in per.items()} for n, per in ran.items()}
    tests = {n: frozenset(per) for n, per in ran.items()}
    m = TestMap("cpu", "a" * 40, "2026-12-01T00:00:00+00:00", tests, imports or {}, lines)
    found = namereads.readers(
        path,
        sources[path],
        new,
        sources,
        m,
        is_test=lambda f: f.rsplit("/", 1)[-1].startswith("test_"),
        internal=lambda name: name.split(".", 1)[0] == "pkg",
    )
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
    # a source module that does more than bind what it reads
    sources = {**SOURCES, "pkg/reg.py": "from pkg.consts import RATE\nREGISTRY = {}\nREGISTRY['r'] = RATE\n"}
    assert _readers(sources, RAN, RATE.replace("3", "4")) is None
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

    def sees(reader: str, origin: str) -> bool:
        return reader == origin or origin in imports.get(reader, set())

    lines = {n: {f: _lines(sources[f], *fns) for f, fns in per.items()} for n, per in ran.items()}
    m = TestMap("cpu", "a" * 40, "2026-12-01T00:00:00+00:00", {n: frozenset(p) for n, p in ran.items()}, {}, lines)

    def found(see: object) -> set[str]:
        got = namereads.readers(
            "pkg/consts.py",
            RATE,
            RATE.replace("3", "4"),
            sources,
            m,
            is_test=lambda f: "test_" in f,
            internal=bool,
            **({"sees": see} if see is not None else {}),  # type: ignore[arg-type]
        )
        assert got is not None
        return set(got)

    assert "tests/test_b.py::test_b" not in found(sees)
    assert "tests/test_b.py::test_b" in found(None)  # by name alone, every file sees every file


WIDE = {
    "consts.py": "SCALE = 2\n",
    "sub/conftest.py": (
        "import pytest\nimport consts\n\n\n@pytest.fixture(scope='session')\ndef table():\n"
        "    return [consts.SCALE] * 3\n"
    ),
    "sub/test_a.py": "def test_a(table):\n    assert table[0] == 2\n",
    "sub/test_b.py": "def test_b(table):\n    assert table[1] == 2\n",
    "test_other.py": "import consts\n\n\ndef test_other():\n    assert consts\n",
}


def test_a_wide_fixture_that_reads_a_constant_runs_every_test_that_requests_it(tmp_path: Path) -> None:
    # the session fixture ran in the first test alone; the second got its value without its lines
    p = git_project(tmp_path, WIDE, SUITE_ON_PATH)
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    (p.root / "suites" / "mine" / "consts.py").write_text("SCALE = 40\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    assert outcomes_of(rec) == {"test_a": "failed", "test_b": "failed", "test_other": "deselected"}, proc.stdout
    assert rec["test_selection"]["by_reason"] == {"reads": 2, "deselected": 1}


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
