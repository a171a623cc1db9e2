"""#40: changes that `run --select changed` once recorded deselected although a test failed
by them, each played in a real run: a git project, its map recorded by a full run, a change,
a selection. Each class of change has its rule; the failing test must run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import SUITE_ON_PATH, git, git_project, recorded_git_project
from tests.conftest import Project
from tests.runs import outcomes_of

MINE = "suites/mine"
OTHER = "def test_other():\n    assert True\n"


def _select(p: Project, *more: str) -> tuple[str, dict[str, Any]]:
    proc = p.run("run", "--device", "fixture", "--select", "changed", *more)
    return proc.stdout + proc.stderr, p.record()


# 1: a wide fixture built by a helper: the second test got the value, not the lines
WIDE_HELPER = {
    "lib.py": "def build():\n    return [1, 2, 3]\n",
    "sub/conftest.py": (
        "import pytest\nimport lib\n\n\n@pytest.fixture(scope='session')\ndef db():\n    return lib.build()\n"
    ),
    "sub/test_a.py": "def test_a(db):\n    assert db[0] == 1\n",
    "sub/test_b.py": "def test_b(db):\n    assert db[1] == 2\n",
    "test_other.py": OTHER,
}
# 2: a cache, and a module's memo: the test that hits it runs no line of the changed function
CACHED = {
    "lib.py": (
        "import functools\n\n\n@functools.lru_cache(maxsize=None)\ndef table():\n    return (1, 2, 3)\n\n\n"
        "def first():\n    return table()[0]\n"
    ),
    "test_a.py": "from lib import first\n\n\ndef test_a():\n    assert first() == 1\n",
    "test_b.py": "from lib import first\n\n\ndef test_b():\n    assert first() == 1\n",
    "test_other.py": OTHER,
}
MEMO = {
    "lib.py": (
        "_MEMO = {}\n\n\ndef compute():\n    return 1\n\n\n"
        "def get():\n    if 'k' not in _MEMO:\n        _MEMO['k'] = compute()\n    return _MEMO['k']\n"
    ),
    "test_a.py": "from lib import get\n\n\ndef test_a():\n    assert get() == 1\n",
    "test_b.py": "from lib import get\n\n\ndef test_b():\n    assert get() == 1\n",
    "test_other.py": OTHER,
}


@pytest.mark.parametrize(
    ("suite", "path", "old", "new"),
    [
        (WIDE_HELPER, "lib.py", "[1, 2, 3]", "[9, 9, 9]"),
        (CACHED, "lib.py", "(1, 2, 3)", "(5, 2, 3)"),
        (MEMO, "lib.py", "return 1\n", "return 5\n"),
    ],
    ids=["wide-fixture", "lru-cache", "module-memo"],
)
def test_a_value_kept_beyond_its_call_runs_every_test_that_reaches_it(
    tmp_path: Path, suite: dict[str, str], path: str, old: str, new: str
) -> None:
    p = recorded_git_project(tmp_path, suite)
    target = p.root / MINE / path
    target.write_text(target.read_text().replace(old, new))
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_a": "failed", "test_b": "failed", "test_other": "deselected"}, out


# 3: the top conftest.py imports a module whose import calls a function
TOP_IMPORTS = {
    "table.py": (
        "def make_table():\n    return [1, 2, 3]\n\n\nTABLE = make_table()\n\n\ndef size():\n    return len(TABLE)\n"
    ),
    "test_t.py": "import table\n\n\ndef test_t():\n    assert table.TABLE[0] == 1\n",
    "test_size.py": "import table\n\n\ndef test_size():\n    assert table.size() == 3\n",
}


def test_a_function_run_at_the_import_of_a_module_the_top_conftest_imports_runs_every_test(tmp_path: Path) -> None:
    p = recorded_git_project(tmp_path, TOP_IMPORTS, SUITE_ON_PATH + "import table  # noqa: F401\n")
    target = p.root / MINE / "table.py"
    target.write_text(target.read_text().replace("[1, 2, 3]", "[7, 2, 3]"))
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_t": "failed", "test_size": "passed"}, out
    assert rec["test_selection"]["by_reason"] == {"full": 2}


# 4: a function run at another module's import: a parametrize list, a decorator
PARAMETRIZED = {
    "cases.py": "def cases():\n    return [{'v': 1}, {'v': 2}]\n",
    "test_p.py": (
        "import pytest\nimport cases\n\n\n@pytest.mark.parametrize('x', cases.cases())\n"
        "def test_p(x):\n    assert x['v'] < 10\n"
    ),
    "test_other.py": OTHER,
}
DECORATED = {
    "deco.py": "def expect(v):\n    def mark(f):\n        f.expected = v\n        return f\n\n    return mark\n",
    "test_p.py": "import deco\n\n\n@deco.expect(2)\ndef test_p():\n    assert test_p.expected == 2\n",
    "test_other.py": OTHER,
}


@pytest.mark.parametrize(
    ("suite", "path", "old", "new", "failed"),
    [
        (PARAMETRIZED, "cases.py", "{'v': 2}", "{'v': 20}", {"test_p[x0]": "passed", "test_p[x1]": "failed"}),
        (DECORATED, "deco.py", "f.expected = v\n", "f.expected = v + 1\n", {"test_p": "failed"}),
    ],
    ids=["parametrize", "decorator"],
)
def test_a_function_run_at_another_module_s_import_runs_that_module_s_tests(
    tmp_path: Path, suite: dict[str, str], path: str, old: str, new: str, failed: dict[str, str]
) -> None:
    p = recorded_git_project(tmp_path, suite)
    target = p.root / MINE / path
    target.write_text(target.read_text().replace(old, new))
    out, rec = _select(p)
    assert outcomes_of(rec) == {**failed, "test_other": "deselected"}, out


# 5: process state written at import by a call (environment, sys.path, warnings, a seed)
ENV = {
    "envset.py": "import os\n\nX = 1\n",
    "test_envset.py": "import envset\n\n\ndef test_x():\n    assert envset.X == 1\n",
    "test_mode.py": "import os\n\n\ndef test_mode():\n    assert os.environ.get('DM_TRIAL_MODE') is None\n",
}


@pytest.mark.parametrize(
    "write",
    [
        "os.environ.setdefault('DM_TRIAL_MODE', 'fast')",
        "os.environ.update(DM_TRIAL_MODE='fast')",
        "os.putenv('DM_TRIAL_MODE', 'fast') or os.environ.__setitem__('DM_TRIAL_MODE', 'fast')",
    ],
    ids=["setdefault", "update", "putenv"],
)
def test_process_state_written_at_import_by_a_call_runs_every_test(tmp_path: Path, write: str) -> None:
    p = recorded_git_project(tmp_path, ENV)
    (p.root / MINE / "envset.py").write_text(f"import os\n\nX = 1\n{write}\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_x": "passed", "test_mode": "failed"}, out
    reason = rec["test_selection"]["full_reason"]
    assert isinstance(reason, str) and "process" in reason, reason


# 7: a map is checked before it is believed
def _map_of(p: Project, **changes: object) -> Path:
    """The project's recorded map with ``changes`` to its JSON fields, written beside it."""
    import json

    recorded = p.results / "fixture" / "test-map.json"
    data = {**json.loads(recorded.read_text()), **changes}
    named = p.root.parent / "named-map.json"
    named.write_text(json.dumps(data))
    return named


