"""Verdicts for a pull request, "is this failure mine?": one for every failing, crashing or
timed-out test of its run, per row, against its base branch's history (#25).

The verdicts, in the order they are tried (the first that holds is given):

``infrastructure``
    the row errored before its tests (engine, install, runner, a device absent on a runner
    that should have it), or was cut off: a verdict for the row, not for a test.
``device-unstable``
    the row is declared unstable (``unstable = true`` in its configuration), or the same
    crash (fingerprint) recurs on the base on this row only, coming and going.
``unknown``
    the base has no history of this row (or the run names no base): said, never guessed.
``broken on base``
    it fails on the base's latest runs with the same signature (fingerprint, or message):
    a regression (at most one flip: pass, then fail) or a streak of at least
    ``BROKEN_STREAK`` failures longer than any before it.
``flaky``
    it flips on the base: pass, fail, pass (two flips or more), with its failure rate over
    the base's runs and a 90% interval for it.
``new``
    none of those: the test did not run on the base (a test the change adds, renames or
    enables), or it passes there (the evidence: how many runs, which commit last, and how
    rare a flake would have to be to hide in that many passes), or it fails there
    differently.

The statistics, stated so a reader can weigh them: a test that fails with probability p
shows no failure in n runs with probability (1-p)^n, so n passes bound p below
``1 - 0.1^(1/n)`` with 90% confidence (30 passes: under 7.4%); a flake at rate p needs
``ln 0.1 / ln(1-p)`` runs to show at least once in 9 cases out of 10 (25%: 9 runs, 10%: 22,
5%: 45). A failure rate over n runs is given with its 90% Clopper-Pearson interval.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias, get_args

from device_matrix.records.outcomes import (
    DESELECTED_OUTCOMES,
    FAIL_CODES,
    INFRASTRUCTURE_STATUSES,
    INFRASTRUCTURE_WORDS,
    PASS_CODES,
    TESTS_FAILED_STATUSES,
)
from device_matrix.records.source import lane_words, short
from device_matrix.report.history import Base, LaneRun, crash_signature, same_failure, signature
from device_matrix.report.misses import Miss
from device_matrix.report.model import NotRunItem, RowView, Triage, Verdict, VerdictItem, VerdictReport

VERDICTS: tuple[str, ...] = get_args(Verdict)
WORDS: Mapping[str, str] = {
    "new": "new",
    "broken-on-base": "broken on base",
    "flaky": "flaky",
    "device-unstable": "device-unstable",
    "infrastructure": "infrastructure",
    "unknown": "unknown",
}
CONFIDENCE = 0.9
BROKEN_STREAK = 3
FLAKY_FLIPS = 2
RECURS = 2  # crashes of one fingerprint on the base that make it recurring


# --- statistics ----------------------------------------------------------------------------


def hidden_rate(passes: int, confidence: float = CONFIDENCE) -> float:
    """The failure rate a flake could have and still pass ``passes`` runs in a row, at most,
    with ``confidence``: the p where (1-p)^n = 1 - confidence."""
    if passes <= 0:
        return 1.0
    return float(1.0 - (1.0 - confidence) ** (1.0 / passes))


def runs_to_see(rate: float, confidence: float = CONFIDENCE) -> int | None:
    """Runs in which a test failing at ``rate`` fails at least once, with ``confidence``."""
    if rate <= 0.0:
        return None
    if rate >= 1.0:
        return 1
    return math.ceil(math.log(1.0 - confidence) / math.log(1.0 - rate) - 1e-9)


def _binomial_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, i) * p**i * (1.0 - p) ** (n - i) for i in range(k + 1))


def _solve(f: Callable[[float], float], target: float, increasing: bool) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if (f(mid) < target) == increasing:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def interval(failures: int, runs: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Clopper-Pearson interval of a failure rate (``confidence`` two-sided)."""
    if runs <= 0:
        return 0.0, 1.0
    tail = (1.0 - confidence) / 2
    low = 0.0 if failures == 0 else _solve(lambda p: 1.0 - _binomial_cdf(failures - 1, runs, p), tail, True)
    high = 1.0 if failures == runs else _solve(lambda p: _binomial_cdf(failures, runs, p), tail, False)
    return low, high


def _pct(x: float) -> str:
    return f"{x:.0%}" if x >= 0.1 or x == 0 else f"{x:.1%}"


