"""One record of a row from its parts: the shards of its split and its gangs (#23).

:func:`merge` is pure (records in, record out) and imports nothing of the runner, so
``triage`` and ``issues sync`` read a spread row without loading it. Every part is
checked before it is merged: a record of another row, of another split, of another shard
index or of another shard count is refused, and the tests the split gave that part are
``not_run`` with the reason, as are the tests of a part that never came back and the
gangs without a record. What disagrees (a test in no shard, or in two) is in the merged
record's ``reason`` and keeps the row from green.

The layout, under ``results/<row>/``::

    run.json                 the whole run, or the merge of the shards (its ``spread``)
    gangs/NAME/run.json      a whole run's gangs, each one test ``gang::NAME``
    shards/plan.json         the split every shard of the row reads (spread/split.py)
    shards/K/run.json        shard K's record (``spread``: plan id, shard K of N)
    shards/K/shard.json      the split as shard K read it, where it ran
    shards/K/gangs/NAME/     the gangs the split gave shard K to keep

:func:`load_spread` reads that from disk and refuses what is malformed (exit 7): a folder
under ``shards/`` that is not a shard number, a symbolic link, a plan whose indexes do
not add up or whose id does not match its content, a gang record without its gang.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from device_matrix.errors import ConfigError, ResultsError
from device_matrix.records import jsonreport
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.junit import write_junit
from device_matrix.records.outcomes import (
    CRASHING_OUTCOMES,
    FAILING_OUTCOMES,
    INFRASTRUCTURE_STATUSES,
    UNFINISHED_OUTCOMES,
)
from device_matrix.records.schema import (
    AttemptRecord,
    CrashRecord,
    DisablesRef,
    PlanFile,
    RowStatus,
    RunRecord,
    SourceInfo,
    SpreadRef,
    TestRecord,
    UnmatchedDisable,
    load_gang,
    load_plan,
    load_run,
    summarize,
)
from device_matrix.records.summary import row_status
from device_matrix.skips import load_disable_list
from device_matrix.skips.disable import target_matches
from device_matrix.skips.tracker import CACHE_FILE, LIST_FILE

SHARDS_DIR = "shards"
GANGS_DIR = "gangs"
PLAN_FILE = "plan.json"  # shards/plan.json: the split every shard of the row reads
SHARD_FILE = "shard.json"
GANG_PREFIX = "gang::"
_PART_RE = re.compile(r"[1-9][0-9]*")  # ASCII digits: str.isdigit() takes "²", which int() refuses
_SHARD_ARG_RE = re.compile(r"([1-9][0-9]*)/([1-9][0-9]*)")


# --- what a row folder holds ---------------------------------------------------------------


@dataclass(frozen=True)
class Gang:
    """A gang's record and where it lies (its rank logs are beside it)."""

    name: str
    record: RunRecord
    where: str  # relative to the row folder: gangs/NAME or shards/K/gangs/NAME


@dataclass(frozen=True)
class PartDisable:
    """#42: a tracker disable a shard applied: its issue, its test as the issue names it, and
    what its children were given (the nodeids or prefixes of the row's list)."""

    issue: str
    test: str
    targets: tuple[str, ...]


@dataclass(frozen=True)
class Part:
    """One shard's folder."""

    index: int
    record: RunRecord | None  # None: the folder has no run.json
    plan: PlanFile | None  # its shard.json
    gangs: tuple[Gang, ...] = ()
    report: Mapping[str, Any] | None = None  # its report.json, for the merged one
    disables: tuple[PartDisable, ...] | None = None  # the tracker's it applied; None: not known


@dataclass(frozen=True)
class Spread:
    row: str
    plan: PlanFile | None  # shards/plan.json
    parts: tuple[Part, ...]
    gangs: tuple[Gang, ...] = ()  # row-level gangs/ (the layout before #23)


@dataclass(frozen=True)
class Merged:
    record: RunRecord
    problems: tuple[str, ...] = ()
    reports: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)


# --- gangs: one test each, folded into the record of the run that ran them --------------------


