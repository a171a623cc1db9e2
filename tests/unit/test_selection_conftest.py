"""A change to a conftest.py that holds only fixtures runs the tests under its folder (#34),
not every test; one with a hook, ``pytest_plugins`` or code run at module level (its effect
reaches every test of the session) still runs everything, as does the top one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from device_matrix import selection
from device_matrix.changes import importgraph, namereads
from device_matrix.records.testmap import TestMap

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RULES = selection.Rules(max_age=timedelta(days=14), full=("conftest.py", "pyproject.toml"), ignore=())

FIXTURES = '''"""Fixtures of the unit tests."""

import pytest

from pkg import limits

collect_ignore = ["setup.py"]
SIZE: int = 3


@pytest.fixture(scope="module")
def limit():
    return limits.LIMIT


class Helper:
    size = 2
'''


@pytest.mark.parametrize(
    ("source", "only"),
    [
        (FIXTURES, True),
        (FIXTURES + "\n\ndef pytest_collection_modifyitems(items):\n    items.reverse()\n", False),  # a hook
        (FIXTURES + "\n\n@pytest.hookimpl\ndef pytest_configure(config):\n    pass\n", False),
        (FIXTURES + "\npytest_plugins = ['pkg.plug']\n", False),  # a plugin: every test's
        (FIXTURES + "\nimport os\nos.environ['MODE'] = 'fast'\n", False),  # the process's state, at import
        (FIXTURES + "\nLIMITS = limits.load()\n", False),  # a call at import
        (FIXTURES + "\n\n@register\ndef f():\n    pass\n", False),  # a decorator that is not a fixture
        (FIXTURES + "\nif limits.FAST:\n    SIZE = 1\n", False),
        (FIXTURES + "\n\nclass Plugin:\n    def pytest_runtest_setup(self, item):\n        pass\n", False),
        ("def f(:\n", False),  # not Python
    ],
)
def test_fixtures_only_tells_a_conftest_of_fixtures_from_one_that_acts_on_the_session(source: str, only: bool) -> None:
    assert selection.fixtures_only(source) is only


FILES = {
    "pkg/__init__.py": "",
    "pkg/limits.py": "LIMIT = 5\n",
    "conftest.py": "import pytest\n",
    "tests/unit/conftest.py": FIXTURES,
    "tests/unit/test_limit.py": "def test_limit(limit):\n    assert limit == 5\n",
    "tests/unit/deep/test_deep.py": "def test_deep(limit):\n    assert limit\n",
    "tests/test_other.py": "def test_other():\n    pass\n",
    "tests/test_helper.py": "from tests.unit.conftest import Helper\n\n\ndef test_helper():\n    assert Helper.size\n",
}
LIMIT, DEEP = "tests/unit/test_limit.py::test_limit", "tests/unit/deep/test_deep.py::test_deep"
OTHER, HELPER = "tests/test_other.py::test_other", "tests/test_helper.py::test_helper"
MAP = TestMap(
    row="cpu",
    commit="a" * 40,
    created="2026-11-30T12:00:00+00:00",
    tests={n: frozenset({n.split("::")[0]}) for n in (LIMIT, DEEP, OTHER, HELPER)},
    imports={"pkg/limits.py": frozenset({1}), "tests/unit/conftest.py": frozenset({1, 3})},
)


def _plan(changed: list[str], conftests: list[str]) -> selection.Plan:
    graph = importgraph.build(FILES)
    return selection.plan(MAP, changed, row="cpu", rules=RULES, now=NOW, graph=graph, conftests=conftests)


def test_a_conftest_of_fixtures_runs_the_tests_under_its_folder_and_its_importers() -> None:
    p = _plan(["tests/unit/conftest.py"], ["tests/unit/conftest.py"])
    assert p.full_reason is None
    assert {n for n in MAP.tests if p.decide(n).run} == {LIMIT, DEEP, HELPER}
    assert p.decide(DEEP) == selection.Decision(
        True, "tests/unit/conftest.py changed: it holds fixtures, for the tests under tests/unit", "conftest"
    )
    assert p.decide(HELPER).why == "imports"  # it imports the conftest as a module
    assert p.decide(OTHER) == selection.Decision(False, "covers none of the 1 changed file", "deselected")


def test_a_conftest_not_shown_to_hold_only_fixtures_runs_every_test() -> None:
    p = _plan(["tests/unit/conftest.py"], [])
    assert p.full_reason == "tests/unit/conftest.py changes, which the test map cannot follow"
    # nor without the import graph, whatever it holds
    bare = selection.plan(MAP, ["tests/unit/conftest.py"], row="cpu", rules=RULES, now=NOW, conftests=[])
    assert bare.full_reason == "tests/unit/conftest.py changes, which the test map cannot follow"


def test_the_top_conftest_runs_every_test_whatever_it_holds() -> None:
    p = _plan(["conftest.py"], ["conftest.py"])
    assert p.full_reason == "conftest.py changes, which the test map cannot follow"


# --- end to end ----------------------------------------------------------------------------

SUITE = {
    "limits.py": "LIMIT = 5\n",
    "test_top.py": "def test_top():\n    pass\n",
    "sub/conftest.py": "import pytest\n\nimport limits\n\n\n@pytest.fixture\ndef limit():\n    return limits.LIMIT\n",
    "sub/test_limit.py": "def test_limit(limit):\n    assert limit == 5\n",
    "sub/test_plain.py": "def test_plain():\n    pass\n",  # under the conftest, using none of it
}


def test_a_conftest_of_fixtures_a_plugin_imports_runs_every_test() -> None:
    files = {**FILES, "pkg/plug.py": "from tests.unit.conftest import Helper\n"}
    graph = importgraph.build(files, plugins={"pkg.plug": "pyproject.toml's pytest11 entry point"})
    changed = ["tests/unit/conftest.py"]
    p = selection.plan(MAP, changed, row="cpu", rules=RULES, now=NOW, graph=graph, conftests=changed)
    assert p.full_reason == (
        "tests/unit/conftest.py changes code that runs when it is imported: "
        "the pytest plugin pkg.plug (pyproject.toml's pytest11 entry point) imports it, for every test"
    )


def _fixture_write(old: str, new: str) -> str | None:
    return namereads.fixture_write(old, new, lambda name: name.split(".", 1)[0] == "pkg")


FIXTURE = (
    "import os\nimport sys\nimport pytest\nfrom pkg import clock\n\n\n"
    "@pytest.fixture\ndef env():\n    {body}\n    yield 1\n"
)


@pytest.mark.parametrize(
    "body",
    [
        "os.environ['MODE'] = 'dev'",
        "os.environ.update(MODE='dev')",
        "os.putenv('MODE', 'dev')",
        "sys.path.insert(0, 'x')",
        "os.chdir('/')",
        "clock.now = lambda: 0",
        "clock.CACHE.clear()",
    ],
)
def test_a_fixture_of_a_conftest_that_writes_the_process_s_state_is_every_test_s(body: str) -> None:
    """#40: what a fixture writes and does not restore outlives the tests under its folder."""
    old = FIXTURE.format(body="pass")
    assert _fixture_write(old, FIXTURE.format(body=body)) is not None
    assert _fixture_write(FIXTURE.format(body=body), old) is not None  # a write taken away


def test_a_fixture_that_reads_the_process_s_state_or_restores_it_writes_nothing_shared() -> None:
    old = FIXTURE.format(body="pass")
    for body in ("x = os.environ.get('MODE')", "monkeypatch = None", "d = {}\n    d['k'] = 1", "os.makedirs('x')"):
        assert _fixture_write(old, FIXTURE.format(body=body)) is None, body