def test_a_map_whose_commit_is_an_option_is_refused_and_git_is_never_handed_it(tmp_path: Path) -> None:
    p = recorded_git_project(tmp_path)
    planted = tmp_path / "planted"
    named = _map_of(p, commit=f"--output={planted}")
    proc = p.run("run", "--device", "fixture", "--select", "changed", "--map", str(named))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 7, out  # EXIT_RESULTS: a damaged map, named on the command line
    assert "is not a full commit id" in out
    assert not planted.exists()
    # found rather than named (the row's results): every test runs, and the record says why
    (p.results / "fixture" / "test-map.json").write_text(named.read_text())
    out, rec = _select(p)
    assert set(outcomes_of(rec).values()) == {"passed"}, out
    assert "is not a full commit id" in str(rec["test_selection"]["full_reason"])
    assert not planted.exists()


def test_a_map_whose_commit_is_a_branch_name_or_no_commit_is_refused(tmp_path: Path) -> None:
    p = recorded_git_project(tmp_path)
    for commit, said in (("main", "is not a full commit id"), ("0" * 40, "is not a commit of this clone")):
        named = _map_of(p, commit=commit)
        (p.root / MINE / "helpers.py").write_text("def double(x):\n    return 2 * x + 0\n")
        proc = p.run("run", "--device", "fixture", "--select", "changed", "--map", str(named))
        out = proc.stdout + proc.stderr
        rec = p.record()
        if commit == "main":
            assert proc.returncode == 7 and said in out, out
        else:  # a well-formed id this clone lacks: a shallow clone; every test runs, saying so
            assert set(outcomes_of(rec).values()) == {"passed"}, out
            assert said in str(rec["test_selection"]["full_reason"])


