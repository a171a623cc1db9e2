"""``device-matrix triage RESULTS``: one report over every row, what changed, and the trends;
for a pull request's run, a verdict for each failure against its base branch (#25)."""

from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from device_matrix import config as config_mod
from device_matrix.cli.results import load_records
from device_matrix.config import check_results_dir
from device_matrix.errors import (
    EXIT_OK,
    EXIT_RESULTS,
    EXIT_TESTS_FAILED,
    EnvironmentProblem,
    ResultsError,
    UsageProblem,
)
from device_matrix.links import load_links
from device_matrix.output import Output
from device_matrix.records import testmap
from device_matrix.records.atomic import storable_text, write_json_atomic, write_text_atomic
from device_matrix.records.schema import RunRecord, SourceInfo
from device_matrix.records.source import base_lane, is_pull_request, override, short, unknown
from device_matrix.records.source import lane as lane_of
from device_matrix.redact import Redactor
from device_matrix.report import groups, html, markdown
from device_matrix.report.actions import annotate, workspace_path
from device_matrix.report.history import DEFAULT_PATH, DEFAULT_WINDOW, KEEP_RUNS, History, run_time, set_aside
from device_matrix.report.model import Triage, build
from device_matrix.report.placement import place
from device_matrix.report.skip_meet import meet
from device_matrix.report.verdicts import VERDICTS, WORDS, judge
from device_matrix.skips import DeviceSkip, scan_tree, uncited

DEFAULT_HISTORY = DEFAULT_PATH


def records_source(records: Sequence[RunRecord], out: Output) -> SourceInfo | None:
    """The source the rows recorded; rows that ran different commits are warned about."""
    sources = [(r["row"], src) for r in records if (src := r.get("source"))]
    if not sources:
        return None
    commits = {src["commit"] for _, src in sources}
    if len(commits) > 1:
        listed = ", ".join(f"{row} {short(src['commit'])}" for row, src in sources)
        message = f"the rows ran different commits ({listed}); the report reads {sources[0][0]}'s source"
        out.line(f"warning: {message}")
        out.annotate("warning", message, title="source")
    return sources[0][1]


def wants_verdicts(src: SourceInfo | None) -> bool:
    """A pull request's run, or any run that names a base to compare with."""
    return is_pull_request(src) or bool(src and src["base_ref"])


def run_triage(
    results: Path,
    out_dir: Path,
    history_path: Path | None,
    label: str | None,
    out: Output,
    *,
    window: int = DEFAULT_WINDOW,
    declared: Sequence[DeviceSkip] = (),
    scanned: Sequence[DeviceSkip] = (),
    base: str = "",
    overrides: Mapping[str, Any] | None = None,
    read_only: bool = False,
    unstable: Collection[str] = (),
    project: Path | None = None,
) -> Triage:
    """``base``: the project's folder inside the checkout, for annotations (``workspace_path``).
    ``overrides``: source fields given as flags (commit, branch, pull_request, base,
    base_commit), over the rows' recorded source. ``read_only``: the history is read, never
    written (a pull request reading its base's). ``unstable``: rows declared unstable.
    ``scanned``: every skip the source scan found, for the runtime skips to meet (#32)."""
    # #30: an --out that cannot be a folder is refused before anything is written
    check_results_dir(out_dir, what="triage --out", tip="Pass --out a folder that can be written, or leave it out.")
    records, problems = load_records(results, out)  # each unreadable row said on the terminal too
    if not records and not problems:
        raise ResultsError(
            f"{results}: no run records",
            tip="Run a row first (nox -s cpu), or point at downloaded artifacts.",
        )
    # records come from other hosts (artifacts): redacted again here, value by value, with
    # this host's secrets, before the reports and the history are made of them (#22)
    redactor = Redactor()
    rows = [redactor.data(r) for r in records]
    meet(rows, scanned)  # #32: a runtime skip carries what the source scan found for it
    triage = build(
        rows,
        [(row, redactor.text(problem)) for row, problem in problems],
        redactor.data(load_links(results)),
        declared,
    )
    src = records_source(records, out)
    if overrides and any(v is not None for v in overrides.values()):
        src = override(src or unknown(), cwd=project, **overrides)
    triage["source"] = src
    # #30: the source (a --branch flag, the rows' own) and the declared skips the source scan
    # read are redacted as the records are, before any report or the history is made of them
    triage = redactor.data(triage)
    # a triage where no row could be read is not a run: recording it would read as every
    # test having disappeared
    history: History | None = None
    if history_path is not None and records:
        history = _with_history(
            triage,
            history_path,
            label=label,
            window=window,
            unreadable={r for r, _ in problems},
            out=out,
            read_only=read_only,
            unstable=unstable,
            maps=_test_maps(results, [r["row"] for r in records], redactor, out),
        )
    elif wants_verdicts(src) and records:
        triage["verdicts"] = _judge(triage, None, unstable)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        md = markdown.render(triage)
        write_text_atomic(out_dir / "triage.md", md)
        write_text_atomic(out_dir / "triage.html", html.render(triage))
        # #32: every test of every failure group; the reports show each group's first tests
        write_json_atomic(out_dir / "triage.json", {**triage, "groups": groups.of(triage)}, redactor)
        if history is not None:
            history.commit()  # #30: the run is kept once its reports are written, never before
    finally:
        if history is not None:
            history.close()
    _to_actions(triage, md, out, base)
    return triage


