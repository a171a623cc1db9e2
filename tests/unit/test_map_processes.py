"""#40: how the recording names what another process did: the pid in a coverage data file's
name (a process it did not follow measured under a test's context), and the program an
audit event started, as a short command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from device_matrix.child.opens import native_path, started
from device_matrix.child.testmap import _data_pid, _followed, fold
from device_matrix.wire import MAP_UNSEEN


@pytest.mark.parametrize(
    ("name", "pid"),
    [
        ("/m/cov-1-ab/data.vm.pid30470.XNboYcLx", "30470"),  # coverage 7.11 and later
        ("/m/cov-1-ab/data.vm.pid30470.XNboYcLx.Ho03O39h4vNh", "30470"),  # and what a newer one adds
        ("/m/cov-1-ab/data.build.example.org.4242.X1a2B3cx", "4242"),  # coverage 7.10: a dotted host
        ("/m/cov-1-ab/data.vm", ""),  # no pid: a process not followed, as far as it can tell
    ],
)
def test_the_pid_of_a_coverage_data_file(name: str, pid: str) -> None:
    assert _data_pid(name) == pid


def test_the_program_an_audit_event_started_as_a_command_line() -> None:
    assert started("subprocess.Popen", ("git", ["git", "log", "-1"], None, None)) == "git log -1"
    assert started("subprocess.Popen", ("/bin/sh", None, None, None)) == "/bin/sh"  # no argv: the executable
    assert started("os.system", (b"make  data",)) == "make data"
    assert started("os.posix_spawn", ("/bin/true", ["true", "-x"], {})) == "true -x"
    assert started("os.spawn", (0, "/bin/cat", ["cat", "f"], {})) == "cat f"
    long = started("os.exec", ("/bin/echo", ["echo", "x" * 200], {}))
    assert len(long) == 80 and long.endswith("...")


@pytest.mark.parametrize(
    ("database", "path"),
    [
        ("data/app.db", "data/app.db"),
        (b"data/app.db", "data/app.db"),
        ("file:data/app.db?mode=ro", "data/app.db"),  # a URI (uri=True): its query is no part of the path
        ("file:///srv/app%20one.db", "/srv/app one.db"),
        (":memory:", None),
        ("", None),  # a temporary database
        ("file::memory:?cache=shared", None),
        ("file:shared?mode=memory", None),
    ],
)
def test_the_file_sqlite3_opens(database: Any, path: str | None) -> None:
    assert native_path(database) == path


def test_a_process_is_followed_in_the_contexts_it_measured_in(tmp_path: Path) -> None:
    own = tmp_path / "cov-100-aa"
    (tmp_path / "cov-200-bb").mkdir(parents=True)  # another recording process of the run
    own.mkdir()
    followed = _followed(own, {"300": [{"c": "t1"}, {"c": "t1", "reads": []}]})  # forked-300.jsonl's
    assert followed["100"] is None  # this process: any context
    assert followed["300"] == {"t1"}  # a forked copy: the contexts its file names (a later pid's are another's)
    assert followed["200"] == {""}  # an xdist worker's coverage, started outside every test
    assert "400" not in followed


def test_a_data_file_cut_short_is_no_failure_of_the_fold_and_its_process_is_unseen(tmp_path: Path) -> None:
    # a process killed as it saved (a pool's terminate()) leaves a file that is no coverage data
    own = tmp_path / "map" / "cov-100-aa"
    own.mkdir(parents=True)
    (own / "finished.jsonl").write_text(json.dumps({"c": "t1", "nodeid": "t.py::a", "reads": []}) + "\n")
    (own / "data.vm.pid123.Xabcdefx").write_bytes(b"SQLite format 3\0 cut short")
    fold(own, tmp_path)
    unseen = json.loads((own / MAP_UNSEEN).read_text())
    assert unseen == {
        "": ["a process beside it (pid 123) left no coverage as the map was written (killed, or running)", ""]
    }
    assert json.loads((own / "part.json").read_text()) == {"t.py::a": []}
    assert not list(own.glob("data.*"))