def test_a_map_of_another_row_is_refused(tmp_path: Path) -> None:
    p = recorded_git_project(tmp_path)
    named = _map_of(p, row="tpu")
    proc = p.run("run", "--device", "fixture", "--select", "changed", "--map", str(named))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 7, out
    assert "is the test map of row 'tpu', not of row 'fixture'" in out


# 6: a test that reads a function's code without calling it
CODE = {
    "lib.py": "def f():\n    return 1\n",
    "test_code.py": "from lib import f\n\n\ndef test_code():\n    assert 1 in f.__code__.co_consts\n",
    "test_calls.py": "from lib import f\n\n\ndef test_calls():\n    assert f() >= 1\n",
    "test_other.py": OTHER,
}


def test_a_test_that_reads_a_changed_function_s_code_runs(tmp_path: Path) -> None:
    p = recorded_git_project(tmp_path, CODE)
    (p.root / MINE / "lib.py").write_text("def f():\n    return 2\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_code": "failed", "test_calls": "passed", "test_other": "deselected"}, out


# tests that failed in the run that recorded the map, with no triage run since (the history
# of recent failures is empty): the map itself says which failed
FAILING = {f"test_f{i}.py": f"def test_f{i}():\n    assert False\n" for i in range(8)}


def test_a_test_that_failed_in_the_map_s_own_run_always_runs(tmp_path: Path) -> None:
    p = git_project(tmp_path, FAILING)
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 1, full.stdout + full.stderr
    (p.root / "CHANGELOG.md").write_text("a line\n")
    git(p.root, "add", "-A")
    git(p.root, "commit", "-qm", "changelog")
    out, rec = _select(p)
    assert set(outcomes_of(rec).values()) == {"failed"}, out
    assert rec["test_selection"]["by_reason"] == {"failed_at_map": 8}, out
    assert rec["status"] == "failed", out


# #40: what a module runs as the program (``if __name__ == "__main__":``) never runs at import
AS_PROGRAM = {
    "tool.py": "import os\n\n\ndef run():\n    return 1\n\n\nif __name__ == '__main__':\n    print(run())\n",
    "test_program.py": (
        "import os\nimport runpy\n\n\ndef test_program(capsys):\n"
        "    runpy.run_path(os.path.join(os.path.dirname(__file__), 'tool.py'), run_name='__main__')\n"
        "    assert capsys.readouterr().out == '1\\n'\n"
    ),
    "test_unit.py": (
        "import unittest\n\nfrom tool import run\n\n\nclass TestRun(unittest.TestCase):\n"
        "    def test_run(self):\n        self.assertEqual(run(), 1)\n\n\n"
        "if __name__ == '__main__':\n    unittest.main()\n"
    ),
    "test_other.py": OTHER,
}


def test_a_change_a_module_runs_as_the_program_runs_the_tests_that_ran_it_as_one(tmp_path: Path) -> None:
    p = recorded_git_project(tmp_path, AS_PROGRAM)
    tool = p.root / MINE / "tool.py"
    tool.write_text(tool.read_text().replace("print(run())", "os.environ.setdefault('X', '1')\n    print(run() + 1)"))
    unit = p.root / MINE / "test_unit.py"
    unit.write_text(unit.read_text().replace("unittest.main()", "unittest.main(verbosity=2)"))
    out, rec = _select(p)
    # the test that ran tool.py as the program sees its change; test_unit.py's guard no test
    # of the map ran (a subprocess may run it, unmeasured), so its file's own tests run; no
    # change is a write of the process's state at import, and test_other is left out
    assert "every test runs" not in out, out
    assert outcomes_of(rec) == {"test_program": "failed", "test_run": "passed", "test_other": "deselected"}, out
    assert rec["test_selection"]["by_reason"] == {"covers": 1, "own_file": 1, "deselected": 1}, out


