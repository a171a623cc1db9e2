#!/usr/bin/env python3
"""Test selection measured by replaying history (#34): faulty changes caught, and at what cost.

For each of the last N commits C of a repository (P its first parent) it injects faults
into the Python lines C changed (comparisons flipped, a condition negated, a constant off
by one, a value returned as None, a call removed; a fixed seed picks them), each its own
"faulty change" C+fault, and runs the whole suite there: the tests that fail at C+fault
and passed at C are the truth. Each strategy then selects tests for C+fault, given what
CI would have: the map recorded at P (or at the nearest earlier mapped commit, with
--map-every) and the files changed since it. A faulty change is caught when a strategy
selects at least one of its failing tests. Side by side, in one run:

- run everything;
- only the tests whose own file changed;
- pytest-testmon: its database built (``pytest --testmon``) at the map commit, then
  ``pytest --testmon`` at C+fault; what it ran is its selection;
- device-matrix: the map (each test's files, coverage.py per-test contexts, written and
  read as a test-map.json, with the lines each test ran) and device_matrix.selection.plan over the changed files, with
  the replayed project's own select_* configuration and, read from the replayed checkout
  as ``run --select changed`` reads them, the function-body changes, the import graph and
  the conftest.py files of fixtures. The map is recorded by the bench's
  own plugin (bench/_replay_plugin.py: a test from its setup to its teardown, its module's
  import, its Python subprocesses, as ``run --record-map`` counts them), not by the
  replayed commit's device-matrix: a replay of device-matrix's own history must not load
  the package under test as its recorder.

Printed per strategy: faulty changes caught, failing tests selected, tests run and test
time run (the seconds of the selected tests in the full run at C+fault over all of it).
Targets (#34): at least 99% caught, at least 95% of failing tests selected, at most 30%
of the test time.

    python bench/selection.py                                   # the fixture repository, 50 commits
    python bench/selection.py --repo . --commits 50             # this repository and its suite
    python bench/selection.py --repo . --commits 10 --faults 2 --budget 840 \
        --tests tests/test_testmap.py tests/test_sync.py tests/test_config.py tests/test_merge.py

A full run of this repository's suite takes minutes: --tests restricts the suite (the
truth is then what that part detects), --budget bounds the replay, --rev moves its end.

A repository of a src/ layout is replayed as it is (src/ is on the path, before the
checkout's root). One with a build step (a version file generated at build time, an
extension) names it with --setup, run in the checkout after each checkout, with --python's
folder first on PATH, so the project is installed from the replayed checkout:

    python bench/selection.py --repo ../attrs --commits 10 \
        --setup 'python -m pip install -q --no-deps --no-build-isolation -e .'

The replay prints device-matrix's planning time per change (its median and its most).

The interpreter running it must have pytest-testmon (bench/requirements-selection.txt).
Faults no test of the full suite detects, and faults whose run timed out, are counted and
left out of the figures (no strategy can catch them).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, clean_env

sys.path.insert(0, str(ROOT))
from device_matrix import config as dm_config
from device_matrix import selection as engine
from device_matrix.cli.select import change_plan
from device_matrix.records import testmap

BENCH = Path(__file__).resolve().parent
TESTMON, DM = "pytest-testmon", "device-matrix"
STRATEGIES = ["run everything", "own file changed", TESTMON, DM]
TARGETS = {"caught": 99.0, "failing": 95.0, "time": 30.0}

# ---------------------------------------------------------------- faults


@dataclass(frozen=True)
class Fault:
    """One mutant of one file: ``source`` is the whole file with the fault in it."""

    path: str
    line: int
    operator: str
    source: str

    @property
    def label(self) -> str:
        return f"{self.path}:{self.line} {self.operator}"


FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.LtE: ast.Gt,
    ast.Gt: ast.LtE,
    ast.GtE: ast.Lt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


def _lines(source: str) -> list[str]:
    """The lines as ast numbers them: split at newlines only (never at a form feed)."""
    return [line + "\n" for line in source.split("\n")]


def _offsets(source: str) -> list[int]:
    starts, total = [], 0
    for line in _lines(source):
        starts.append(total)
        total += len(line)
    return starts


def _span(node: ast.AST, source: str, starts: list[int]) -> tuple[int, int] | None:
    """The character span of ``node`` (ast columns count UTF-8 bytes: converted per line)."""
    end_line, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
    line, col = getattr(node, "lineno", None), getattr(node, "col_offset", None)
    if None in (end_line, end_col, line, col):
        return None
    lines = _lines(source)

    def char(n: int, c: int) -> int:
        return starts[n - 1] + len(lines[n - 1].encode()[:c].decode(errors="ignore"))

    return char(line, col), char(end_line, end_col)


def _replacements(node: ast.AST, segment: str, condition: bool) -> list[tuple[str, str]]:
    """(operator, the text that replaces ``segment``) for each fault the node admits."""
    out: list[tuple[str, str]] = []
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in FLIP:
                ops = [*node.ops[:i], FLIP[type(op)](), *node.ops[i + 1 :]]
                out.append(("comparison flipped", f"({ast.unparse(ast.Compare(node.left, ops, node.comparators))})"))
    if isinstance(node, ast.BoolOp):
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        out.append(("boolean negated", f"({ast.unparse(ast.BoolOp(other, node.values))})"))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append(("boolean negated", f"({ast.unparse(node.operand)})"))
    if condition and not isinstance(node, ast.Compare):  # a comparison's negation is its flip
        out.append(("boolean negated", f"(not ({segment}))"))
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        out.append(("boolean negated", repr(not node.value)))
    if isinstance(node, ast.Constant) and type(node.value) is int:
        out.append(("constant off by one", repr(node.value + 1)))
    returns_none = isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) and node.value.value is None
    if isinstance(node, ast.Return) and node.value is not None and not returns_none:
        out.append(("return None", "return None"))
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        out.append(("call removed", "pass"))
    return out


def fault_sites(path: str, source: str, lines: Iterable[int]) -> list[Fault]:
    """Every fault the given lines of ``source`` admit, in source order, each compiling."""
    wanted = set(lines)
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    starts = _offsets(source)
    found: list[Fault] = []
    tests = {id(n.test) for n in ast.walk(tree) if isinstance(n, (ast.If, ast.While, ast.IfExp, ast.Assert))}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", None)
        span = _span(node, source, starts) if line in wanted else None
        if line is None or span is None:
            continue
        segment = source[span[0] : span[1]]
        for operator, text in _replacements(node, segment, id(node) in tests):
            mutant = source[: span[0]] + text + source[span[1] :]
            try:
                compile(mutant, path, "exec")
            except SyntaxError:
                continue
            if mutant != source:
                found.append(Fault(path, line, operator, mutant))
    unique = {f.source: f for f in found}  # two operators that write the same text are one fault
    return sorted(unique.values(), key=lambda f: (f.line, f.operator, f.source))


def pick_faults(sites: Sequence[Fault], count: int, seed: int, commit: str) -> list[Fault]:
    """``count`` faults of ``sites``, the same for the same seed and commit."""
    rng = random.Random(f"{seed}:{commit}")
    return rng.sample(list(sites), min(count, len(sites)))


def changed_lines(diff: str) -> dict[str, set[int]]:
    """The new-side line numbers each file's hunks of a ``git diff -U0`` touch."""
    out: dict[str, set[int]] = {}
    current: str | None = None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("@@") and current is not None:
            m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
            if m:
                start, n = int(m.group(1)), int(m.group(2) or "1")
                out.setdefault(current, set()).update(range(start, start + n))
    return {f: ls for f, ls in out.items() if ls}