# --- one test ------------------------------------------------------------------------------


def _blank(anchor: str, where: tuple[str, str | None, str], verdict: Verdict, evidence: str) -> VerdictItem:
    """An item of ``where`` (row, nodeid, outcome) with no evidence figures yet."""
    row, nodeid, outcome = where
    return VerdictItem(
        anchor=anchor,
        row=row,
        nodeid=nodeid,
        outcome=outcome,
        verdict=verdict,
        evidence=evidence,
        signature=None,
        base_outcomes="",
        base_ran=0,
        base_failures=0,
        flips=0,
        rate=None,
        low=None,
        high=None,
        runs_needed=None,
        since=None,
        last_pass=None,
        fingerprint=None,
        placement=None,
    )


def _run_words(run: LaneRun) -> str:
    commit = run.source["commit"] if run.source else None
    return f"{run.label} (commit {short(commit)})" if commit else run.label


def _streaks(ran: Sequence[str]) -> tuple[int, int]:
    """(the trailing run of failures, the longest run of failures before it)."""
    trailing = 0
    for code in reversed(ran):
        if code not in FAIL_CODES:
            break
        trailing += 1
    longest = run = 0
    for code in ran[: len(ran) - trailing]:
        run = run + 1 if code in FAIL_CODES else 0
        longest = max(longest, run)
    return trailing, longest


def judge_test(
    base: Base,
    *,
    row: str,
    nodeid: str,
    outcome: str,
    sig: str,
    fingerprint: str | None,
    key: str,
    anchor: str,
    placement: str | None = None,
) -> VerdictItem:
    """One failing test of the pull request against the base's runs of its row.

    ``key``: the nodeid as the history stores it.
    """
    name = lane_words(base.lane)
    item = _blank(anchor, (row, nodeid, outcome), "unknown", "")
    item["signature"] = sig
    item["fingerprint"] = fingerprint
    text, base_sig = base.series.get((row, key), ("-" * len(base.runs), None))
    ran = _base_figures(item, base, text)
    if not ran:
        item["verdict"] = "new"
        item["evidence"] = (
            f"did not run on {name} in its last {len(base.runs)} run(s) of {row}: a test this change adds, renames "
            "or enables"
        )
        return item
    codes = [c for _, c in ran]
    trailing, longest = _streaks(codes)
    if trailing:
        item["since"] = _run_words(base.runs[ran[len(ran) - trailing][0]])
    crash_rows = base.crashes.get(fingerprint, {}) if fingerprint else {}
    flips = item["flips"]
    if fingerprint and set(crash_rows) == {row} and len(crash_rows[row]) >= RECURS and flips >= FLAKY_FLIPS:
        item["verdict"] = "device-unstable"
        item["rate"] = item["base_failures"] / len(ran)
        where = f"; {placement}" if placement else ""
        item["evidence"] = (
            f"the same crash ({fingerprint}) recurs on {name} on {row} only: in {len(crash_rows[row])} of "
            f"{len(ran)} runs there, passing in between ({flips} flips){where}"
        )
        item["placement"] = placement
        return item
    broken = trailing > 0 and (flips <= 1 or (trailing >= BROKEN_STREAK and trailing > longest))
    if broken and same_failure(base_sig, sig):
        item["verdict"] = "broken-on-base"
        what = f"crash ({fingerprint})" if fingerprint else "message"
        item["evidence"] = (
            f"fails on {name} with the same {what}: in its last {trailing} run(s) of {row}, since {item['since']}"
            + (f"; it last passed in {item['last_pass']}" if item["last_pass"] else "; it never passed there")
        )
    elif flips >= FLAKY_FLIPS:
        _flaky(item, name, row, len(ran))
    elif broken:
        item["verdict"] = "new"
        item["evidence"] = (
            f"fails on {name} too, since {item['since']}, but differently: there {base_sig or 'unknown'}; here {sig}"
        )
    else:
        _passes_on_base(item, name, row, codes)
    return item


