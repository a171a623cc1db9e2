"""#40: a folder listing sees names, not contents. A content change to a file that was there
at the map's commit and is now, in a folder listed at import or by a test, runs only the
tests that opened the file (and those that get what its opener kept); a file added to or
removed from a listed folder changes what the listing returns, and runs every test that can
see the listing (at import: every test)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from device_matrix.changes import namereads
from device_matrix.cli.select import opened_kept
from device_matrix.records.testmap import TestMap
from device_matrix.selection import Plan, Rules, plan

RULES = Rules(max_age=timedelta(days=30), full=(), ignore=())
NOW = datetime(2026, 12, 2, tzinfo=UTC)
PO = "src/pkg/locale/ru/messages.po"
TESTS = {
    "tests/test_ru.py::test_ru": frozenset({"src/pkg/i18n.py"}),
    "tests/test_de.py::test_de": frozenset({"src/pkg/i18n.py"}),
    "tests/test_cases.py::test_cases": frozenset({"tests/test_cases.py"}),
    "tests/test_plain.py::test_plain": frozenset({"src/pkg/core.py"}),
}
# the package lists its own folder at import (humanize's); test_ru opens the Russian
# catalogue; test_cases lists a folder of cases
READS = {
    "tests/test_ru.py::test_ru": frozenset({PO}),
    "tests/test_cases.py::test_cases": frozenset({"tests/cases/"}),
}
MAP = TestMap(
    "cpu",
    "a" * 40,
    "2026-12-01T00:00:00+00:00",
    TESTS,
    reads=READS,
    read_at_import=frozenset({"src/pkg/"}),
    openers={PO: frozenset({"tests/test_ru.py:4"}), "tests/cases/": frozenset({"tests/test_cases.py:3"})},
)


def _plan(changed: str, *, present: bool) -> Plan:
    return plan(MAP, [changed], row="cpu", rules=RULES, now=NOW, present=[changed] if present else [])


def _ran(p: Plan) -> set[str]:
    return {n for n in MAP.tests if p.decide(n).run}


def test_a_content_change_in_a_folder_listed_at_import_runs_only_the_tests_that_opened_the_file() -> None:
    p = _plan(PO, present=True)
    assert p.full_reason is None
    assert _ran(p) == {"tests/test_ru.py::test_ru"}
    assert p.decide("tests/test_ru.py::test_ru").why == "opens"


def test_a_file_added_to_or_removed_from_a_folder_listed_at_import_runs_every_test() -> None:
    # present=False: it was not there at the map's commit, or is gone now (git sees a rename
    # as the one removed and the other added)
    p = _plan("src/pkg/locale/fr/messages.po", present=False)
    assert p.full_reason is not None
    assert _ran(p) == set(MAP.tests)
    assert _plan(PO, present=False).full_reason is not None


def test_a_content_change_in_a_folder_a_test_listed_runs_only_its_openers_and_an_added_file_the_lister() -> None:
    changed = _plan("tests/cases/one.txt", present=True)
    assert changed.full_reason is None and _ran(changed) == set()
    added = _plan("tests/cases/two.txt", present=False)
    assert added.full_reason is None and _ran(added) == {"tests/test_cases.py::test_cases"}


def test_a_listing_s_code_keeps_only_the_names_so_a_content_change_follows_the_file_s_openers_alone() -> None:
    sources = {"tests/test_cases.py": "import os\n\ndef cases():\n    return os.listdir('tests/cases')\n"}
    project = lambda: namereads.Parsed(sources)  # noqa: E731
    same = opened_kept(MAP, ["tests/cases/one.txt"], RULES, None, project, present=["tests/cases/one.txt"])
    assert same == ({}, None)
