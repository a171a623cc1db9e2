"""The RunRecord: one versioned ``run.json`` per device row, written atomically.

A reader must cope with a row that died: :func:`load_run` raises
:class:`~device_matrix.errors.ResultsError` with what is wrong (missing, truncated, of
another version) and triage reports that instead of failing.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from types import UnionType
from typing import (
    Any,
    Literal,
    TypeAlias,
    TypedDict,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from device_matrix.errors import ResultsError
from device_matrix.names import ROW_NAME_RE
from device_matrix.records.outcomes import OUTCOMES

# the record's field types, named where the record is (records/outcomes.py defines them)
from device_matrix.records.outcomes import Outcome as Outcome  # noqa: PLC0414 - an explicit re-export
from device_matrix.records.outcomes import RowStatus as RowStatus  # noqa: PLC0414 - an explicit re-export

SCHEMA = "device-matrix/run"
SCHEMA_VERSION = 1

# session: the process died between tests, outside any test
CrashPhase: TypeAlias = Literal["test", "collection", "exit", "startup", "session"]
Classification: TypeAlias = Literal["deterministic", "flaky", "unknown"]


class _SkipFields(TypedDict):
    mode: str
    devices: list[str]
    issue: str | None
    reason: str
    source: str
    expires: str | None
    file: str | None
    line: int | None


class SkipInfo(_SkipFields, total=False):
    by_design: bool  # only_on: not applicable on this device (cites no issue, needs none)


class _TestFields(TypedDict):
    nodeid: str
    outcome: Outcome
    duration: float
    message: str | None
    skip: SkipInfo | None
    crash: str | None  # id of the crash record, for crashed/timeout tests
    attempt: int


class TestRecord(_TestFields, total=False):
    # fields added after the first records were written: older records lack them (#20).
    # For a failing test: what it failed with, the exception line(s) as pytest's E lines
    # show them, and where, relative to the project root: the deepest line of the test's
    # own file in the traceback (of a crash: in the Python stack), else the test itself.
    cause: str | None
    file: str | None
    line: int | None


# #39: where a crash's Python stack was read: the faulthandler file of the attempt, the
# process's output (a handler of its own: absltest's faulthandler), or its core file (pystack)
PythonStackSource: TypeAlias = Literal["faulthandler", "output", "core"]


class _DiagnosisFields(TypedDict):
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


class CrashDiagnosis(_DiagnosisFields, total=False):
    # fields added later (#39): older records lack them
    python_stack_source: PythonStackSource | None  # None: no Python stack was had
    python_stack_missing: str | None  # why not, where none was had (no core, no pystack...)
    # #42: the fingerprint before a name's digits were kept, where it differs (its issue may
    # be filed under it); absent or None: the same
    former_fingerprint: str | None
    # why gdb_frames is empty where a core was read: no gdb, or files that do not match the core
    gdb_frames_missing: str | None


class _RerunFields(TypedDict):
    outcome: Outcome
    returncode: int | None
    signal_name: str | None
    fingerprint: str | None
    duration: float


class RerunRecord(_RerunFields, total=False):
    # #39: what the verdict compares with the crash's own basis (older records lack it)
    fingerprint_basis: list[str] | None


class _CrashFields(TypedDict):
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


class PhaseFailure(TypedDict):
    """A phase of a crashed test that failed before the crash (a call that failed, then a
    teardown that crashed): the test's own failure, evidence beside the crash."""

    when: str  # setup | call | teardown
    sub: str | None  # a failed subtest's description; None for the phase itself
    outcome: str  # as its report said: failed, error
    cause: str | None  # the exception line(s), as pytest's E lines show them
    message: str | None  # its traceback
    file: str | None  # where, relative to the project root
    line: int | None


class CrashRecord(_CrashFields, total=False):
    # fields added after the first records were written: older records lack them
    deadline: float | None  # seconds, for a timeout: the deadline that passed
    failed_before: list[PhaseFailure]  # the test's phases that failed before it crashed or hung


class AttemptRecord(TypedDict):
    index: int
    purpose: Literal["collect", "run", "resume", "rerun"]
    returncode: int | None
    signal_name: str | None
    duration: float
    selected: int | None
    finished: int
    journal: str
    log: str


class _SummaryFields(TypedDict):
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


class Summary(_SummaryFields, total=False):
    deselected: int  # #34: left out by test selection; older records lack it


EventKind: TypeAlias = Literal["push", "pull_request", "schedule", "manual", "local", "other"]


