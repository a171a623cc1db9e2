"""#40: a module that imports by a computed name, or runs a string (``exec``), somewhere in
the import graph no longer runs every test module that reaches it for every change at
import: where each such import is in a function that ran in no import, only the tests the
map saw run one of those functions can have imported by it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from device_matrix import selection
from device_matrix.changes import importgraph
from device_matrix.records.testmap import TestMap

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RULES = selection.Rules(max_age=timedelta(days=14), full=("conftest.py",), ignore=())
LOADER = (
    "import importlib\n\n\ndef load(name):\n    return importlib.import_module(name)\n\n\ndef plain():\n    return 1\n"
)
FILES = {
    "pkg/__init__.py": "",
    "pkg/consts.py": "SCALE = 2\n",
    "pkg/other.py": "def triple(x):\n    return 3 * x\n",
    "pkg/loader.py": LOADER,
    "tests/test_load.py": (
        "from pkg import loader\n\n\ndef test_loads():\n    assert loader.load('pkg.' + 'consts')\n\n\n"
        "def test_plain():\n    assert loader.plain() == 1\n"
    ),
    "tests/test_other.py": "from pkg.other import triple\n\n\ndef test_other():\n    assert triple(2) == 6\n",
    "tests/test_consts.py": "from pkg import consts\n\n\ndef test_consts():\n    assert consts.SCALE == 2\n",
}
CONSTS = "tests/test_consts.py::test_consts"
LOADS, PLAIN, OTHER = (
    "tests/test_load.py::test_loads",
    "tests/test_load.py::test_plain",
    "tests/test_other.py::test_other",
)


def _plan(files: dict[str, str], at_import: frozenset[int] = frozenset({1, 4, 8})) -> selection.Plan:
    lines = {
        LOADS: {"tests/test_load.py": frozenset({5}), "pkg/loader.py": frozenset({5})},
        PLAIN: {"tests/test_load.py": frozenset({9}), "pkg/loader.py": frozenset({9})},
        OTHER: {"tests/test_other.py": frozenset({5}), "pkg/other.py": frozenset({2})},
        CONSTS: {"tests/test_consts.py": frozenset({5})},
    }
    m = TestMap(
        row="cpu",
        commit="a" * 40,
        created="2026-11-30T12:00:00+00:00",
        tests={n: frozenset(per) for n, per in lines.items()},
        imports={"pkg/loader.py": at_import, "pkg/consts.py": frozenset({1}), "pkg/other.py": frozenset({1})},
        lines=lines,
    )
    graph = importgraph.build(files)
    return selection.plan(m, ["pkg/other.py"], row="cpu", rules=RULES, now=NOW, graph=graph)


def test_a_dynamic_import_in_a_function_runs_only_the_tests_that_ran_it() -> None:
    g = importgraph.build(FILES)
    assert g.unknown_in == {"pkg/loader.py": ((5, 5),)}
    p = _plan(FILES)
    d = p.decide(LOADS)
    assert d.run and d.why == "imports" and d.reason.endswith(", in a function it ran"), d
    assert "pkg/loader.py imports a module by a name it computes (import_module)" in d.reason
    assert not p.decide(PLAIN).run  # it reaches the loader, and ran none of its dynamic imports
    assert p.decide(OTHER).run  # it imports what changed
    assert not p.decide(CONSTS).run


def test_a_dynamic_import_at_import_or_in_a_function_that_ran_then_runs_every_test_that_reaches_it() -> None:
    at_top = {**FILES, "pkg/loader.py": LOADER + "\nM = importlib.import_module('pkg.' + 'x')\n"}
    assert "pkg/loader.py" not in importgraph.build(at_top).unknown_in
    for p in (_plan(at_top), _plan(FILES, at_import=frozenset({1, 4, 5, 8}))):
        assert p.decide(LOADS).run and p.decide(PLAIN).run
        assert p.decide(PLAIN).reason.endswith("(import_module)")
        assert not p.decide(CONSTS).run


def test_a_map_without_lines_cannot_narrow_a_dynamic_import() -> None:
    p = _plan(FILES)
    assert p.test_map is not None
    bare = TestMap(p.test_map.row, p.test_map.commit, p.test_map.created, p.test_map.tests, p.test_map.imports)
    graph = importgraph.build(FILES)
    q = selection.plan(bare, ["pkg/other.py"], row="cpu", rules=RULES, now=NOW, graph=graph)
    assert q.decide(PLAIN).run
