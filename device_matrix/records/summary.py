"""The one fold from a run record to what every renderer shows.

The terminal, the Markdown and HTML reports, the Actions groups and JUnit each used to
count a record their own way, so one record with a pass, an xpass, an error, a timeout and
a not_run read four different ways (issue 9). Every renderer now takes its numbers, the
row's label and the crash headlines from here:

    fold(record).counts.phrase()   -> "1 passed, 2 failed (1 error, 1 xpassed), 1 timeout, 1 not run"
    fold(record).label             -> "timed out"
    fold(record).headlines         -> ("TIMEOUT after 300 s in test_y",)
    crash_headline(crash_record)   -> "SIGSEGV in test_x (deterministic)"
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from device_matrix.records.outcomes import (
    BAD_BUCKETS,
    BUCKET_OF,
    BUCKET_WORDS,
    BUCKETS,
    CRASHING_OUTCOMES,
    FAILING_OUTCOMES,
    NAMED_IN_FAILED,
    OUTCOMES,
    STATUS_ORDER,
    Bucket,
    RowStatus,
)
from device_matrix.records.schema import CrashRecord, RunRecord, TestRecord


def most_serious(statuses: Iterable[RowStatus]) -> RowStatus:
    """The most serious of ``statuses`` ("passed" for none)."""
    return min(statuses, key=STATUS_ORDER.index, default="passed")


def row_status(
    outcomes: Iterable[str], crashes: Sequence[CrashRecord], *, claimed: Iterable[RowStatus] = ()
) -> RowStatus:
    """The one rule of a row's status: never green when a test failed, crashed or never ran.

    ``outcomes``: the tests' outcomes; ``claimed``: what the processes that ran them said
    (the runner's verdict, each shard's status). The most serious of what the tests show
    and what was claimed wins; a row whose every claim is ``unavailable`` and that holds no
    test is unavailable.
    """
    seen = set(outcomes)
    claims = list(claimed)
    if claims and all(c == "unavailable" for c in claims) and not seen:
        return "unavailable"
    shown: RowStatus = "passed"
    if crashes or seen & CRASHING_OUTCOMES:
        shown = "crashed"
    elif seen & FAILING_OUTCOMES or "not_run" in seen:
        shown = "failed"
    return most_serious([*(c for c in claims if c != "unavailable"), shown])


@dataclass(frozen=True)
class Counts:
    """Tests per outcome; ``bucket`` groups them the way every report shows them."""

    by_outcome: Mapping[str, int]

    @property
    def total(self) -> int:
        return sum(self.by_outcome.values())

    def outcome(self, name: str) -> int:
        return self.by_outcome.get(name, 0)

    def bucket(self, name: Bucket) -> int:
        return sum(n for o, n in self.by_outcome.items() if BUCKET_OF.get(o) == name)

    def buckets(self) -> dict[str, int]:
        return {b: self.bucket(b) for b in BUCKETS}

    @property
    def bad(self) -> int:
        """Tests a maintainer must look at: failed, errored, xpassed, crashed, timed out, never ran."""
        return sum(self.bucket(b) for b in BAD_BUCKETS)

    def phrase(self) -> str:
        """Every non-zero bucket in a fixed order, with the outcomes folded into "failed" named."""
        parts: list[str] = []
        for b in BUCKETS:
            n = self.bucket(b)
            if not n:
                continue
            text = f"{n} {BUCKET_WORDS[b]}"
            if b == "failed":
                inner = [f"{self.outcome(o)} {o}" for o in NAMED_IN_FAILED if self.outcome(o)]
                if inner:
                    text += f" ({', '.join(inner)})"
            parts.append(text)
        return ", ".join(parts) if parts else "no tests"


def count(tests: Iterable[TestRecord]) -> Counts:
    by: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    for t in tests:
        by[t["outcome"]] = by.get(t["outcome"], 0) + 1
    return Counts({o: n for o, n in by.items() if n})


def short_name(nodeid: str) -> str:
    """The test function (with its parameters) of a nodeid: ``a/b.py::C::test_x[1]`` -> ``test_x[1]``."""
    head, sep, params = nodeid.partition("[")
    return head.rsplit("::", 1)[-1] + sep + params


def _deadline(crash: CrashRecord, tests: Sequence[TestRecord]) -> float | None:
    # A record that carries the deadline says it; older records only have the test's
    # wall time up to the kill, which is the deadline plus the stack-dump grace.
    explicit = dict(crash).get("deadline")
    if isinstance(explicit, (int, float)) and not isinstance(explicit, bool) and explicit > 0:
        return float(explicit)
    for t in tests:
        if t.get("crash") == crash["id"] and t["duration"] > 0:
            return t["duration"]
    return None


def crash_headline(crash: CrashRecord, tests: Sequence[TestRecord] = ()) -> str:
    """What happened, in the words a maintainer looks for.

    A timeout is headed ``TIMEOUT after N s``, never by the SIGTERM the runner sent.
    """
    d = crash["diagnosis"]
    if crash["kind"] == "timeout":
        seconds = _deadline(crash, tests)
        what = f"TIMEOUT after {seconds:.0f} s" if seconds is not None else "TIMEOUT"
    else:
        what = d["signal_name"] or (f"exit code {d['exit_code']}" if d["exit_code"] is not None else "crash")
    where = f"in {short_name(crash['nodeid'])}" if crash["nodeid"] else f"during {crash['phase']}"
    return f"{what} {where} ({crash['classification']})"


def failed_before(crash: CrashRecord) -> list[str]:
    """Each phase of the crashed test that failed before the crash, in a line:
    ``its call failed at tests/test_x.py:9: AssertionError: ...`` (the cause's first line)."""
    lines = []
    for f in crash.get("failed_before", []):
        what = f"its {f['when']}" + (f" (subtest {f['sub']})" if f["sub"] else "")
        where = f" at {f['file']}:{f['line']}" if f["file"] else ""
        cause = f": {f['cause'].splitlines()[0]}" if f["cause"] else ""
        lines.append(f"{what} {f['outcome']}{where}{cause}")
    return lines


def failed_before_told(crash: CrashRecord) -> list[str]:
    """Each of :func:`failed_before`'s lines, then its traceback: as a test's message and
    junit.xml tell them beside the crash."""
    return [
        f"before it ended, {line}\n{f['message'] or ''}".rstrip()
        for line, f in zip(failed_before(crash), crash.get("failed_before", []), strict=True)
    ]


def crash_kind_label(crash: CrashRecord, tests: Sequence[TestRecord] = ()) -> str:
    """The headline's first words: ``SIGSEGV``, ``TIMEOUT after 300 s``, ``exit code 3``."""
    return crash_headline(crash, tests).split(" in ", 1)[0].split(" during ", 1)[0]


@dataclass(frozen=True)
class RowFold:
    row: str
    status: str
    label: str
    counts: Counts
    headlines: tuple[str, ...]

    def line(self) -> str:
        """``cpu: crashed: 3 passed, 1 crashed`` for a group title or a terminal summary."""
        return f"{self.row}: {self.label}: {self.counts.phrase()}"


def row_label(status: RowStatus, counts: Counts, crashes: Sequence[CrashRecord]) -> str:
    """The row's status in words (:func:`row_status` of its tests and its claim)."""
    if status == "unavailable":
        return status
    shown = row_status([o for o, n in counts.by_outcome.items() if n], crashes, claimed=[status])
    if shown != "crashed":
        return shown
    if crashes and all(c["kind"] == "timeout" for c in crashes):
        return "timed out"
    if not crashes and status != "crashed" and not counts.bucket("crashed"):
        return "timed out"  # tests timed out, and no crash record says more
    return "crashed"


def fold(record: RunRecord) -> RowFold:
    tests = record["tests"]
    counts = count(tests)
    crashes = record["crashes"]
    return RowFold(
        row=record["row"],
        status=record["status"],
        label=row_label(record["status"], counts, crashes),
        counts=counts,
        headlines=tuple(crash_headline(c, tests) for c in crashes),
    )