def is_test_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test_") or name.endswith("_test.py")


# ---------------------------------------------------------------- metrics


@dataclass
class Case:
    """One faulty change: the truth and what each strategy selected."""

    label: str
    failing: frozenset[str]  # failed at C+fault, passed at C
    seconds: dict[str, float]  # every test of the full run at C+fault
    selected: dict[str, frozenset[str]] = field(default_factory=dict)
    full_reason: str | None = None  # device-matrix ran everything, why
    why: dict[str, str] = field(default_factory=dict)  # device-matrix's reason for each test it ran


@dataclass
class Score:
    caught: int = 0
    cases: int = 0
    failing_selected: int = 0
    failing: int = 0
    tests_run: int = 0
    tests: int = 0
    time_run: float = 0.0
    time: float = 0.0


def score(cases: Iterable[Case], strategy: str) -> Score:
    """The figures of one strategy over the faulty changes some test detects."""
    s = Score()
    for case in cases:
        if not case.failing:
            continue
        chosen = case.selected[strategy] & case.seconds.keys()
        s.cases += 1
        s.caught += bool(chosen & case.failing)
        s.failing += len(case.failing)
        s.failing_selected += len(chosen & case.failing)
        s.tests += len(case.seconds)
        s.tests_run += len(chosen)
        s.time += sum(case.seconds.values())
        s.time_run += sum(case.seconds[t] for t in chosen)
    return s