def with_gangs(record: RunRecord, gangs: Sequence[Gang]) -> RunRecord:
    """``record`` with each gang's test, crashes and attempts, and the status of them all.

    What an earlier fold put in is taken out first, so folding again gives the same record.
    """
    base = without_gangs(record)
    if not gangs:
        return base
    tests, crashes, attempts = list(base["tests"]), list(base["crashes"]), list(base["attempts"])
    infos = []
    for gang in gangs:
        _add_gang(gang, base["row"], tests, crashes, attempts)
        infos.append(dict(gang.record["environment"].get("gang") or {"name": gang.name}))
    environment = dict(base["environment"])
    environment["gangs"] = infos
    environment["without_gangs"] = {
        "status": base["status"],
        "reason": base["reason"],
        "finished_at": base["finished_at"],
        "duration": base["duration"],
    }
    claims = [base["status"], *(g.record["status"] for g in gangs)]
    reasons = [base["reason"], *(f"gang {g.name}: {g.record['reason']}" for g in gangs if g.record["reason"])]
    # the gangs run after the row's tests: the row ends when the last of them ended
    _, finished = _span(
        [(base["started_at"], base["finished_at"])] + [(base["started_at"], g.record["finished_at"]) for g in gangs]
    )
    return RunRecord(
        **{
            **base,
            "status": row_status([t["outcome"] for t in tests], crashes, claimed=claims),
            "reason": " | ".join(r for r in reasons if r) or None,
            "finished_at": finished,
            "duration": _duration(base["started_at"], finished, [base["duration"]]),
            "tests": tests,
            "crashes": crashes,
            "attempts": attempts,
            "summary": summarize(tests),
            "environment": environment,
        }
    )


def without_gangs(record: RunRecord) -> RunRecord:
    """``record`` as its runner wrote it: no gang's test, crash or attempt, its own verdict."""
    environment = dict(record["environment"])
    own = environment.pop("without_gangs", None)
    environment.pop("gangs", None)
    if not isinstance(own, dict):
        return record
    tests = [t for t in record["tests"] if not t["nodeid"].startswith(GANG_PREFIX)]
    return RunRecord(
        **{
            **record,
            "status": own.get("status", record["status"]),
            "reason": own.get("reason"),
            "finished_at": own.get("finished_at", record["finished_at"]),
            "duration": own.get("duration", record["duration"]),
            "tests": tests,
            "crashes": [c for c in record["crashes"] if not (c["nodeid"] or "").startswith(GANG_PREFIX)],
            "attempts": [a for a in record["attempts"] if not _is_gang_log(a["log"])],
            "summary": summarize(tests),
            "environment": environment,
        }
    )


def _is_gang_log(log: str) -> bool:
    parts = Path(log).parts
    return GANGS_DIR in parts[:-1]


def _add_gang(
    gang: Gang, row: str, tests: list[TestRecord], crashes: list[CrashRecord], attempts: list[AttemptRecord]
) -> None:
    offset = len(attempts)
    for a in gang.record["attempts"]:
        attempts.append(AttemptRecord(**{**a, "index": a["index"] + offset, "log": f"{gang.where}/{a['log']}"}))
    ids = {}
    for c in gang.record["crashes"]:
        ids[c["id"]] = f"{row}-{gang.name}.{c['id'].rsplit('-', 1)[-1]}"
        crashes.append(CrashRecord(**{**c, "id": ids[c["id"]], "attempt": c["attempt"] + offset}))
    for t in gang.record["tests"]:
        crash = ids.get(t["crash"]) if t["crash"] else None
        tests.append(TestRecord(**{**t, "crash": crash, "attempt": t["attempt"] + offset}))


def gang_not_run(row: str, name: str, why: str) -> TestRecord:
    return _not_run(f"{GANG_PREFIX}{name}", why)


def _edited(record: RunRecord, report: Mapping[str, Any] | None) -> list[str]:
    """Where a part's run.json and the report.json its runner wrote with it disagree.

    The runner writes both from one record; a test whose outcome differs was changed by
    hand (or by a tool) after the run, and the merge believes neither over the other.
    """
    entries = report.get("tests") if report is not None else None
    if not isinstance(entries, list):
        return []  # no report.json (an older part, a shard whose runner was killed): nothing to hold it to
    said: dict[str, str] = {}
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("nodeid"), str):
            own = entry.get("device_matrix")
            outcome = own.get("outcome") if isinstance(own, dict) else entry.get("outcome")
            said[entry["nodeid"]] = str(outcome)
    out = []
    for t in record["tests"]:
        if "::" not in t["nodeid"] and t["outcome"] == "error":
            continue  # a collection error is a collector there, not a test
        mine = t["outcome"] if t["outcome"] in UNFINISHED_OUTCOMES else jsonreport.JSON_REPORT_OUTCOME[t["outcome"]]
        theirs = said.get(t["nodeid"], "absent")
        if mine != theirs:
            out.append(f"{t['nodeid']}: {t['outcome']} in its run.json, {theirs} in its report.json")
    return out


