"""The summary fold, pinned exactly: counts, buckets, the row's word and each crash headline."""

from __future__ import annotations

from typing import Any

import pytest

from device_matrix.records.summary import (
    BUCKETS,
    Counts,
    count,
    crash_headline,
    crash_kind_label,
    fold,
    row_label,
    short_name,
)
from tests import records as R


def _tests(*outcomes: str) -> list[dict[str, Any]]:
    return [R.test(f"t.py::test_{i}", o) for i, o in enumerate(outcomes)]


def test_counts_by_outcome_and_by_bucket() -> None:
    c = count(_tests("passed", "passed", "error", "xpassed", "failed", "not_run", "xfailed"))
    assert c.by_outcome == {"passed": 2, "failed": 1, "error": 1, "xpassed": 1, "xfailed": 1, "not_run": 1}
    assert c.total == 7
    assert c.outcome("passed") == 2 and c.outcome("crashed") == 0
    assert c.bucket("failed") == 3 and c.bucket("passed") == 2 and c.bucket("crashed") == 0
    assert c.buckets() == {
        "passed": 2,
        "failed": 3,
        "crashed": 0,
        "timeout": 0,
        "skipped": 0,
        "xfailed": 1,
        "not_run": 1,
    }
    assert list(c.buckets()) == list(BUCKETS)
    assert c.bad == 4  # failed (with error and xpassed) and not run; xfailed is not bad


def test_an_outcome_from_a_newer_record_is_counted_not_dropped() -> None:
    c = count([R.test("t.py::a", "passed"), R.test("t.py::b", "mystery")])
    assert c.by_outcome == {"passed": 1, "mystery": 1}
    assert c.total == 2 and c.bucket("passed") == 1


def test_bad_counts_every_bucket_a_maintainer_must_look_at() -> None:
    c = Counts({"passed": 1, "failed": 1, "crashed": 2, "timeout": 4, "not_run": 8, "skipped": 16, "xfailed": 32})
    assert c.bad == 15


def test_the_phrase_names_every_nonzero_bucket_in_order() -> None:
    c = Counts({"not_run": 1, "error": 2, "passed": 3, "timeout": 1, "xpassed": 1, "crashed": 1, "skipped": 2})
    assert c.phrase() == "3 passed, 3 failed (2 error, 1 xpassed), 1 crashed, 1 timeout, 2 skipped, 1 not run"
    assert Counts({"failed": 2}).phrase() == "2 failed"
    assert Counts({"xpassed": 1}).phrase() == "1 failed (1 xpassed)"
    assert Counts({}).phrase() == "no tests"


@pytest.mark.parametrize(
    ("nodeid", "name"),
    [
        ("a/b.py::C::test_x[1]", "test_x[1]"),
        ("a/b.py::test_y[a::b-c[d]]", "test_y[a::b-c[d]]"),
        ("test_z", "test_z"),
        ("a.py::test_w", "test_w"),
    ],
)
def test_short_name(nodeid: str, name: str) -> None:
    assert short_name(nodeid) == name


def _timeout(**extra: Any) -> dict[str, Any]:
    c = R.crash("cpu", "s/t.py::test_hang", "f", signal="SIGTERM", kind="timeout")
    c.update(extra)
    return c


def test_a_timeout_is_headed_by_its_deadline() -> None:
    assert crash_headline(_timeout(deadline=300)) == "TIMEOUT after 300 s in test_hang (deterministic)"
    assert crash_headline(_timeout(deadline=2.6)) == "TIMEOUT after 3 s in test_hang (deterministic)"
    # not a deadline: a bool, zero, a negative number, text
    for bad in (True, 0, -5, "300"):
        assert crash_headline(_timeout(deadline=bad)) == "TIMEOUT in test_hang (deterministic)"


def test_an_older_timeout_takes_its_deadline_from_its_test() -> None:
    crash = _timeout()
    tests = [
        R.test("s/t.py::other", "timeout", crash_id="cpu-9", duration=50.0),
        R.test("s/t.py::zero", "timeout", crash_id=crash["id"], duration=0.0),
        R.test("s/t.py::test_hang", "timeout", crash_id=crash["id"], duration=301.7),
    ]
    assert crash_headline(crash, tests) == "TIMEOUT after 302 s in test_hang (deterministic)"
    assert crash_kind_label(crash, tests) == "TIMEOUT after 302 s"
    assert crash_headline(crash, tests[:2]) == "TIMEOUT in test_hang (deterministic)"


