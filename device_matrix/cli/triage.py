"""``device-matrix triage RESULTS``: one report over every row, and what changed."""

from __future__ import annotations

import argparse
from pathlib import Path

from device_matrix import config as config_mod
from device_matrix.cli.issues import load_records
from device_matrix.errors import EXIT_OK, ResultsError
from device_matrix.issues.sync import load_links
from device_matrix.output import Output
from device_matrix.records.atomic import write_json_atomic, write_text_atomic
from device_matrix.report import html, markdown
from device_matrix.report.history import History
from device_matrix.report.model import Triage, build

DEFAULT_HISTORY = Path(".device-matrix") / "history.sqlite"


def run_triage(results: Path, out_dir: Path, history_path: Path | None, label: str | None, out: Output) -> Triage:
    records, problems = load_records(results)
    if not records and not problems:
        raise ResultsError(
            f"{results}: no run records",
            tip="Run a row first (nox -s cpu), or point at downloaded artifacts.",
        )
    triage = build(records, problems, load_links(results))
    if history_path is not None:
        history = History(history_path)
        try:
            triage["changes"] = history.compare(triage)
            history.record(triage, label or triage["generated_at"])
        finally:
            history.close()
    out_dir.mkdir(parents=True, exist_ok=True)
    md = markdown.render(triage)
    write_text_atomic(out_dir / "triage.md", md)
    write_text_atomic(out_dir / "triage.html", html.render(triage))
    write_json_atomic(out_dir / "triage.json", triage)
    _to_actions(triage, md, out)
    return triage


def _to_actions(t: Triage, md: str, out: Output) -> None:
    for r in t["rows"]:
        with out.group(f"{r['row']}: {r['status']}"):
            s = r["summary"]
            out.line(
                f"{s.get('total', 0)} tests: {s.get('passed', 0)} passed, {s.get('failed', 0)} failed, "
                f"{s.get('crashed', 0)} crashed, {s.get('skipped', 0)} skipped"
            )
            if r["reason"]:
                out.line(r["reason"])
    for c in t["crashes"]:
        out.annotate(
            "error",
            f"{c['signal'] or c['kind']} in {', '.join(c['nodeids'][:3])} on {', '.join(c['rows'])} "
            f"({c['classification']}); fingerprint {c['fingerprint']}; repro: {c['repro'].splitlines()[0]}",
            title=f"crash: {c['signal'] or c['kind']}",
        )
    for f in t["failures"]:
        path = f["nodeid"].split("::", 1)[0]
        out.annotate(
            "error",
            f"{f['outcome']} on {f['row']}: {f['message'] or ''}",
            title=f["nodeid"][-200:],
            file=path,
        )
    for p in t["problems"]:
        out.annotate("warning", p["problem"], title=f"row {p['row']}")
    out.step_summary(md)


def cmd_triage(args: argparse.Namespace, out: Output) -> int:
    cfg = config_mod.load(Path(args.project) if args.project else None)
    results = Path(args.results) if args.results else cfg.results_dir
    out_dir = Path(args.out) if args.out else results / "triage"
    history = None if args.no_history else (Path(args.history) if args.history else cfg.project_root / DEFAULT_HISTORY)
    t = run_triage(results, out_dir, history, args.label, out)
    crashes = len(t["crashes"])
    out.line(
        f"triage: {len(t['rows'])} row(s), {len(t['tests'])} tests, {len(t['failures'])} failure(s), "
        f"{crashes} crash(es), {len(t['skips'])} device skip(s); {len(t['problems'])} unreadable row(s)"
    )
    for name in ("triage.md", "triage.html", "triage.json"):
        out.line(f"  {out_dir / name}")
    return EXIT_OK
