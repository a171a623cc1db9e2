"""#40: a test that started a program (a subprocess, a process of multiprocessing's spawn)
may have read, through it, a file no audit hook of the recording saw opened: a change to a
file that is not Python runs it, what its starter kept is followed as an opener's, and a
program started outside every test, or by code the recording could not name, runs every test."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from device_matrix.changes import namereads
from device_matrix.cli.select import opened_kept
from device_matrix.records.testmap import TestMap
from device_matrix.selection import Rules, plan

RULES = Rules(max_age=timedelta(days=30), full=(), ignore=())
# a session-wide fixture that runs a program and keeps what it printed
CONFTEST = (
    "import subprocess\n\nimport pytest\n\n\n@pytest.fixture(scope='session')\ndef table():\n"
    "    return subprocess.run(['cat', 'data/t.csv'], capture_output=True).stdout\n\n\n"
    "def run(cmd):\n    return subprocess.run(cmd)\n"
)
TESTS = (
    "def test_table(table):\n    assert table\n\n\ndef test_also(table):\n    assert table\n\n\n"
    "def test_run():\n    from tests.conftest import run\n    run(['true'])\n\n\ndef test_plain():\n    assert 1\n"
)
SOURCES = {"tests/conftest.py": CONFTEST, "tests/test_t.py": TESTS}
NOW = datetime(2026, 12, 2, tzinfo=UTC)


def _map(unseen: dict[str, str], starters: frozenset[str]) -> TestMap:
    lines = {
        "tests/test_t.py::test_table": {"tests/conftest.py": frozenset({8}), "tests/test_t.py": frozenset({2})},
        "tests/test_t.py::test_also": {"tests/test_t.py": frozenset({6})},
        "tests/test_t.py::test_run": {"tests/conftest.py": frozenset({12}), "tests/test_t.py": frozenset({10, 11})},
        "tests/test_t.py::test_plain": {"tests/test_t.py": frozenset({15})},
    }
    return TestMap(
        row="cpu",
        commit="a" * 40,
        created="2026-12-01T00:00:00+00:00",
        tests={n: frozenset(per) for n, per in lines.items()},
        lines=lines,
        reads={n: frozenset() for n in lines},
        openers={},
        unseen=unseen,
        starters=starters,
    )


def _ran(m: TestMap, changed: str) -> set[str]:
    p = plan(m, [changed], row="cpu", rules=RULES, now=NOW)
    return {n for n in m.tests if p.decide(n).run}


def test_a_test_that_started_a_program_runs_when_a_file_that_is_not_python_changes() -> None:
    m = _map({"tests/test_t.py::test_run": "it started `true`"}, frozenset({"tests/conftest.py:11"}))
    assert _ran(m, "data/t.csv") == {"tests/test_t.py::test_run"}
    said = plan(m, ["data/t.csv"], row="cpu", rules=RULES, now=NOW).decide("tests/test_t.py::test_run")
    assert said.reason == "it started `true`: the map cannot see all it did, and data/t.csv changed"
    assert said.why == "opens"


def test_a_test_that_started_a_program_runs_when_a_python_file_changes_too() -> None:
    # a linter, grep or a build the test runs reads sources as data: no line of them runs
    m = _map({"tests/test_t.py::test_run": "it started `ruff check`"}, frozenset({"tests/conftest.py:11"}))
    # a function of conftest.py only test_table ran changed: test_plain ran none of it
    spans = {"tests/conftest.py": [(8, 8)]}
    p = plan(m, ["tests/conftest.py"], row="cpu", rules=RULES, now=NOW, bodies=["tests/conftest.py"], functions=spans)
    assert p.full_reason is None
    assert p.decide("tests/test_t.py::test_run").reason.startswith("it started `ruff check`: the map cannot see")
    assert p.decide("tests/test_t.py::test_table").run
    assert not p.decide("tests/test_t.py::test_plain").run


def test_what_the_starter_of_a_program_kept_reaches_the_tests_that_share_it() -> None:
    m = _map({"tests/test_t.py::test_table": "it started `cat data/t.csv`"}, frozenset({"tests/conftest.py:6"}))
    kept, why = opened_kept(m, ["data/t.csv"], RULES, None, lambda: namereads.Parsed(SOURCES))
    assert why is None
    # the session fixture kept what its program printed: test_also gets it without starting one
    assert set(kept["data/t.csv"]) == {"tests/test_t.py::test_table", "tests/test_t.py::test_also"}


def test_a_program_started_by_code_the_recording_could_not_name_runs_every_test() -> None:
    m = _map(
        {"tests/test_t.py::test_run": "a process it started (pid 7) ran Python the recording does not follow"},
        frozenset({""}),
    )
    kept, why = opened_kept(m, ["data/t.csv"], RULES, None, lambda: namereads.Parsed(SOURCES))
    assert kept == {}
    assert why is not None and "tests/test_t.py::test_run started may have opened" in why
    assert "cannot be followed" in why


def test_a_program_the_project_started_outside_every_test_runs_every_test() -> None:
    m = _map({"": "it started `git describe`"}, frozenset({""}))
    p = plan(m, ["data/t.csv"], row="cpu", rules=RULES, now=NOW)
    assert p.full_reason is not None
    assert "the project's code outside every test: it started `git describe`" in p.full_reason
    assert _ran(m, "data/t.csv") == set(m.tests)
    # a Python file a test read as text (a doctest's module): the program is the project's
    read = {**(m.reads or {}), "tests/test_t.py::test_also": frozenset({"tests/conftest.py"})}
    m = dataclasses.replace(m, reads=read, openers={"tests/conftest.py": frozenset({"tests/test_t.py:6"})})
    _, why = opened_kept(m, ["tests/conftest.py"], RULES, None, lambda: namereads.Parsed(SOURCES))
    assert why is not None and "which a program the project's code outside every test started may" in why, why
