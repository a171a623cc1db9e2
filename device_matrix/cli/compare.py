"""``device-matrix compare``: a row's scripts run both ways, side by side.

Each of the row's ``scripts`` entries runs as its authors run it (``VARS python FILE ARGS``
from the project's folder, nothing of device-matrix in the process), then at once through
device-matrix (a row of that entry alone, into ``RESULTS/compare/NN/``): one way right after
the other, so a busy machine weighs on both alike. Per test it prints whether the outcome
is the same, and per invocation the tests each way and the time ratio (#24). This is how a
maintainer shows a team that the switch changes nothing but the record.

What a plain run says of its tests is what unittest prints: every test by name when it is
verbose (``test_x (module.Class.test_x) ... ok``), else the failures and errors by name and
the rest as counts (``Ran 12 tests``, ``OK (skipped=2)``). A test it does not name is "not
failing" there; the counts of skipped and expected failures are compared as counts. A
program (``kind = "program"``) is one test both ways: its exit status as a plain run ends
(:func:`exit_outcome`) beside its outcome in the record.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from device_matrix import config as config_mod
from device_matrix.cli.commands import a_folder
from device_matrix.config import Config, Row, Script
from device_matrix.errors import EXIT_OK, EXIT_TESTS_FAILED, UsageProblem
from device_matrix.executors.base import spawn
from device_matrix.output import Output
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.outcomes import QUIET_OUTCOMES, RAISED_OUTCOMES, SKIPPING_OUTCOMES
from device_matrix.records.schema import RunRecord
from device_matrix.run.targets import of_script

# unittest's verbose line, and the headers of its failure listing (3.11: "(module.Class.test)";
# 3.10 and older: "(module.Class)"); a subtest's header ends with its parameters
_VERBOSE_RE = re.compile(
    r"^(?P<method>\w+) \((?P<where>[\w.]+)\)(?: \([^)]*\))?(?:\n.*?)? \.\.\. ",
    re.MULTILINE,
)
# the outcome unittest writes after " ... ": right there, or, when the test printed (a
# warning, a log line), at the start of a line of its own after that output (#29)
_WORD_RE = re.compile(r"(?:\A|(?<=\n))(?P<word>ok|FAIL|ERROR|skipped|expected failure|unexpected success)\b")
_HEADER_RE = re.compile(
    r"^(?P<word>FAIL|ERROR|UNEXPECTED SUCCESS): (?P<method>\w+) \((?P<where>[\w.]+)\)", re.MULTILINE
)
_RAN_RE = re.compile(r"^Ran (\d+) tests? in ", re.MULTILINE)
_SUMMARY_RE = re.compile(r"^(OK|FAILED)(?: \((?P<counts>[^)]*)\))?\s*$", re.MULTILINE)
_WORDS = {
    "ok": "passed",
    "FAIL": "failed",
    "ERROR": "error",
    "skipped": "skipped",
    "expected failure": "xfailed",
    "unexpected success": "failed",
    "UNEXPECTED SUCCESS": "failed",
}
_COUNTS = {"failures": "failed", "errors": "error", "skipped": "skipped", "expected failures": "xfailed"}
_COUNTS["unexpected successes"] = "unexpected"
NOT_FAILING = QUIET_OUTCOMES


@dataclass
class PlainRun:
    """What ``python FILE ARGS`` printed of its tests."""

    returncode: int
    seconds: float
    ran: int | None = None  # None: unittest never said (the process died, or ran none)
    named: dict[str, str] = field(default_factory=dict)  # "Class::method" -> outcome
    counts: Counter[str] = field(default_factory=Counter)  # outcome -> tests, from the summary
    verbose: bool = False
    timed_out: bool = False


def exit_outcome(plain: PlainRun) -> str:
    """A program's outcome as its plain run ended, in the record's words."""
    if plain.timed_out:
        return "timeout"
    if plain.returncode < 0:
        return "crashed"  # a signal ended it
    return "passed" if plain.returncode == 0 else "failed"


def _class_and_method(method: str, where: str) -> str:
    parts = where.split(".")
    cls = parts[-2] if parts[-1] == method and len(parts) > 1 else parts[-1]
    return f"{cls}::{method}"


def read_plain(output: str, returncode: int, seconds: float) -> PlainRun:
    """What a unittest script's output says of its tests."""
    run = PlainRun(returncode=returncode, seconds=seconds)
    ran = _RAN_RE.findall(output)
    if ran:
        run.ran = int(ran[-1])
    starts = list(_VERBOSE_RE.finditer(output))
    for k, m in enumerate(starts):
        end = starts[k + 1].start() if k + 1 < len(starts) else len(output)
        word = _WORD_RE.search(output[m.end() : end])
        if word is None:
            continue  # the process died in this test: no outcome was written
        run.verbose = True
        key = _class_and_method(m["method"], m["where"])
        outcome = _WORDS[word["word"]]
        if run.named.get(key) not in RAISED_OUTCOMES:  # a failed subtest fails its test
            run.named[key] = outcome
    for m in _HEADER_RE.finditer(output):
        key = _class_and_method(m["method"], m["where"])
        if run.named.get(key) != "error":
            run.named[key] = _WORDS[m["word"]]
    summaries = _SUMMARY_RE.findall(output)
    if summaries and summaries[-1][1]:
        for part in summaries[-1][1].split(","):
            name, _, number = part.strip().partition("=")
            if name in _COUNTS and number.isdigit():
                run.counts[_COUNTS[name]] += int(number)
    return run