def _base_figures(item: VerdictItem, base: Base, text: str) -> list[tuple[int, str]]:
    """The test's runs on the base that passed or failed (position, code), with its figures
    (runs, failures, flips, last pass) set on ``item``."""
    item["base_outcomes"] = text
    ran = [(i, c) for i, c in enumerate(text) if c in PASS_CODES or c in FAIL_CODES]
    codes = [c for _, c in ran]
    item["base_ran"] = len(ran)
    item["base_failures"] = sum(c in FAIL_CODES for c in codes)
    item["flips"] = sum((a in PASS_CODES) != (b in PASS_CODES) for a, b in itertools.pairwise(codes))
    passes_at = [i for i, c in ran if c in PASS_CODES]
    if passes_at:
        item["last_pass"] = _run_words(base.runs[passes_at[-1]])
    return ran


def _flaky(item: VerdictItem, name: str, row: str, ran: int) -> None:
    failures = item["base_failures"]
    rate = failures / ran
    low, high = interval(failures, ran)
    needed = runs_to_see(rate)
    item["verdict"] = "flaky"
    item["rate"] = rate
    item["low"] = low
    item["high"] = high
    item["runs_needed"] = needed
    enough = (
        f"{ran} runs are enough to see a failure this frequent 9 times out of 10 ({needed} needed)"
        if needed is not None and ran >= needed
        else f"only {ran} runs: a failure this frequent needs {needed} to show 9 times out of 10"
    )
    item["evidence"] = (
        f"flips on {name}: failed {failures} of {ran} runs of {row} ({_pct(rate)}, 90% interval "
        f"{_pct(low)}-{_pct(high)}), {item['flips']} flips; {enough}"
    )


def _passes_on_base(item: VerdictItem, name: str, row: str, codes: Sequence[str]) -> None:
    failures = item["base_failures"]
    streak = 0
    for c in reversed(codes):
        if c not in PASS_CODES:
            break
        streak += 1
    bound = hidden_rate(streak)
    item["verdict"] = "new"
    item["low"] = 0.0
    item["high"] = bound
    item["rate"] = failures / len(codes) if failures else 0.0
    earlier = f" (it failed {failures} time(s) before that)" if failures else ""
    item["evidence"] = (
        f"passes on {name}: its last {streak} run(s) of {row} passed, last in {item['last_pass']}{earlier}; "
        f"a flake hiding in {streak} passes would fail under {_pct(bound)} of runs (90% confidence)"
    )


# --- the report ----------------------------------------------------------------------------


def line(counts: Mapping[str, int], base: str | None) -> str:
    where = base or "the base"
    parts = []
    if counts.get("new"):
        parts.append(f"{counts['new']} new failure{'s' if counts['new'] != 1 else ''} from this change")
    if counts.get("broken-on-base"):
        parts.append(f"{counts['broken-on-base']} already failing on {where}")
    if counts.get("flaky"):
        parts.append(f"{counts['flaky']} flaky")
    if counts.get("device-unstable"):
        parts.append(f"{counts['device-unstable']} on an unstable device")
    if counts.get("infrastructure"):
        parts.append(f"{counts['infrastructure']} infrastructure")
    if counts.get("unknown"):
        parts.append(f"{counts['unknown']} unknown (no history of {where} to compare with)")
    return "; ".join(parts) if parts else "no failures: nothing to judge"


def judge(
    triage: Triage,
    base: Base | None,
    *,
    base_ref: str | None,
    base_commit: str | None,
    unstable: Collection[str] = (),
    placements: Mapping[str, str] | None = None,
    stored: Callable[[str], str] = lambda n: n,
    missed: Sequence[Miss] = (),
) -> VerdictReport:
    """Every failing, crashing or timed-out test of ``triage`` (a pull request's run), judged
    against ``base`` (None: no history of it), and every row that ended red outside them.
    ``unstable``: the rows declared unstable. ``placements``: fingerprint -> where it
    happens, by environment. ``stored``: a nodeid as the history keys it. ``missed``: the
    tests this pull request's selection left out that a full run of the base then failed
    (#40: the history's misses of its lane), counted on the line."""
    judging = _Judging(base, base_ref or "the base", base_ref is not None, unstable, placements or {}, stored)
    failing = _failing(triage)
    for r in triage["rows"]:
        judging.row(r, failed_tests=any(f[0] == r["row"] for f in failing))
    for row, nodeid, outcome, sig, fp in failing:
        judging.test(row, nodeid, outcome, sig, fp)
    items = judging.items
    counts = {v: sum(1 for i in items if i["verdict"] == v) for v in VERDICTS}
    not_run = _not_run(triage)
    return VerdictReport(
        base=base_ref,
        base_lane=base.lane if base is not None else None,
        base_commit=base_commit,
        base_runs=len(base.runs) if base is not None else 0,
        run_ids=[r.id for r in base.runs] if base is not None else [],
        line=line(counts, base_ref) + _not_run_words(len(not_run)) + _missed_words(missed, base_ref),
        counts=counts,
        items=items,
        not_run=not_run,
        missed=list(missed),
    )