def _judge(triage: Triage, history: History | None, unstable: Collection[str], window: int = DEFAULT_WINDOW) -> Any:
    src = triage["source"]
    lane = base_lane(src)
    base = history.base(lane, window) if history is not None and lane is not None else None
    placements = {c["fingerprint"]: c["placement"]["text"] for c in triage["crashes"] if c["placement"]}
    mine = lane_of(src) if src is not None and is_pull_request(src) else None
    return judge(
        triage,
        base,
        base_ref=src["base_ref"] if src else None,
        base_commit=src["base_commit"] if src else None,
        unstable=unstable,
        placements=placements,
        stored=storable_text,
        missed=history.misses_of(mine) if history is not None and mine is not None else (),
    )


def _place_crashes(triage: Triage, history: History, run_id: int) -> None:
    """Each crash of this run placed by environment, over the history's runs (#25)."""
    if not triage["crashes"]:
        return
    wanted = {c["fingerprint"]: [n for _, n in c["seen"] if not n.startswith("(")] for c in triage["crashes"]}
    observed = history.observations(wanted, include=run_id)
    for c in triage["crashes"]:
        if wanted[c["fingerprint"]]:
            c["placement"] = place(c["fingerprint"], observed.get(c["fingerprint"], []))


def _with_history(
    triage: Triage,
    path: Path,
    *,
    label: str | None,
    window: int,
    unreadable: set[str],
    out: Output,
    read_only: bool = False,
    unstable: Collection[str] = (),
    maps: Sequence[testmap.TestMap] = (),
) -> History:
    """The history with this triage recorded, not yet committed (the caller commits once
    the reports are written, and closes it), and what it says set on ``triage``."""

    def warn(message: str) -> None:
        out.line(f"warning: {message}")
        out.annotate("warning", message, title="history")

    src = triage["source"]
    for last_try in (False, True):
        history = History.open(path, warn, read_only=read_only)
        try:
            triage["changes"] = history.compare(triage, frozenset(unreadable), source=src)
            run_id = history.record(
                triage,
                label or run_time(triage),  # #41: the run's own time, not the triage's
                keep=max(KEEP_RUNS, window),
                source=src,
                commit=False,
                maps=maps,
            )
            if history.kept_before is not None:
                out.line(f"note: this run is in the history already ({history.kept_before.label}): not recorded again")
            triage["history"] = history.view(triage, window)
            triage["backstop"] = history.backstop(triage, window)
            _place_crashes(triage, history, run_id)
            if wants_verdicts(src):
                triage["verdicts"] = _judge(triage, history, unstable, window)
        except sqlite3.OperationalError as exc:
            history.close()
            # locked, read-only, disk full: the file may be fine, so it is never moved
            raise EnvironmentProblem(
                f"{path}: cannot write the history: {exc}",
                tip="Free space or permissions for it, wait for the other triage, or pass --no-history.",
            ) from exc
        except sqlite3.IntegrityError:
            history.close()
            raise  # a constraint this code broke is a bug (exit 70), not damage: the file stays
        except sqlite3.DatabaseError as exc:
            history.close()
            # damage that only shows when a page is read: set aside like an unreadable file
            if last_try or read_only:
                raise ResultsError(f"{path}: history database is damaged: {exc}", tip="Pass --no-history.") from exc
            aside = set_aside(path)
            warn(f"{path}: history database is damaged ({exc}); moved to {aside.name} and started a new history")
        except BaseException:
            history.close()
            raise
        else:
            return history
    raise AssertionError("unreachable: the last try returns or raises")


def _test_maps(results: Path, rows: Sequence[str], redactor: Redactor, out: Output) -> list[testmap.TestMap]:
    """#34: the test map each row's folder holds (``results/<row>/``, or an artifact's one
    level deeper), redacted again as the records are; a map that cannot be read is warned
    about and left out (its row has no map: every test runs), never the triage's end."""
    found: list[testmap.TestMap] = []
    for row in rows:
        candidates = [results / row / testmap.FILE_NAME, *sorted(results.glob(f"*/{row}/{testmap.FILE_NAME}"))]
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            continue
        try:
            m = testmap.from_json(redactor.data(testmap.to_json(testmap.read(path))), str(path))
        except ResultsError as exc:
            out.line(f"warning: {exc.message}")
            continue
        if m.row != row:
            out.line(f"warning: {path}: the test map of row {m.row!r} in the folder of row {row!r}; left out")
            continue
        found.append(m)
    return found


