"""``device-matrix diagnose LOG...``: what a crash in a log is, and which issue has it.

Any shape of log is read (a downloaded GitHub Actions job log, one pasted into an
issue, a row's output.log) and gets the diagnosis and fingerprint the runner gives the
same crash. The tracker is only read: issues.json links and the embedded ledger.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from device_matrix import config as config_mod
from device_matrix import diagnostics
from device_matrix.cli.commands import a_file, a_folder
from device_matrix.diagnostics import outputlog
from device_matrix.diagnostics.parse import clean_lines
from device_matrix.errors import EXIT_OK, EXIT_TESTS_FAILED, DeviceMatrixError, ResultsError, TrackerError
from device_matrix.output import Output, one_line
from device_matrix.records.schema import CrashDiagnosis, load_run
from device_matrix.records.summary import crash_headline
from device_matrix.redact import Redactor

# How a log says the process's exit status when nothing else did: the runner step's
# "Process completed with exit code 139." or a shell's "Segmentation fault (core dumped)".
ACTIONS_EXIT_RE = re.compile(r"Process completed with exit code (\d+)\.")
SHELL_SIGNALS = {
    "Segmentation fault": 11,
    "Aborted": 6,
    "Bus error": 7,
    "Illegal instruction": 4,
    "Floating point exception": 8,
    "Trace/breakpoint trap": 5,
    "CPU time limit exceeded": 24,
    "Quit": 3,
    "Killed": 9,
}
_NAMES = "|".join(map(re.escape, SHELL_SIGNALS))
# bash: "run.sh: line 3:  4242 Segmentation fault      (core dumped) python train.py";
# sh and others: the message alone on its line
SHELL_RE = re.compile(rf": line \d+: +\d+ ({_NAMES})(?:\s|$)|^({_NAMES})(?: \(core dumped\))?$")
STACK_LINES = 25


def returncode_from_log(text: str) -> int | None:
    """The exit status a log reports for its process, when it reports one."""
    found: int | None = None
    for line in clean_lines(text):
        m = ACTIONS_EXIT_RE.search(line)
        if m:
            found = int(m.group(1))
            continue
        m = SHELL_RE.search(line.strip())
        if m:
            found = -SHELL_SIGNALS[m.group(1) or m.group(2)]
            continue
        # the line a row's output.log ends an attempt with when a signal ended its process (#20)
        rc = outputlog.returncode_in(line.strip())
        if rc is not None:
            found = rc
    return found


def diagnose_log(text: str, *, redactor: Redactor, returncode: int | None = None) -> CrashDiagnosis | None:
    """The runner's diagnosis of the crash ``text`` shows, or None when it shows none."""
    rc = returncode if returncode is not None else returncode_from_log(text)
    if diagnostics.signal_from_returncode(rc) is not None:
        return diagnostics.diagnose(returncode=rc, fault_text="", output_text=text, redactor=redactor)
    return diagnostics.diagnose_output(text, redactor=redactor)


def known_issues(
    fingerprint: str, results: Path, seed: Path | None = None, ledgers: Sequence[Path] = ()
) -> list[dict[str, str]]:
    """Issues that already carry ``fingerprint``: issues.json links, the ledgers, the seed."""
    from device_matrix.findings import crash_key
    from device_matrix.issues.ledger import Ledger, load_seed
    from device_matrix.issues.sync import load_links

    key = crash_key(fingerprint)
    found: dict[str, dict[str, str]] = {}
    state = load_links(results)
    linked = state.get("links", {}).get(key)
    if isinstance(linked, str):
        info = state.get("issues", {}).get(linked, {})
        found[linked] = {"issue": linked, "title": str(info.get("title", "")), "state": str(info.get("state", ""))}
    for ledger_path in ledgers:
        if not ledger_path.is_file():  # never create one: this command only reads
            continue
        try:
            ledger = Ledger(ledger_path)
            try:
                for issue in ledger.list_issues():
                    if issue.fingerprint == key:
                        found[issue.key] = {"issue": issue.key, "title": issue.title, "state": issue.state}
            finally:
                ledger.close()
        except (sqlite3.Error, TrackerError):
            pass  # not a ledger (or a damaged one): the links above still count
    if seed is not None and seed.is_file():
        for entry in load_seed(seed):
            ref = f"ledger:{entry['id']}"
            if entry.get("fingerprint") == key and ref not in found:
                found[ref] = {"issue": ref, "title": entry["title"], "state": str(entry.get("state", "open"))}
    return list(found.values())


