"""One exception family. Each error carries its exit code and a tip that says what to do.

Exit codes of the ``device-matrix`` command (documented in README.md, "Exit codes"):

====  ==========================================================================
code  meaning
====  ==========================================================================
0     every row that ran passed (a bare ``run`` reports the rows absent here, #20)
1     a test failed, errored, crashed or timed out on some row
2     the command line was wrong (argparse: a path of the wrong kind too), or its selection
      selected no test
3     the configuration is invalid (file, key and what is allowed are printed)
4     a row named with ``--device`` is not present here; nothing else went wrong
5     the environment is missing something the tool needs (container engine,
      writable results folder, pytest in the row's interpreter)
6     the issue tracker refused or could not be reached
7     a results file could not be read (missing, truncated, wrong version)
70    an internal error in device-matrix itself (a bug: please report it)
128+N the run was interrupted by signal N (130 SIGINT, 143 SIGTERM, 129 SIGHUP):
      run.json says ``interrupted``; ``device-matrix run --resume`` continues
====  ==========================================================================
"""

from __future__ import annotations

from typing import ClassVar

EXIT_OK = 0
EXIT_TESTS_FAILED = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_UNAVAILABLE = 4
EXIT_ENVIRONMENT = 5
EXIT_TRACKER = 6
EXIT_RESULTS = 7
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130  # 128 + SIGINT; SIGTERM gives 143, SIGHUP 129


class DeviceMatrixError(Exception):
    """Base of every error the tool reports to a user.

    ``message`` says what went wrong; ``tip`` says what to do about it.
    """

    exit_code: ClassVar[int] = EXIT_INTERNAL

    def __init__(self, message: str, *, tip: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.tip = tip

    def __str__(self) -> str:
        return self.message


class ConfigError(DeviceMatrixError):
    """The matrix configuration is invalid."""

    exit_code = EXIT_CONFIG

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        key: str | None = None,
        allowed: str | None = None,
        tip: str | None = None,
    ) -> None:
        parts = []
        if source:
            parts.append(source)
        if key:
            parts.append(key)
        where = ": ".join(parts)
        text = f"{where}: {message}" if where else message
        if allowed:
            text += f" (allowed: {allowed})"
        super().__init__(text, tip=tip)
        self.source = source
        self.key = key
        self.allowed = allowed


class UsageProblem(DeviceMatrixError):
    """The command line asks for something that cannot be done (as argparse's errors)."""

    exit_code = EXIT_USAGE


class EnvironmentProblem(DeviceMatrixError):
    """Something the tool needs on this host is missing."""

    exit_code = EXIT_ENVIRONMENT


class TrackerError(DeviceMatrixError):
    """The issue tracker refused a request or could not be reached."""

    exit_code = EXIT_TRACKER


class ResultsError(DeviceMatrixError):
    """A results file is missing, truncated or of an unknown version."""

    exit_code = EXIT_RESULTS