def _not_run(triage: Triage) -> list[NotRunItem]:
    """The tests selection left out of this run (#34), by row and nodeid, with its reason."""
    return [
        NotRunItem(row=row, nodeid=t["nodeid"], reason=t.get("causes", {}).get(row, ""))
        for t in triage["tests"]
        for row, outcome in sorted(t["outcomes"].items())
        if outcome in DESELECTED_OUTCOMES
    ]


def _not_run_words(n: int) -> str:
    return f"; {n:,} test{'' if n == 1 else 's'} not run on this PR (deselected)" if n else ""


def _missed_words(missed: Sequence[Miss], base: str | None) -> str:
    n = len(missed)
    if not n:
        return ""
    tests = f"{n:,} test{'' if n == 1 else 's'}"
    return f"; selection missed {tests} on this PR: left out, then failed by a full run of {base or 'the base'}"


Failing: TypeAlias = tuple[str, str, str, str, str | None]  # row, nodeid, outcome, signature, fingerprint


def _failing(triage: Triage) -> list[Failing]:
    """Every failing test of the run and every test a crash was seen in, by row and nodeid."""
    failing: list[Failing] = []
    for f in triage["failures"]:
        failing.append((f["row"], f["nodeid"], f["outcome"], signature(f["outcome"], f["message"]), None))
    outcome_of = {t["nodeid"]: t["outcomes"] for t in triage["tests"]}
    for c in triage["crashes"]:
        for row, nodeid in c["seen"]:
            outcome = outcome_of.get(nodeid, {}).get(row, "crashed")
            failing.append((row, nodeid, outcome, crash_signature(c["fingerprint"]), c["fingerprint"]))
    failing.sort(key=lambda x: (x[0], x[1]))
    return failing


def _reached_every_test(r: RowView) -> bool:
    """The row's tests all ran (none is left not run): whatever failed it came after them."""
    return sum(r["counts"].values()) > 0 and not r["counts"].get("not_run", 0)


@dataclass
class _Judging:
    """The items of one report, in order, and what each is judged against."""

    base: Base | None
    name: str  # the base, in words
    named: bool  # the run names a base
    unstable: Collection[str]
    placements: Mapping[str, str]
    stored: Callable[[str], str]
    items: list[VerdictItem] = field(default_factory=list)

    def anchor(self) -> str:
        return f"verdict-{len(self.items) + 1}"

    def no_history(self, row: str) -> str | None:
        if not self.named:
            return "this run names no base branch to compare with (pass --base, or run it for a pull request)"
        if self.base is None or not self.base.runs:
            return f"no history of {self.name} to compare with"
        if not any(s is not None for s in self.base.rows.get(row, [])):
            return f"{self.name} has no run of {row} in its last {len(self.base.runs)} run(s)"
        return None

    def row(self, r: RowView, *, failed_tests: bool) -> None:
        """A row that never reached its tests, or one that ended red with no failing test
        of its own to judge (#30: a session hook's exit status, a test never run)."""
        status, why = r["status"], r["reason"] or r["label"]
        outside = status in TESTS_FAILED_STATUSES or (status == "error" and _reached_every_test(r))
        if status in INFRASTRUCTURE_STATUSES and not outside:
            evidence = f"the row {INFRASTRUCTURE_WORDS[status]}, outside any test: {why}"
            self.items.append(_blank(self.anchor(), (r["row"], None, status), "infrastructure", evidence))
        elif outside and not failed_tests:
            ended = f"the row ended {r['label']} outside any failing test: {why.splitlines()[0][:300]}"
            self.items.append(self._judge_row(r["row"], status, ended))

    def _judge_row(self, row: str, status: str, ended: str) -> VerdictItem:
        where = (row, None, status)
        if row in self.unstable:
            return _blank(self.anchor(), where, "device-unstable", f"the row {row} is declared unstable; {ended}")
        if (missing := self.no_history(row)) is not None:
            return _blank(self.anchor(), where, "unknown", f"{missing}; {ended}")
        assert self.base is not None  # no_history said so otherwise
        return _judge_row_on_base(self.base, row, status, ended, self.anchor())

    def test(self, row: str, nodeid: str, outcome: str, sig: str, fp: str | None) -> None:
        base, anchor = self.base, self.anchor()
        if row in self.unstable:
            evidence = f"the row {row} is declared unstable (unstable = true)"
            item = _blank(anchor, (row, nodeid, outcome), "device-unstable", evidence)
        elif (missing := self.no_history(row)) is not None:
            item = _blank(anchor, (row, nodeid, outcome), "unknown", missing)
        elif nodeid.startswith("(") and fp is not None:
            item = _judge_outside_tests(base, row=row, nodeid=nodeid, outcome=outcome, fp=fp, anchor=anchor)
        else:
            assert base is not None  # no_history said so otherwise
            item = judge_test(
                base,
                row=row,
                nodeid=nodeid,
                outcome=outcome,
                sig=sig,
                fingerprint=fp,
                key=self.stored(nodeid),
                anchor=anchor,
                placement=self.placements.get(fp or ""),
            )
        item["signature"] = sig
        item["fingerprint"] = fp
        item["placement"] = self.placements.get(fp) if fp is not None else None
        self.items.append(item)