def _not_run(nodeid: str, why: str) -> TestRecord:
    return TestRecord(
        nodeid=nodeid, outcome="not_run", duration=0.0, message=f"not run: {why}", skip=None, crash=None, attempt=0
    )


# --- the merge -----------------------------------------------------------------------------


def merge(spread: Spread, *, command: Sequence[str] = ()) -> Merged:
    """The row's record from its parts; ``problems`` says what disagreed."""
    if not spread.parts:
        raise ResultsError(f"row {spread.row}: no shards to merge", tip="Run the row with --shard K/N first.")
    problems: list[str] = []
    reference = _reference(spread, problems)
    of = reference["of"] if reference is not None else max(_counts(spread))
    accepted, why_not = _accepted(spread, reference, of, problems)
    owner, order = _owners(reference)
    records = {k: p.record for k, p in sorted(accepted.items()) if p.record is not None}
    mixed = _mixed(records, problems)
    pool = _pool(spread.row, records, accepted=accepted, owner=owner, order=order, problems=problems)
    tests = _tests(pool, order, owner=owner, accepted=accepted, why_not=why_not, of=of, problems=problems)
    crashes, attempts = pool.crashes, pool.attempts
    gangs, gang_claims = _gangs(
        spread,
        reference=reference,
        accepted=accepted,
        why_not=why_not,
        of=of,
        tests=tests,
        crashes=crashes,
        attempts=attempts,
        problems=problems,
    )

    claims: list[RowStatus] = [r["status"] for r in records.values()] + gang_claims
    if problems:
        claims.append("failed")
    if not records:
        claims.append("error")  # not one part came back
    status = row_status([t["outcome"] for t in tests], crashes, claimed=claims)

    first = next(iter(records.values()), None)
    times = [(r["started_at"], r["finished_at"]) for r in records.values()]
    started, finished = _span(times)
    durations = [r["duration"] for r in records.values()]
    record = RunRecord(
        schema=first["schema"] if first else "device-matrix/run",
        version=first["version"] if first else 1,
        row=spread.row,
        pjrt_device=first["pjrt_device"] if first else "",
        status=status,
        reason=" | ".join(_reasons(records, accepted, problems)) or None,
        mode=first["mode"] if first else "none",
        image=first["image"] if first else None,
        suites=first["suites"] if first else [],
        started_at=started,
        finished_at=finished,
        duration=_duration(started, finished, durations),
        command=list(command) or ["device-matrix", "merge"],
        repro=first["repro"] if first else f"nox -s {spread.row}",
        environment=_environment(first, records, accepted, of, gangs),
        tests=tests,
        crashes=crashes,
        attempts=attempts,
        summary=summarize(tests),
        run_url=next((r["run_url"] for r in records.values() if r["run_url"]), None),
        runner_pid=None,
        # a shard that came back from no node has no source: any other shard's is the row's (#25);
        # shards of different commits tested no one commit
        source=_source(records, mixed),
        spread=SpreadRef(plan=reference["plan"] if reference is not None else _only_plan(records), shard=None, of=of),
    )
    selection = _selection(records, problems)
    if selection is not None:
        record["selection"] = selection
    ages = [r["disables"] for r in records.values() if "disables" in r]
    if ages:
        # #33: the oldest list a shard applied; #42: what it matched, as a whole run says it
        record["disables"] = _settled(max(ages, key=lambda ref: ref["age_s"]), spread.parts, record, problems)
    return Merged(record, tuple(problems), {k: p.report for k, p in accepted.items() if p.report is not None})


def _settled(ref: DisablesRef, parts: Sequence[Part], record: RunRecord, problems: Sequence[str]) -> DisablesRef:
    """#42: the row's disables that name none of its tests, which no shard can know (each
    runs part of the row): said once every part came back with its list and the merge is a
    whole run of the row that collected; else not known, as a shard's record says."""
    lists = [p.disables for p in parts]
    whole = not problems and record.get("selection") is None and record["tests"]
    if not whole or record["status"] in INFRASTRUCTURE_STATUSES or any(d is None for d in lists):
        return ref
    mine = {d.issue: d for found in lists if found is not None for d in found}
    nodeids = [t["nodeid"] for t in record["tests"]]
    missed = [d for d in mine.values() if not any(target_matches(x, n) for x in d.targets for n in nodeids)]
    problem = f"matches no test of row {record['row']}"
    return {
        **ref,
        "applied": len(mine) - len(missed),
        "unmatched": [UnmatchedDisable(issue=d.issue, test=d.test, problem=problem) for d in missed],
    }


