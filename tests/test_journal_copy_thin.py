"""A failure's traceback is stored once across a row's records (#32): an attempt's journal
copy (attempts/NN/journal.jsonl) keeps a report's text only until the run's record that
holds it is written; from then on the copy says where it is. A text the record does not
hold verbatim (a run killed before its record, a rerun's earlier failure, a test whose
record says something else) stays in the copy: nothing is ever in no file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from device_matrix.run.journal import STORED_IN, Fold, thin_copies
from tests.conftest import Project, clean_env, make_project

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
    path = _copy(tmp_path, _events())
    with path.open("a") as fh:
        fh.write('"a line of the child that was not an event"\n{"e":"report","n":8,"longrepr":"torn')
    thin_copies(tmp_path / "attempts", _record(TRACEBACK))  # type: ignore[arg-type]
    text = path.read_text()
    assert TRACEBACK not in text and text.endswith('{"e":"report","n":8,"longrepr":"torn')
    assert '"a line of the child that was not an event"\n' in text
    other = tmp_path / "unreadable"
    _copy(other, _events()).chmod(0)
    try:
        thin_copies(other / "attempts", _record(TRACEBACK))  # type: ignore[arg-type]  # nothing raised
    finally:
        (other / "attempts" / "01" / "journal.jsonl").chmod(0o644)
    assert thin_copies(tmp_path / "nowhere", _record(TRACEBACK)) is None  # type: ignore[arg-type,func-returns-value]


# --- real runs ------------------------------------------------------------------------------

FAILING = """
import time

def test_first():
    raise AssertionError("\\n".join(f"line {i:05d} of what the first failure says" for i in range(400)))

def test_second():
    raise AssertionError("\\n".join(f"line {i:05d} of what the second failure says" for i in range(400)))

def test_slow():
    time.sleep({sleep})
"""


def _project(root: Path, sleep: float = 0) -> Project:
    root.mkdir(parents=True, exist_ok=True)
    p = make_project(root, [])
    folder = root / "suites" / "talk"
    folder.mkdir(parents=True)
    (folder / "test_talk.py").write_text(FAILING.replace("{sleep}", str(sleep)))
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace("suites = []", 'suites = ["talk"]'))
    return p


def _journals(p: Project) -> str:
    return "".join(path.read_text() for path in sorted((p.results / "fixture" / "attempts").glob("*/journal.jsonl")))


@pytest.mark.slow
def test_a_runs_journal_copy_holds_no_second_copy_of_its_failures(tmp_path: Path) -> None:
    p = _project(tmp_path)
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    tests = {t["nodeid"].rsplit("::", 1)[1]: t for t in p.record()["tests"]}
    for name in ("first", "second"):
        assert f"line 00399 of what the {name} failure says" in tests[f"test_{name}"]["message"]
    journal = _journals(p)
    assert "of what the first failure says" not in journal and "of what the second failure says" not in journal
    assert journal.count(f'"stored":"{STORED_IN}"') == 2


@pytest.mark.slow
def test_an_interrupted_run_resumes_and_its_failures_stay_in_one_file(tmp_path: Path) -> None:
    p = _project(tmp_path, sleep=60)
    command = [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--no-gdb"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    runner = subprocess.Popen([*command, "--device", "fixture"], cwd=p.root, env=clean_env(), **quiet)
    try:
        deadline = time.monotonic() + 120
        # the two failures are journaled, the slow test is running: the runner is told to stop
        while time.monotonic() < deadline and '"nodeid":"suites/talk/test_talk.py::test_slow"' not in _journals_of(p):
            time.sleep(0.2)
        os.kill(runner.pid, signal.SIGTERM)
        runner.wait(60)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    record = p.record()
    assert record["status"] == "interrupted", record["reason"]
    assert "of what the first failure says" not in _journals(p)
    (p.root / "suites" / "talk" / "test_talk.py").write_text(FAILING.replace("{sleep}", "0"))
    proc = p.run("run", "--device", "fixture", "--resume")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    resumed = {t["nodeid"].rsplit("::", 1)[1]: t for t in p.record()["tests"]}
    assert [resumed[n]["outcome"] for n in ("test_first", "test_second", "test_slow")] == ["failed", "failed", "passed"]
    assert "line 00399 of what the first failure says" in resumed["test_first"]["message"]
    assert resumed["test_first"]["attempt"] == 1  # kept from the interrupted run, not run again
    assert "of what the first failure says" not in _journals(p)


def _journals_of(p: Project) -> str:
    try:
        return _journals(p)
    except OSError:
        return ""
