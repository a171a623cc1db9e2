"""``device-matrix run --rerun-disabled [--times N]`` (#33): the re-enable check.

Only the tracker's disabled tests of each row, each run ``N`` times in the ordinary
runner (crashes, timeouts, isolation as in any run), with the tracker's disables not
applied. The runs go to ``.device-matrix/reruns/`` (not the results folder: the history
and the verdicts never count these passes); their evidence, per disable issue (runs,
passes, failures with fingerprints), to ``<results>/disabled-reruns.json``, which
``issues sync`` comments on each issue, closing those that passed every run.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from device_matrix.config import Config, make_state_dir
from device_matrix.errors import EXIT_OK, UsageProblem
from device_matrix.issues import disables
from device_matrix.output import Output, one_line
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.outcomes import QUIET_OUTCOMES
from device_matrix.records.schema import RunRecord, TestRecord
from device_matrix.run.context import RunOptions
from device_matrix.run.plan import RowPlan

# docs/verdicts.md: a flake at 5% fails at least once within n runs with this confidence;
# the default n, defaults.toml's reenable_times (45), gives 1 - 0.95**45 = 0.90: 45 passes in a
# row say a test is not a 5% flake, 9 times in 10.
FLAKE_RATE = 0.05
EVIDENCE_FILE = "disabled-reruns.json"


def _failure(record: RunRecord, test: TestRecord) -> dict[str, Any]:
    crash = next((c for c in record["crashes"] if c["nodeid"] == test["nodeid"]), None)
    lines = [x.strip() for x in str(test.get("message") or "").splitlines() if x.strip()]
    # pytest's error lines ("E   AssertionError: ...") say what failed; else the last line
    said = next((x[1:].strip() for x in lines if x.startswith("E ")), lines[-1] if lines else "")
    return {
        "nodeid": test["nodeid"],
        "outcome": test["outcome"],
        "fingerprint": crash["diagnosis"]["fingerprint"] if crash else None,
        "message": said[:200],
    }


def cmd_rerun_disabled(
    args: argparse.Namespace,
    cfg: Config,
    options: RunOptions,
    *,
    rows: Sequence[str],
    out: Output,
    force: Literal["local", "container"] | None,
) -> int:
    """``run --rerun-disabled [--times N]``: its options checked, then :func:`rerun_disabled`."""
    from device_matrix.cli.shards import run_whole, spread_requested
    from device_matrix.run.plan import plan_row

    if not args.rerun_disabled:
        raise UsageProblem("--times is for --rerun-disabled", tip="Add --rerun-disabled, or leave --times out.")
    if args.test or args.resume or spread_requested(args):
        raise UsageProblem(
            "--rerun-disabled runs each row's disabled tests, on this host, from the start",
            tip="Leave out --test, --resume and the spreading options (--shard, --shards, --executor).",
        )
    return rerun_disabled(
        cfg,
        rows,
        options,
        explain=args.times is None,
        out=out,
        plan_row=lambda c, name: plan_row(c, c.row(name), force=force),
        run_whole=run_whole,
    )


def rerun_disabled(
    cfg: Config,
    rows: Sequence[str],
    options: RunOptions,
    *,
    explain: bool,
    out: Output,
    plan_row: Callable[[Config, str], RowPlan],
    run_whole: Callable[[Config, RowPlan, RunOptions, Output], RunRecord],
) -> int:
    n = cfg.reenable_times  # --times N, else the configuration's reenable_times
    if explain:
        sure = 1 - (1 - FLAKE_RATE) ** n
        out.line(
            f"rerunning each disabled test {n} times: a {FLAKE_RATE:.0%} flake fails within {n} runs"
            f" with {sure:.0%} confidence"
        )
    tracked = disables.tracker_config(cfg, os.environ)  # the workflow's tracker input, as the row jobs read it
    read = disables.read_disables(
        lambda: disables.open_tracker(tracked, tracked.results_dir),
        cfg.state_dir,
        ledger=disables.ledger_path(tracked),
        seed=disables.seed_path(tracked),
    )
    if not read.fresh:
        out.line(one_line(f"disables: {read.note}"))
    rerun_id = uuid.uuid4().hex[:12]
    make_state_dir(cfg.state_dir)  # #42: the reruns' folder is in it, never to be committed
    reruns = dataclasses.replace(cfg, results_dir=cfg.state_dir / "reruns")
    # the tests rerun here are not skipped by their own disables
    disables.hold(reruns, [])
    evidence: dict[str, dict[str, Any]] = {}
    for name in rows:
        plan = plan_row(reruns, name)
        row = plan.row
        scripts = [s.file for s in row.scripts]
        wanted = {d: d.targets(scripts) for d in read.disables if d.applies(row.name, row.pjrt_device)}
        targets = sorted({t for ts in wanted.values() for t in ts})
        if not targets:
            out.line(f"{name}: no disabled tests")
            continue
        if plan.mode == "unavailable":
            out.line(f"{name}: unavailable ({plan.reason}): its disabled tests are not rerun")
            continue
        for d in wanted:
            evidence.setdefault(
                f"{d.issue}|{name}",
                {"issue": d.issue, "test": d.test, "row": name, "runs": 0, "passes": 0, "failures": []},
            )
        for i in range(1, n + 1):
            out.line(f"{name}: rerun {i}/{n} of {len(targets)} disabled test(s)")
            record = run_whole(reruns, plan, dataclasses.replace(options, tests=tuple(targets)), out)
            for d in wanted:
                ran = [t for t in record["tests"] if d.matches(t["nodeid"], scripts)]
                if not ran or all(t["outcome"] == "skipped" for t in ran):
                    continue  # not run this time (skipped by the project's own list or marker)
                entry = evidence[f"{d.issue}|{name}"]
                entry["runs"] += 1
                bad = [t for t in ran if t["outcome"] not in QUIET_OUTCOMES]
                if bad:
                    entry["failures"].append({"run": i, "tests": [_failure(record, t) for t in bad]})
                else:
                    entry["passes"] += 1
    data = {
        "rerun": rerun_id,
        "times": n,
        "at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "disables": list(evidence.values()),
    }
    cfg.results_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(cfg.results_dir / EVIDENCE_FILE, data)
    for e in evidence.values():
        out.line(one_line(f"{e['issue']} ({e['test']}) on {e['row']}: {e['passes']} of {e['runs']} run(s) passed"))
    out.line(f"evidence in {cfg.results_dir / EVIDENCE_FILE}: `device-matrix issues sync` reports it on each issue")
    return EXIT_OK


def read_evidence(results: Path) -> dict[str, Any] | None:
    """The re-enable checks' evidence in ``results``: its own file, and those of other rows'
    jobs downloaded beside it (``results/reruns-ROW/``), as one: an issue disabled on two rows
    is closed only when it passed on both."""
    import json

    found: list[dict[str, Any]] = []
    for path in [results / EVIDENCE_FILE, *sorted(results.glob(f"*/{EVIDENCE_FILE}"))]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("disables"), list):
            found.append(data)
    if not found:
        return None
    return {
        "rerun": "+".join(sorted(str(d.get("rerun", "")) for d in found)),
        "times": max(int(d.get("times") or 0) for d in found),
        "disables": [e for d in found for e in d["disables"]],
    }
