"""The split of a row into shards, and its plan: decided once, read by every shard (#23).

The row's tests are dealt out longest first, each to the least-loaded shard, by the
durations in earlier ``run.json`` files (ties: fewer tests, then the lower shard; a test
without a recorded duration weighs the mean of the known ones, so with none the split is
by count). Every tie is broken by the nodeid, so the same collection and durations give
the same split, and the same plan id, on every machine.

The first shard to start writes the plan (``results/<row>/shards/plan.json``: the
collection, the durations it used, the parts, the gangs and which shard keeps them, the
id); every later shard of the row reads it, on this host or on another given the file,
so the durations a finished shard recorded never move a test into another shard. A shard
whose collection is not the plan's is refused. :meth:`Split.write` is the one place a plan
is written, :meth:`Split.fit` the one place a shard's own collection is held against
it, and :meth:`Split.part_of` the one place a shard's selection is taken from it.

A plan names each test as a record does (#22): a known secret in a nodeid is its
placeholder (``[redacted:hex]``, one per value), so plan.json is written as it is made,
its id is the id of what is on disk, and the durations recorded under those names weigh
them. A shard finds its own raw collection in the plan by those names
(:func:`device_matrix.wanted.selected`), and selects its part by its raw nodeids.
"""

from __future__ import annotations

import heapq
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from device_matrix.config import Config
from device_matrix.errors import ResultsError, UsageProblem
from device_matrix.records.atomic import create_json_atomic, write_json_atomic
from device_matrix.records.merge import SHARD_FILE, SHARDS_DIR
from device_matrix.records.schema import (
    SHARD_SCHEMA,
    GangSlot,
    LostNode,
    PlanFile,
    RunRecord,
    SpreadRef,
    load_plan,
    load_run,
    plan_id,
)
from device_matrix.redact import Redactor
from device_matrix.wanted import selected