@dataclass
class Invocation:
    script: Script
    plain: PlainRun
    tests: dict[str, str]  # "Class::method" -> outcome in the record
    seconds: float  # the device-matrix attempts of this invocation
    rows: list[tuple[str, str, str | None, bool]] = field(default_factory=list)  # nodeid, ours, plain, same
    flaky: set[str] = field(default_factory=set)  # nodeids whose outcomes changed from run to run (--repeat)
    runs: int = 1  # times each way (--repeat)

    @property
    def label(self) -> str:
        return self.script.file + (f" {self.script.suffix}" if self.script.variant else "")

    def compare(self, nodeids: dict[str, str], status: str) -> int:
        """Fill ``rows``; the number of mismatches. ``status``: the row's, through device-matrix."""
        mismatches = 0
        for key, ours in self.tests.items():
            theirs = self.plain.named.get(key)
            if key == "" and self.script.kind == "program":
                theirs = exit_outcome(self.plain)  # one test both ways: the process's end
                same = theirs == ours
            elif key == "":
                # the script's own error: it failed before unittest ran a test, both ways
                theirs = "error" if self.plain.ran is None and self.plain.returncode != 0 else None
                same = theirs == ours
            elif theirs is None and not self.plain.verbose:
                same = ours in NOT_FAILING and self.plain.ran is not None  # "not failing" there
            else:
                same = theirs == ours
            mismatches += not same
            self.rows.append((nodeids[key], ours, theirs, same))
        for key, theirs in self.plain.named.items():
            if key not in self.tests:
                mismatches += 1
                self.rows.append((f"{self.script.file}::{key}", "(not recorded)", theirs, False))
        if not self.plain.verbose and self.plain.ran is not None:
            # what a quiet run only counts: its skipped and expected failures, as counts
            ours_counts = Counter(self.tests.values())
            for outcome in sorted(SKIPPING_OUTCOMES):
                mismatches += abs(ours_counts[outcome] - self.plain.counts[outcome])
        if not mismatches and (self.plain.returncode == 0) != (status == "passed"):
            # the process: a script that exits non-zero (a hang at exit, a crash after its
            # tests) fails its CI step even when every test passed; so must the record
            mismatches += 1
            ours = f"row {status}"
            self.rows.append((f"{self.label} (the process)", ours, f"exit {self.plain.returncode}", False))
        return mismatches


def _env(row: Row, script: Script) -> dict[str, str]:
    """The variables the script runs with, as the row's run gives them (its own over the row's)."""
    env = dict(os.environ)
    env.update(row.env)
    env.setdefault("PJRT_DEVICE", row.pjrt_device)
    env.update(script.env)
    return env


def plain_timeout(row: Row, script: Script, given: float | None) -> float:
    """How long the plain run may take: ``--timeout``, else the row's own deadline for what
    the run through device-matrix is given (a program's test: ``test_timeout``; a unittest
    file's tests: ``run_timeout``), so the two ways stop alike (#30)."""
    if given is not None:
        return given
    return row.test_timeout if script.kind == "program" else row.run_timeout


