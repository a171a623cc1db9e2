"""The one view of a triage report (#31): its sections in order, and what a section lists,
built here once and rendered by markdown.py and html.py alike.

Each renderer keeps a piece per section id it draws (Markdown has no test matrix nor
commits table; the HTML report shows the trends inside the row cards), and walks
:func:`sections` in this order. A new section is one entry in :data:`SECTIONS` (with its
builder here when it lists things) and one small piece in each renderer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal, TypeAlias

from device_matrix.report.model import RowView, Triage, nothing_changed

CHANGES_LISTED = 50  # of each kind of change, in both reports; triage.json has them all
FAILURES_SHOWN = 500  # #32: failures listed one by one in the HTML report; the groups hold them all
TESTS_SHOWN = 10_000  # #32: rows of the HTML report's test matrix: 20,000 failing tests stay under 5 MB


@dataclass(frozen=True)
class Section:
    id: str  # its anchor in the HTML report
    title: str  # its name in the HTML report's navigation
    present: Callable[[Triage], bool]  # whether this triage has it


def _always(_: Triage) -> bool:
    return True


def _with_history(t: Triage) -> bool:
    return t["history"] is not None


SECTIONS: tuple[Section, ...] = (
    Section("rows", "Rows", _always),
    # #32: the report leads with the failures by cause, what needs action first
    Section("groups", "Failure groups", lambda t: bool(t["failures"] or t["crashes"])),
    Section("verdicts", "Verdicts", lambda t: t["verdicts"] is not None),
    Section("commits", "Commits", lambda t: t["history"] is not None and bool(t["history"]["sources"])),
    Section("trends", "Trends", lambda t: t["history"] is not None and bool(t["history"]["trends"])),
    Section("changes", "What changed", lambda t: t["changes"]["previous"] is not None),
    Section("failures", "Failures", _always),
    Section("crashes", "Crashes", _always),
    Section("crash-history", "Crash history", _with_history),
    Section("flaky", "Flaky", _with_history),
    Section("durations", "Durations", _always),
    Section("matrix-section", "Tests", _always),
    Section("skips", "Skips", _always),
)


def sections(t: Triage, drawn: Callable[[str], bool] = lambda _: True) -> list[Section]:
    """The sections ``t`` has, in the report's order; ``drawn``: those a renderer draws."""
    return [s for s in SECTIONS if s.present(t) and drawn(s.id)]


# #34: why tests ran, in the selection line's words, after the changed files (device_matrix/selection.py's Why)
SELECTION_WORDS: Mapping[str, str] = {
    "recent": "recently failing",
    "failed_at_map": "failed when the map was recorded",
    "opens": "opened a changed file",
    "new": "new",
    "no_data": "without map data",
    "named": "named with --test",
}


def selection_line(r: RowView) -> str | None:
    """How much of the row ran and why, when a change chose its tests (#34):
    "ran 212 of 1,446 tests: 3 changed files; 31 recently failing; 4 new"."""
    s = r["test_selection"]
    if s is None:
        return None
    head = f"ran {s['ran']:,} of {s['total']:,} tests"
    if s["full_reason"] is not None:
        return f"{head}: every test, {s['full_reason']}"
    n = len(s["changed"])
    parts = [f"{n:,} changed file{'' if n == 1 else 's'}"]
    parts += [f"{s['by_reason'][why]:,} {words}" for why, words in SELECTION_WORDS.items() if s["by_reason"].get(why)]
    return f"{head}: {'; '.join(parts)}"


ChangeKind: TypeAlias = Literal[
    "row_added",
    "row_gone",
    "new_failure",
    "fixed",
    "new_crash",
    "crash_stopped",
    "newly_flaky",
    "appeared",
    "disappeared",
    "not_run",
]


# each kind in words, where a list of it is cut: "… 12 more (new test; see triage.json)"
CHANGE_WORDS: Mapping[ChangeKind, str] = {
    "row_added": "new row",
    "row_gone": "row gone",
    "new_failure": "new failure",
    "fixed": "fixed",
    "new_crash": "new crash",
    "crash_stopped": "crash stopped",
    "newly_flaky": "newly flaky crash",
    "appeared": "new test",
    "disappeared": "test gone",
    "not_run": "not run this time",
}


@dataclass(frozen=True)
class Change:
    """One line of "what changed": ``subject`` is the row, the test or the crash's fingerprint."""

    kind: ChangeKind
    subject: str
    row: str = ""  # the row of a test's change
    text: str = ""  # a crash's headline


@dataclass(frozen=True)
class ChangeList:
    previous: str  # the run compared with
    lines: list[Change]
    more: dict[ChangeKind, int]  # of each kind, how many past CHANGES_LISTED are left out
    nothing: bool  # same results as last time


def changes(t: Triage) -> ChangeList:
    """What changed since the previous triage of the history, each kind listed up to
    ``CHANGES_LISTED`` (the HTML report listed 200 and the Markdown 20 of some, #31)."""
    ch = t["changes"]
    headline = {c["fingerprint"]: c["headline"] for c in t["crashes"]}
    lines: list[Change] = []
    more: dict[ChangeKind, int] = {}

    def listed(kind: ChangeKind, items: list[Change]) -> None:
        lines.extend(items[:CHANGES_LISTED])
        if len(items) > CHANGES_LISTED:
            more[kind] = len(items) - CHANGES_LISTED

    listed("row_added", [Change("row_added", row) for row in ch["rows_added"]])
    listed("row_gone", [Change("row_gone", row) for row in ch["rows_gone"]])
    listed("new_failure", [Change("new_failure", nodeid, row) for nodeid, row in ch["new_failures"]])
    listed("fixed", [Change("fixed", nodeid, row) for nodeid, row in ch["fixed"]])
    listed("new_crash", [Change("new_crash", fp, text=headline.get(fp, fp)) for fp in ch["new_crashes"]])
    listed("crash_stopped", [Change("crash_stopped", fp, text=text) for fp, text in ch["stopped_crashes"]])
    listed("newly_flaky", [Change("newly_flaky", fp, text=headline.get(fp, fp)) for fp in ch["newly_flaky"]])
    listed("appeared", [Change("appeared", nodeid, row) for nodeid, row in ch["appeared"]])
    listed("disappeared", [Change("disappeared", nodeid, row) for nodeid, row in ch["disappeared"]])
    listed("not_run", [Change("not_run", nodeid, row) for nodeid, row in ch.get("not_run", [])])
    return ChangeList(previous=str(ch["previous"]), lines=lines, more=more, nothing=nothing_changed(ch))