def _part_disables(folder: Path) -> tuple[PartDisable, ...] | None:
    """#42: the tracker's disables the shard in ``folder`` applied, from its row files (none
    there: it applied none); None when they cannot be read."""
    if not (folder / LIST_FILE).is_file():
        return ()
    try:
        listed = [e for e in load_disable_list(folder / LIST_FILE) if e.since is not None]
        named = {
            str(d["issue"]): str(d["test"]) for d in json.loads((folder / CACHE_FILE).read_text("utf-8"))["disables"]
        }
    except (ConfigError, OSError, ValueError, KeyError, TypeError):
        return None
    targets: dict[str, list[str]] = {}
    for entry in listed:
        if entry.issue is not None and entry.test is not None:
            targets.setdefault(entry.issue, []).append(entry.test)
    return tuple(PartDisable(issue, named.get(issue, tests[0]), tuple(tests)) for issue, tests in targets.items())


def _selection(records: Mapping[int, RunRecord], problems: list[str]) -> str | None:
    """#30: what the row selected, as its shards say it less their own ``--shard K/N``.

    Shards that selected differently are a problem, and the row's selection is theirs
    together: a run compared with no other, neither the whole row's nor one shard's."""
    said: dict[int, str] = {}
    for k, r in records.items():
        words = (r.get("selection") or "").split(" ")
        if "spread" in r and r["spread"]["shard"] is not None and words[-2:] == ["--shard", f"{k}/{r['spread']['of']}"]:
            words = words[:-2]
        said[k] = " ".join(words)
    distinct = sorted(set(said.values()))
    if len(distinct) > 1:
        listed = ", ".join(f"shard {k} {words or '(the whole row)'!r}" for k, words in said.items())
        problems.append(f"the shards ran different selections: {listed}")
    return (
        " | ".join(w or "(the whole row)" for w in distinct) if len(distinct) > 1 else next(iter(distinct), "") or None
    )


def _accepted(
    spread: Spread, reference: PlanFile | None, of: int, problems: list[str]
) -> tuple[dict[int, Part], dict[int, str]]:
    """The parts that are of this row's split, and why each other shard (refused, missing) is not."""
    accepted: dict[int, Part] = {}
    why_not: dict[int, str] = {}
    for part in spread.parts:
        why = _refusal(part, spread.row, reference, of)
        if why is None:
            accepted[part.index] = part
            continue
        why_not[part.index] = why
        problems.append(f"shard {part.index}: {why}")
    for k in range(1, of + 1):
        if k not in accepted and k not in why_not:
            why_not[k] = "no results"
            problems.append(f"shard {k}/{of}: no results")
    return accepted, why_not


def _owners(reference: PlanFile | None) -> tuple[dict[str, int], list[str]]:
    """The shard the split gave each test, and the split's order of the tests."""
    owner: dict[str, int] = {}
    order: list[str] = []
    if reference is not None and reference["tests"] is not None and reference["parts"] is not None:
        order = list(reference["tests"])
        for k, part_indexes in enumerate(reference["parts"], 1):
            for i in part_indexes:
                owner[reference["tests"][i]] = k
    return owner, order


@dataclass
class _Pool:
    """Every accepted part's attempts, crashes and tests, renumbered for the row's record."""

    attempts: list[AttemptRecord] = field(default_factory=list)
    offset: dict[int, int] = field(default_factory=dict)  # each part's attempts follow those before it
    crashes: list[CrashRecord] = field(default_factory=list)
    crash_ids: dict[tuple[int, str], str] = field(default_factory=dict)  # (part, its id) -> the row's id
    seen: dict[str, list[tuple[int, TestRecord]]] = field(default_factory=dict)  # each test, by the parts