def _places(args: argparse.Namespace) -> tuple[Path, Path | None, list[Path]]:
    """The results folder to search, the ledger's seed file when in a project, and the
    ledgers to read: the project's (#42), and one a results folder holds from before, read
    where it is (this command moves nothing)."""
    from device_matrix.issues.home import LEDGER_FILE

    try:
        cfg = config_mod.load(Path(args.project) if args.project else None)
    except DeviceMatrixError:
        # outside a project (a log downloaded anywhere): the default folder, no seed
        results = Path(args.results or "results")
        return results, None, [results / LEDGER_FILE]
    results = Path(args.results) if args.results else cfg.results_dir
    seed = cfg.project_root / cfg.tracker.ledger_seed
    return results, seed, [cfg.state_dir / LEDGER_FILE, results / LEDGER_FILE]


# #30: a log is read as a stream and only its end is kept: a crash speaks at the end, and a
# log of any size (a multi-gigabyte job log, /dev/zero) is read in bounded memory
LOG_TAIL = 8 << 20
READ_CHUNK = 1 << 20
# where a stream that never ends (a device, a pipe) stops being read
STREAM_LIMIT = 4 << 30


def _read(path: Path) -> str:
    """The last LOG_TAIL bytes of the log at ``path``, read as a stream."""
    kept = bytearray()
    try:
        with path.open("rb") as fh:
            if path.is_file():
                # a file: straight to its end
                fh.seek(max(0, path.stat().st_size - LOG_TAIL))
            read = 0
            while read < STREAM_LIMIT and (chunk := fh.read(READ_CHUNK)):
                read += len(chunk)
                kept += chunk
                if len(kept) > LOG_TAIL:
                    del kept[: len(kept) - LOG_TAIL]
    except OSError as exc:
        raise ResultsError(
            f"{path}: cannot read the log ({exc.strerror or exc})",
            tip="Pass a log file: a downloaded job log, a log pasted into a file, or RESULTS/<row>/output.log.",
        ) from exc
    return kept.decode("utf-8", "replace")


def _print(out: Output, log: str, diag: CrashDiagnosis | None, issues: list[dict[str, str]]) -> None:
    out.line(f"{log}:")
    if diag is None:
        out.line("  no native crash found (no signal, fatal line, native stack or uncaught exception)")
        return
    hint = f" ({diag['hint']})" if diag["hint"] else ""
    out.line(f"  signal: {diag['signal_name'] or 'unknown'}{hint}")
    if diag["fatal_error"]:
        out.line(f"  fatal error: {diag['fatal_error']}")
    for line in diag["fatal_lines"]:
        out.line(f"  fatal: {line}")
    if diag["terminate"]:
        out.line(f"  exception: {diag['terminate']}")
    for title, stack in (
        (f"native stack ({diag['native_format']})", diag["native_stack"]),
        ("python stack", diag["python_stack"]),
    ):
        if stack:
            out.line(f"  {title}:")
            lines = stack.splitlines()
            for line in lines[:STACK_LINES]:
                out.line(f"    {line}")
            if len(lines) > STACK_LINES:
                out.line(f"    ... {len(lines) - STACK_LINES} more line(s)")
    out.line(f"  fingerprint: {diag['fingerprint']}")
    for part in diag["fingerprint_basis"]:
        out.line(f"    {part}")
    if issues:
        for issue in issues:
            out.line(one_line(f"  issue: {issue['issue']} [{issue['state']}] {issue['title']}"))
    else:
        out.line("  issue: none has this fingerprint yet (device-matrix issues sync files one from a run)")