def test_a_crash_is_headed_by_its_signal_else_its_exit_code() -> None:
    c = R.crash("cpu", "s/t.py::test_x", "f")
    assert crash_headline(c) == "SIGSEGV in test_x (deterministic)"
    c["diagnosis"]["signal_name"] = None
    c["diagnosis"]["exit_code"] = 3
    c["classification"] = "flaky"
    assert crash_headline(c) == "exit code 3 in test_x (flaky)"
    c["diagnosis"]["exit_code"] = 0
    assert crash_kind_label(c) == "exit code 0"
    c["diagnosis"]["exit_code"] = None
    assert crash_headline(c) == "crash in test_x (flaky)"


def test_a_crash_outside_a_test_names_its_phase() -> None:
    c = R.crash("cpu", None, "f")
    assert crash_headline(c) == "SIGSEGV during exit (deterministic)"
    assert crash_kind_label(c) == "SIGSEGV"
    c["phase"] = "collection"
    assert crash_headline(c) == "SIGSEGV during collection (deterministic)"


@pytest.mark.parametrize(
    ("status", "outcomes", "kinds", "label"),
    [
        ("unavailable", ["crashed"], ["crash"], "unavailable"),
        ("error", [], [], "error"),
        ("interrupted", ["passed"], [], "interrupted"),
        ("running", ["failed"], [], "running"),
        ("crashed", ["timeout"], ["timeout", "timeout"], "timed out"),
        ("crashed", ["timeout", "crashed"], ["timeout", "crash"], "crashed"),
        ("passed", ["crashed"], [], "crashed"),
        ("crashed", ["passed"], [], "crashed"),
        ("failed", ["timeout", "failed"], [], "timed out"),
        ("passed", ["not_run"], [], "failed"),
        ("failed", ["passed"], [], "failed"),
        ("passed", ["passed", "skipped", "xfailed"], [], "passed"),
        ("passed", [], [], "passed"),
    ],
)
def test_row_label(status: str, outcomes: list[str], kinds: list[str], label: str) -> None:
    crashes = [R.crash("cpu", "t.py::x", "f", index=i, kind=k) for i, k in enumerate(kinds)]
    assert row_label(status, count(_tests(*outcomes)), crashes) == label


def test_the_fold_of_a_record() -> None:
    crash = R.crash("cpu", "s/t.py::test_x", "f")
    tests = [R.test("s/t.py::test_a"), R.test("s/t.py::test_x", "crashed", crash_id=crash["id"])]
    rec = R.record("cpu", tests, [crash])
    f = fold(rec)
    assert (f.row, f.status, f.label) == ("cpu", "crashed", "crashed")
    assert f.counts.by_outcome == {"passed": 1, "crashed": 1}
    assert f.headlines == ("SIGSEGV in test_x (deterministic)",)
    assert f.line() == "cpu: crashed: 1 passed, 1 crashed"


def test_a_one_second_deadline_is_a_deadline() -> None:
    assert crash_headline(_timeout(deadline=1)) == "TIMEOUT after 1 s in test_hang (deterministic)"
    crash = _timeout()
    tests = [R.test("s/t.py::test_hang", "timeout", crash_id=crash["id"], duration=1.0)]
    assert crash_headline(crash, tests) == "TIMEOUT after 1 s in test_hang (deterministic)"


def test_the_kind_label_of_a_test_whose_name_says_in() -> None:
    c = R.crash("cpu", "s/t.py::test_x[a in b]", "f")
    assert crash_headline(c) == "SIGSEGV in test_x[a in b] (deterministic)"
    assert crash_kind_label(c) == "SIGSEGV"


def test_the_fold_of_a_row_that_did_not_run_says_why() -> None:
    for status in ("unavailable", "error", "interrupted"):
        f = fold(R.record("tpu", [], status=status))
        assert (f.status, f.label, f.line()) == (status, status, f"tpu: {status}: no tests")
