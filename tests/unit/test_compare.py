"""``device-matrix compare``: a row's scripts as scripts and through device-matrix (#24).

The part of these tests that starts no process; the rest is in tests/integration/test_compare.py (#41)."""

from __future__ import annotations

from device_matrix.cli.compare import read_plain

QUIET = """\
..sFE
======================================================================
ERROR: test_error (__main__.TestRecord.test_error)
----------------------------------------------------------------------
Traceback (most recent call last):
TypeError: cannot unpack non-iterable bool object

======================================================================
FAIL: test_failure (__main__.TestRecord)
----------------------------------------------------------------------
AssertionError: 1 != 2

----------------------------------------------------------------------
Ran 5 tests in 0.004s

FAILED (failures=1, errors=1, skipped=1)
"""


VERBOSE = """\
test_a (__main__.T.test_a) ... ok
test_b (__main__.T.test_b)
The docstring's first line ... skipped 'no TPU'
test_c (__main__.T.test_c) ... expected failure
test_d (__main__.T.test_d) ...
  test_d (__main__.T.test_d) (k=1) ... FAIL

======================================================================
FAIL: test_d (__main__.T.test_d) (k=1)
----------------------------------------------------------------------
AssertionError

----------------------------------------------------------------------
Ran 4 tests in 0.001s

FAILED (failures=1, skipped=1, expected failures=1)
"""


def test_a_quiet_run_names_its_failures_and_counts_the_rest() -> None:
    run = read_plain(QUIET, 1, 2.0)
    assert run.ran == 5 and not run.verbose
    # 3.11's header names the method, 3.10's only the class: both read as Class::method
    assert run.named == {"TestRecord::test_error": "error", "TestRecord::test_failure": "failed"}
    assert run.counts == {"failed": 1, "error": 1, "skipped": 1}


def test_a_verbose_run_names_every_test() -> None:
    run = read_plain(VERBOSE, 1, 1.0)
    assert run.verbose and run.ran == 4
    assert run.named == {"T::test_a": "passed", "T::test_b": "skipped", "T::test_c": "xfailed", "T::test_d": "failed"}


def test_a_run_that_died_says_nothing_of_its_tests() -> None:
    run = read_plain("..Fatal Python error: Segmentation fault\n", -11, 1.0)
    assert run.ran is None and run.named == {} and not run.counts
