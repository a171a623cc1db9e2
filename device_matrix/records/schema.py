"""The RunRecord: one versioned ``run.json`` per device row, written atomically.

A reader must cope with a row that died: :func:`load_run` raises
:class:`~device_matrix.errors.ResultsError` with what is wrong (missing, truncated, of
another version) and triage reports that instead of failing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypedDict, cast, get_args

from device_matrix.errors import ResultsError

SCHEMA = "device-matrix/run"
SCHEMA_VERSION = 1

Outcome: TypeAlias = Literal[
    "passed", "failed", "error", "skipped", "xfailed", "xpassed", "crashed", "timeout", "not_run"
]
OUTCOMES: tuple[str, ...] = get_args(Outcome)
FAILING_OUTCOMES = frozenset({"failed", "error", "xpassed", "crashed", "timeout"})
# running: written when a run starts; a record still "running" whose runner is gone
# was cut off (SIGKILL, a lost machine). interrupted: the runner was told to stop.
RowStatus: TypeAlias = Literal["passed", "failed", "crashed", "unavailable", "error", "interrupted", "running"]
# session: the process died between tests, outside any test
CrashPhase: TypeAlias = Literal["test", "collection", "exit", "startup", "session"]
Classification: TypeAlias = Literal["deterministic", "flaky", "unknown"]


class SkipInfo(TypedDict):
    mode: str
    devices: list[str]
    issue: str | None
    reason: str
    source: str
    expires: str | None
    file: str | None
    line: int | None


class TestRecord(TypedDict):
    nodeid: str
    outcome: Outcome
    duration: float
    message: str | None
    skip: SkipInfo | None
    crash: str | None  # id of the crash record, for crashed/timeout tests
    attempt: int


class CrashDiagnosis(TypedDict):
    signal: int | None
    signal_name: str | None
    hint: str | None
    exit_code: int | None
    fatal_error: str | None
    python_stack: str | None
    native_stack: str | None
    native_format: str | None
    fatal_lines: list[str]
    terminate: str | None
    gdb_backtrace: str | None
    core_file: str | None
    gdb_frames: list[str]
    last_output: list[str]
    fingerprint: str
    fingerprint_basis: list[str]


class RerunRecord(TypedDict):
    outcome: Outcome
    returncode: int | None
    signal_name: str | None
    fingerprint: str | None
    duration: float


class CrashRecord(TypedDict):
    id: str
    kind: Literal["crash", "timeout", "worker_crash"]  # worker_crash: a process the test started
    phase: CrashPhase
    nodeid: str | None
    when: str | None  # setup | call | teardown, when known
    attempt: int
    diagnosis: CrashDiagnosis
    classification: Classification
    reruns: list[RerunRecord]
    repro: str
    issue: str | None


class AttemptRecord(TypedDict):
    index: int
    purpose: Literal["run", "resume", "rerun"]
    returncode: int | None
    signal_name: str | None
    duration: float
    selected: int | None
    finished: int
    journal: str
    log: str


class Summary(TypedDict):
    total: int
    passed: int
    failed: int
    error: int
    skipped: int
    xfailed: int
    xpassed: int
    crashed: int
    timeout: int
    not_run: int


class RunRecord(TypedDict):
    schema: str
    version: int
    row: str
    pjrt_device: str
    status: RowStatus
    reason: str | None
    mode: Literal["local", "container", "none"]
    image: str | None
    suites: list[str]
    started_at: str
    finished_at: str
    duration: float
    command: list[str]
    repro: str
    environment: dict[str, Any]
    tests: list[TestRecord]
    crashes: list[CrashRecord]
    attempts: list[AttemptRecord]
    summary: Summary
    run_url: str | None
    runner_pid: int | None  # the device-matrix process that wrote it (see status "running")


def summarize(tests: list[TestRecord]) -> Summary:
    counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    for t in tests:
        counts[t["outcome"]] += 1
    return Summary(
        total=len(tests),
        passed=counts["passed"],
        failed=counts["failed"],
        error=counts["error"],
        skipped=counts["skipped"],
        xfailed=counts["xfailed"],
        xpassed=counts["xpassed"],
        crashed=counts["crashed"],
        timeout=counts["timeout"],
        not_run=counts["not_run"],
    )


_REQUIRED = ("row", "status", "tests", "crashes", "summary")


def load_run(path: Path) -> RunRecord:
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing", tip="The row did not finish writing its results; see its log.") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ResultsError(
            f"{path}: truncated or not JSON ({exc})",
            tip="The row died while writing; rerun it or read its log.",
        ) from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ResultsError(f"{path}: not a device-matrix run record")
    if data.get("version") != SCHEMA_VERSION:
        raise ResultsError(
            f"{path}: run record version {data.get('version')!r}, this tool reads {SCHEMA_VERSION}",
            tip="Use the device-matrix version that wrote it, or rerun the row.",
        )
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise ResultsError(f"{path}: run record lacks {', '.join(missing)}")
    return cast(RunRecord, data)
