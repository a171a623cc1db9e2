"""``device-matrix triage RESULTS``: one report over every row, what changed, and the trends."""

from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from device_matrix import config as config_mod
from device_matrix.cli.issues import load_records
from device_matrix.errors import EXIT_OK, EXIT_RESULTS, EnvironmentProblem, ResultsError
from device_matrix.issues.sync import load_links
from device_matrix.output import Output
from device_matrix.records.atomic import write_json_atomic, write_text_atomic
from device_matrix.redact import Redactor
from device_matrix.report import html, markdown
from device_matrix.report.history import DEFAULT_WINDOW, KEEP_RUNS, History, set_aside
from device_matrix.report.model import Triage, build
from device_matrix.skips import DeviceSkip, uncited

DEFAULT_HISTORY = Path(".device-matrix") / "history.sqlite"


def run_triage(
    results: Path,
    out_dir: Path,
    history_path: Path | None,
    label: str | None,
    out: Output,
    *,
    window: int = DEFAULT_WINDOW,
    declared: Sequence[DeviceSkip] = (),
) -> Triage:
    records, problems = load_records(results)
    if not records and not problems:
        raise ResultsError(
            f"{results}: no run records",
            tip="Run a row first (nox -s cpu), or point at downloaded artifacts.",
        )
    # records come from other hosts (artifacts): redacted again here, value by value, with
    # this host's secrets, before the reports and the history are made of them (#22)
    redactor = Redactor()
    triage = build(
        [redactor.data(r) for r in records],
        [(row, redactor.text(problem)) for row, problem in problems],
        redactor.data(load_links(results)),
        declared,
    )
    # a triage where no row could be read is not a run: recording it would read as every
    # test having disappeared
    if history_path is not None and records:
        _with_history(triage, history_path, label=label, window=window, unreadable={r for r, _ in problems}, out=out)
    out_dir.mkdir(parents=True, exist_ok=True)
    md = markdown.render(triage)
    write_text_atomic(out_dir / "triage.md", md)
    write_text_atomic(out_dir / "triage.html", html.render(triage))
    write_json_atomic(out_dir / "triage.json", triage, redactor)
    _to_actions(triage, md, out)
    return triage


def _with_history(
    triage: Triage, path: Path, *, label: str | None, window: int, unreadable: set[str], out: Output
) -> None:
    def warn(message: str) -> None:
        out.line(f"warning: {message}")
        out.annotate("warning", message, title="history")

    for last_try in (False, True):
        history = History.open(path, warn)
        try:
            triage["changes"] = history.compare(triage, frozenset(unreadable))
            history.record(triage, label or triage["generated_at"], keep=max(KEEP_RUNS, window))
            triage["history"] = history.view(triage, window)
        except sqlite3.OperationalError as exc:
            # locked, read-only, disk full: the file may be fine, so it is never moved
            raise EnvironmentProblem(
                f"{path}: cannot write the history: {exc}",
                tip="Free space or permissions for it, wait for the other triage, or pass --no-history.",
            ) from exc
        except sqlite3.DatabaseError as exc:
            # damage that only shows when a page is read: set aside like an unreadable file
            if last_try:
                raise ResultsError(f"{path}: history database is damaged: {exc}", tip="Pass --no-history.") from exc
            history.close()
            aside = set_aside(path)
            warn(f"{path}: history database is damaged ({exc}); moved to {aside.name} and started a new history")
        else:
            return
        finally:
            history.close()


def _to_actions(t: Triage, md: str, out: Output) -> None:
    for r in t["rows"]:
        with out.group(f"{r['row']}: {r['label']}"):
            out.line(f"{sum(r['counts'].values())} tests: {r['phrase']}")
            for headline in r["headlines"]:
                out.line(headline)
            if r["reason"]:
                out.line(r["reason"])
    for c in t["crashes"]:
        out.annotate(
            "error",
            f"{c['headline']} on {', '.join(c['rows'])}; tests {', '.join(c['nodeids'][:3])}; "
            f"fingerprint {c['fingerprint']}; repro: {c['repro'].splitlines()[0]}",
            title=f"crash: {c['label']}",
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
    window = int(getattr(args, "history_runs", DEFAULT_WINDOW))
    declared = uncited(cfg.project_root, cfg.suite_folders())
    t = run_triage(results, out_dir, history, args.label, out, window=window, declared=declared)
    crashes = len(t["crashes"])
    out.line(
        f"triage: {len(t['rows'])} row(s), {len(t['tests'])} tests, {len(t['failures'])} failure(s), "
        f"{crashes} crash(es), {len(t['skips'])} device skip(s); {len(t['problems'])} unreadable row(s)"
    )
    for name in ("triage.md", "triage.html", "triage.json"):
        out.line(f"  {out_dir / name}")
    if not t["rows"]:
        out.error(
            f"{results}: no row's run.json could be read ({len(t['problems'])} unreadable)",
            tip="See the problems listed above and in the report; rerun the rows or download their artifacts again.",
        )
        return EXIT_RESULTS
    return EXIT_OK
