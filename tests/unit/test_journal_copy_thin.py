"""A failure's traceback is stored once across a row's records (#32): an attempt's journal
copy (attempts/NN/journal.jsonl) keeps a report's text only until the run's record that
holds it is written; from then on the copy says where it is. A text the record does not
hold verbatim (a run killed before its record, a rerun's earlier failure, a test whose
record says something else) stays in the copy: nothing is ever in no file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from device_matrix.run.journal import STORED_IN, Fold, thin_copies

TRACEBACK = "def test_a():\n>       assert 1 == 2\nE       assert 1 == 2\n\nt.py:2: AssertionError"


def _events(longrepr: str | None = TRACEBACK, *, nodeid: str = "t.py::test_a") -> list[dict[str, Any]]:
    return [
        {"e": "session", "n": 1, "pid": 7, "device": "cpu", "t": 1.0, "env": None},
        {"e": "collected", "n": 2, "nodeids": [nodeid], "t": 1.0},
        {"e": "start", "n": 3, "nodeid": nodeid, "t": 1.0, "meta": {}, "seq": 1, "loc": ["t.py", 1]},
        {"e": "pass", "n": 4, "when": "setup", "duration": 0.0},
        {
            "e": "report",
            "n": 5,
            "nodeid": nodeid,
            "when": "call",
            "outcome": "failed",
            "duration": 0.1,
            "longrepr": longrepr,
            "wasxfail": None,
            "skip": None,
            "sub": None,
            "cause": "assert 1 == 2",
            "where": ["t.py", 2],
        },
        {"e": "finish", "n": 6, "nodeid": nodeid, "t": 1.2},
        {"e": "end", "n": 7, "exitstatus": 1, "t": 1.3},
    ]


def _copy(folder: Path, events: list[dict[str, Any]], index: int = 1) -> Path:
    path = folder / "attempts" / f"{index:02d}" / "journal.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
    return path


def _record(message: str | None, nodeid: str = "t.py::test_a", cause: str | None = "assert 1 == 2") -> dict[str, Any]:
    return {"tests": [{"nodeid": nodeid, "outcome": "failed", "message": message, "cause": cause}]}


def test_a_text_the_record_holds_leaves_the_copy_which_says_where_it_is(tmp_path: Path) -> None:
    path = _copy(tmp_path, _events())
    before = path.read_text().splitlines()
    thin_copies(tmp_path / "attempts", _record(TRACEBACK))  # type: ignore[arg-type]
    after = path.read_text().splitlines()
    report = json.loads(after[4])
    assert report["longrepr"] is None and report["stored"] == STORED_IN
    assert TRACEBACK not in path.read_text()
    # every other line as it was, and what the copy is read for is still there
    assert [line for i, line in enumerate(after) if i != 4] == [line for i, line in enumerate(before) if i != 4]
    assert report["cause"] is None and report["where"] == ["t.py", 2]  # the record's cause is the same
    fold = Fold()
    for line in path.read_bytes().splitlines():
        fold.feed(line)
    assert fold.broken is None and fold.finished_ids() == ["t.py::test_a"] and fold.ended


def test_a_subtests_text_inside_the_records_message_leaves_the_copy_too(tmp_path: Path) -> None:
    path = _copy(tmp_path, _events())
    thin_copies(tmp_path / "attempts", _record(f"subtest (i=3): {TRACEBACK}"))  # type: ignore[arg-type]
    assert TRACEBACK not in path.read_text()


def test_a_cause_the_record_says_otherwise_stays_in_the_copy(tmp_path: Path) -> None:
    path = _copy(tmp_path, _events())
    thin_copies(tmp_path / "attempts", _record(TRACEBACK, cause="another cause"))  # type: ignore[arg-type]
    (report,) = [json.loads(line) for line in path.read_text().splitlines() if '"e":"report"' in line]
    assert report["longrepr"] is None and report["cause"] == "assert 1 == 2"


@pytest.mark.parametrize(
    "record",
    [
        _record(None),  # the running record of a run killed outright: it holds no message yet
        _record("interrupted by SIGTERM while it ran"),  # the record says something else
        _record(TRACEBACK, nodeid="t.py::test_b"),  # the same words, another test's
        {"tests": []},
    ],
    ids=["no-message", "other-message", "other-test", "no-tests"],
)
def test_a_text_the_record_does_not_hold_stays_in_the_copy(tmp_path: Path, record: dict[str, Any]) -> None:
    path = _copy(tmp_path, _events())
    before = path.read_bytes()
    thin_copies(tmp_path / "attempts", record)  # type: ignore[arg-type]
    assert path.read_bytes() == before


def test_a_copy_that_is_not_all_json_keeps_its_other_lines_and_an_unreadable_one_is_left(tmp_path: Path) -> None:
    events = _events()
    path = _copy(tmp_path, events[:4])
    with path.open("a") as fh:
        # a line of the child's that is no event, one that only looks like a report, and a
        # byte that is no UTF-8: each stays as it was, and the report after them is thinned
        fh.write('"a line of the child that was not an event"\n{"e":"report","n":5,"longrepr":"torn\n')
        fh.write(
            '{"e":"collect_error","n":5,"nodeid":"t.py::test_a","longrepr":"' + TRACEBACK.replace("\n", "\\n") + '"}\n'
        )
    with path.open("ab") as fh:
        fh.write(b"\xff\n")
    with path.open("a") as fh:
        fh.write("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events[4:]))
        fh.write('{"e":"report","n":8,"longrepr":"torn')
    thin_copies(tmp_path / "attempts", _record(TRACEBACK))  # type: ignore[arg-type]
    lines = path.read_text(errors="replace").splitlines()
    assert lines[4:7] == [
        '"a line of the child that was not an event"',
        '{"e":"report","n":5,"longrepr":"torn',
        '{"e":"collect_error","n":5,"nodeid":"t.py::test_a","longrepr":"' + TRACEBACK.replace("\n", "\\n") + '"}',
    ]
    (report,) = [json.loads(line) for line in lines[8:] if line.startswith('{"e":"report","n":5,"nodeid"')]
    assert report["stored"] == STORED_IN
    assert lines[-1] == '{"e":"report","n":8,"longrepr":"torn'


def test_a_copy_with_nothing_to_take_out_is_not_written_again(tmp_path: Path) -> None:
    path = _copy(tmp_path, _events())
    before = path.stat().st_ino
    thin_copies(tmp_path / "attempts", _record("another text"))  # type: ignore[arg-type]
    assert path.stat().st_ino == before
    thin_copies(tmp_path / "attempts", _record(TRACEBACK))  # type: ignore[arg-type]
    assert path.stat().st_ino != before  # written anew, beside it, then renamed over it


def test_a_short_text_of_a_test_the_record_does_not_name_stays(tmp_path: Path) -> None:
    path = _copy(tmp_path, _events("X"))
    before = path.read_bytes()
    thin_copies(tmp_path / "attempts", _record("XXXX", nodeid="t.py::test_b"))  # type: ignore[arg-type]
    assert path.read_bytes() == before


def test_a_copy_that_cannot_be_read_is_left_and_the_others_are_thinned(tmp_path: Path) -> None:
    (tmp_path / "attempts" / "01" / "journal.jsonl").mkdir(parents=True)  # not a file: reading it fails
    path = _copy(tmp_path, _events(), index=2)
    thin_copies(tmp_path / "attempts", _record(TRACEBACK))  # type: ignore[arg-type]
    assert TRACEBACK not in path.read_text()
    assert thin_copies(tmp_path / "nowhere", _record(TRACEBACK)) is None  # type: ignore[arg-type,func-returns-value]