def _text_of(file: IO[bytes]) -> str:
    file.seek(0)
    return file.read().decode(errors="replace")


def _plain(cfg: Config, row: Row, script: Script, python: str, timeout: float) -> PlainRun:
    started = time.monotonic()
    timed_out = False
    # #30: output into files, not pipes: a daemon the script leaves holding its stdout must not
    # make a finished script look hung; its process group is ended once the script is done
    with tempfile.TemporaryFile() as out_file:
        # started as every child is (base.spawn), with the plain run's own environment: no
        # token of ours in it. #39: what it leaves is ended with it, as a row's attempt ends:
        # its group, then each orphan it made (compare adopts them: a multiprocessing
        # worker, its resource_tracker, a daemon that left the group), also when compare is
        # interrupted while it runs
        child = spawn(
            [python, script.file, *script.args],
            env=_env(row, script),
            cwd=cfg.project_root,
            output=out_file,
            token="",
            adopt=True,
            carry_token=False,
        )
        try:
            returncode = child.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out, returncode = True, -9
        finally:
            child.end()
        # what it printed before it hung: unittest's summary comes before a hang at exit
        output = _text_of(out_file)
    seconds = time.monotonic() - started
    if script.kind == "program":
        # one test, whatever it printed (unittest in a program is the program's own business)
        return PlainRun(returncode=returncode, seconds=seconds, ran=1, timed_out=timed_out)
    return read_plain(output, returncode, seconds)


def _through(
    cfg: Config, row: Row, script: Script, *, python: str, folder: Path, out: Output
) -> tuple[RunRecord, float]:
    """The one invocation through device-matrix: a row of this script alone, into ``folder``."""
    from device_matrix.run.plan import plan_row
    from device_matrix.run.runner import RunOptions, run_row

    # the entry alone: no suites, no other script, no gang of the row's
    alone = dataclasses.replace(row, suites=(), scripts=(script,), gangs=())
    here = dataclasses.replace(cfg, results_dir=folder)
    command = ("device-matrix", "--project", str(cfg.project_root), "compare", "--device", row.name)
    options = RunOptions(python=python, command=command)
    started = time.monotonic()
    record = run_row(here, plan_row(here, alone, force="local"), options, out)
    return record, time.monotonic() - started


def _key(nodeid: str, script: Script, root: Path) -> str | None:
    """``Class::method`` of a test of this invocation (its nodeid ends with [variant]); ``""``
    for the invocation's own error (the script failed before any test ran)."""
    if not of_script(nodeid, script, (script,), root):
        return None
    _, sep, rest = nodeid.partition("::")
    return rest.removesuffix(script.suffix) if sep else ""


def _one(
    cfg: Config, row: Row, script: Script, folder: Path, *, python: str, timeout: float | None, out: Output
) -> tuple[Invocation, int]:
    """One invocation both ways, one right after the other (the machine's load is about the
    same for both): its comparison and its mismatches."""
    plain = _plain(cfg, row, script, python, plain_timeout(row, script, timeout))
    record, seconds = _through(cfg, row, script, python=python, folder=folder, out=out)
    out.line(
        f"  {shlex.join([script.file, *script.args])}: as a script exit {plain.returncode} in "
        f"{plain.seconds:.1f} s, through device-matrix {record['status']} in {seconds:.1f} s"
    )
    root = cfg.project_root
    nodeids = {k: t["nodeid"] for t in record["tests"] if (k := _key(t["nodeid"], script, root)) is not None}
    outcomes = {k: str(t["outcome"]) for t in record["tests"] if (k := _key(t["nodeid"], script, root)) is not None}
    inv = Invocation(script, plain, outcomes, seconds)
    return inv, inv.compare(nodeids, record["status"])