def _pool(
    row: str,
    records: Mapping[int, RunRecord],
    *,
    accepted: Mapping[int, Part],
    owner: Mapping[str, int],
    order: list[str],
    problems: list[str],
) -> _Pool:
    """The parts' attempts, crashes and tests in one pool; a test of no split is added to ``order``."""
    pool = _Pool()
    crash_keys: set[tuple[str, str | None, str]] = set()
    for k, kept in records.items():
        rec = without_gangs(kept)
        problems.extend(f"shard {k}: {said}" for said in _edited(rec, accepted[k].report))
        pool.offset[k] = len(pool.attempts)
        for a in rec["attempts"]:
            pool.attempts.append(
                AttemptRecord(
                    **{
                        **a,
                        "index": a["index"] + pool.offset[k],
                        "journal": f"{SHARDS_DIR}/{k}/{a['journal']}" if a["journal"] else "",
                        "log": f"{SHARDS_DIR}/{k}/{a['log']}",
                    }
                )
            )
        for c in rec["crashes"]:
            key = (c["phase"], c["nodeid"], c["diagnosis"]["fingerprint"])
            new_id = f"{row}-{k}.{c['id'].rsplit('-', 1)[-1]}"
            pool.crash_ids[(k, c["id"])] = new_id
            if c["phase"] != "test" and key in crash_keys:
                continue  # every shard imports every module: one crash, seen by each shard
            crash_keys.add(key)
            pool.crashes.append(CrashRecord(**{**c, "id": new_id, "attempt": c["attempt"] + pool.offset[k]}))
        for t in rec["tests"]:
            if t["nodeid"] not in pool.seen and t["nodeid"] not in owner:
                order.append(t["nodeid"])
            pool.seen.setdefault(t["nodeid"], []).append((k, t))
    return pool


def _tests(
    pool: _Pool,
    order: Sequence[str],
    *,
    owner: Mapping[str, int],
    accepted: Mapping[int, Part],
    why_not: Mapping[int, str],
    of: int,
    problems: list[str],
) -> list[TestRecord]:
    """Each test once, in the split's order: from the part that ran it, or not_run and why."""
    tests: list[TestRecord] = []
    for nodeid in order:
        entries = pool.seen.get(nodeid, [])
        if not entries:
            k = owner[nodeid]
            why = why_not.get(k) or "in no shard's results"
            where = f"shard {k}/{of}"
            if k in accepted:
                problems.append(f"{nodeid}: in no shard's results (assigned to {where})")
                tests.append(_not_run(nodeid, f"in no shard's results (assigned to {where})"))
            else:
                tests.append(_not_run(nodeid, f"{where}: {why}"))
            continue
        shards_of = [k for k, _ in entries]
        # a module that fails (or dies) on import: every shard imports it and says so
        module = nodeid not in owner and "::" not in nodeid
        if len(entries) > 1 and not module:
            problems.append(f"{nodeid}: ran in shards {', '.join(map(str, shards_of))}")
        elif owner and nodeid not in owner and not module:
            problems.append(f"{nodeid}: ran in shard {shards_of[0]} but is in no shard of the split")
        elif owner and not module and owner[nodeid] != shards_of[0]:
            problems.append(f"{nodeid}: ran in shard {shards_of[0]}, the split gave it to shard {owner[nodeid]}")
        k, test = entries[0] if module else max(entries, key=lambda e: _severity(e[1]))
        crash = pool.crash_ids.get((k, test["crash"])) if test["crash"] else None
        tests.append(TestRecord(**{**test, "crash": crash, "attempt": test["attempt"] + pool.offset[k]}))
    return tests


def _reasons(records: Mapping[int, RunRecord], accepted: Mapping[int, Part], problems: Sequence[str]) -> list[str]:
    """What the row's record says of its parts: the shards' own reasons, nodes lost, disagreements first."""
    reasons = [f"shard {k}: {r['reason']}" for k, r in records.items() if r["reason"]]
    for k, part in sorted(accepted.items()):
        lost = part.plan.get("lost", []) if part.plan is not None else []
        if part.record is not None and part.record["status"] != "error":
            for entry in lost:
                node = part.plan.get("node") if part.plan is not None else None
                reasons.append(f"shard {k}: node {entry['name']} died while it ran; it ran again on node {node}")
    if problems:
        reasons.insert(0, f"shards disagree: {'; '.join(problems[:20])}" + (" ..." if len(problems) > 20 else ""))
    return reasons


def _environment(
    first: RunRecord | None,
    records: Mapping[int, RunRecord],
    accepted: Mapping[int, Part],
    of: int,
    gangs: list[dict[str, Any]],
) -> dict[str, Any]:
    """The first part's environment, each shard's place and end in ``shards``, the gangs in ``gangs``."""
    environment: dict[str, Any] = dict(first["environment"]) if first is not None else {}
    environment.pop("gangs", None)
    environment.pop("without_gangs", None)
    environment["shards"] = [
        {
            "shard": k,
            "of": of,
            "status": r["status"],
            "duration": r["duration"],
            "tests": len(r["tests"]),
            "host": _plan_of(accepted[k]).get("host") or r["environment"].get("host"),
            "node": _plan_of(accepted[k]).get("node"),
            "lost": [entry["name"] for entry in _plan_of(accepted[k]).get("lost", [])],
        }
        for k, r in records.items()
    ]
    if gangs:
        environment["gangs"] = gangs
    return environment


