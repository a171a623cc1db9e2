"""Failure groups (#32): every failed, errored, crashed and timed-out test of a triage in
one group by its signature, across rows, ordered by what needs action.

A signature is a crash's fingerprint, or the exception line (its first line, with what
differs from run to run masked: :func:`device_matrix.report.signature.mask`) with the
innermost frame of the traceback in the project's own code. Fourteen tests that fail
because one server cannot be reached are one group of fourteen, on the rows they ran on.

The order leads with what a reader must act on: a group holding a ``new`` failure (this
change broke it), then ``device-unstable``, ``flaky``, ``broken on base``,
``infrastructure`` and ``unknown``, then a group no verdict was given for (a run that is
no pull request's); within a class, the largest first.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TypedDict

from device_matrix.findings import group_key
from device_matrix.records.schema import TestRecord
from device_matrix.report.model import Triage, failure_view
from device_matrix.report.signature import mask

SIGNATURE_LIMIT = 300
TESTS_SHOWN = 5  # of each group, in triage.md and triage.html; triage.json has them all
GROUPS_LISTED = 20  # groups in triage.md and the comment past every ``new`` one
# the order a reader acts in: the first class a group's tests hold places it
CLASS_ORDER: tuple[str, ...] = ("new", "device-unstable", "flaky", "broken-on-base", "infrastructure", "unknown", "")


class GroupTest(TypedDict):
    row: str
    nodeid: str
    outcome: str
    where: str | None  # "tests/test_a.py:3": the test's file and line, as the record placed it
    verdict: str | None


class FailureGroup(TypedDict):
    id: str  # its anchor in the HTML report: "group-1"
    signature: str
    cause: str  # its first test's exception line as it was, or the crash's headline
    frame: str | None  # the innermost frame in the project's own code
    fingerprint: str | None  # a crash's
    lead: str  # the class that places it (CLASS_ORDER; "" where no verdict was given)
    count: int
    rows: dict[str, int]  # tests per row, in the triage's row order
    verdicts: dict[str, int]  # tests per verdict
    issue: str | None
    issue_state: str | None
    tests: list[GroupTest]  # every test, the first one first


def failure_signature(message: str | None, frame: str | None) -> str:
    """A failure's signature: its exception line masked, and where in the project it was raised."""
    first = next((line.strip() for line in (message or "").splitlines() if line.strip()), "(no message)")
    return (mask(first) + (f" @ {frame}" if frame else ""))[:SIGNATURE_LIMIT]


def test_signature(t: TestRecord, tests: Collection[str] = ()) -> str:
    """The signature of a failing test's group, as :func:`of` groups it: what the issue sync
    keys a failure group's issue by (#32: ``findings.group_key``). ``tests``: the run's test
    files (``findings.test_files``)."""
    f = failure_view(t, "", tests)
    return failure_signature(f["message"], f["site"])


def _where(file: str | None, line: int | None) -> str | None:
    return f"{file}:{line}" if file and line else file


def of(t: Triage) -> list[FailureGroup]:
    """The groups of ``t``'s failures and crashes, in the order a reader acts on them."""
    verdict = {(i["row"], i["nodeid"]): i["verdict"] for i in (t["verdicts"] or {"items": []})["items"]}
    groups: dict[str, FailureGroup] = {}
    outcomes = {test["nodeid"]: test["outcomes"] for test in t["tests"]} if t["crashes"] else {}
    for c in t["crashes"]:
        sig = f"crash {c['fingerprint']}"
        g = groups[sig] = _group(sig, c["headline"], None, c["fingerprint"], issue=c["issue"], state=c["issue_state"])
        for row, nodeid in c["seen"]:
            outcome = str(outcomes.get(nodeid, {}).get(row, "crashed"))
            where = _where(c["file"], c["line"]) if nodeid == c["seen"][0][1] else None
            g["tests"].append(GroupTest(row=row, nodeid=nodeid, outcome=outcome, where=where, verdict=None))
    linked = t.get("failure_issues") or {}  # a triage.json written before #32's issues has none
    for f in t["failures"]:
        # a triage.json written before the site was kept has the frame alone
        sig = failure_signature(f["message"], f.get("site", f["frame"]))
        if sig not in groups:
            link = linked.get(group_key(sig))
            issue, state = (link["issue"], link["state"]) if link else (None, None)
            groups[sig] = _group(sig, f["message"] or "", f["frame"], None, issue=issue, state=state)
        groups[sig]["tests"].append(
            GroupTest(
                row=f["row"], nodeid=f["nodeid"], outcome=f["outcome"], where=_where(f["file"], f["line"]), verdict=None
            )
        )
    order = {r["row"]: i for i, r in enumerate(t["rows"])}
    for g in groups.values():
        for test in g["tests"]:
            test["verdict"] = verdict.get((test["row"], test["nodeid"]))
        _count(g, order)
    ranked = sorted(groups.values(), key=lambda g: (CLASS_ORDER.index(g["lead"]), -g["count"], g["signature"]))
    for n, g in enumerate(ranked, 1):
        g["id"] = f"group-{n}"
    return ranked


def _group(
    sig: str, cause: str, frame: str | None, fingerprint: str | None, *, issue: str | None, state: str | None
) -> FailureGroup:
    return FailureGroup(
        id="",
        signature=sig,
        cause=cause,
        frame=frame,
        fingerprint=fingerprint,
        lead="",
        count=0,
        rows={},
        verdicts={},
        issue=issue,
        issue_state=state,
        tests=[],
    )


def _count(g: FailureGroup, order: Mapping[str, int]) -> None:
    g["tests"].sort(key=lambda x: (order.get(x["row"], len(order)), x["nodeid"]))
    g["count"] = len(g["tests"])
    rows: dict[str, int] = {}
    verdicts: dict[str, int] = {}
    for test in g["tests"]:
        rows[test["row"]] = rows.get(test["row"], 0) + 1
        if test["verdict"] is not None:
            verdicts[test["verdict"]] = verdicts.get(test["verdict"], 0) + 1
    g["rows"] = rows
    g["verdicts"] = {v: verdicts[v] for v in CLASS_ORDER if v in verdicts}
    g["lead"] = next(iter(g["verdicts"]), "")


def spread(g: FailureGroup) -> str:
    """ "14 tests: 11 on cpu, 3 on tpu" """
    noun = "test" if g["count"] == 1 else "tests"
    return f"{g['count']} {noun}: " + ", ".join(f"{n} on {row}" for row, n in g["rows"].items())


def listed(groups: Sequence[FailureGroup], limit: int = GROUPS_LISTED) -> tuple[list[FailureGroup], int, int]:
    """The groups a limited list shows: every one holding a ``new`` failure, then the others
    up to ``limit`` in all; and how many groups (and tests in them) are left out."""
    new = [g for g in groups if g["lead"] == "new"]
    rest = [g for g in groups if g["lead"] != "new"]
    shown = new + rest[: max(limit - len(new), 0)]
    left = rest[max(limit - len(new), 0) :]
    return shown, len(left), sum(g["count"] for g in left)