@dataclass(frozen=True)
class Shard:
    index: int  # 1..count
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``K/N`` with 1 <= K <= N, as ``--shard`` takes it."""
    match = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text)
    if match is None or not 1 <= int(match[1]) <= int(match[2]):
        raise UsageProblem(
            f"--shard {text!r}: expected K/N with 1 <= K <= N",
            tip="For example --shard 2/4 runs the second of four shards.",
        )
    return Shard(int(match[1]), int(match[2]))


# --- the split --------------------------------------------------------------------------


def recorded_durations(paths: Iterable[Path], row: str) -> dict[str, float]:
    """Each test's duration in the newest readable record of ``row`` among ``paths``.

    A path is a ``run.json``, a row folder (its ``run.json`` and its shards') or a
    results folder (its folder ``row``). Tests that never ran (``not_run``) say nothing
    about how long they take.
    """
    found: list[tuple[str, str, RunRecord]] = []
    for given in paths:
        path = given / row if (given / row).is_dir() else given
        files = [path] if path.is_file() else [path / "run.json", *sorted(path.glob(f"{SHARDS_DIR}/*/run.json"))]
        for file in files:
            try:
                record = load_run(file)
            except ResultsError:
                continue
            found.append((record.get("finished_at") or "", str(file), record))
    durations: dict[str, float] = {}
    for _, _, record in sorted(found, key=lambda f: (f[0], f[1])):  # newer records win
        if record["row"] != row:
            continue
        for test in record["tests"]:
            if test["outcome"] != "not_run":
                durations[test["nodeid"]] = max(0.0, float(test["duration"]))
    return durations


def split(nodeids: Sequence[str], durations: Mapping[str, float], count: int) -> list[list[str]]:
    """``count`` parts, each in the collection order of ``nodeids``."""
    if count < 1:
        raise ValueError(f"count must be >= 1, not {count}")
    tests = list(dict.fromkeys(nodeids))
    weights = estimated(tests, durations)
    heap = [(0.0, 0, k) for k in range(count)]  # (load, tests, shard): a total order
    owner: dict[str, int] = {}
    for nodeid in sorted(tests, key=lambda n: (-weights[n], n)):
        load, size, k = heapq.heappop(heap)
        owner[nodeid] = k
        heapq.heappush(heap, (load + weights[nodeid], size + 1, k))
    parts: list[list[str]] = [[] for _ in range(count)]
    for nodeid in tests:
        parts[owner[nodeid]].append(nodeid)
    return parts


def estimated(tests: Sequence[str], durations: Mapping[str, float]) -> dict[str, float]:
    """Each test's weight: its recorded duration, else the mean of the recorded ones."""
    known = [durations[n] for n in tests if n in durations]
    mean = sum(known) / len(known) if known else 1.0
    return {n: durations.get(n, mean) for n in tests}


def balance(parts: Sequence[Sequence[str]], durations: Mapping[str, float]) -> float:
    """Longest estimated shard / mean shard (1.0 is perfect)."""
    weights = estimated([n for part in parts for n in part], durations)
    loads = [sum(weights[n] for n in part) for part in parts]
    mean = sum(loads) / len(loads) if loads else 0.0
    return max(loads) / mean if mean else 1.0


def check_count(count: int, tests: Sequence[str] | None, *, flag: str) -> None:
    """More shards than tests is a wrong command line, refused before anything is split.

    ``tests`` None (the row could not be collected): each shard records why, as a whole run would.
    """
    if tests is not None and count > len(tests):
        raise UsageProblem(
            f"{flag}: {count} shards but the row has {len(tests)} tests",
            tip=f"Use at most {max(len(tests), 1)} shards (a shard with no test would only say so).",
        )


# --- the plan -----------------------------------------------------------------------------


def plan_path(cfg: Config, row: str) -> Path:
    return cfg.results_dir / row / SHARDS_DIR / "plan.json"


def shard_folder(cfg: Config, row: str, index: int) -> Path:
    return cfg.results_dir / row / SHARDS_DIR / str(index)


@dataclass(frozen=True)
class Split:
    """The row's split as its plan holds it; every question about it is asked here (#31).

    ``plan`` is what ``plan.json`` holds. A shard's part (:meth:`part_of`), the gangs it
    keeps (:meth:`gangs_of`), whether its own collection is the split's (:meth:`fit`), the
    claim of the first shard to split the row (:meth:`claim`) and the files a split is
    written to (:meth:`write`, :meth:`write_shard_file`) are the one place each is decided.
    """

    plan: PlanFile

    @classmethod
    def make(
        cls,
        row: str,
        count: int,
        tests: Sequence[str] | None,
        durations: Mapping[str, float],
        *,
        gangs: Sequence[str] = (),
        reason: str | None = None,
        redactor: Redactor | None = None,
    ) -> Split:
        """The split of ``tests`` (as collected) into ``count`` parts; each gang kept by shard 1.

        Each test is named as a record names it (an identifier, redacted by value: #22).
        """
        redactor = redactor or Redactor()
        parts_idx: list[list[int]] | None = None
        estimates: list[float] = []
        if tests is not None:
            tests = list(dict.fromkeys(redactor.ident(t) for t in tests))
            position = {n: i for i, n in enumerate(tests)}
            parts = split(tests, durations, count)
            parts_idx = [[position[n] for n in part] for part in parts]
            weights = estimated(list(tests), durations)
            estimates = [round(sum(weights[n] for n in part), 3) for part in parts]
        slots = [GangSlot(name=name, shard=1) for name in gangs]
        listed = None if tests is None else list(tests)
        return cls(
            PlanFile(
                schema=SHARD_SCHEMA,
                row=row,
                of=count,
                tests=listed,
                parts=parts_idx,
                durations_known=sum(1 for n in tests or () if n in durations),
                estimated_seconds=estimates,
                reason=redactor.text(reason) if reason else None,
                plan=plan_id(row, count, listed, parts_idx, slots),
                durations=[durations.get(n) for n in tests or ()],
                gangs=slots,
            )
        )

    @classmethod
    def read(cls, path: Path, shard: Shard) -> Split | None:
        """The split in ``path`` (None: there is none yet), refused when it is not of ``shard``'s count."""
        if not path.exists():
            return None
        found = cls(load_plan(path))
        if found.of != shard.count:
            raise UsageProblem(
                f"--shard {shard}: the split in {path} has {found.of} shards",
                tip=f"Run --shard K/{found.of}, or remove {path} to split the row again.",
            )
        return found

    @property
    def id(self) -> str:
        return self.plan["plan"]

    @property
    def of(self) -> int:
        return self.plan["of"]

    def ref(self, index: int) -> SpreadRef:
        """What the record of shard ``index`` says of its place in this split."""
        return SpreadRef(plan=self.id, shard=index, of=self.of)

    def write(self, path: Path, redactor: Redactor | None = None) -> None:
        """The one place a plan reaches the disk (plan.json, and each shard's shard.json):
        redacted by value (#22); a plan :meth:`make` made is written as it is."""
        write_json_atomic(path, self.plan, redactor)

    def claim(self, path: Path) -> bool:
        """Write this as the row's split unless another shard wrote one first (whether it did).

        Shards of a row started at once in one results folder each find no plan and split the
        row; the first to write decides, and the others read its split (#23).
        """
        return create_json_atomic(path, self.plan)

    def write_shard_file(
        self, folder: Path, index: int, *, node: str | None = None, lost: Sequence[LostNode] = ()
    ) -> None:
        """``shard.json``: the plan as shard ``index`` read it, and where it ran."""
        part = PlanFile(**{**self.plan, "shard": index, "host": socket.gethostname(), "node": node, "lost": list(lost)})
        Split(part).write(folder / SHARD_FILE)

    def part_of(
        self, index: int, collected: Sequence[str] | None = None, redactor: Redactor | None = None
    ) -> list[str] | None:
        """The nodeids of shard ``index`` (1-based); None when the row could not be collected.

        As the plan names them; with ``collected`` (the shard's own collection, which
        :meth:`fit` held against the plan), the raw nodeids they name, in the plan's
        order: what the shard's runner selects.
        """
        plan = self.plan
        if plan["tests"] is None or plan["parts"] is None:
            return None
        tests = plan["tests"]
        named = [tests[i] for i in plan["parts"][index - 1]]
        if collected is None:
            return named
        found = selected(collected, named, redactor, read=True)
        return sorted(found, key=found.__getitem__)

    def fit(self, tests: Sequence[str] | None, where: Path, flag: str, redactor: Redactor | None = None) -> None:
        """A shard's own collection (raw nodeids) is the plan's, or the shard is refused (the
        split is decided once). Each collected test is found by the name the plan gives it."""
        planned = self.plan["tests"]
        if tests is None or planned is None:
            return  # a collection that failed: the shard's own run records why
        redactor = redactor or Redactor()
        found = selected(tests, planned, redactor, read=True)
        extras = sorted({redactor.ident(t) for t in tests if t not in found})
        named = set(found.values())
        absent = sorted(n for i, n in enumerate(planned) if i not in named)
        if not extras and not absent:
            return
        extra, missing, example = len(extras), len(absent), (extras or absent)[0]
        raise UsageProblem(
            f"{flag}: this shard's collection differs from the split in {where} ({extra} test(s) not in it, "
            f"{missing} of it not collected here, e.g. {example})",
            tip="Run every shard of a split on the same code with the same selection; to split the row again, "
            f"remove {where} (or run it with --shards N).",
        )

    def gangs_of(self, index: int) -> list[str]:
        """The gangs whose record the split gave shard ``index`` to keep."""
        return [g["name"] for g in self.plan.get("gangs", []) if g["shard"] == index]

    def gang_names(self) -> set[str]:
        """Every gang the split placed (a resume runs no other)."""
        return {g["name"] for g in self.plan.get("gangs", [])}


__all__ = [
    "Shard",
    "Split",
    "balance",
    "check_count",
    "estimated",
    "parse_shard",
    "plan_path",
    "recorded_durations",
    "shard_folder",
    "split",
]