def _mixed(records: Mapping[int, RunRecord], problems: list[str]) -> bool:
    """Whether the parts ran different commits; that, and parts run in different places
    (here, in a container, in another image), are problems: one record is of one run."""
    commits = {k: c for k, r in records.items() if (source := r.get("source")) and (c := source["commit"])}
    mixed = len(set(commits.values())) > 1
    if mixed:
        listed = ", ".join(f"shard {k} at {c[:12]}" for k, c in commits.items())
        problems.append(f"the shards ran different commits: {listed}")
    places = {k: r["mode"] if r["mode"] != "container" else f"container {r['image']}" for k, r in records.items()}
    if len(set(places.values())) > 1:
        problems.append(
            "the shards ran in different places: " + ", ".join(f"shard {k} {where}" for k, where in places.items())
        )
    return mixed


def _source(records: Mapping[int, RunRecord], mixed: bool) -> SourceInfo | None:
    source = next((r["source"] for r in records.values() if r.get("source")), None)
    if source is None or not mixed:
        return source
    return SourceInfo(**{**source, "commit": None, "head_commit": None})


def _plan_of(part: Part) -> PlanFile | dict[str, Any]:
    return part.plan if part.plan is not None else {}


def _only_plan(records: Mapping[int, RunRecord]) -> str | None:
    ids = {r["spread"]["plan"] for r in records.values() if "spread" in r}
    return ids.pop() if len(ids) == 1 else None


def _spread_of(record: RunRecord) -> tuple[int | None, int | None, str | None]:
    """(shard, of, plan id) a part's record says it is; older records name it in their command."""
    if "spread" in record:
        ref = record["spread"]
        return ref["shard"], ref["of"], ref["plan"]
    command = record["command"]
    if "--shard" in command[:-1]:
        match = _SHARD_ARG_RE.fullmatch(command[command.index("--shard") + 1])
        if match:
            return int(match[1]), int(match[2]), None
    return None, None, None


def _counts(spread: Spread) -> list[int]:
    """Every shard count the parts give (their index too): the row had at least that many."""
    counts = [part.index for part in spread.parts]
    for part in spread.parts:
        if part.plan is not None:
            counts.append(part.plan["of"])
        if part.record is not None:
            of = _spread_of(part.record)[1]
            if of is not None:
                counts.append(of)
    return counts


def _reference(spread: Spread, problems: list[str]) -> PlanFile | None:
    """The split the parts are checked against: shards/plan.json, else the one most parts name."""
    if spread.plan is not None:
        return spread.plan
    plans = [p.plan for p in spread.parts if p.plan is not None and p.plan["row"] == spread.row]
    if not plans:
        return None
    ids = [p["plan"] for p in plans]
    chosen = max(ids, key=lambda i: (ids.count(i), -ids.index(i)))  # most parts; then the lowest shard
    if len(set(ids)) > 1:
        problems.append(
            "the shards were split differently (their collections or recorded durations differed): "
            f"checked against plan {chosen}"
        )
    return next(p for p in plans if p["plan"] == chosen)


def _refusal(part: Part, row: str, reference: PlanFile | None, of: int) -> str | None:
    """Why ``part`` is not merged into row ``row`` (None: it is)."""
    record, plan, k = part.record, part.plan, part.index
    if record is None:
        return "no results (its folder has no run.json)"
    if record["row"] != row:
        return f"a record of row {record['row']!r}, not {row!r}"
    if plan is not None and plan["row"] != row:
        return f"a split of row {plan['row']!r}, not {row!r}"
    shard, count, plan_id = _spread_of(record)
    if shard is None and "spread" in record:
        return "the record of a whole spread, not of one shard"
    if shard is None and plan is None:
        return "the record of a whole run, not of a shard"
    if shard is not None and (shard, count) != (k, of):
        return f"its record is shard {shard}/{count}, the folder shard {k}/{of}"
    if plan is not None and (plan.get("shard", k), plan["of"]) != (k, of):
        return f"its shard.json is shard {plan.get('shard')}/{plan['of']}, the folder shard {k}/{of}"
    if reference is not None:
        for named in (plan_id, plan["plan"] if plan is not None else None):
            if named is not None and named != reference["plan"]:
                return f"of another split (plan {named}, not {reference['plan']})"
    return None