def shares(cases: Iterable[Case]) -> str:
    """device-matrix's share of the test time, in points, by why each test it ran ran."""
    points: dict[str, float] = {}
    total = 0.0
    for case in cases:
        if not case.failing:
            continue
        total += sum(case.seconds.values())
        for nodeid, why in case.why.items():
            points[why] = points.get(why, 0.0) + case.seconds.get(nodeid, 0.0)
    ranked = sorted(points.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{why} {_pct(seconds, total):.1f}" for why, seconds in ranked) or "none"


def apart(cases: Sequence[Case]) -> list[str]:
    """device-matrix and pytest-testmon told apart (#40): on the faulty changes device-matrix
    ran in full (a change its map cannot follow), what testmon ran of them; on the others,
    both strategies' shares."""
    scored = [c for c in cases if c.failing]
    full = [c for c in scored if c.full_reason is not None]
    rest = [c for c in scored if c.full_reason is None]
    n = len(scored)
    saved = f"{TESTMON} ran {_shares(full, TESTMON)}" if full else "none"
    both = f"{DM} ran {_shares(rest, DM)}; {TESTMON} {_shares(rest, TESTMON, short=True)}" if rest else "none"
    return [
        f"  where device-matrix ran everything ({len(full)} of {n}): {saved}",
        f"  elsewhere ({len(rest)} of {n}): {both}",
    ]


def _shares(cases: Sequence[Case], strategy: str, *, short: bool = False) -> str:
    s = score(cases, strategy)
    tests, time_ = _pct(s.tests_run, s.tests), _pct(s.time_run, s.time)
    return f"{tests:.1f}%, {time_:.1f}%" if short else f"{tests:.1f}% of the tests, {time_:.1f}% of the time"


def each(cases: Sequence[Case]) -> list[str]:
    """A line per faulty change some test detects: what device-matrix ran, and why, beside
    what pytest-testmon ran."""
    lines = []
    for case in (c for c in cases if c.failing):
        total = sum(case.seconds.values())
        ran = {}
        for name in (DM, TESTMON):
            chosen = case.selected.get(name, frozenset()) & case.seconds.keys()
            share = _pct(sum(case.seconds[t] for t in chosen), total)
            ran[name] = f"{len(chosen)}/{len(case.seconds)}" + (" tests" if name == DM else "") + f" {share:.1f}%"
        counts: dict[str, int] = {}
        for why in case.why.values():
            counts[why] = counts.get(why, 0) + 1
        why = case.full_reason or ", ".join(f"{w} {k}" for w, k in sorted(counts.items())) or "nothing"
        lines.append(
            f"  {case.label}: {len(case.failing)} failing; {DM} {ran[DM]} of the time ({why}); {TESTMON} {ran[TESTMON]}"
        )
    return lines


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else 0.0


def table(cases: Sequence[Case], strategies: Sequence[str]) -> list[str]:
    """The side-by-side table of the strategies, and the targets."""
    lines = [
        f"  {'strategy':<18} {'faulty changes caught':>24} {'failing tests selected':>24}"
        f" {'tests run':>18} {'test time run':>22}"
    ]
    for name in strategies:
        s = score(cases, name)
        lines.append(
            f"  {name:<18} {f'{s.caught}/{s.cases}':>15} {_pct(s.caught, s.cases):>7.1f}%"
            f" {f'{s.failing_selected}/{s.failing}':>15} {_pct(s.failing_selected, s.failing):>7.1f}%"
            f" {f'{s.tests_run}/{s.tests}':>10} {_pct(s.tests_run, s.tests):>6.1f}%"
            f" {f'{s.time_run:.1f}/{s.time:.1f}s':>14} {_pct(s.time_run, s.time):>6.1f}%"
        )
    t = TARGETS
    caught, failing, seconds = f">= {t['caught']}%", f">= {t['failing']}%", f"<= {t['time']}%"
    lines.append(f"  {'target':<18} {caught:>24} {failing:>24} {'':>18} {seconds:>22}")
    return lines


def own_file(nodeids: Iterable[str], changed: Iterable[str]) -> frozenset[str]:
    files = set(changed)
    return frozenset(n for n in nodeids if n.split("::", 1)[0] in files)


def device_matrix_selection(
    m: testmap.TestMap,
    changed: Iterable[str],
    nodeids: Iterable[str],
    rules: engine.Rules,
    root: Path | None = None,
) -> tuple[frozenset[str], str | None]:
    """device-matrix's selection: the engine over the map and the changed files, the
    function-body changes, the import graph and the conftest.py files of fixtures read from the checkout at ``root`` as
    ``run --select changed`` reads them (None: neither known, every change to a source file
    runs all); why it ran all."""
    p = device_matrix_plan(m, changed, rules, root)
    run, _ = p.split(nodeids)
    return frozenset(run), p.full_reason


def device_matrix_plan(
    m: testmap.TestMap, changed: Iterable[str], rules: engine.Rules, root: Path | None
) -> engine.Plan:
    """The plan :func:`device_matrix_selection` selects by: ``run --select changed``'s own,
    dated by the map (the replay's clock is the commit's)."""
    return change_plan(root, m, list(changed), row=m.row, rules=rules, now=datetime.fromisoformat(m.created))


# ---------------------------------------------------------------- the replay


@dataclass(frozen=True)
class Run:
    """What one pytest process reported (bench/_replay_plugin.py)."""

    outcomes: dict[str, str]
    seconds: dict[str, float]
    files: dict[str, list[str]]
    timed_out: bool = False
    broken: bool = False  # #40: pytest could not run the suite (an internal error, a usage error)
    imports: dict[str, list[int]] = field(default_factory=dict)  # lines that ran outside every test
    lines: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # nodeid -> file -> the lines it ran
    # #40: nodeid -> the files that are not Python it opened (None: not recorded), who opened
    # each, and those opened outside every test
    reads: dict[str, list[str]] | None = None
    openers: dict[str, list[str]] = field(default_factory=dict)
    read_at_import: list[str] = field(default_factory=list)
    # #40: the tests that started a program ("": the project's code, outside every test) -> why,
    # and who started them
    unseen: dict[str, str] = field(default_factory=dict)
    starters: list[str] = field(default_factory=list)

    def passed(self) -> set[str]:
        return {t for t, o in self.outcomes.items() if o == "passed"}

    def failed_against(self, baseline: Run) -> frozenset[str]:
        """The tests that passed at the baseline and do not now (a module that no longer
        imports fails every test of it)."""
        out = set()
        broken = [f for f, o in self.outcomes.items() if o == "error" and "::" not in f]
        for t in baseline.passed():
            mine = self.outcomes.get(t)
            if mine == "failed" or (mine is None and any(t.startswith(f + "::") for f in broken)):
                out.add(t)
        return frozenset(out)


class Replay:
    """A throwaway clone of the repository, checked out commit by commit, and its pytest runs."""

    def __init__(
        self,
        source: Path,
        work: Path,
        *,
        python: str,
        tests: Sequence[str],
        timeout: float,
        autoload: bool,
        setup: str | None = None,
    ) -> None:
        self.work, self.python, self.tests, self.timeout = work, python, list(tests), timeout
        self.autoload, self.setup = autoload, setup
        subprocess.run(["git", "clone", "-q", "--no-checkout", str(source), str(work)], check=True)
        self.env = clean_env(PYTHONDONTWRITEBYTECODE="1")  # a fault of the same size, same second: no stale .pyc
        # the replayed code (#40: a src/ layout's too), then the plugin
        self.env["PYTHONPATH"] = os.pathsep.join([str(work / "src"), str(work), str(BENCH)])
        # #40: the setup command's `python` and `pip` are the replay's interpreter's
        self.env["PATH"] = os.pathsep.join([str(Path(python).parent), self.env.get("PATH", "")])
        if not autoload:  # a suite that needs no installed plugin starts in a third of the time
            self.env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        self.seconds = 0.0  # wall seconds of every pytest run

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.work, capture_output=True, text=True, check=True).stdout

    def checkout(self, commit: str) -> None:
        self.git("checkout", "-q", "--force", "--detach", commit)
        self.git("clean", "-q", "-fdx")
        if self.setup:  # #40: a build step (a generated version file, an extension), in the checkout
            proc = subprocess.run(
                self.setup, shell=True, cwd=self.work, env=self.env, capture_output=True, text=True, check=False
            )
            if proc.returncode:
                raise SystemExit(
                    f"--setup exited {proc.returncode} at {commit}:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
                )

    def pytest(
        self, out: Path, *extra: str, cover: bool = False, env: dict[str, str] | None = None, faulty: bool = False
    ) -> Run:
        cache = [] if "--testmon" in extra else ["-p", "no:cacheprovider"]
        # a test file the commit does not have yet is left out, not an error
        tests = [t for t in self.tests if (self.work / t.split("::", 1)[0]).exists()]
        if self.tests and not tests:
            raise SystemExit(f"none of {' '.join(self.tests)} exists at {self.git('rev-parse', 'HEAD').strip()}")
        argv = [self.python, "-m", "pytest", "-q", *cache, "-p", "_replay_plugin", *extra, *tests]
        run_env = {**self.env, **(env or {}), "REPLAY_OUT": str(out), "REPLAY_COVER": "1" if cover else "0"}
        run_env["REPLAY_TMP"] = str(self.work.parent)
        run_env["REPLAY_OPENS"] = str(ROOT / "device_matrix" / "child" / "opens.py")  # #40: the files opened
        out.unlink(missing_ok=True)
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                argv, cwd=self.work, env=run_env, capture_output=True, text=True, timeout=self.timeout, check=False
            )
        except subprocess.TimeoutExpired:
            self.seconds += time.perf_counter() - start
            return Run({}, {}, {}, timed_out=True)
        self.seconds += time.perf_counter() - start
        if (proc.returncode not in (0, 1) or not out.exists()) and faulty:
            return Run({}, {}, {}, broken=True)  # #40: the fault stopped the suite: no test's truth
        if proc.returncode not in (0, 1) or not out.exists():
            at = self.git("rev-parse", "HEAD").strip()
            raise SystemExit(f"pytest at {at} exited {proc.returncode}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        data = json.loads(out.read_text())
        return Run(
            data["outcomes"],
            data["seconds"],
            data["files"],
            imports=data.get("imports", {}),
            lines=data.get("lines", {}),
            reads=data.get("reads"),
            openers=data.get("openers", {}),
            read_at_import=data.get("read_at_import", []),
            unseen=data.get("unseen", {}),
            starters=data.get("starters", []),
        )

    def testmon(self, datafile: Path, out: Path) -> Run:
        """``pytest --testmon`` with its database at ``datafile`` (built there, or read and updated)."""
        cache = self.work.parent / "pytest-cache"  # testmon needs pytest's cache plugin: a fresh one each run
        shutil.rmtree(cache, ignore_errors=True)
        extra = [] if self.autoload else ["-p", "testmon.pytest_testmon"]
        extra += ["--testmon", "-o", f"cache_dir={cache}", *(["--testmon-forceselect"] if self.tests else [])]
        return self.pytest(out, *extra, env={"TESTMON_DATAFILE": str(datafile)})


def to_map(run: Run, commit: str) -> testmap.TestMap:
    """The run's per-test files as a device-matrix test map (each passing or failing test of it)."""
    tests = {t: frozenset(run.files.get(t, ())) for t in run.outcomes if "::" in t}
    imports = {rel: frozenset(lines) for rel, lines in run.imports.items()}
    lines = {t: {rel: frozenset(ns) for rel, ns in run.lines.get(t, {}).items()} for t in tests}
    created = datetime.now(UTC).isoformat()
    reads = {t: frozenset(run.reads.get(t, ())) for t in tests} if run.reads is not None else None
    return testmap.TestMap(
        row="replay",
        commit=commit,
        created=created,
        tests=tests,
        imports=imports,
        lines=lines,
        reads=reads,
        read_at_import=frozenset(run.read_at_import),
        openers={rel: frozenset(by) for rel, by in run.openers.items()} if reads is not None else None,
        unseen={t: why for t, why in run.unseen.items() if t in tests or not t},
        starters=frozenset(run.starters),
    )


def rules_at(work: Path) -> engine.Rules:
    """The selection rules the replayed project's configuration gives at the checked-out commit."""
    return engine.rules_of(dm_config.load(work, environ={}))


@dataclass
class Tally:
    commits: int = 0
    without_sites: int = 0
    faults: int = 0
    undetected: int = 0
    timed_out: int = 0
    broken: int = 0  # #40: faults that stopped pytest itself (exit 2 to 4): no test's truth
    full_reasons: dict[str, int] = field(default_factory=dict)
    planning: list[float] = field(default_factory=list)  # #40: seconds device-matrix planned each change


def replay(
    rp: Replay, commits: Sequence[str], args: argparse.Namespace, log: Callable[[str], None]
) -> tuple[list[Case], Tally]:
    """Every faulty change of ``commits[1:]`` (``commits[0]`` is only mapped), scored."""
    tmp = rp.work.parent
    cases: list[Case] = []
    tally = Tally()
    maps: dict[str, tuple[testmap.TestMap, Path]] = {}  # commit -> its map and its testmon database
    rp.checkout(commits[0])
    baseline = rp.pytest(tmp / "run.json", cover=True)
    maps[commits[0]] = _mapped(rp, commits[0], baseline, None)
    map_commit = commits[0]
    started = time.perf_counter()
    for i, commit in enumerate(commits[1:], start=1):
        if args.budget and time.perf_counter() - started > args.budget:
            log(f"stopped before {commit[:10]}: --budget {args.budget:.0f}s spent")
            break
        parent = commits[i - 1]
        rp.checkout(commit)
        tally.commits += 1
        diff = rp.git("diff", "-U0", "--no-renames", "--no-color", parent, commit, "--", "*.py")
        sites = [
            f
            for path, lines in sorted(changed_lines(diff).items())
            if not is_test_file(path)
            for f in fault_sites(path, (rp.work / path).read_text(errors="replace"), lines)
        ]
        faults = pick_faults(sites, args.faults, args.seed, commit)
        tally.without_sites += not faults
        mapped_here = i % args.map_every == 0  # CI records a map on this commit of the base branch
        if not (faults or mapped_here):  # nothing to score and no map to record: no run needed
            log(f"{i}/{len(commits) - 1} {commit[:10]}: no fault site")
            continue
        baseline = rp.pytest(tmp / "run.json", cover=mapped_here)  # per-test coverage only for a map
        m, db = maps[map_commit]
        rules = rules_at(rp.work)
        for fault in faults:
            tally.faults += 1
            case = _faulty_change(
                rp, fault, baseline=baseline, m=m, db=db, map_commit=map_commit, rules=rules, tally=tally
            )
            if case is not None:
                cases.append(case)
                log(f"  {commit[:10]} {fault.label}: {len(case.failing)} failing")
        if mapped_here:
            maps[commit] = _mapped(rp, commit, baseline, db)
            map_commit = commit
        log(f"{i}/{len(commits) - 1} {commit[:10]}: {len(faults)} faults from {len(sites)} sites")
    return cases, tally


def _mapped(rp: Replay, commit: str, run: Run, previous_db: Path | None) -> tuple[testmap.TestMap, Path]:
    """The map recorded at ``commit`` (written and read back as a test-map.json) and the
    testmon database at it (built there, or the previous one brought up to date as CI would)."""
    path = rp.work.parent / "maps" / commit / testmap.FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    testmap.write(path, to_map(run, commit))
    db = path.parent / "testmondata"
    if previous_db is not None:
        copy_database(previous_db, db)
    rp.testmon(db, path.parent / "testmon.json")
    return testmap.read(path), db


def copy_database(source: Path, target: Path) -> None:
    """A copy of testmon's SQLite database as it stands, through SQLite (its write-ahead log
    included): a copy of the main file alone can be a malformed database (a replay of this
    repository's history stopped on one)."""
    target.unlink(missing_ok=True)
    with contextlib.closing(sqlite3.connect(source)) as src, contextlib.closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


def _faulty_change(
    rp: Replay,
    fault: Fault,
    *,
    baseline: Run,
    m: testmap.TestMap,
    db: Path,
    map_commit: str,
    rules: engine.Rules,
    tally: Tally,
) -> Case | None:
    target = rp.work / fault.path
    original = target.read_text(errors="replace")
    target.write_text(fault.source)
    try:
        truth = rp.pytest(rp.work.parent / "truth.json", faulty=True)
        if truth.timed_out or truth.broken:
            tally.timed_out += truth.timed_out
            tally.broken += truth.broken
            return None
        failing = truth.failed_against(baseline)
        if not failing:
            tally.undetected += 1
            return None
        changed = [f for f in rp.git("diff", "--name-only", "--no-renames", map_commit).split() if f]
        nodeids = [t for t in truth.outcomes if "::" in t] or sorted(baseline.outcomes)
        seconds = {t: truth.seconds.get(t, 0.0) for t in nodeids}
        scratch = rp.work.parent / "testmondata.scratch"
        copy_database(db, scratch)  # testmon writes to its database: each fault starts from the map commit's
        chosen = rp.testmon(scratch, rp.work.parent / "testmon.json")
        planning = time.perf_counter()
        p = device_matrix_plan(m, changed, rules, rp.work)
        tally.planning.append(time.perf_counter() - planning)
        why: dict[str, str] = {n: d.why for n, d in ((n, p.decide(n)) for n in nodeids) if d.run}
        dm, full = frozenset(why), p.full_reason
    finally:
        target.write_text(original)
    if full is not None:
        key = re.sub(r"\d+ days old", "N days old", full)
        tally.full_reasons[key] = tally.full_reasons.get(key, 0) + 1
    return Case(
        label=fault.label,
        failing=failing,
        seconds=seconds,
        selected={
            "run everything": frozenset(nodeids),
            "own file changed": own_file(nodeids, changed),
            "pytest-testmon": frozenset(t for t in chosen.outcomes if "::" in t),
            "device-matrix": dm,
        },
        full_reason=full,
        why=why,
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repo", type=Path, help="a git repository to replay (default: the fixture repository, built)")
    ap.add_argument("--commits", type=int, default=50, help="how many of its last commits (first parents)")
    ap.add_argument("--rev", default="HEAD", help="the newest commit to replay (default: HEAD)")
    ap.add_argument("--faults", type=int, default=3, help="faulty changes per commit")
    ap.add_argument("--seed", type=int, default=34)
    ap.add_argument("--map-every", type=int, default=1, help="record the map on every Kth commit only")
    ap.add_argument("--tests", nargs="*", default=[], help="restrict the suite to these paths")
    ap.add_argument("--python", default=sys.executable, help="interpreter with pytest-testmon for the runs")
    ap.add_argument("--timeout", type=float, default=900, help="seconds one pytest run may take")
    ap.add_argument("--budget", type=float, default=0, help="start no commit after this many seconds (0: none)")
    ap.add_argument("--quiet", action="store_true", help="print the table only")
    ap.add_argument(
        "--setup",
        help="a shell command run in the checkout after each checkout, with --python's folder first on PATH "
        "(a build step: 'python -m pip install -q --no-deps -e .')",
    )
    args = ap.parse_args()
    log: Callable[[str], None] = (lambda _: None) if args.quiet else (lambda s: print(s, flush=True))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dm-selection-") as tmp:
        source = args.repo
        if source is None:
            from _fixture_repo import build

            source = Path(tmp) / "fixture"
            build(source, commits=args.commits + 5)
        shas = subprocess.run(
            ["git", "rev-list", "--first-parent", "--reverse", "-n", str(args.commits + 1), args.rev],
            cwd=source,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        rp = Replay(
            source,
            Path(tmp) / "work",
            python=args.python,
            tests=args.tests,
            timeout=args.timeout,
            autoload=args.repo is not None,  # the fixture's tests need no plugin but the two loaded by name
            setup=args.setup,
        )
        cases, tally = replay(rp, shas, args, log)
    _report(args, shas, cases, tally, source=source, runs=rp.seconds, wall=time.perf_counter() - started)
    return 0


def _report(
    args: argparse.Namespace,
    shas: Sequence[str],
    cases: Sequence[Case],
    tally: Tally,
    *,
    source: Path,
    runs: float,
    wall: float,
) -> None:
    where = "the fixture repository (bench/_fixture_repo.py)" if args.repo is None else str(source)
    suite = " ".join(args.tests) if args.tests else "the whole suite"
    print()
    last = shas[tally.commits] if tally.commits else shas[0]
    print(f"replayed {tally.commits} commits of {where}, {shas[1][:10]}..{last[:10]}, suite: {suite}")
    print(
        f"  {tally.faults} faulty changes injected (up to {args.faults} a commit, seed {args.seed}; "
        f"{tally.without_sites} commits changed no line a fault fits), map every {args.map_every} commit(s)"
    )
    print(
        f"  {len(cases)} detected by the full suite and scored; {tally.undetected} no test detects, "
        f"{tally.timed_out} timed out, {tally.broken} stopped pytest itself: left out"
    )
    for reason, n in sorted(tally.full_reasons.items(), key=lambda kv: -kv[1]):
        print(f"  device-matrix ran everything for {n} of them: {reason}")
    print(f"  {runs:.0f}s in pytest runs, {wall:.0f}s in all")
    if tally.planning:
        ordered = sorted(tally.planning)
        print(
            f"  device-matrix's planning per change: median {ordered[len(ordered) // 2]:.2f}s, "
            f"max {ordered[-1]:.2f}s over {len(ordered)} changes ({', '.join(f'{t:.2f}' for t in tally.planning)})"
        )
    print()
    print("\n".join(table(cases, STRATEGIES)))
    print()
    print(f"  device-matrix's test time by why each test ran, in points: {shares(cases)}")
    print("\n".join(apart(cases)))
    print()
    print("\n".join(each(cases)))


if __name__ == "__main__":
    sys.exit(main())
