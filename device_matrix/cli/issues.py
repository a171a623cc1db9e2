"""``device-matrix issues sync``: link or file an issue for every skip, crash and failure
group; ``issues list`` and ``issues show``: the embedded ledger's issues, read."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from device_matrix import config as config_mod
from device_matrix.cli.commands import a_file, a_folder
from device_matrix.cli.results import crash_placements, load_records
from device_matrix.config import REPOSITORY_RE
from device_matrix.errors import EXIT_OK, ConfigError, ResultsError, UsageProblem
from device_matrix.issues import open_tracker
from device_matrix.issues.base import Tracker
from device_matrix.issues.ledger import Kept, read_issues
from device_matrix.issues.sync import sync
from device_matrix.output import Output, one_line
from device_matrix.report import groups
from device_matrix.report.history import DEFAULT_PATH
from device_matrix.skips import uncited


def cmd_issues_sync(args: argparse.Namespace, out: Output) -> int:
    cfg = config_mod.load(Path(args.project) if args.project else None)
    results = Path(args.results) if args.results else cfg.results_dir
    records, problems = load_records(results, out)
    if problems and not records:
        raise ResultsError(
            f"{results}: no readable run.json ({len(problems)} unreadable: {problems[0][1]})",
            tip="Rerun the rows, or point at the folder the row jobs uploaded.",
        )
    if args.repository:
        import dataclasses

        if not REPOSITORY_RE.fullmatch(args.repository):
            raise ConfigError(
                f"--repository {args.repository!r} is not owner/name", tip="Write e.g. --repository acme/xla."
            )
        cfg = dataclasses.replace(cfg, tracker=dataclasses.replace(cfg.tracker, repository=args.repository))
    kind = args.tracker or cfg.tracker.kind
    apply = args.apply if args.apply is not None else kind == "ledger"
    tracker = open_tracker(cfg, results, kind=kind, note=out.line)
    history = None if args.no_history else (Path(args.history) if args.history else cfg.project_root / DEFAULT_PATH)
    report = sync(
        records,
        tracker,
        apply=apply,
        labels=cfg.tracker.labels,
        results_dir=results,
        on_recurrence=cfg.tracker.on_recurrence,
        declared=uncited(cfg.project_root, cfg.suite_folders()),
        placements=crash_placements(records, history, out),
        # #32: failure groups keyed as the triage groups them
        signature=groups.test_signature,
        file_failures=cfg.tracker.file_failures,
        max_failure_issues=cfg.tracker.max_failure_issues,
    )
    for line in report.lines():
        out.line(one_line(line))  # each a line of ours around titles and names the tracker gave (#42)
    # #33: the DISABLED issues not applied are answered; the re-enable check's evidence, on each
    from device_matrix.cli.disabled import read_evidence
    from device_matrix.issues.disables import answer_all, answer_unmatched, report_reruns, rowless

    if apply:
        read = answer_all(cfg, tracker)
        if read.refused or read.unreadable:
            out.line(f"disables: {len(read.refused) + len(read.unreadable)} DISABLED issue(s) not applied, answered")
        # #42: the disables that named no test of a row, or no row (a row job's token could not answer them)
        unmatched = [e for r in records if "disables" in r for e in r["disables"].get("unmatched", [])]
        unmatched += rowless(cfg, read.disables)
        if unmatched and answer_unmatched(lambda: tracker, unmatched):
            out.line("disables: a DISABLED issue that matches no test could not be answered: asked again next sync")

    evidence = read_evidence(results)
    if evidence is not None:
        out.line(f"re-enable check ({evidence.get('times')} run(s) of each disabled test):")
        for line in report_reruns(tracker, evidence, apply=apply):
            out.line(one_line(line))
    if not apply and (report.would_file or evidence is not None):
        out.line("dry run: pass --apply to file them")
    return EXIT_OK


def _ledger_issues(args: argparse.Namespace, out: Output) -> tuple[list[Kept], Path, Path, Path]:
    """The ledger's issues, the seed and ledger files, and the project root they are shown from.
    The ledger is the project's (#42): one in the results folder from before is moved to it."""
    from device_matrix.issues.home import ledger_file

    cfg = config_mod.load(Path(args.project) if args.project else None)
    seed = cfg.project_root / cfg.tracker.ledger_seed
    ledger = ledger_file(cfg, results=Path(args.results) if args.results else None, note=out.line)
    return read_issues(seed, ledger), seed, ledger, cfg.project_root