class SourceInfo(TypedDict):
    """Where a run's code came from (#25): what the verdicts of a pull request compare.

    Every field may be unknown (None): a run outside Actions and outside git knows none.
    """

    commit: str | None  # the commit tested; on a pull request, the merge commit Actions built
    head_commit: str | None  # a pull request's own head commit
    ref: str | None  # the branch or tag name (a pull request's head branch)
    ref_type: Literal["branch", "tag"] | None
    event: EventKind
    event_name: str | None  # the Actions event as GitHub names it (push, pull_request_target, ...)
    pull_request: int | None
    base_ref: str | None  # the branch a pull request (or a --base run) is compared with
    base_commit: str | None  # the merge-base with it where git can tell, else the base's tip
    repository: str | None  # owner/name
    run_id: str | None
    run_attempt: int | None
    workflow: str | None
    origin: Literal["actions", "git", "none"]  # where the fields were read (flags override any)


class _RunFields(TypedDict):
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


SelectMode: TypeAlias = Literal["changed", "all"]


class SelectionInfo(TypedDict):
    """``test_selection``: how a run chose its tests from a change (#34), beside the command
    line's ``selection`` words. Absent: the run ran every test it was given, unasked."""

    mode: SelectMode  # what the command line asked for (--select)
    full_reason: str | None  # why every test ran, when it did ("no test map for row 'cpu'")
    map_commit: str | None  # the commit of the test map the selection read
    changed: list[str]  # the changed project files (documentation left out)
    ran: int
    total: int
    by_reason: dict[str, int]  # tests by why each ran or was left out (device_matrix/selection.py's Why)


class SpreadRef(TypedDict):
    """Which part of a spread row a record is (#23): checked before any part is merged."""

    plan: str | None  # the id of the split (None: written before the split was made)
    shard: int | None  # 1..of; None: the record of the whole spread (its driver's, or the merge)
    of: int


class UnmatchedDisable(TypedDict):
    """#42: a tracker disable of the row that names none of its tests (a typo, a renamed test)."""

    issue: str
    test: str
    problem: str  # "matches no test of row cpu"


class _DisablesFields(TypedDict):
    """The tracker's disable list a run applied (#33): when it was read and how old it was."""

    read_at: str  # when the list was read from the tracker
    age_s: int  # how old it was when the run applied it
    fresh: bool  # read for this run; False: the cached list (the tracker could not be read)
    # the tracker's disables on this row (its name's or its device's); once a run of the
    # whole row has collected, only those that name one of its tests (#42)
    applied: int
    note: str  # what was read, or why the cached list served


class DisablesRef(_DisablesFields, total=False):
    # a class of its own, not NotRequired: under `from __future__ import annotations` Python
    # before 3.12 counts a NotRequired key as required, and load_run refused every record
    # without it (#42)
    # #42: those on this row that name none of its tests, known once a run of the whole
    # row has collected; absent: not known (a run of part of the row, or one cut short)
    unmatched: list[UnmatchedDisable]


class RunRecord(_RunFields, total=False):
    # fields added after the first records were written: older records lack them, and
    # the version stays 1 while every addition is optional (a reader of version 1 reads them all)
    runner_pid: int | None  # the device-matrix process that wrote it (see status "running")
    source: SourceInfo | None  # commit, branch, pull request, base (#25)
    spread: SpreadRef  # a shard's record, or the merge of a row's shards; absent: a whole run
    # what the run selected, in its command line's words (#30): None for the whole row;
    # triage compares a run with the runs of the same selection (absent: the whole row)
    selection: str | None
    # the tracker's disable list the run applied, or the cached one it had (#33); absent: none
    disables: DisablesRef
    test_selection: SelectionInfo | None  # #34: the tests a change could break, and why the others did not run
    # #41: a digest of the code the run ran (its commit and working tree, device_matrix/run/worktree.py);
    # None: not known. A --resume continues a run of the same digest only
    worktree: str | None
    # #41: what --resume did: "continued the run started at ...", or why it ran the row whole
    resume: str | None
    # what the run found that is no test's and no crash's: a core file no crash took, kept
    # with the row's results (absent: none)
    warnings: list[str]


def selection_words(
    *, suites: Sequence[str] | None, tests: Sequence[str], pytest_args: Sequence[str], spread: SpreadRef | None
) -> str | None:
    """A record's ``selection``: ``--suite``, ``--test``, pytest's own arguments and the
    shard, as given; None when the run ran the whole row."""
    words = [*(f"--suite {s}" for s in suites or ()), *(f"--test {t}" for t in tests), *pytest_args]
    if spread is not None and spread["shard"] is not None:
        words.append(f"--shard {spread['shard']}/{spread['of']}")
    return " ".join(words) or None


