"""The command line: rows, plan, list, doctor, exit codes, unavailable rows.

The part of these tests that starts no process; the rest is in tests/integration/test_cli.py (#41)."""

from __future__ import annotations

from device_matrix.cli import combine_exit_codes
from device_matrix.errors import (
    EXIT_ENVIRONMENT,
    EXIT_OK,
    EXIT_TESTS_FAILED,
    EXIT_UNAVAILABLE,
)


def test_combine_exit_codes() -> None:
    assert combine_exit_codes([EXIT_OK, EXIT_UNAVAILABLE]) == EXIT_UNAVAILABLE
    assert combine_exit_codes([EXIT_UNAVAILABLE, EXIT_TESTS_FAILED]) == EXIT_TESTS_FAILED
    assert combine_exit_codes([EXIT_TESTS_FAILED, EXIT_ENVIRONMENT]) == EXIT_ENVIRONMENT
    assert combine_exit_codes([]) == EXIT_OK
