"""The one vocabulary of a test's outcome and a row's status (#31).

Every module that orders, groups, counts, colours or codes outcomes and statuses takes
them from here: a test's outcomes and the groups a report shows them in, the history's
letter for each, a row's statuses most serious first, the exit code of each, and the
order in which the exit codes of several rows give one. tests/unit/test_outcomes.py fails
when a second list of them appears anywhere else in the package.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, TypeAlias, get_args

from device_matrix.errors import (
    EXIT_CONFIG,
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RESULTS,
    EXIT_TESTS_FAILED,
    EXIT_TRACKER,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
)

# --- a test's outcome ----------------------------------------------------------------------

# deselected: left out by the selection of a change (#34): never run, so never passed
Outcome: TypeAlias = Literal[
    "passed", "failed", "error", "skipped", "xfailed", "xpassed", "crashed", "timeout", "not_run", "deselected"
]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
# #34: left out on purpose by test selection (device_matrix/selection.py): not a failure, not
# a pass, and no evidence for the history, which keeps it with a letter of its own (CODE)
DESELECTED_OUTCOMES: frozenset[str] = frozenset({"deselected"})
# a maintainer acts on these; a strict xfail that passed (xpassed) means the expectation is stale
FAILING_OUTCOMES: frozenset[str] = frozenset({"failed", "error", "xpassed", "crashed", "timeout"})
# the test took its process down, or was killed at its deadline: its record holds a crash
CRASHING_OUTCOMES: frozenset[str] = frozenset({"crashed", "timeout"})
# failed by what the test itself reported (an assert, an error, a stale xfail), not by a crash
REPORTED_FAILURES: frozenset[str] = FAILING_OUTCOMES - CRASHING_OUTCOMES
# the test's report holds the exception it raised (an assert, an error in a fixture)
RAISED_OUTCOMES: frozenset[str] = frozenset({"failed", "error"})
# the test did not run to its end: it crashed, timed out or never started
UNFINISHED_OUTCOMES: frozenset[str] = CRASHING_OUTCOMES | {"not_run"}
# for flips a test either passed (passed, xfailed) or failed (FAILING_OUTCOMES); a skip,
# a test that never ran or an absent one says nothing
PASSING_OUTCOMES: frozenset[str] = frozenset({"passed", "xfailed"})
# not run on purpose: a skip, or an expected failure that failed as expected
SKIPPING_OUTCOMES: frozenset[str] = frozenset({"skipped", "xfailed"})
# nothing to look at: the terminal lists the others, compare holds them against a plain run
QUIET_OUTCOMES: frozenset[str] = frozenset(OUTCOMES) - FAILING_OUTCOMES - DESELECTED_OUTCOMES - {"not_run"}

# The groups every report counts tests in. error and xpassed are failures a maintainer acts
# on like a failed assert; they are named inside the "failed" bucket.
Bucket: TypeAlias = Literal["passed", "failed", "crashed", "timeout", "skipped", "xfailed", "not_run", "deselected"]
BUCKETS: tuple[Bucket, ...] = get_args(Bucket)
# the history's counts of a row's run: a deselected test is no evidence of anything (#34)
HISTORY_BUCKETS: tuple[Bucket, ...] = tuple(b for b in BUCKETS if b not in DESELECTED_OUTCOMES)
BUCKET_OF: Mapping[str, Bucket] = {
    "passed": "passed",
    "failed": "failed",
    "error": "failed",
    "xpassed": "failed",
    "crashed": "crashed",
    "timeout": "timeout",
    "skipped": "skipped",
    "xfailed": "xfailed",
    "not_run": "not_run",
    "deselected": "deselected",
}
BAD_BUCKETS: frozenset[Bucket] = frozenset({"failed", "crashed", "timeout", "not_run"})
# the tests a maintainer must look at: failed, errored, xpassed, crashed, timed out, never ran
BAD_OUTCOMES: frozenset[str] = frozenset(o for o in OUTCOMES if BUCKET_OF[o] in BAD_BUCKETS)
# #40: the buckets of a test that ran and failed: what a selection that left it out missed
FAILING_BUCKETS: frozenset[Bucket] = BAD_BUCKETS - {"not_run"}
# the outcomes of the "failed" bucket other than "failed" itself, named inside it
NAMED_IN_FAILED: tuple[Outcome, ...] = tuple(o for o in OUTCOMES if BUCKET_OF[o] == "failed" and o != "failed")
BUCKET_WORDS: Mapping[Bucket, str] = {b: b.replace("_", " ") for b in BUCKETS}

# The history keeps one letter per run and test (report/history.py's series).
ABSENT = "-"  # the test was not in that run
CODE: Mapping[str, str] = {
    "passed": "P",
    "failed": "F",
    "error": "E",
    "xpassed": "X",
    "crashed": "C",
    "timeout": "T",
    "skipped": "S",
    "xfailed": "x",
    "not_run": "N",
    # #34: left out by selection: counted nowhere (neither pass nor fail), yet not absent, so
    # the run after it compares the test with the outcome it last ran with
    "deselected": "D",
}
DESELECTED_CODES: frozenset[str] = frozenset(CODE[o] for o in DESELECTED_OUTCOMES)
OUTCOME_OF: Mapping[str, str] = {c: o for o, c in CODE.items()}
PASS_CODES: frozenset[str] = frozenset(CODE[o] for o in PASSING_OUTCOMES)
FAIL_CODES: frozenset[str] = frozenset(CODE[o] for o in FAILING_OUTCOMES)

# the terminal's colour of each outcome, and of a row without a device (ANSI SGR codes)
COLOUR: Mapping[str, str] = {
    "passed": "32",
    "failed": "31",
    "error": "31",
    "crashed": "35;1",
    "timeout": "35",
    "skipped": "33",
    "xfailed": "33",
    "xpassed": "31",
    "not_run": "90",
    "deselected": "90",
    "unavailable": "90",
}

# --- a row's status ------------------------------------------------------------------------

# running: written when a run starts; a record still "running" whose runner is gone
# was cut off (SIGKILL, a lost machine). interrupted: the runner was told to stop.
RowStatus: TypeAlias = Literal["passed", "failed", "crashed", "unavailable", "error", "interrupted", "running"]
# the one order of row statuses, most serious first: the runner's processes, the shards of
# a merge and the parts of a row each give one, and the most serious is the row's (#23)
STATUS_ORDER: tuple[RowStatus, ...] = ("running", "interrupted", "error", "crashed", "failed", "unavailable", "passed")
# the run did not come to its end: its runner was stopped, or is gone
UNFINISHED_STATUSES: frozenset[str] = frozenset({"running", "interrupted"})
# rows that never reached their tests, or were cut off before the end, in the words of a verdict
INFRASTRUCTURE_WORDS: Mapping[str, str] = {
    "error": "errored before its tests",
    "unavailable": "found no device",
    "interrupted": "was interrupted",
    "running": "was cut off (its runner is gone)",
}
INFRASTRUCTURE_STATUSES: frozenset[str] = frozenset(INFRASTRUCTURE_WORDS)
# the row never reached its tests (no device here, or an error before them): its reason says why
BEFORE_TESTS_STATUSES: frozenset[str] = frozenset({"unavailable", "error"})

STATUS_EXIT: Mapping[str, int] = {
    "passed": EXIT_OK,
    "failed": EXIT_TESTS_FAILED,
    "crashed": EXIT_TESTS_FAILED,
    "unavailable": EXIT_UNAVAILABLE,
    "error": EXIT_ENVIRONMENT,
    "running": EXIT_INTERNAL,  # never the status of a finished run
    "interrupted": EXIT_INTERRUPTED,
}
# the statuses of a row whose tests failed (as against one that never reached them)
TESTS_FAILED_STATUSES: frozenset[str] = frozenset(s for s, c in STATUS_EXIT.items() if c == EXIT_TESTS_FAILED)
# a row that is not green, yet ran: a JUnit report of it without a failing test is an error
NOT_GREEN_STATUSES: frozenset[str] = TESTS_FAILED_STATUSES | {"error", "interrupted"}

# When rows end differently the most serious code wins: a bug, then what the user must fix
# before anything can run (the command line, the configuration, the environment, a
# results file, the tracker), then failed tests, then a missing device. #31: every code the
# tool has is here, so a configuration error is never hidden by a failed test.
EXIT_SEVERITY: tuple[int, ...] = (
    EXIT_INTERNAL,
    EXIT_USAGE,
    EXIT_CONFIG,
    EXIT_ENVIRONMENT,
    EXIT_RESULTS,
    EXIT_TRACKER,
    EXIT_TESTS_FAILED,
    EXIT_UNAVAILABLE,
    EXIT_OK,
)


def combine_exit_codes(codes: Sequence[int]) -> int:
    """The exit code of several rows (or steps): a signal's first, else the most serious."""
    interrupted = [c for c in codes if c > 128]
    if interrupted:
        return interrupted[0]
    for code in EXIT_SEVERITY:
        if code in codes:
            return code
    return max(codes) if codes else EXIT_OK