def merge(pairs: list[tuple[Invocation, int]]) -> tuple[Invocation, int]:
    """#39: one invocation run several times each way (``--repeat``), as one comparison.

    A test differs when it differs in every pair of runs and no outcome it had one way is
    one it had the other way (a race that goes either way in both is not the row's); a test
    that differs in some pairs, or whose outcomes meet, is flaky: shown, not a mismatch.
    A count that differs (a quiet run's skips) differs when it does in every pair. The
    outcomes each way are shown in run order (``passed/failed``), the seconds summed."""
    if len(pairs) == 1:
        return pairs[0]
    first = pairs[0][0]
    seen: dict[str, list[tuple[str, str | None, bool]]] = {}
    for inv, _ in pairs:
        for nodeid, ours, theirs, same in inv.rows:
            seen.setdefault(nodeid, []).append((ours, theirs, same))
    merged = Invocation(
        first.script,
        dataclasses.replace(first.plain, seconds=sum(inv.plain.seconds for inv, _ in pairs)),
        first.tests,
        sum(inv.seconds for inv, _ in pairs),
        runs=len(pairs),
    )
    mismatches = min(m - sum(not same for *_, same in inv.rows) for inv, m in pairs)
    for nodeid, runs in seen.items():
        ours_seen = {ours for ours, _, _ in runs}
        theirs_seen = {theirs for _, theirs, _ in runs}
        every = len(runs) == len(pairs) and not any(same for *_, same in runs)
        differs = every and not ours_seen & theirs_seen
        if not differs and (len(runs) < len(pairs) or not all(same for *_, same in runs)):
            merged.flaky.add(nodeid)
        mismatches += differs
        ours_all = "/".join(ours for ours, _, _ in runs)
        theirs_all = "/".join(theirs or "not failing" for _, theirs, _ in runs)
        merged.rows.append((nodeid, ours_all, theirs_all, not differs))
    return merged, mismatches


def _totals(invocations: list[tuple[Invocation, int]]) -> tuple[float, float, int]:
    """Seconds as scripts, seconds through device-matrix, mismatches."""
    plain = sum(inv.plain.seconds for inv, _ in invocations)
    return plain, sum(inv.seconds for inv, _ in invocations), sum(m for _, m in invocations)


def _summary(row: Row, invocations: list[tuple[Invocation, int]], interrupted: str | None) -> dict[str, object]:
    """compare.json: the invocations compared so far, and whether compare was interrupted."""
    plain_total, total_seconds, mismatched = _totals(invocations)
    return {
        "row": row.name,
        "invocations": [
            {
                "file": inv.script.file,
                "variant": inv.script.variant,
                "args": list(inv.script.args),
                "tests_upstream": inv.plain.ran,
                "tests_recorded": len(inv.tests),  # the script's own error included
                "mismatches": m,
                "plain_seconds": round(inv.plain.seconds, 3),
                "device_matrix_seconds": round(inv.seconds, 3),
                "plain_exit": inv.plain.returncode,
                "runs": inv.runs,
                "tests": [
                    {"nodeid": n, "device_matrix": o, "plain": p, "same": s, **_flaky_key(inv, n)}
                    for n, o, p, s in inv.rows
                ],
            }
            for inv, m in invocations
        ],
        "invocations_planned": len(row.scripts),
        "interrupted": interrupted,  # the signal's name, or null: every invocation was compared
        "plain_seconds": round(plain_total, 3),
        "device_matrix_seconds": round(total_seconds, 3),
        "time_ratio": round(total_seconds / plain_total, 3) if plain_total else None,
        "mismatches": mismatched,
        "flaky": sum(len(inv.flaky) for inv, _ in invocations),
    }