# a caller hands what the changed function made, or the function itself, to a function of
# the project that keeps it: a later test reads it back without running a line of either
HANDED_ON = {
    "core.py": "def compute(n):\n    return n * 2\n",
    "store.py": (
        "_SEEN = []\n\n\ndef remember(v):\n    _SEEN.append(v)\n\n\ndef keep(f):\n    _SEEN.append(f(2))\n\n\n"
        "def last():\n    return _SEEN[-1]\n"
    ),
    "test_b.py": "from store import last\n\n\ndef test_b():\n    assert last() == 4\n",
    "test_other.py": OTHER,
}


@pytest.mark.parametrize(
    "call", ["remember(compute(2))", "keep(compute)"], ids=["value-handed-on", "function-handed-on"]
)
def test_what_a_caller_hands_to_a_function_that_keeps_it_runs_its_readers(tmp_path: Path, call: str) -> None:
    test_a = f"from core import compute\nfrom store import keep, remember\n\n\ndef test_a():\n    {call}\n"
    p = recorded_git_project(tmp_path, {**HANDED_ON, "test_a.py": test_a})
    target = p.root / MINE / "core.py"
    target.write_text(target.read_text().replace("n * 2", "n * 3"))
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_a": "passed", "test_b": "failed", "test_other": "deselected"}, out


def test_what_a_reader_of_a_changed_constant_hands_to_a_function_that_keeps_it_runs_its_readers(
    tmp_path: Path,
) -> None:
    test_a = "import core\nfrom store import remember\n\n\ndef test_a():\n    remember(core.SCALE * 2)\n"
    suite = {**HANDED_ON, "core.py": "SCALE = 2\n", "test_a.py": test_a}
    p = recorded_git_project(tmp_path, suite)
    target = p.root / MINE / "core.py"
    target.write_text("SCALE = 3\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_a": "passed", "test_b": "failed", "test_other": "deselected"}, out


@pytest.mark.parametrize("call", ["SEEN.append(compute(2))", "store.SEEN.append(compute(2))"])
def test_what_a_caller_appends_to_another_module_s_list_runs_the_tests_that_read_it(tmp_path: Path, call: str) -> None:
    test_a = f"import store\nfrom core import compute\nfrom store import SEEN\n\n\ndef test_a():\n    {call}\n"
    store = "SEEN = []\n\n\ndef last():\n    return SEEN[-1]\n"
    p = recorded_git_project(tmp_path, {**HANDED_ON, "store.py": store, "test_a.py": test_a})
    target = p.root / MINE / "core.py"
    target.write_text(target.read_text().replace("n * 2", "n * 3"))
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_a": "passed", "test_b": "failed", "test_other": "deselected"}, out


# a text file of doctests (pytest collects test*.txt): its examples read a changed constant
DOCTEST_TEXT = {
    "consts.py": "RATE = 2\n",
    "other.py": "def double(n):\n    return 2 * n\n",
    # it runs a line of the project (other.py's), none that reads RATE
    "test_usage.txt": ">>> import consts, other\n>>> other.double(2)\n4\n>>> consts.RATE\n2\n",
    "test_rate.py": "import consts\n\n\ndef test_rate():\n    assert consts.RATE > 0\n",
    "test_other.py": OTHER,
}


@pytest.mark.parametrize("new", ["RATE = 3\n", "RATE = max(3, 1)\n"], ids=["by-name", "by-import"])
def test_a_text_file_of_doctests_that_names_a_changed_constant_runs(tmp_path: Path, new: str) -> None:
    p = recorded_git_project(tmp_path, DOCTEST_TEXT)
    target = p.root / MINE / "consts.py"
    target.write_text(new)
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_usage.txt": "failed", "test_rate": "passed", "test_other": "deselected"}, out


# a test that runs a module's doctests by its own code: an example reads a changed constant
# through a class's default, running no line of the project's
TESTMOD = {
    "consts.py": "RATE = 2\n",
    "orders.py": (
        "from consts import RATE\n\n\nclass Order:\n"
        '    """An order.\n\n    >>> Order.rate\n    2\n    """\n\n    rate = RATE\n'
    ),
    "test_docs.py": (
        "import doctest\n\nimport orders\n\n\ndef test_docs():\n    assert not doctest.testmod(orders).failed\n"
    ),
    "test_other.py": OTHER,
}


def test_a_test_that_runs_doctests_whose_example_names_a_changed_constant_runs(tmp_path: Path) -> None:
    p = recorded_git_project(tmp_path, TESTMOD)
    (p.root / MINE / "consts.py").write_text("RATE = 3\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_docs": "failed", "test_other": "deselected"}, out
