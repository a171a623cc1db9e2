"""#40: a data file's change is a change to the code that opened it: the function named by
the line its code starts at, what it keeps followed to every test that can reach it, and a
full run, said why, where the opener cannot be named."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from device_matrix.changes import namereads
from device_matrix.child.opens import opener as _opener
from device_matrix.cli.select import opened_kept
from device_matrix.records.testmap import TestMap
from device_matrix.selection import Rules

LOADER = (
    "import functools\n\n\nclass C:\n    def m(self):\n        return 1\n\n\n"
    "@functools.lru_cache\n@functools.wraps(len)\ndef load():\n    return open('data/s.txt').read()\n\n\n"
    "def plain():\n    return 0\n"
)
TESTS = "from pkg.lib import load\n\n\ndef test_a():\n    assert load()\n\n\ndef test_b():\n    assert load()\n"
SOURCES = {"pkg/lib.py": LOADER, "pkg/test_lib.py": TESTS}
RULES = Rules(max_age=timedelta(days=30), full=(), ignore=())


def _map(openers: dict[str, frozenset[str]] | None, reads: dict[str, frozenset[str]] | None = None) -> TestMap:
    lines = {
        "pkg/test_lib.py::test_a": {"pkg/lib.py": frozenset({12}), "pkg/test_lib.py": frozenset({5})},
        "pkg/test_lib.py::test_b": {"pkg/test_lib.py": frozenset({9})},
    }
    return TestMap(
        row="cpu",
        commit="a" * 40,
        created="2026-12-01T00:00:00+00:00",
        tests={n: frozenset(per) for n, per in lines.items()},
        lines=lines,
        reads=reads if reads is not None else {"pkg/test_lib.py::test_a": frozenset({"data/s.txt"})},
        openers=openers,
    )


def _kept(m: TestMap, changed: str = "data/s.txt") -> tuple[dict[str, dict[str, str]], str | None]:
    return opened_kept(m, [changed], RULES, None, lambda: namereads.Parsed(SOURCES))


def test_the_opener_is_the_function_whose_code_starts_at_the_line_its_first_decorator_is_on() -> None:
    parsed = namereads.Parsed(SOURCES)
    assert namereads.opener_span(parsed, "pkg/lib.py", 9) == (12, 12)
    assert namereads.opener_span(parsed, "pkg/lib.py", 5) == (6, 6)  # a method
    assert namereads.opener_span(parsed, "pkg/lib.py", 15) == (16, 16)
    assert namereads.opener_span(parsed, "pkg/lib.py", 11) is None  # the def line of a decorated one
    assert namereads.opener_span(parsed, "pkg/other.py", 1) is None


def test_a_cached_opener_s_file_changed_runs_every_test_that_calls_it() -> None:
    kept, why = _kept(_map({"data/s.txt": frozenset({"pkg/lib.py:9"})}))
    assert why is None
    assert set(kept["data/s.txt"]) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}
    assert "pkg/lib.py kept of data/s.txt" in kept["data/s.txt"]["pkg/test_lib.py::test_b"]


def test_an_opener_that_keeps_nothing_adds_no_test_and_a_file_no_test_opened_none() -> None:
    assert _kept(_map({"data/s.txt": frozenset({"pkg/lib.py:15"})})) == ({}, None)
    assert _kept(_map({"data/s.txt": frozenset({"pkg/lib.py:9"})}), "data/other.txt") == ({}, None)


def test_an_opener_that_cannot_be_named_or_found_runs_every_test_and_says_why() -> None:
    for opener, words in [("", "could not name"), ("pkg/lib.py:11", "pkg/lib.py:11"), ("pkg/gone.py:3", "gone")]:
        kept, why = _kept(_map({"data/s.txt": frozenset({opener})}))
        assert kept == {}
        assert why is not None and words in why and "cannot be followed" in why


def test_a_map_recorded_before_openers_were_kept_runs_every_test_on_a_file_a_test_opened() -> None:
    kept, why = _kept(_map(None))
    assert kept == {}
    assert why is not None and "does not know which code opened it" in why
    assert _kept(_map(None), "data/other.txt") == ({}, None)


def test_a_folder_listed_counts_for_a_file_added_to_it() -> None:
    m = _map({"data/": frozenset({"pkg/lib.py:9"})}, {"pkg/test_lib.py::test_a": frozenset({"data/"})})
    kept, why = _kept(m, "data/new.txt")
    assert why is None and set(kept["data/new.txt"]) == {"pkg/test_lib.py::test_a", "pkg/test_lib.py::test_b"}


def test_the_recorded_opener_is_the_nearest_function_of_the_project_past_its_comprehensions(tmp_path: Path) -> None:
    source = "def f(op):\n    return [x for x in [op()]][0]\n\n\nAT_IMPORT = OP()\n"
    ns: dict[str, Any] = {"OP": lambda: _opener(tmp_path)}
    exec(compile(source, str(tmp_path / "pkg" / "m.py"), "exec"), ns)
    assert ns["AT_IMPORT"] == ""  # a module's own code: no function to name
    assert ns["f"](lambda: _opener(tmp_path)) == "pkg/m.py:1"
    assert _opener(tmp_path) is None  # no code of the project on the stack


def test_an_opener_whose_keeping_cannot_be_followed_runs_every_test() -> None:
    m = _map({"data/s.txt": frozenset({"pkg/lib.py:9"})})
    no_lines = TestMap(m.row, m.commit, m.created, m.tests, reads=m.reads, openers=m.openers)  # files alone
    kept, why = _kept(no_lines)
    assert kept == {}
    assert why == "data/s.txt changes, opened by code of pkg/lib.py: what it kept of it cannot be followed"