def _gangs(
    spread: Spread,
    *,
    reference: PlanFile | None,
    accepted: Mapping[int, Part],
    why_not: Mapping[int, str],
    of: int,
    tests: list[TestRecord],
    crashes: list[CrashRecord],
    attempts: list[AttemptRecord],
    problems: list[str],
) -> tuple[list[dict[str, Any]], list[RowStatus]]:
    """Each gang of the split from the folder of the shard that keeps it; a missing one not_run."""
    found: dict[str, Gang] = {}
    for gang in [*spread.gangs, *(g for _, p in sorted(accepted.items()) for g in p.gangs)]:
        if gang.name in found:
            problems.append(f"gang {gang.name}: a record in {found[gang.name].where} and in {gang.where}")
            continue
        found[gang.name] = gang
    infos: list[dict[str, Any]] = []
    claims: list[RowStatus] = []
    expected = reference.get("gangs", []) if reference is not None else []
    for slot in expected:
        if slot["name"] in found:
            continue
        k = slot["shard"]
        why = f"shard {k}/{of}: {why_not[k]}" if k in why_not else "its record is missing (it did not run or was lost)"
        if k not in why_not:
            problems.append(f"gang {slot['name']}: {why}")
        tests.append(gang_not_run(spread.row, slot["name"], why))
        infos.append({"name": slot["name"]})
    for gang in found.values():
        _add_gang(gang, spread.row, tests, crashes, attempts)
        infos.append(dict(gang.record["environment"].get("gang") or {"name": gang.name}))
        claims.append(gang.record["status"])
    return infos, claims


def _severity(test: TestRecord) -> int:
    outcome = test["outcome"]
    if outcome in CRASHING_OUTCOMES:
        return 3
    if outcome in FAILING_OUTCOMES:
        return 2
    return 0 if outcome == "not_run" else 1


def _when(text: str) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.timezone.utc)


def _span(times: Iterable[tuple[str, str]]) -> tuple[str, str]:
    """The first start and the last end, compared as times (hosts may write other offsets)."""
    starts = [(w, s) for s, _ in times if (w := _when(s)) is not None]
    ends = [(w, e) for _, e in times if (w := _when(e)) is not None]
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    started = min(starts)[1] if starts else now
    finished = max(ends)[1] if ends else started
    return started, finished


def _duration(started: str, finished: str, durations: Sequence[float]) -> float:
    """Wall time from the first shard's start to the last one's end, never less than one shard.

    Hosts' clocks differ: a span shorter than a shard (or negative) is not believed.
    """
    a, b = _when(started), _when(finished)
    span = (b - a).total_seconds() if a is not None and b is not None else 0.0
    return round(max([span, *durations, 0.0]), 3)


# --- reading a row folder ----------------------------------------------------------------------


def has_shards(folder: Path) -> bool:
    shards = folder / SHARDS_DIR
    return shards.is_dir() and any(not p.name.startswith(".") and p.name != PLAN_FILE for p in shards.iterdir())


def is_spread(record: RunRecord) -> bool:
    """A record of a spread row (a shard's, the merge's or its driver's), not of a whole run."""
    return "spread" in record or "shards" in record["environment"]


def load_gangs(folder: Path, where: str) -> tuple[Gang, ...]:
    """The gang records under ``folder/gangs/`` (``where``: that folder, relative to the row's)."""
    gangs_dir = folder / GANGS_DIR
    if not gangs_dir.is_dir():
        return ()
    found = []
    for entry in sorted(gangs_dir.iterdir()):
        if entry.name.startswith("."):
            continue
        _refuse_link(entry)
        if not (entry / "run.json").exists():
            continue  # a gang that has not written its record yet: the split says it is missing
        found.append(Gang(entry.name, load_gang(entry / "run.json"), f"{where}{GANGS_DIR}/{entry.name}"))
    return tuple(found)


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise ResultsError(
            f"{path}: a symbolic link; each part of a row's results is a folder of its own",
            tip="Copy the folder there (downloaded artifacts: extract them) instead of linking it.",
        )


