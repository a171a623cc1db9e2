"""Crashes placed by environment (#25): which facet values separate the runs where a crash
happened from the runs where the same test passed.

The observations are (row, facets, crashed) per run of a row: the runs where a fingerprint
crashed one of its tests, and the runs where those tests passed, on the rows it crashed on
(a test that passes on the cpu row says nothing about the cuda row's accelerator; those rows
are named apart). A facet *separates* when:

* every value it takes in a crash run is known, and each such value has at least
  ``RECUR`` crashes (a value seen crashing once is a coincidence, and a host name, unique
  per runner, would otherwise always "separate");
* some runs on other values exist, and none of them crashed (by construction);
* the crashes falling on those values by chance is unlikely: with C crashes among N runs of
  which n are on those values, the hypergeometric probability that all C fall there,
  ``comb(n, C) / comb(N, C)``, is under ``ALPHA``.

Separating facets are ranked by how pure their values are (crashes per run there), then by
how few values they need; facets that pick the same runs as the best with as few values
are named together ("Tesla T4 / driver 535.104.05"), the others listed as also separating.
Where none separates, the sentence says so.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

from device_matrix.diagnostics.environment import FACET_WORDS, FACETS, facets
from device_matrix.records.schema import RunRecord

RECUR = 2
ALPHA = 0.05
OTHERS_NAMED = 3


@dataclass(frozen=True)
class Observation:
    row: str
    facets: Mapping[str, str]
    crashed: bool


class FacetSplit(TypedDict):
    facet: str
    values: list[str]  # the values the crashes happened on
    crashes: int  # crashes on those values (all of them)
    runs: int  # runs on those values, crashed or passed
    elsewhere: list[list[str | int]]  # [value, runs] of the other values: none of them crashed
    chance: float  # the probability that the crashes fall there if they ignored the facet


class Placement(TypedDict):
    fingerprint: str
    crashes: int
    passes: int  # runs where its tests passed, on the rows it crashed on
    rows: list[str]  # the rows it crashed on
    clean_rows: list[list[str | int]]  # [row, runs]: rows where its tests passed and never crashed
    separating: list[FacetSplit]  # the best split and the facets that pick the same runs; [] if none
    also: list[str]  # other facets that separate, less well
    text: str


def from_records(records: Sequence[RunRecord], nodeids: Mapping[str, Collection[str]]) -> dict[str, list[Observation]]:
    """Per fingerprint, a crash or a pass for each row of this run whose record has its tests."""
    out: dict[str, list[Observation]] = {fp: [] for fp in nodeids}
    for rec in records:
        env = rec.get("environment")
        seen = facets(env if isinstance(env, dict) else {}, image=rec.get("image"))
        crashed = {c["diagnosis"]["fingerprint"] for c in rec["crashes"]}
        outcomes = {t["nodeid"]: t["outcome"] for t in rec["tests"]}
        for fp, ids in nodeids.items():
            if fp in crashed:
                out[fp].append(Observation(rec["row"], seen, True))
            elif any(outcomes.get(n) == "passed" for n in ids):
                out[fp].append(Observation(rec["row"], seen, False))
    return out


def _split(facet: str, obs: Sequence[Observation]) -> tuple[FacetSplit, frozenset[int]] | None:
    crashes: dict[str, int] = {}
    passes: dict[str, int] = {}
    for o in obs:
        value = o.facets.get(facet)
        if value is None:
            if o.crashed:
                return None  # a crash on an unknown value: the facet cannot place it
            continue
        (crashes if o.crashed else passes)[value] = (crashes if o.crashed else passes).get(value, 0) + 1
    if not crashes or any(n < RECUR for n in crashes.values()):
        return None
    inside = set(crashes)
    outside = {v: n for v, n in passes.items() if v not in inside}
    if not outside:
        return None
    c = sum(crashes.values())
    n_in = c + sum(n for v, n in passes.items() if v in inside)
    total = n_in + sum(outside.values())
    chance = math.comb(n_in, c) / math.comb(total, c)
    if chance >= ALPHA:
        return None
    picked = frozenset(i for i, o in enumerate(obs) if o.facets.get(facet) in inside)
    split = FacetSplit(
        facet=facet,
        values=sorted(inside, key=lambda v: (-crashes[v], v)),
        crashes=c,
        runs=n_in,
        elsewhere=[[v, n] for v, n in sorted(outside.items(), key=lambda x: (-x[1], x[0]))],
        chance=chance,
    )
    return split, picked


def _values(split: FacetSplit) -> str:
    values = " or ".join(split["values"])
    return values if split["facet"] in ("accelerator", "host", "image") else f"{FACET_WORDS[split['facet']]} {values}"


def place(fingerprint: str, observations: Sequence[Observation]) -> Placement:
    crash_rows = sorted({o.row for o in observations if o.crashed})
    on_rows = [o for o in observations if o.row in crash_rows]
    clean: dict[str, int] = {}
    for o in observations:
        if o.row not in crash_rows and not o.crashed:
            clean[o.row] = clean.get(o.row, 0) + 1
    c = sum(o.crashed for o in on_rows)
    p = len(on_rows) - c
    out = Placement(
        fingerprint=fingerprint,
        crashes=c,
        passes=p,
        rows=crash_rows,
        clean_rows=[[r, n] for r, n in sorted(clean.items())],
        separating=[],
        also=[],
        text="",
    )
    where = ", ".join(crash_rows)
    rows_note = ""
    if clean:
        rows_note = f"; its tests passed on {', '.join(clean)} ({sum(clean.values())} run(s)) and never crashed there"
    if c < RECUR:
        out["text"] = f"crashed in {c} run(s) of {where}: too few to place by environment{rows_note}"
        return out
    if p == 0:
        out["text"] = (
            f"crashed in all {c} runs of {where} where its tests ran: no passing run there to compare with{rows_note}"
        )
        return out
    found = [s for f in FACETS if (s := _split(f, on_rows)) is not None]
    if not found:
        out["text"] = (
            f"nothing separates the {c} crashes from the {p} passing runs on {where}: "
            f"every accelerator, driver, version, image and host seen crashing also passed, "
            f"or crashed only once{rows_note}"
        )
        return out
    found.sort(key=lambda sp: (-sp[0]["crashes"] / sp[0]["runs"], len(sp[0]["values"]), sp[0]["chance"]))
    best, picked = found[0]
    # the facets that pick the same runs with as few values: one fact under several names
    # (a T4's model, its driver); a facet that needs more values for them (three T4 hosts) is "also"
    same = [s for s, runs in found if runs == picked and len(s["values"]) == len(best["values"])]
    out["separating"] = same
    out["also"] = [s["facet"] for s in (sp for sp, _ in found) if s not in same]
    named = " / ".join(_values(s) for s in same)
    others = best["elsewhere"]
    listed = ", ".join(f"{n} on {v}" for v, n in others[:OTHERS_NAMED])
    more = f" and {len(others) - OTHERS_NAMED} more" if len(others) > OTHERS_NAMED else ""
    outside = sum(int(n) for _, n in others)
    out["text"] = (
        f"{c} of {c} crashes on {named} ({best['crashes']} of {best['runs']} runs there crashed); "
        f"0 of {outside} runs elsewhere crashed ({listed}{more}); "
        f"by chance alone: {_chance(best['chance'])}{rows_note}"
    )
    return out


def _chance(p: float) -> str:
    return f"p = {p:.2g}" if p >= 1e-4 else "p < 0.0001"
