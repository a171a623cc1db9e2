"""The identity of a finding: the key its issue carries, for a crash, a device skip or a
failure group.

A crash is known by its diagnosis fingerprint (the same crash gets the same one from
every shape of log and every rerun); a device skip that cites no issue by its test and
its mode; a failure group (#32) by its signature (report/groups.py: the masked exception
line and the innermost frame in the project's own code, its line left out: #42), so the
same failure with another temp dir, UUID or port, or raised from a line an edit moved, is
the same finding. The issue sync files and finds issues by these keys, and the reports and
``device-matrix diagnose`` look links up by them: each is built here, and only here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from device_matrix.records.schema import SkipInfo
from device_matrix.skips import DeviceSkip

# where a skip that is a device skip comes from (not pytest's own skip, not a by-design one)
DEVICE_SKIP_SOURCES = frozenset({"marker", "disable_list", "unittest"})
CRASH_PREFIX = "crash-"
SKIP_PREFIX = "skip-"
FAILURE_PREFIX = "failure-"


# #42: before failure groups kept the numbers that say what happened (an exit status, a
# signal, errno, an HTTP status) and those inside names (float16), every number was masked
_EVERY_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def former_signature(signature: str) -> str:
    """The signature a failure group had before #42 kept numbers by their role: every number
    masked. Issues filed and histories written then hold it."""
    return _EVERY_NUMBER.sub("N", signature)


def test_files(nodeids: Iterable[str]) -> frozenset[str]:
    """The files that hold the tests ``nodeids`` name: a run's test code, which a failure
    group's signature reads (#42: report/signature.py:cause_site)."""
    return frozenset(n.partition("::")[0] for n in nodeids)


def crash_key(fingerprint: str) -> str:
    """The key of the crash whose diagnosis has ``fingerprint``."""
    return CRASH_PREFIX + fingerprint


def fingerprint_of(key: str) -> str:
    """The diagnosis fingerprint of the crash known by ``key`` (:func:`crash_key` undone)."""
    return key.removeprefix(CRASH_PREFIX)


def skip_key(test: str, mode: str) -> str:
    """The key of ``test`` (a nodeid, or ``FILE:LINE`` of a skip in the sources) skipped in ``mode``."""
    return SKIP_PREFIX + hashlib.sha256(f"{mode}|{test}".encode()).hexdigest()[:16]


def failure_key(signature: str) -> str:
    """The key of the failure group whose signature is ``signature``."""
    return FAILURE_PREFIX + hashlib.sha256(signature.encode()).hexdigest()[:16]


# the line of a failure group's cause site, at the end of its signature: " @ src/pkg/hub.py:41"
_SITE_LINE = re.compile(r"( @ \S+):\d+$")


def group_key(signature: str) -> str:
    """The key of the issue of the failure group whose signature is ``signature`` (#42): its
    signature's without the line of its cause's site, so that an edit above that line, which
    moves it, finds the group's issue again. Two groups of one masked message raised in one
    file share their issue."""
    return failure_key(_SITE_LINE.sub(r"\1", signature))


def former_group_keys(signature: str) -> tuple[str, ...]:
    """The keys the issue of the group of ``signature`` may have been filed under before #42,
    where they differ from today's: with its site's line, and with every number masked
    (:func:`former_signature`)."""
    keys = dict.fromkeys((failure_key(signature), failure_key(former_signature(signature))))
    return tuple(k for k in keys if k != group_key(signature))


def is_device_skip(skip: SkipInfo) -> bool:
    """Whether a test's recorded skip is a device skip, the kind that needs an issue."""
    return skip["source"] in DEVICE_SKIP_SOURCES


def declared_test(skip: DeviceSkip) -> str:
    """The test a skip found in the sources names: its nodeid, else where it is declared."""
    return skip.test or f"{skip.file}:{skip.line}"
