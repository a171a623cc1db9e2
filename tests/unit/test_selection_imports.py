"""A change to what runs at import runs the test modules that can see it (#34), by the
project's static import graph (device_matrix/changes/importgraph.py), not every test; where the
graph cannot be known (a module imported by a computed name, a plugin, a file that does
not parse) the tests it cannot follow run, or every test, and the record says why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from device_matrix import selection
from device_matrix.changes import importgraph
from device_matrix.records.testmap import TestMap

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RULES = selection.Rules(max_age=timedelta(days=14), full=("conftest.py", "pyproject.toml"), ignore=())

# a package, a constant two of its modules read at import, and the tests of each
BASE = {
    "pkg/__init__.py": "",
    "pkg/consts.py": "SCALE = 2\n",
    "pkg/api.py": "from pkg import consts\n\n\ndef scaled(x):\n    return x * consts.SCALE\n",
    "pkg/other.py": "def triple(x):\n    return 3 * x\n",
    "tests/test_api.py": "from pkg.api import scaled\n\n\ndef test_api():\n    assert scaled(3) == 6\n",
    "tests/test_consts.py": "import pkg.consts\n\n\ndef test_consts():\n    assert pkg.consts.SCALE == 2\n",
    "tests/test_other.py": "from pkg.other import triple\n\n\ndef test_other():\n    assert triple(2) == 6\n",
}
API, CONSTS = "tests/test_api.py::test_api", "tests/test_consts.py::test_consts"
OTHER = "tests/test_other.py::test_other"


def _map(files: dict[str, str]) -> TestMap:
    """A map of every test file's one test: it ran its own file (and what each test's own
    name says it calls); every other Python file ran at import, line 1."""
    tests = {
        f"{path}::{path.rsplit('/', 1)[-1].removesuffix('.py')}": frozenset({path})
        for path in files
        if path.rsplit("/", 1)[-1].startswith("test_")
    }
    imports = {path: frozenset({1}) for path in files if not path.rsplit("/", 1)[-1].startswith("test_")}
    return TestMap(row="cpu", commit="a" * 40, created="2026-11-30T12:00:00+00:00", tests=tests, imports=imports)


def _plan(files: dict[str, str], changed: list[str], **kw: object) -> selection.Plan:
    graph = importgraph.build(files, **kw)  # type: ignore[arg-type]
    return selection.plan(_map(files), changed, row="cpu", rules=RULES, now=NOW, graph=graph)


def _ran(p: selection.Plan) -> set[str]:
    assert p.test_map is not None
    return {n for n in p.test_map.tests if p.decide(n).run}


def test_a_constant_runs_the_test_modules_that_import_it_and_no_other() -> None:
    p = _plan(BASE, ["pkg/consts.py"])
    assert p.full_reason is None
    assert _ran(p) == {API, CONSTS}  # test_api through pkg/api.py, test_consts itself
    why = "pkg/consts.py changes code that runs when it is imported: 2 test modules import it"
    assert p.decide(API) == selection.Decision(True, why, "imports")
    assert p.decide(OTHER) == selection.Decision(False, "covers none of the 1 changed file", "deselected")
    assert p.summary(p.test_map.tests if p.test_map else [])["by_reason"] == {"imports": 2, "deselected": 1}


def test_without_the_graph_a_change_at_import_still_runs_every_test() -> None:
    p = selection.plan(_map(BASE), ["pkg/consts.py"], row="cpu", rules=RULES, now=NOW)
    assert p.full_reason == "pkg/consts.py changes code that runs when it is imported"


def test_a_change_every_test_module_can_see_runs_every_test_as_before() -> None:
    files = {**BASE, "tests/test_other.py": "import pkg.api\n\n\ndef test_other():\n    pass\n"}
    p = _plan(files, ["pkg/consts.py"])
    assert p.full_reason == "pkg/consts.py changes code that runs when it is imported"


def test_a_module_only_a_conftest_imports_runs_the_tests_under_that_conftest() -> None:
    files = {
        **BASE,
        "pkg/limits.py": "LIMIT = 5\n",
        "tests/unit/conftest.py": "import pytest\n\nfrom pkg import limits\n\n\n@pytest.fixture\n"
        "def limit():\n    return limits.LIMIT\n",
        "tests/unit/test_limit.py": "def test_limit(limit):\n    assert limit == 5\n",
        "tests/unit/deep/test_deep.py": "def test_deep(limit):\n    assert limit\n",
        "tests/unitary/test_near.py": "def test_near():\n    pass\n",  # a folder whose name only starts so
    }
    p = _plan(files, ["pkg/limits.py"])
    assert p.full_reason is None
    assert _ran(p) == {"tests/unit/test_limit.py::test_limit", "tests/unit/deep/test_deep.py::test_deep"}
    assert p.decide("tests/unit/deep/test_deep.py::test_deep").reason == (
        "pkg/limits.py changes code that runs when it is imported: "
        "tests/unit/conftest.py imports it, for the tests under tests/unit"
    )


def test_a_module_imported_only_inside_a_function_is_seen_by_its_test() -> None:
    files = {**BASE, "pkg/lazy.py": "RATE = 3\n"}
    files["tests/test_lazy.py"] = "def test_lazy():\n    from pkg import lazy\n\n    assert lazy.RATE == 3\n"
    assert _ran(_plan(files, ["pkg/lazy.py"])) == {"tests/test_lazy.py::test_lazy"}


def test_relative_imports_are_followed_from_the_importing_package() -> None:
    files = {
        **BASE,
        "pkg/sub/__init__.py": "",
        "pkg/sub/base.py": "K = 1\n",
        "pkg/sub/use.py": "from .base import K\n\n\ndef k():\n    return K\n",
        "pkg/sub/up.py": "from .. import consts\n",
        "tests/test_use.py": "from pkg.sub.use import k\n\n\ndef test_use():\n    assert k() == 1\n",
        "tests/test_up.py": "from pkg.sub import up\n\n\ndef test_up():\n    assert up.consts.SCALE\n",
    }
    assert _ran(_plan(files, ["pkg/sub/base.py"])) == {"tests/test_use.py::test_use"}
    assert _ran(_plan(files, ["pkg/consts.py"])) == {API, CONSTS, "tests/test_up.py::test_up"}


def test_star_imports_are_followed_to_the_module_and_a_package_s_submodules() -> None:
    files = {
        **BASE,
        "pkg/star.py": "from pkg.consts import *\n",
        "tests/test_star.py": "from pkg.star import SCALE\n\n\ndef test_star():\n    assert SCALE\n",
        "pkg/sub/__init__.py": '__all__ = ["base"]\n',
        "pkg/sub/base.py": "K = 1\n",
        "tests/test_sub.py": "from pkg.sub import *\n\n\ndef test_sub():\n    assert base.K\n",
    }
    assert _ran(_plan(files, ["pkg/consts.py"])) == {API, CONSTS, "tests/test_star.py::test_star"}
    assert _ran(_plan(files, ["pkg/sub/base.py"])) == {"tests/test_sub.py::test_sub"}


def test_a_package_that_re_exports_a_module_makes_every_importer_of_the_package_see_it() -> None:
    # importing pkg.other runs pkg/__init__.py first, which imports pkg.consts
    files = {**BASE, "pkg/__init__.py": "from .consts import SCALE\n", "pkg/lone.py": "X = 1\n"}
    files["tests/test_lone.py"] = "import sys\n\n\ndef test_lone():\n    assert sys\n"
    p = _plan(files, ["pkg/consts.py"])
    assert _ran(p) == {API, CONSTS, OTHER}
    assert not p.decide("tests/test_lone.py::test_lone").run


def test_a_dotted_name_in_a_string_is_an_import_mock_patch_makes() -> None:
    files = {**BASE}
    files["tests/test_patch.py"] = (
        'from unittest import mock\n\n\n@mock.patch("pkg.consts.SCALE", 5)\ndef test_patch():\n    pass\n'
    )
    assert "tests/test_patch.py::test_patch" in _ran(_plan(files, ["pkg/consts.py"]))


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("import importlib\n\nNAME = 'pkg.' + 'x'\nM = importlib.import_module(NAME)\n", "import_module"),
        ("M = __import__(''.join(['pkg', '.consts']))\n", "__import__"),
        (
            "import importlib.util\n\n\ndef test_x():\n    importlib.util.spec_from_file_location('m', 'tools/m.py')\n",
            "spec_from_file_location",
        ),
        ("import runpy\n\n\ndef test_x():\n    runpy.run_path('tools/m.py')\n", "run_path"),
        ("def test_x():\n    exec('import pkg.consts')\n", "exec"),
    ],
)
def test_a_test_whose_imports_cannot_be_followed_runs_for_any_change_at_import_and_says_why(
    source: str, why: str
) -> None:
    files = {**BASE, "tests/test_dyn.py": source}
    p = _plan(files, ["pkg/other.py"])
    d = p.decide("tests/test_dyn.py::test_dyn")
    assert d.run and d.why == "imports", d
    assert d.reason.startswith(
        "pkg/other.py changes code that runs when it is imported, and what tests/test_dyn.py imports cannot be "
        "followed: tests/test_dyn.py "
    )
    assert why in d.reason
    assert not p.decide(API).run


def test_a_name_written_out_where_a_module_is_imported_by_name_is_followed() -> None:
    files = {
        **BASE,
        "tests/test_byname.py": "import importlib\n\nimport pytest\n\nC = importlib.import_module('pkg.consts')\n"
        "pytest.importorskip('numpy')\nO = __import__('pkg.other')\n",
    }
    p = _plan(files, ["pkg/consts.py"])
    assert _ran(p) == {API, CONSTS, "tests/test_byname.py::test_byname"}
    assert "cannot be followed" not in p.decide("tests/test_byname.py::test_byname").reason


def test_a_module_that_does_not_parse_is_one_whose_imports_cannot_be_followed() -> None:
    files = {**BASE, "pkg/broken.py": "def f(:\n", "tests/test_broken.py": "from pkg import broken\n"}
    d = _plan(files, ["pkg/other.py"]).decide("tests/test_broken.py::test_broken")
    assert d.run and "pkg/broken.py does not parse" in d.reason


def test_a_module_a_pytest_plugin_imports_runs_every_test() -> None:
    files = {**BASE, "pkg/plug.py": "from pkg import consts\n", "conftest.py": 'pytest_plugins = ["pkg.plug"]\n'}
    p = _plan(files, ["pkg/consts.py"])
    assert p.full_reason == (
        "pkg/consts.py changes code that runs when it is imported: "
        "the pytest plugin pkg.plug (pytest_plugins of conftest.py) imports it, for every test"
    )
    files = {**BASE, "pkg/plug.py": "from pkg import consts\n"}
    p = _plan(files, ["pkg/consts.py"], plugins={"pkg.plug": "pyproject.toml's pytest11 entry point"})
    assert p.full_reason is not None and "the pytest plugin pkg.plug (pyproject.toml's pytest11 entry point)" in (
        p.full_reason
    )
    # however the list is written
    for plugins in (
        'pytest_plugins: list[str] = ["pkg.plug"]\n',
        'pytest_plugins = []\npytest_plugins += ["pkg.plug"]\n',
    ):
        files = {**BASE, "pkg/plug.py": "from pkg import consts\n", "conftest.py": plugins}
        assert "the pytest plugin pkg.plug" in (_plan(files, ["pkg/consts.py"]).full_reason or "")
    # plugins named by a computed list: which, no one can say
    files = {**BASE, "conftest.py": "NAMES = ['pkg.plug']\npytest_plugins = NAMES\n"}
    p = _plan(files, ["pkg/other.py"])
    assert p.full_reason == (
        "pkg/other.py changes code that runs when it is imported, and which tests import it cannot be followed: "
        "conftest.py names its pytest_plugins by a computed value"
    )


def test_a_module_that_ran_at_import_but_no_test_module_imports_runs_every_test() -> None:
    # the map saw it run at import, the graph finds no importer: something the graph cannot
    # see imported it (an installed plugin, a path hook), and every test runs
    files = {**BASE, "pkg/hidden.py": "H = 1\n"}
    p = _plan(files, ["pkg/hidden.py"])
    assert p.full_reason == (
        "pkg/hidden.py changes code that runs when it is imported, and no test module imports it: "
        "what imported it the import graph cannot tell"
    )


def test_a_deleted_module_is_seen_by_the_modules_that_still_import_it() -> None:
    files: dict[str, str | None] = {**BASE, "pkg/gone.py": None}
    files["tests/test_gone.py"] = "from pkg import gone\n"
    m = _map({k: v for k, v in files.items() if v is not None} | {"pkg/gone.py": ""})
    p = selection.plan(m, ["pkg/gone.py"], row="cpu", rules=RULES, now=NOW, graph=importgraph.build(files))
    assert {n for n in m.tests if p.decide(n).run} == {"tests/test_gone.py::test_gone"}


# --- end to end: run --select changed in a project in git ---------------------------------

SUITE = {
    "consts.py": "SCALE = 2\n",
    "api.py": "import consts\n\n\ndef scaled(x):\n    return x * consts.SCALE\n",
    "other.py": "OTHER = 3\n",
    "limits.py": "LIMIT = 5\n",
    "test_api.py": "from api import scaled\n\n\ndef test_scaled():\n    assert scaled(3) == 6\n",
    "test_other.py": "import other\n\n\ndef test_other():\n    assert other.OTHER == 3\n",
    "sub/conftest.py": "import pytest\n\nimport limits\n\n\n@pytest.fixture\ndef limit():\n    return limits.LIMIT\n",
    "sub/test_limit.py": "def test_limit(limit):\n    assert limit == 5\n",
}


def test_a_file_name_in_a_string_is_no_import() -> None:
    files = {
        **BASE,
        "pkg/limits.py": "LIMIT = 5\n",
        "tests/unit/conftest.py": "from pkg import limits\n",
        "tests/unit/test_limit.py": "def test_limit():\n    pass\n",
        "tests/test_names.py": 'NAMES = ["conftest.py", "setup.py"]\n',
    }
    assert _ran(_plan(files, ["pkg/limits.py"])) == {"tests/unit/test_limit.py::test_limit"}


def test_a_plugin_whose_imports_cannot_be_followed_runs_every_test() -> None:
    files = {
        **BASE,
        "pkg/plug.py": "import importlib\n\n\ndef pytest_configure(config):\n"
        "    importlib.import_module(config.getini('extra'))\n",
    }
    p = _plan(files, ["pkg/other.py"], plugins={"pkg.plug": "pyproject.toml's pytest11 entry point"})
    assert p.full_reason == (
        "pkg/other.py changes code that runs when it is imported, and what the pytest plugin pkg.plug "
        "(pyproject.toml's pytest11 entry point) imports cannot be followed: "
        "pkg/plug.py imports a module by a name it computes (import_module)"
    )


def test_a_name_starts_at_the_top_of_its_packages() -> None:
    # pkg/spread/ray.py is pkg.spread.ray: `import ray` (an installed package) is not it;
    # a folder without __init__.py may be on sys.path, and its modules go by their own names
    files = {
        **BASE,
        "pkg/spread/__init__.py": "",
        "pkg/spread/ray.py": "NODES = 2\n",
        "tests/integration/test_ray.py": "def test_ray():\n    import ray\n\n    assert ray\n",
        "tests/integration/test_spread.py": "from pkg.spread import ray\n",
        "suites/mine/helpers.py": "K = 1\n",
        "suites/mine/test_helpers.py": "import helpers\n",
        "suites/mine/test_long.py": "import suites.mine.helpers\n",
    }
    assert _ran(_plan(files, ["pkg/spread/ray.py"])) == {"tests/integration/test_spread.py::test_spread"}
    assert _ran(_plan(files, ["suites/mine/helpers.py"])) == {
        "suites/mine/test_helpers.py::test_helpers",
        "suites/mine/test_long.py::test_long",
    }


def test_a_conftest_with_session_hooks_imports_for_every_test() -> None:
    # pytest_collection_modifyitems in tests/unit/conftest.py gets every collected test, in
    # any folder: what it imports is every test's, as a plugin's
    files = {
        **BASE,
        "pkg/limits.py": "LIMIT = 5\n",
        "tests/unit/conftest.py": "from pkg import limits\n\n\ndef pytest_collection_modifyitems(items):\n    pass\n",
        "tests/unit/test_limit.py": "def test_limit():\n    pass\n",
    }
    p = _plan(files, ["pkg/limits.py"])
    assert p.full_reason == (
        "pkg/limits.py changes code that runs when it is imported: the pytest hooks of tests/unit/conftest.py "
        "(pytest_collection_modifyitems), which act on every test imports it, for every test"
    )
    # a conftest of fixtures alone still acts on its folder's tests only
    fixtures = {**files, "tests/unit/conftest.py": "from pkg import limits\n"}
    assert _ran(_plan(fixtures, ["pkg/limits.py"])) == {"tests/unit/test_limit.py::test_limit"}


@pytest.mark.parametrize(
    "lookup",
    [
        "pkgutil.resolve_name('pkg.consts:SCALE')",
        "pydoc.locate('pkg.consts.SCALE')",
        "importlib.util.find_spec('pkg.consts')",
    ],
)
def test_a_module_named_to_a_lookup_by_name_is_followed(lookup: str) -> None:
    files = {**BASE, "tests/test_look.py": f"import importlib.util, pkgutil, pydoc\n\nV = {lookup}\n"}
    p = _plan(files, ["pkg/consts.py"])
    assert _ran(p) == {API, CONSTS, "tests/test_look.py::test_look"}
    assert "cannot be followed" not in p.decide("tests/test_look.py::test_look").reason


@pytest.mark.parametrize(
    "lookup",
    ["pkgutil.resolve_name(f'{n}:SCALE')", "pydoc.locate(n + '.SCALE')", "importlib.util.find_spec(n)"],
)
def test_a_module_a_lookup_is_handed_a_computed_name_of_cannot_be_followed(lookup: str) -> None:
    files = {**BASE, "tests/test_look.py": f"import importlib.util, pkgutil, pydoc\n\nn = 'pkg.consts'\nV = {lookup}\n"}
    d = _plan(files, ["pkg/other.py"]).decide("tests/test_look.py::test_look")
    assert d.run and "imports a module by a name it computes" in d.reason


def test_what_a_change_imports_anew_no_longer_or_at_another_time_is_what_it_reaches_so() -> None:
    files = {
        **BASE,
        "pkg/fakes.py": "from pkg import other\n\nother.triple = len\n",
        "pkg/more.py": "from pkg import fakes\n",
    }
    graph = importgraph.build(files)
    test = files["tests/test_api.py"]

    def changed(old: str, new: str) -> frozenset[str]:
        return importgraph.imports_changed(graph, "tests/test_api.py", old, new)

    # pkg/__init__.py and pkg/api.py: reached before, and still, by the import it kept
    assert changed(test, "import pkg.more\n" + test) == {"pkg/more.py", "pkg/fakes.py", "pkg/other.py"}
    assert changed("import pkg.more\n" + test, test) == {"pkg/more.py", "pkg/fakes.py", "pkg/other.py"}
    assert changed(test, test + "\nX = 1\n") == frozenset()
    assert changed(test, "import pkg.api\n" + test) == frozenset()  # an import it had, written again
    # from its import into a function's body: it runs when the function does, not at import
    lazy = test + "\n\ndef later():\n    import pkg.more\n"
    assert changed("import pkg.more\n" + test, lazy) == {"pkg/more.py", "pkg/fakes.py", "pkg/other.py"}
    assert changed(lazy, lazy.replace("later", "later2")) == frozenset()
