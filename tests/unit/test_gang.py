"""A gang's record from its ranks' results: outcome, xfail and its restriction, crashes (no Ray needed)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from device_matrix import config
from device_matrix.config import Gang, Row
from device_matrix.redact import Redactor
from device_matrix.spread.gang import RankResult, gang_record, last_exception, rank_env, selected

RECORDED = Path(__file__).parents[1] / "fixtures" / "recorded"
ROOT = Path(__file__).resolve().parents[2]


def _recorded(name: str) -> str:
    return (RECORDED / name).read_text()


def _cpu_row() -> tuple[Row, Gang]:
    row = config.load(ROOT).row("cpu")
    (gang,) = row.gangs
    return row, gang


def _rank(rank: int, returncode: int | None, output: str = "", **kwargs: object) -> RankResult:
    return RankResult(
        rank=rank, env={"RANK": str(rank)}, host="h", ip="10.0.0.1", returncode=returncode, output=output, **kwargs
    )  # type: ignore[arg-type]


def _record(row: Row, gang: Gang, ranks: list[RankResult]) -> dict[str, object]:
    record = gang_record(
        row,
        "local",
        gang,
        ranks,
        started_at="2026-01-01T00:00:00+00:00",
        duration=1.0,
        master=("10.0.0.1", 1234),
        redactor=Redactor(),
    )
    return dict(record)


def test_the_last_exception_of_a_rank_is_read_through_its_rank_prefix() -> None:
    assert last_exception(_recorded("gang_rank0_collective_mismatch.txt")) == "CollectiveMismatch"
    assert last_exception(_recorded("gang_rank1_eaddrinuse.txt")) == "torch.distributed.DistNetworkError"
    assert last_exception("all good\n") is None


def test_the_recorded_pjrt_cpu_failure_is_the_cpu_rows_expected_failure() -> None:
    row, gang = _cpu_row()
    ranks = [
        _rank(0, 1, _recorded("gang_rank0_collective_mismatch.txt")),
        _rank(1, 1, _recorded("gang_rank1_eaddrinuse.txt")),
    ]
    record = _record(row, gang, ranks)
    (test,) = record["tests"]  # type: ignore[misc]
    assert test["nodeid"] == "gang::all_reduce" and test["outcome"] == "xfailed"
    assert test["skip"]["issue"] == "ledger:4" and test["skip"]["mode"] == "xfail"
    assert "CollectiveMismatch" in test["message"] and "DistNetworkError" in test["message"]
    assert record["status"] == "passed"
    assert [a["log"] for a in record["attempts"]] == ["rank0.log", "rank1.log"]  # type: ignore[attr-defined]


def test_another_failure_or_a_crash_is_not_the_expected_one() -> None:
    row, gang = _cpu_row()
    other = 'Traceback (most recent call last):\n  File "w.py", line 1, in <module>\nValueError: no\n'
    (test,) = _record(row, gang, [_rank(0, 1, _recorded("gang_rank1_eaddrinuse.txt")), _rank(1, 1, other)])["tests"]  # type: ignore[misc]
    assert test["outcome"] == "failed" and "ValueError" in test["message"]
    # a rank that vanished is never the expected failure either
    lost = _rank(1, None, lost="no result came back (NodeDiedError)")
    (test,) = _record(row, gang, [_rank(0, 1, _recorded("gang_rank1_eaddrinuse.txt")), lost])["tests"]  # type: ignore[misc]
    assert test["outcome"] == "failed" and "NodeDiedError" in test["message"]


def test_a_gang_that_passes_where_it_is_expected_to_fail_is_a_strict_failure() -> None:
    row, gang = _cpu_row()
    (test,) = _record(row, gang, [_rank(0, 0), _rank(1, 0)])["tests"]  # type: ignore[misc]
    assert test["outcome"] == "failed" and test["message"].startswith("[XPASS(strict)]")
    other_row = Row(name="tpu", pjrt_device="TPU")
    (test,) = _record(other_row, gang, [_rank(0, 0), _rank(1, 0)])["tests"]  # type: ignore[misc]
    assert test["outcome"] == "passed" and test["skip"] is None  # the xfail is for cpu only


def test_a_rank_past_its_timeout_is_a_timeout() -> None:
    row, gang = _cpu_row()
    record = _record(
        row, gang, [_rank(0, -signal.SIGABRT, "Fatal Python error: Aborted\n", timed_out=True), _rank(1, 0)]
    )
    (test,) = record["tests"]  # type: ignore[misc]
    assert test["outcome"] == "timeout"
    assert record["crashes"][0]["kind"] == "timeout"  # type: ignore[index]


@pytest.mark.parametrize(("rank", "local"), [(0, (0, 2)), (1, (1, 2)), (2, (0, 1))])
def test_each_rank_gets_the_launcher_variables(rank: int, local: tuple[int, int]) -> None:
    row, gang = _cpu_row()
    env = rank_env(row, gang, rank=rank, world=3, local=local, master=("10.0.0.1", 29500))
    assert env["RANK"] == str(rank) and env["WORLD_SIZE"] == "3"
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == tuple(map(str, local))
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("10.0.0.1", "29500")
    assert env["CPU_NUM_DEVICES"] == "1" and env["PJRT_DEVICE"] == "CPU"  # the gang's env over the row's


@pytest.mark.parametrize(
    ("tests", "suites", "pytest_args", "why"),
    [
        ((), None, (), None),
        ((), None, ("-x", "--maxfail=2", "-p", "no:randomly"), None),
        (("suites/mlp/test_ab.py::test_x",), None, (), "--test names tests"),
        ((), ["mlp"], (), "--suite names suites"),
        ((), None, ("-k", "allreduce"), "pytest's -k selects tests"),
        ((), None, ("-kallreduce",), "pytest's -k selects tests"),
        ((), None, ("-m", "not slow"), "pytest's -m selects tests"),
        ((), None, ("--deselect=suites/a.py::t",), "pytest's --deselect selects tests"),
        ((), None, ("suites/mlp/test_ab.py",), "suites/mlp/test_ab.py names tests"),
        ((), None, ("suites/mlp/test_ab.py::test_x",), "suites/mlp/test_ab.py::test_x names tests"),
    ],
)
def test_a_run_that_selects_tests_leaves_the_gangs_out(
    tests: tuple[str, ...], suites: list[str] | None, pytest_args: tuple[str, ...], why: str | None
) -> None:
    row, _ = _cpu_row()
    assert selected(row, tests=tests, suites=suites, pytest_args=pytest_args) == why
    # a row without gangs has nothing to leave out
    bare = config.load(ROOT).row("tpu")
    assert not bare.gangs
    assert selected(bare, tests=tests, suites=suites, pytest_args=pytest_args) is None


def test_a_failed_gangs_attempt_is_its_failing_ranks() -> None:
    row, gang = _cpu_row()
    record = _record(row, gang, [_rank(0, 0), _rank(1, 3, "rank 1: bailing out\n")])
    (test,) = record["tests"]  # type: ignore[misc]
    assert test["outcome"] == "failed" and test["message"].startswith("rank 1 ")
    attempts = {a["index"]: a for a in record["attempts"]}  # type: ignore[attr-defined]
    assert attempts[test["attempt"]]["log"] == "rank1.log"