def _judge_row_on_base(base: Base, row: str, status: str, ended: str, anchor: str) -> VerdictItem:
    """A row red outside its tests, against the base's runs of it: broken there when its
    latest run ended red without a failing test too, else new."""
    name = lane_words(base.lane)
    labels = base.rows.get(row, [])
    ran = [i for i, label in enumerate(labels) if label is not None]
    latest = ran[-1]
    tests_failed = any(
        r == row and text[latest : latest + 1] in FAIL_CODES for (r, _), (text, _) in base.series.items()
    )
    item = _blank(anchor, (row, None, status), "new", "")
    if labels[latest] != "passed" and not tests_failed:
        item["verdict"] = "broken-on-base"
        item["since"] = _run_words(base.runs[latest])
        item["evidence"] = f"{ended}; {row} ended {labels[latest]} outside its tests on {name} too, in {item['since']}"
        return item
    streak = 0
    for i in reversed(ran):
        if labels[i] != "passed":
            break
        streak += 1
    if streak:
        item["last_pass"] = _run_words(base.runs[latest])
        item["evidence"] = f"{ended}; {row} passed on {name} in its last {streak} run(s), last in {item['last_pass']}"
    else:
        item["evidence"] = f"{ended}; {row} ended {labels[latest]} on {name} in its latest run, by failing tests"
    return item


def _judge_outside_tests(
    base: Base | None, *, row: str, nodeid: str, outcome: str, fp: str, anchor: str
) -> VerdictItem:
    """A crash outside any test (collection, startup, exit): judged by its fingerprint alone."""
    assert base is not None
    name = lane_words(base.lane)
    at = base.crashes.get(fp, {})
    ran = [i for i, s in enumerate(base.rows.get(row, [])) if s is not None]
    item = _blank(anchor, (row, nodeid, outcome), "new", "")
    item["fingerprint"] = fp
    mine = at.get(row, [])
    present = [i in mine for i in ran]
    flips = sum(a != b for a, b in itertools.pairwise(present))
    if set(at) == {row} and len(mine) >= RECURS and flips >= FLAKY_FLIPS:
        item["verdict"] = "device-unstable"
        item["evidence"] = (
            f"the same crash ({fp}) recurs on {name} on {row} only: in {len(mine)} of {len(ran)} runs, coming and going"
        )
    elif mine and ran[-1] in mine:
        item["verdict"] = "broken-on-base"
        item["since"] = _run_words(base.runs[min(mine)])
        item["evidence"] = (
            f"the same crash ({fp}) happened on {name} on {row} in its latest run, and in {len(mine)} of {len(ran)}"
        )
    elif mine:
        item["verdict"] = "flaky"
        item["evidence"] = f"the same crash ({fp}) came and went on {name}: in {len(mine)} of {len(ran)} runs of {row}"
    else:
        last = _run_words(base.runs[ran[-1]]) if ran else "?"
        item["evidence"] = f"this crash ({fp}) never happened on {name} on {row}; its last run there: {last}"
    return item