# --- the split of a spread row: shards/plan.json, and shards/K/shard.json beside each part ---

SHARD_SCHEMA = "device-matrix/shard"


class GangSlot(TypedDict):
    name: str
    shard: int  # the part whose folder keeps the gang's record (shards/K/gangs/NAME/)


class RankInfo(TypedDict):
    rank: int
    node: str
    host: str
    ip: str
    returncode: int | None
    lost: str | None


class GangInfo(TypedDict):
    """``environment.gang`` of a gang's record (device_matrix.spread.gang)."""

    name: str
    module: str
    world_size: int
    master: str | None
    ranks: list[RankInfo]


def load_gang(path: Path) -> RunRecord:
    """A gang's ``run.json``: a run record whose ``environment.gang`` says which gang and ranks."""
    record = load_run(path)
    info: Any = record["environment"].get("gang")
    problem = _checker(GangInfo)(info)
    if problem is None and info["name"] != path.parent.name:
        problem = f": gang {info['name']!r} in the folder of gang {path.parent.name!r}"
    if problem is None and [t["nodeid"] for t in record["tests"]] != [f"gang::{info['name']}"]:
        # a gang is one test: a record that holds others would put them in the row (#23)
        problem = f": its tests are not the one test gang::{info['name']}"
    if problem is not None:
        raise ResultsError(
            f"{path}: environment.gang{problem}",
            tip="Run the row again; a gang's record is written by device-matrix and never edited by hand.",
        )
    return record


class LostNode(TypedDict):
    node: str
    name: str
    error: str


class _PlanFields(TypedDict):
    schema: str
    row: str
    of: int
    tests: list[str] | None  # every collected test in collection order; None: collection failed
    parts: list[list[int]] | None  # indexes into tests, one list per shard
    durations_known: int
    estimated_seconds: list[float]  # what each shard should take by the recorded durations
    reason: str | None


class PlanFile(_PlanFields, total=False):
    # fields added with #23; an older shard.json lacks them and its id is computed
    plan: str  # the split's id: a digest of row, of, tests, parts and gangs
    durations: list[float | None]  # the recorded duration the split used for each test
    gangs: list[GangSlot]
    # shard.json only: the part it sits beside, and where that part ran
    shard: int
    host: str
    node: str | None  # the Ray node that ran the shard
    lost: list[LostNode]  # Ray nodes that died while they ran it