def cmd_compare(args: argparse.Namespace, out: Output) -> int:
    from device_matrix.run.attempt import Interrupted, interrupts_raise

    cfg = config_mod.load(Path(args.project) if args.project else None)
    row = cfg.row(args.device)
    if not row.scripts:
        raise UsageProblem(
            f"row {row.name!r} has no scripts to compare",
            tip="List the files as [[tool.device-matrix.devices.ROW.scripts]] (docs/upstream.md), then compare.",
        )
    if args.repeat < 1:
        raise UsageProblem(f"--repeat {args.repeat}: each way runs at least once", tip="Give --repeat 1 or more.")
    python = args.python or sys.executable
    results = Path(args.results) if args.results else cfg.results_dir / "compare"
    out.line(f"compare: row {row.name}, {len(row.scripts)} invocation(s), each as a script, then through device-matrix")
    invocations: list[tuple[Invocation, int]] = []
    try:
        # #39: SIGTERM, SIGINT and SIGHUP end the run under way and every process of it
        with interrupts_raise():
            for index, script in enumerate(row.scripts, 1):
                folders = [results / (f"{index:02d}" + (f"-{k}" if k > 1 else "")) for k in range(1, args.repeat + 1)]
                pairs = [_one(cfg, row, script, f, python=python, timeout=args.timeout, out=out) for f in folders]
                invocations.append(merge(pairs))
                # each verdict on disk as it is decided: a reader after a kill sees every one so far
                write_json_atomic(results / "compare.json", _summary(row, invocations, None))
    except Interrupted as exc:
        write_json_atomic(results / "compare.json", _summary(row, invocations, str(exc)))
        out.error(
            f"compare interrupted by {exc}: {len(invocations)} of {len(row.scripts)} invocation(s) compared, "
            f"in {results / 'compare.json'}",
            "Run compare again for all of them.",
        )
        return 128 + exc.signum
    _print(out, invocations, args.all)
    plain_total, total_seconds, mismatched = _totals(invocations)
    ratio = f"{total_seconds / plain_total:.2f}" if plain_total else "?"
    upstream = sum(inv.plain.ran or 0 for inv, _ in invocations)
    recorded = sum(len(inv.tests) for inv, _ in invocations)
    out.line(
        f"total: {upstream} test(s) upstream, {recorded} recorded, {mismatched} mismatch(es)"
        f"{_flaky_words(invocations)}; "
        f"{plain_total:.1f} s as scripts, {total_seconds:.1f} s through device-matrix (ratio {ratio})"
    )
    if args.json:
        out.line(json.dumps(_summary(row, invocations, None), indent=2))
    return EXIT_OK if mismatched == 0 else EXIT_TESTS_FAILED


def _flaky_key(inv: Invocation, nodeid: str) -> dict[str, bool]:
    """A test's ``flaky`` in compare.json: only where each way ran more than once."""
    return {"flaky": nodeid in inv.flaky} if inv.runs > 1 else {}


def _flaky_words(invocations: list[tuple[Invocation, int]]) -> str:
    flaky = sum(len(inv.flaky) for inv, _ in invocations)
    return f", {flaky} flaky (--repeat)" if flaky else ""


def _print(out: Output, invocations: list[tuple[Invocation, int]], every: bool) -> None:
    out.line("")
    header = f"{'invocation':<60} {'upstream':>8} {'recorded':>8} {'mismatch':>8} {'ratio':>6}"
    out.line(header)
    out.line("-" * len(header))
    for inv, mismatches in invocations:
        ratio = f"{inv.seconds / inv.plain.seconds:.2f}" if inv.plain.seconds else "?"
        ran = "?" if inv.plain.ran is None else str(inv.plain.ran)
        out.line(f"{inv.label[:60]:<60} {ran:>8} {len(inv.tests):>8} {mismatches:>8} {ratio:>6}")
    out.line("")
    for inv, _ in invocations:
        for nodeid, ours, theirs, same in inv.rows:
            flaky = nodeid in inv.flaky
            if same and not flaky and not every:
                continue
            word = "FLAKY" if flaky and same else ("same" if same else "DIFFERENT")
            said = theirs or ("not failing" if inv.plain.ran is not None else f"exit {inv.plain.returncode}")
            out.line(f"  {word:<9} device-matrix {ours:<10} plain {said:<12} {nodeid}")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`compare`."""
    cp = sub.add_parser(
        "compare",
        help="run a row's scripts as scripts and through device-matrix; per test: the same outcome or not",
        description="Each [[scripts]] entry of the row runs as `VARS python FILE ARGS`, then the row runs "
        "through `device-matrix run`: per test the outcomes side by side, per invocation the time ratio.",
    )
    cp.add_argument("--device", "-d", required=True, help="the row whose scripts to compare")
    cp.add_argument("--python", help="interpreter for both ways (default: this one)")
    cp.add_argument(
        "--results", type=a_folder, help="results folder of the device-matrix run (default RESULTS/compare)"
    )
    cp.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds one plain run may take (default: the row's test_timeout for a program, its run_timeout "
        "for a unittest file, as through device-matrix)",
    )
    cp.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each invocation N times each way, alternating: a test differs only when it does every "
        "time and no outcome meets; one that changes is shown as flaky (default 1)",
    )
    cp.add_argument("--all", action="store_true", help="print every test, not only those that differ")
    cp.add_argument("--json", action="store_true", help="print the comparison as JSON too")
    cp.set_defaults(func=cmd_compare)