def load_spread(folder: Path) -> Spread:
    """Every part of the spread row in ``folder``, each read and checked (malformed: exit 7)."""
    shards = folder / SHARDS_DIR
    _refuse_link(shards)
    whole = folder / "run.json"
    if whole.is_file():
        try:
            own = load_run(whole)
        except ResultsError:
            own = None
        if own is not None and not is_spread(own):
            raise ResultsError(
                f"{folder} holds a whole run of the row and shards of another",
                tip=f"Keep one: remove {whole} or {shards}.",
            )
    if (shards / PLAN_FILE).exists():
        _refuse_link(shards / PLAN_FILE)
    plan = load_plan(shards / PLAN_FILE) if (shards / PLAN_FILE).exists() else None
    parts = []
    for entry in sorted(shards.iterdir()) if shards.is_dir() else ():
        if entry.name.startswith(".") or entry.name == PLAN_FILE:
            continue
        _refuse_link(entry)
        if not entry.is_dir() or not _PART_RE.fullmatch(entry.name):
            raise ResultsError(
                f"{entry}: not a shard's folder (shards/ holds plan.json and folders 1, 2, ... N)",
                tip=f"Move it out of {shards}; a downloaded artifact belongs in shards/K.",
            )
        k = int(entry.name)
        record = load_run(entry / "run.json") if (entry / "run.json").exists() else None
        part_plan = load_plan(entry / SHARD_FILE) if (entry / SHARD_FILE).exists() else None
        parts.append(
            Part(
                index=k,
                record=record,
                plan=part_plan,
                gangs=load_gangs(entry, f"{SHARDS_DIR}/{k}/"),
                report=read_report(entry / "report.json"),
                disables=_part_disables(entry),
            )
        )
    return Spread(
        row=folder.name,
        plan=plan,
        parts=tuple(sorted(parts, key=lambda p: p.index)),
        gangs=load_gangs(folder, ""),
    )


def read_report(path: Path) -> Mapping[str, Any] | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None  # the merged report.json is rebuilt from the records; this only adds phases
    return data if isinstance(data, dict) else None


def read_row(folder: Path) -> RunRecord:
    """The row's record as a reader should see it: its shards merged, its gangs folded in."""
    if has_shards(folder):
        return merge_row(folder)
    return with_gangs(load_run(folder / "run.json"), load_gangs(folder, ""))


def merge_row(folder: Path) -> RunRecord:
    """Merge ``folder/shards/*`` into ``folder/run.json`` (and junit.xml, report.json)."""
    merged = merge(load_spread(folder), command=["device-matrix", "merge", str(folder)])
    write_merged(folder, merged)
    return merged.record


def write_merged(folder: Path, merged: Merged) -> None:
    write_reports(folder, merged.record, merged.reports.values())
    write_json_atomic(folder / "run.json", merged.record)


def write_reports(folder: Path, record: RunRecord, reports: Iterable[Mapping[str, Any]]) -> None:
    """``junit.xml`` and ``report.json`` of ``record``, each test's phases and line from ``reports``.

    ``reports``: the report.json files its runners wrote; a gang's test has no phases there (#23).
    """
    phases: dict[str, list[dict[str, Any]]] = {}
    locations: dict[str, tuple[str, int | None]] = {}
    root = ""
    for report in reports:
        root = root or str(report.get("root", ""))
        entries = report.get("tests", [])
        for entry in entries if isinstance(entries, list) else ():
            nodeid = entry.get("nodeid") if isinstance(entry, dict) else None
            if not isinstance(nodeid, str) or nodeid in phases or nodeid.startswith(GANG_PREFIX):
                continue
            phases[nodeid] = [
                {"when": when, **entry[when]} for when in jsonreport.WHEN if isinstance(entry.get(when), dict)
            ]
            lineno = entry.get("lineno")
            locations[nodeid] = (nodeid.split("::", 1)[0], lineno if type(lineno) is int else None)
    write_junit(folder / "junit.xml", record)
    jsonreport.write(folder / "report.json", jsonreport.build(record, phases, locations, Path(root or folder)))


def artifact_folder(results: Path, artifact: str) -> Path | None:
    """Where a row job's artifact belongs: ``results-<row>@K`` (shard K) or ``results-<row>``.

    The names come from :func:`device_matrix.workflow.actions_matrix`; None for another name.
    """
    if not artifact.startswith("results-"):
        return None
    row, at, shard = artifact.removeprefix("results-").rpartition("@")
    if at and _PART_RE.fullmatch(shard) and row:
        return results / row / SHARDS_DIR / shard
    return results / artifact.removeprefix("results-")