def _shown(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def cmd_issues_list(args: argparse.Namespace, out: Output) -> int:
    kept, seed, ledger, root = _ledger_issues(args, out)
    where = {True: _shown(seed, root), False: _shown(ledger, root)}
    if args.json:
        rows = [
            {
                "issue": k.issue.key,
                "state": k.issue.state,
                "title": k.issue.title,
                "labels": k.issue.labels,
                "fingerprint": k.issue.fingerprint,
                "kept_in": where[k.seeded],
                "comments": len(k.comments),
            }
            for k in kept
        ]
        out.line(json.dumps(rows, indent=2))
        return EXIT_OK
    for k in kept:
        notes = f", {len(k.comments)} comment(s)" if k.comments else ""
        out.line(f"{k.issue.key}  {k.issue.state:<6}  {one_line(k.issue.title)}  [{where[k.seeded]}{notes}]")
    if not kept:
        out.line(f"no issues: none in {where[True]}, none filed in {where[False]}")
    if any(not k.seeded for k in kept):
        out.line(
            f"TIP   Issues filed in {where[False]} are this machine's: a clone or a CI job has only "
            f"{where[True]}. Copy an issue a skip cites there as an [[issue]] (id, title, state)."
        )
    return EXIT_OK


def cmd_issues_show(args: argparse.Namespace, out: Output) -> int:
    ref = args.issue if args.issue.startswith("ledger:") else f"ledger:{args.issue}"
    kept, seed, ledger, root = _ledger_issues(args, out)
    found = [k for k in kept if k.issue.key == ref]
    if not found:
        raise UsageProblem(
            f"{ref} is not in the ledger ({_shown(seed, root)}, {_shown(ledger, root)})",
            tip="`device-matrix issues list` shows the ledger's issues.",
        )
    (k,) = found
    out.line(f"{k.issue.key}: {one_line(k.issue.title)}")
    out.line(f"state: {k.issue.state}")
    if k.issue.labels:
        out.line(f"labels: {one_line(', '.join(k.issue.labels))}")
    out.line(f"kept in: {_shown(seed, root) if k.seeded else _shown(ledger, root)}")
    out.line("")
    for line in k.issue.body.splitlines():
        out.line(line)
    for i, comment in enumerate(k.comments, 1):
        out.line("")
        out.line(f"--- comment {i}")
        for line in comment.splitlines():
            out.line(line)
    return EXIT_OK


def _disable_tracker(args: argparse.Namespace, out: Output) -> tuple[config_mod.Config, Tracker]:
    cfg = config_mod.load(Path(args.project) if args.project else None)
    results = Path(args.results) if args.results else cfg.results_dir
    if args.repository:
        import dataclasses

        if not REPOSITORY_RE.fullmatch(args.repository):
            raise ConfigError(
                f"--repository {args.repository!r} is not owner/name", tip="Write e.g. --repository acme/xla."
            )
        cfg = dataclasses.replace(cfg, tracker=dataclasses.replace(cfg.tracker, repository=args.repository))
    return cfg, open_tracker(cfg, results, kind=args.tracker or cfg.tracker.kind, note=out.line)


def cmd_issues_disable(args: argparse.Namespace, out: Output) -> int:
    """#33: file ``DISABLED TEST`` with its devices: the next run of those rows skips it."""
    import datetime as dt

    from device_matrix.issues.disables import known_devices, open_disable_issues
    from device_matrix.skips.tracker import Disable, body_for, parse, title_for

    today = dt.date.today()
    title, body = title_for(args.test), body_for(args.device or [], args.reason or "")
    parsed = parse("new", title, body, today)
    if not isinstance(parsed, Disable):
        problem = parsed.problem if parsed is not None else "not a test's nodeid"
        raise UsageProblem(f"cannot disable {args.test!r}: {problem}", tip="Name a test as its nodeid reads.")
    cfg, tracker = _disable_tracker(args, out)
    known = known_devices(cfg)
    unknown = [d for d in parsed.devices if d != "*" and d not in known]
    if unknown:  # it would apply nowhere, as `run --device` of no row is refused
        raise ConfigError(
            f"--device {', '.join(unknown)}: no row of this project nor its device has that name",
            tip=f"Name one or more of: {', '.join(known)} (or leave --device out for every row).",
        )
    # an open disable of the test covers these devices only where its own devices line says so
    # (a disable on tpu is none on cpu)
    on: dict[str, tuple[str, ...]] = {}
    for kept in open_disable_issues(tracker, title):
        read = parse(kept.key, kept.title, kept.body, today)
        on[kept.key] = read.devices if isinstance(read, Disable) else ()
    covered = {d for devices in on.values() for d in devices}
    if on and ("*" in covered or set(parsed.devices) <= covered):
        out.line(f"{', '.join(on)} already disables {args.test}; nothing filed")
        return EXIT_OK
    issue = tracker.create(title, body, [])
    where = ", ".join(args.device) if args.device else "every row"
    out.line(f"{issue.key}: {title} (on {where}); the next run of those rows skips it")
    for key, devices in on.items():
        out.line(one_line(f"  {key} disables it on {', '.join(devices) or 'no device it can read'} too"))
    return EXIT_OK


def cmd_issues_enable(args: argparse.Namespace, out: Output) -> int:
    """#33: close the open ``DISABLED TEST`` issues: the next run runs the test again."""
    from device_matrix.issues.disables import close_issue, open_disable_issues
    from device_matrix.skips.tracker import title_for

    _, tracker = _disable_tracker(args, out)
    found = open_disable_issues(tracker, title_for(args.test))
    if not found:
        raise UsageProblem(
            f"no open issue disables {args.test!r}",
            tip="`device-matrix skips list` shows the tracker's disables and their tests.",
        )
    for issue in found:
        close_issue(tracker, issue)
        out.line(f"{issue.key} closed: {args.test} runs again from the next run")
    return EXIT_OK


# #42: the ledger is the project's (.device-matrix/ledger.sqlite) whatever the results folder
OLD_LEDGER_HELP = "a results folder whose ledger.sqlite from before is moved to .device-matrix/ (default from config)"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`issues sync`, `issues list`, `issues show`, `issues disable` and `issues enable`."""
    issues = sub.add_parser("issues", help="link skips and crashes to issues")
    issues_sub = issues.add_subparsers(dest="issues_command", required=True)
    s = issues_sub.add_parser(
        "sync",
        help="file or link an issue for every skip, crash and failure group without one; read cited issues' states",
        description="Dry run by default for GitHub (shows what it would file); the local ledger is written directly.",
    )
    s.add_argument("results", nargs="?", type=a_folder, help="results folder (default from config)")
    s.add_argument("--tracker", choices=("ledger", "github"), help="override tracker.kind")
    s.add_argument("--repository", help="owner/name for the github tracker (overrides tracker.repository)")
    group = s.add_mutually_exclusive_group()
    group.add_argument("--apply", dest="apply", action="store_true", default=None, help="file and comment for real")
    group.add_argument("--dry-run", dest="apply", action="store_false", help="only say what would be filed")
    s.add_argument(
        "--history",
        type=a_file,
        help="run history a crash is placed by, read-only (default .device-matrix/history.sqlite)",
    )
    s.add_argument("--no-history", action="store_true", help="place crashes by this run's rows only")
    s.set_defaults(func=cmd_issues_sync)
    lst = issues_sub.add_parser(
        "list", help="the embedded ledger's issues: the seed file's and those filed in .device-matrix/ledger.sqlite"
    )
    lst.add_argument("results", nargs="?", type=a_folder, help=OLD_LEDGER_HELP)
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_issues_list)
    show = issues_sub.add_parser("show", help="one ledger issue: its state, labels, body and comments")
    show.add_argument("issue", help="ledger:N, or N")
    show.add_argument("results", nargs="?", type=a_folder, help=OLD_LEDGER_HELP)
    show.set_defaults(func=cmd_issues_show)
    for name, helptext, func in (
        ("disable", "file a DISABLED issue: the test is skipped on those rows from the next run", cmd_issues_disable),
        ("enable", "close the test's DISABLED issue: it runs again from the next run", cmd_issues_enable),
    ):
        d = issues_sub.add_parser(name, help=helptext)
        d.add_argument("test", help="a nodeid, a file or class prefix, a parametrized id, or 'test_x (__main__.TestY)'")
        if name == "disable":
            d.add_argument(
                "--device", action="append", help="a row or device it is disabled on (repeat; none: every row)"
            )
            d.add_argument("--reason", help="why, for the issue's body")
        d.add_argument("results", nargs="?", type=a_folder, help=OLD_LEDGER_HELP)
        d.add_argument("--tracker", choices=("ledger", "github"), help="override tracker.kind")
        d.add_argument("--repository", help="owner/name for the github tracker (overrides tracker.repository)")
        d.set_defaults(func=func)