def plan_id(row: str, of: int, tests: list[str] | None, parts: list[list[int]] | None, gangs: list[GangSlot]) -> str:
    """The id of a split: the same collection split the same way has the same id on every host."""
    body = json.dumps([row, of, tests, parts, [[g["name"], g["shard"]] for g in gangs]], separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def check_plan(data: Any, where: str) -> PlanFile:
    """A plan read from ``where``, checked field by field and for what no type says (#23)."""
    tip = "Run the row's shards again; a split is written by device-matrix and never edited by hand."
    if not isinstance(data, dict) or data.get("schema") != SHARD_SCHEMA:
        raise ResultsError(f"{where}: not a device-matrix shard plan", tip=tip)
    problem = _checker(PlanFile)(data)
    if problem is None:
        problem = _plan_problem(data)
    if problem:
        raise ResultsError(f"{where}: plan{problem}", tip=tip)
    plan = cast(PlanFile, data)
    computed = plan_id(plan["row"], plan["of"], plan["tests"], plan["parts"], plan.get("gangs", []))
    if plan.setdefault("plan", computed) != computed:
        raise ResultsError(f"{where}: the split's id {plan['plan']} does not match its content", tip=tip)
    plan.setdefault("node", None)
    plan.setdefault("lost", [])
    plan.setdefault("gangs", [])
    return plan


def _plan_problem(data: dict[str, Any]) -> str | None:
    of = data["of"]
    if not ROW_NAME_RE.fullmatch(data["row"]):
        return f".row: {data['row']!r} is not a row name"
    if of < 1:
        return f".of: {of} is not a number of shards"
    if "shard" in data and not 1 <= data["shard"] <= of:
        return f".shard: {data['shard']} is not one of 1..{of}"
    for gang in data.get("gangs", []):
        if not 1 <= gang["shard"] <= of:
            return f".gangs: {gang['name']!r} kept by shard {gang['shard']}, not one of 1..{of}"
    tests, parts = data["tests"], data["parts"]
    if (tests is None) != (parts is None):
        return ": tests and parts go together"
    if tests is None or parts is None:
        return None
    if len(set(tests)) != len(tests):
        return ".tests: a test is listed twice"
    if len(parts) != of:
        return f".parts: {len(parts)} parts for {of} shards"
    seen = sorted(i for part in parts for i in part)
    if seen != list(range(len(tests))):
        return f".parts: not every one of the {len(tests)} tests in exactly one part"
    if "durations" in data and len(data["durations"]) != len(tests):
        return ".durations: not one per test"
    return None


def load_plan(path: Path) -> PlanFile:
    """Read and check a ``plan.json`` or ``shard.json``."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing", tip="The shard did not finish writing its results.") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror or exc}", tip="Check the file's permissions.") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ResultsError(f"{path}: truncated or not JSON ({str(exc)[:200]})") from None
    return check_plan(data, str(path))


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
        deselected=counts["deselected"],
    )


Checker: TypeAlias = Callable[[Any], str | None]


@functools.cache
def _checker(tp: Any) -> Checker:
    """A function that says what is wrong with a value of annotation ``tp`` ("" prefix
    of a path, then ": " and the problem), or None. Built once per annotation: a run
    record holds thousands of tests."""
    origin = get_origin(tp)
    if tp is Any:
        return lambda v: None
    if origin is Literal:
        choices = get_args(tp)
        allowed = ", ".join(map(str, choices))
        return lambda v: None if v in choices and not isinstance(v, bool) else f": {v!r} is not one of {allowed}"
    if origin in (Union, UnionType):
        arms = [_checker(arm) for arm in get_args(tp)]

        def union(v: Any) -> str | None:
            problems = [arm(v) for arm in arms]
            return None if any(p is None for p in problems) else next(p for p in problems if p)

        return union
    if tp is type(None):
        return lambda v: None if v is None else ": should be null"
    if origin is list:
        item = _checker(get_args(tp)[0])

        def listed(v: Any) -> str | None:
            if not isinstance(v, list):
                return ": should be a list"
            for i, x in enumerate(v):
                p = item(x)
                if p is not None:
                    return f"[{i}]{p}"
            return None

        return listed
    if origin is dict:
        return lambda v: None if isinstance(v, dict) else ": should be an object"
    if is_typeddict(tp):
        fields = [(key, _checker(sub)) for key, sub in get_type_hints(tp).items()]
        required = tp.__required_keys__

        def typed(v: Any) -> str | None:
            if not isinstance(v, dict):
                return ": should be an object"
            for key, check in fields:
                if key not in v:
                    if key not in required:
                        continue  # a field later versions added: older records lack it
                    return f".{key}: missing"
                p = check(v[key])
                if p is not None:
                    return f".{key}{p}"
            return None

        return typed
    if tp is float:
        return lambda v: (
            None
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            else ": should be a finite number"
        )
    if tp is int:
        return lambda v: None if isinstance(v, int) and not isinstance(v, bool) else ": should be a whole number"
    if tp is str:
        return lambda v: None if isinstance(v, str) else ": should be a string"
    if tp is bool:
        return lambda v: None if isinstance(v, bool) else ": should be true or false"
    raise TypeError(f"no check for {tp!r}")  # a new annotation in the schema needs a case here


def load_run(path: Path) -> RunRecord:
    """Read and check one run.json: every field of the schema, of its type."""
    tip = "Rerun the row, or read its output.log; the file was not written by this device-matrix version."
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ResultsError(f"{path}: missing", tip="The row did not finish writing its results; see its log.") from None
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror or exc}", tip="Check the file's permissions.") from None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ResultsError(f"{path}: not UTF-8 text (byte {exc.start})", tip=tip) from None
    except (ValueError, RecursionError) as exc:
        raise ResultsError(
            f"{path}: truncated or not JSON ({str(exc)[:200]})",
            tip="The row died while writing; rerun it or read its log.",
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ResultsError(f"{path}: not a device-matrix run record", tip=tip)
    if data.get("version") != SCHEMA_VERSION:
        raise ResultsError(
            f"{path}: run record version {data.get('version')!r}, this tool reads {SCHEMA_VERSION}",
            tip="Use the device-matrix version that wrote it, or rerun the row.",
        )
    problem = _checker(RunRecord)(data)
    if problem is None and not ROW_NAME_RE.fullmatch(data["row"]):
        problem = f".row: {data['row']!r} is not a row name"
    if problem is None and "spread" in data:
        spread = data["spread"]
        if spread["of"] < 1 or (spread["shard"] is not None and not 1 <= spread["shard"] <= spread["of"]):
            problem = f".spread: shard {spread['shard']} of {spread['of']} is not a part of a split"
    if problem:
        raise ResultsError(f"{path}: run{problem}", tip=tip)
    return cast(RunRecord, data)