def _to_actions(t: Triage, md: str, out: Output, base: str) -> None:
    for r in t["rows"]:
        with out.group(f"{r['row']}: {r['label']}"):
            out.line(f"{sum(r['counts'].values())} tests: {r['phrase']}")
            for headline in r["headlines"]:
                out.line(headline)
            if r["reason"]:
                out.line(r["reason"])
    annotate(t, out, base=base)
    if t["verdicts"] is not None:
        out.annotate("notice", t["verdicts"]["line"], title="verdicts")
    out.step_summary(md)


def parse_fail_on(text: str) -> frozenset[str]:
    """``--fail-on new,flaky``: verdicts, by id (broken-on-base) or in words (broken on base)."""
    by_words = {w: v for v, w in WORDS.items()}
    out = set()
    for part in text.split(","):
        name = part.strip()
        if not name:
            continue
        verdict = name if name in VERDICTS else by_words.get(name)
        if verdict is None:
            raise UsageProblem(
                f"--fail-on {text!r}: {name!r} is not a verdict",
                tip=f"Name one or more of: {', '.join(VERDICTS)} (comma-separated), e.g. --fail-on new.",
            )
        out.add(verdict)
    if not out:
        raise UsageProblem("--fail-on names no verdict", tip="For example: --fail-on new.")
    return frozenset(out)


def cmd_triage(args: argparse.Namespace, out: Output) -> int:
    cfg = config_mod.load(Path(args.project) if args.project else None)
    results = Path(args.results) if args.results else cfg.results_dir
    out_dir = Path(args.out) if args.out else results / "triage"
    history = None if args.no_history else (Path(args.history) if args.history else cfg.project_root / DEFAULT_HISTORY)
    window = int(getattr(args, "history_runs", DEFAULT_WINDOW))
    # #30: an empty --fail-on is refused as "," is, never a gate silently off
    gate = parse_fail_on(args.fail_on) if args.fail_on is not None else frozenset()
    declared = uncited(cfg.project_root, cfg.suite_folders())
    scanned = scan_tree(cfg.project_root, cfg.suite_folders())
    t = run_triage(
        results,
        out_dir,
        history,
        args.label,
        out,
        window=window,
        declared=declared,
        scanned=scanned,
        base=workspace_path(cfg.project_root),
        overrides={
            "commit": args.commit,
            "branch": args.branch,
            "pull_request": args.pr,
            "base": args.base,
            "base_commit": args.base_commit,
        },
        read_only=args.history_read_only,
        unstable=[name for name, row in cfg.rows.items() if row.unstable],
        project=cfg.project_root,
    )
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
    verdicts = t["verdicts"]
    if verdicts is not None:
        out.line(f"verdicts: {verdicts['line']}")
    if args.pr_comment:
        from device_matrix.cli.pr_comment import comment_on_pull_request

        comment_on_pull_request(t, cfg, out, repository=args.repository)
    if gate:
        if verdicts is None:
            out.line("--fail-on: this run is no pull request's and names no base: no verdicts to gate on")
            return EXIT_OK
        hits = {v: verdicts["counts"].get(v, 0) for v in sorted(gate) if verdicts["counts"].get(v, 0)}
        if hits:
            judged = ", ".join(f"{n} {WORDS[v]}" for v, n in hits.items())
            out.error(
                f"--fail-on {','.join(sorted(gate))}: {judged}",
                tip="See the verdicts in the report (triage.md, the step summary); each says what it rests on.",
            )
            return EXIT_TESTS_FAILED
    return EXIT_OK


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`triage`."""
    from device_matrix.cli.commands import a_file, a_folder, add_source_flags, whole_number

    tr = sub.add_parser("triage", help="one report (md, html, json) over every row's run.json")
    tr.add_argument(
        "results", nargs="?", type=a_folder, help="results folder (default from config), or downloaded artifacts"
    )
    tr.add_argument("--out", type=a_folder, help="where to write the reports (default RESULTS/triage)")
    tr.add_argument("--history", type=a_file, help="run history database (default .device-matrix/history.sqlite)")
    tr.add_argument("--no-history", action="store_true", help="do not compare with or record into the history")
    tr.add_argument("--label", help="name of this run in the history (default: the time)")
    tr.add_argument(
        "--history-runs",
        type=whole_number(1),
        default=DEFAULT_WINDOW,
        help=f"runs of the history the trends cover (default {DEFAULT_WINDOW})",
    )
    tr.add_argument(
        "--history-read-only",
        action="store_true",
        help="read the history, never write it (a pull request reading its base branch's)",
    )
    tr.add_argument(
        "--fail-on",
        metavar="VERDICTS",
        help="exit 1 when a failure of a pull request gets one of these verdicts (comma-separated, e.g. new)",
    )
    tr.add_argument(
        "--pr-comment",
        action="store_true",
        help="post the verdicts as one comment on the pull request, updated in place (GitHub)",
    )
    tr.add_argument("--repository", help="owner/name for --pr-comment (default: tracker.repository, or the run's)")
    add_source_flags(tr)
    tr.set_defaults(func=cmd_triage)
