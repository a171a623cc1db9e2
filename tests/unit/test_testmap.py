"""The test map's file (#34): each file once, tests by index, and a clear error for anything else."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from device_matrix.errors import ResultsError
from device_matrix.records import testmap
from device_matrix.records.testmap import TestMap


def _map() -> TestMap:
    return TestMap(
        row="cpu",
        commit="a" * 40,
        created="2026-12-01T00:00:00Z",
        tests={
            "tests/test_a.py::test_one": frozenset({"pkg/a.py", "pkg/util.py"}),
            "tests/test_b.py::test_two": frozenset({"pkg/util.py"}),
            "tests/test_c.py::test_none": frozenset(),
        },
    )


def test_a_map_reads_back_as_written_with_each_file_stored_once(tmp_path: Path) -> None:
    path = tmp_path / testmap.FILE_NAME
    testmap.write(path, _map())
    assert testmap.read(path) == _map()
    data = json.loads(path.read_text())
    assert data["files"] == ["pkg/a.py", "pkg/util.py"]
    assert data["tests"]["tests/test_b.py::test_two"] == [1]
    assert _map().files() == {"pkg/a.py", "pkg/util.py"}


def test_a_map_is_redacted_as_every_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_s3cr3tvalue1234567890")
    m = TestMap(row="cpu", commit=None, created="x", tests={"t.py::test[hf_s3cr3tvalue1234567890]": frozenset()})
    path = tmp_path / testmap.FILE_NAME
    testmap.write(path, m)
    assert "hf_s3cr3tvalue1234567890" not in path.read_text()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json", "not JSON"),
        ('{"schema": "other"}', "not a device-matrix test map"),
        (json.dumps({"schema": testmap.SCHEMA, "version": 99}), "version 99"),
        (json.dumps({"schema": testmap.SCHEMA, "version": 1, "files": "x"}), "damaged"),
        (
            json.dumps(
                {
                    "schema": testmap.SCHEMA,
                    "version": 1,
                    "row": "cpu",
                    "commit": None,
                    "created": "x",
                    "files": ["a.py"],
                    "tests": {"t": [1]},
                }
            ),
            "not indices",
        ),
        (
            json.dumps(
                {
                    "schema": testmap.SCHEMA,
                    "version": 1,
                    "row": "cpu",
                    "commit": None,
                    "created": "x",
                    "files": ["a.py"],
                    "tests": {"t": [True]},
                }
            ),
            "not indices",
        ),
    ],
)
def test_a_damaged_map_is_a_results_error_that_says_what(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / testmap.FILE_NAME
    path.write_text(text)
    with pytest.raises(ResultsError, match=words):
        testmap.read(path)


def test_a_missing_map_says_how_one_is_recorded(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="no test map there"):
        testmap.read(tmp_path / "absent.json")


@pytest.mark.parametrize("commit", ["--output=/tmp/x", "main", "HEAD~1", "a" * 39, "A" * 40, "a" * 41, "a" * 40 + "\n"])
def test_a_map_whose_commit_is_not_a_full_object_id_is_damaged(commit: str) -> None:
    # #40: a map's commit is handed to git: an option, or a name that moves, is never one
    data = {**testmap.to_json(_map()), "commit": commit}
    with pytest.raises(ResultsError, match="is not a full commit id"):
        testmap.from_json(data, "m.json")
    for whole in ("b" * 40, "c" * 64, None):
        assert testmap.from_json({**data, "commit": whole}, "m.json").commit == whole


def test_the_files_each_test_opened_read_back_and_a_damaged_list_is_an_error() -> None:
    # #40: each path once; a test's by index; those read outside every test apart
    m = TestMap(
        row="cpu",
        commit="a" * 40,
        created="2026-12-01T00:00:00Z",
        tests={"t.py::a": frozenset({"pkg/a.py"}), "t.py::b": frozenset()},
        reads={"t.py::a": frozenset({"data/x.csv", "cases/"}), "t.py::b": frozenset()},
        read_at_import=frozenset({"settings.json"}),
    )
    data = testmap.to_json(m)
    assert data["reads"] == {
        "files": ["cases/", "data/x.csv", "settings.json"],
        "tests": {"t.py::a": [0, 1], "t.py::b": []},
        "import": [2],
        "unseen": {},
        "starters": [],
        "probes": True,
    }
    back = testmap.from_json(json.loads(json.dumps(data)), "m.json")
    assert (back.reads, back.read_at_import) == (m.reads, m.read_at_import)
    assert testmap.from_json({k: v for k, v in data.items() if k != "reads"}, "m.json").reads is None
    for bad in ([], {"files": ["a"], "tests": {"t.py::a": [1]}, "import": []}, {"files": [1], "tests": {}}):
        with pytest.raises(ResultsError, match="its reads are not files by index"):
            testmap.from_json({**data, "reads": bad}, "m.json")


def test_the_tests_whose_programs_opens_are_unseen_read_back_and_a_map_without_them_knows_no_reads() -> None:
    # #40: a test that started a program (a subprocess) may have read any file through it
    m = TestMap(
        row="cpu",
        commit="a" * 40,
        created="2026-12-01T00:00:00Z",
        tests={"t.py::a": frozenset({"pkg/a.py"}), "t.py::b": frozenset()},
        reads={"t.py::a": frozenset({"data/x.csv"}), "t.py::b": frozenset()},
        openers={"data/x.csv": frozenset({"pkg/a.py:3"})},
        unseen={"t.py::b": "it started `git status`"},
        starters=frozenset({"t.py:7"}),
    )
    data = json.loads(json.dumps(testmap.to_json(m)))
    back = testmap.from_json(data, "m.json")
    assert (back.unseen, back.starters, back.reads) == (m.unseen, m.starters, m.reads)
    # a map recorded before the programs were kept: what each test opened may be short of
    # what it read, so the map knows no reads (a change to any such file runs every test)
    older = {**data, "reads": {k: v for k, v in data["reads"].items() if k not in ("unseen", "starters")}}
    back = testmap.from_json(older, "m.json")
    assert (back.reads, back.openers, back.read_at_import, back.unseen) == (None, None, frozenset(), {})
    for bad in ({"unseen": [], "starters": []}, {"unseen": {"t.py::b": 1}, "starters": []}, {"unseen": {}}):
        with pytest.raises(ResultsError, match="its unseen opens are not tests"):
            testmap.from_json({**data, "reads": {**data["reads"], "unseen": None, "starters": None, **bad}}, "m.json")


def test_a_map_recorded_before_every_kind_of_read_was_kept_knows_no_reads() -> None:
    # #40: before Python files read as text, hidden folders, links, paths asked about and
    # the repository above the project were kept, a test may have read a file its reads lack
    m = TestMap(
        row="cpu",
        commit="a" * 40,
        created="2026-12-01T00:00:00Z",
        tests={"t.py::a": frozenset({"pkg/a.py"})},
        reads={"t.py::a": frozenset({"data/x.csv"})},
        openers={"data/x.csv": frozenset({"pkg/a.py:3"})},
    )
    data = json.loads(json.dumps(testmap.to_json(m)))
    assert testmap.from_json(data, "m.json").reads == m.reads
    older = {**data, "reads": {k: v for k, v in data["reads"].items() if k != "probes"}}
    back = testmap.from_json(older, "m.json")
    assert (back.reads, back.openers, back.read_at_import, back.unseen) == (None, None, frozenset(), {})
    with pytest.raises(ResultsError, match="its reads are not files by index"):
        testmap.from_json({**data, "reads": {**data["reads"], "probes": "yes"}}, "m.json")


def test_the_tests_that_failed_when_the_map_was_recorded_read_back_and_a_damaged_list_is_an_error() -> None:
    m = TestMap(row="cpu", commit=None, created="x", tests={"t.py::a": frozenset()}, failed=frozenset({"t.py::a"}))
    data = testmap.to_json(m)
    assert testmap.from_json(data, "m.json").failed == {"t.py::a"}
    with pytest.raises(ResultsError, match="failed is not a list of nodeids"):
        testmap.from_json({**data, "failed": "t.py::a"}, "m.json")