def recorded(path: Path, text: str, *, redactor: Redactor) -> list[tuple[dict[str, str], CrashDiagnosis]]:
    """The crashes the runner recorded for this log: from the run.json beside a row's own
    output.log, else from the lines the runner wrote into the log (#24). Their diagnosis
    and fingerprint are the record's, whatever the log alone would give."""
    lines = outputlog.recorded_crashes(text)
    if not lines:
        return []
    beside = path.parent / "run.json"
    if path.name == "output.log" and beside.is_file():
        try:
            record = load_run(beside)
        except ResultsError:
            record = None
        # #42: the record of this very log, not one an earlier run left beside a log being written
        known = {(c["id"], c["diagnosis"]["fingerprint"]) for c in record["crashes"]} if record else set()
        # #41: one id twice is a sign: a line the record does not confirm beside one it does is
        # a test's output imitating the runner's
        confirmed = {m["id"] for m in lines if (m["id"], m["fingerprint"]) in known}
        lines = [m for m in lines if (m["id"], m["fingerprint"]) in known or m["id"] not in confirmed]
        said = {(m["id"], m["fingerprint"]) for m in lines}
        if record is not None and said <= known:
            return [
                (
                    {"crash": c["id"], "headline": crash_headline(c, record["tests"]), "nodeid": c["nodeid"] or ""},
                    c["diagnosis"],
                )
                for c in record["crashes"]
                if c["kind"] in ("crash", "timeout")
            ]
    found = []
    for line in lines:
        # the attempt's own output: from its header to the runner's line, which says how its
        # process ended (#42: a log copied before run.json was written is read as it is)
        begin = outputlog.attempt_start(text, int(line["attempt"]), line.start())
        diag = diagnostics.diagnose(
            returncode=outputlog.returncode_in(line.group(0)),
            fault_text="",
            output_text=text,
            redactor=redactor,
            start=begin,
            end=line.start(),
        )
        diag["fingerprint"] = line["fingerprint"]
        diag["fingerprint_basis"] = [f"recorded by device-matrix in this log ({line['id']})"]
        found.append(({"crash": line["id"], "headline": line["headline"], "nodeid": line["nodeid"] or ""}, diag))
    return found


def cmd_diagnose(args: argparse.Namespace, out: Output) -> int:
    texts = [(name, _read(Path(name))) for name in args.logs]
    results, seed, ledgers = _places(args)
    redactor = Redactor()
    report: list[dict[str, Any]] = []
    for name, text in texts:
        crashes = recorded(Path(name), text, redactor=redactor)
        twice = sorted({w["crash"] for w, _ in crashes if [v["crash"] for v, _ in crashes].count(w["crash"]) > 1})
        if twice and not args.json:
            # #41: the runner names each crash once; a test's output may imitate its lines
            out.line(
                f"{name}: NOTE: crash {', '.join(twice)} is named more than once; a test's output may imitate "
                "device-matrix's lines: the run.json of the row says which crash it recorded"
            )
        if crashes:
            # the runner knew more than the log says (the faulthandler file, the exit status)
            for what, known in crashes:
                issues = known_issues(known["fingerprint"], results, seed, ledgers)
                report.append({"log": name, "diagnosis": known, "issues": issues, "recorded": what})
                if not args.json:
                    out.line(f"{name}: recorded by device-matrix as {what['crash']}: {what['headline']}")
                    _print(out, name, known, issues)
            continue
        diag = diagnose_log(text, redactor=redactor, returncode=args.returncode)
        issues = known_issues(diag["fingerprint"], results, seed, ledgers) if diag else []
        report.append({"log": name, "diagnosis": diag, "issues": issues})
        if not args.json:
            _print(out, name, diag, issues)
    if args.json:
        out.line(json.dumps(report, indent=2))
    return EXIT_OK if any(r["diagnosis"] for r in report) else EXIT_TESTS_FAILED


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`diagnose`."""
    dg = sub.add_parser(
        "diagnose",
        help="diagnose the crash in a log (a CI job log, a pasted log, output.log) and name its issue",
    )
    dg.add_argument("logs", nargs="+", metavar="LOG", type=a_file, help="log files to read")
    dg.add_argument(
        "--results", type=a_folder, help="results folder whose issue links and ledger to search (default from config)"
    )
    dg.add_argument("--returncode", type=int, help="the process's exit status, when the log does not say it")
    dg.add_argument("--json", action="store_true")
    dg.set_defaults(func=cmd_diagnose)
