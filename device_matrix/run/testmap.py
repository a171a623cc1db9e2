"""#34: the run's test map: the parts its pytest processes left, into ``results/<row>/test-map.json``.

With ``record_map`` (or ``run --record-map``) every pytest process of the run records,
in a folder of its own under ``attempts/map/``, which project files each test it finished
ran (:mod:`device_matrix.child.testmap`). At the end of the run the parts become one
:class:`~device_matrix.records.testmap.TestMap` of the row at the run's commit, and the
parts (raw nodeids) go. A test that ran in more than one process (a crash's rerun) keeps
the files of each. A resumed run adds its tests to the map the run it continues wrote.
A map recorded from a tree with uncommitted changes to tracked files names no commit: its
coverage is of those changes, and a selection by it runs every test.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from device_matrix.devices import ask_tool
from device_matrix.errors import EnvironmentProblem, ResultsError
from device_matrix.records import testmap
from device_matrix.records.outcomes import FAILING_OUTCOMES
from device_matrix.records.source import git
from device_matrix.run.context import Run
from device_matrix.run.state import now_iso
from device_matrix.wire import MAP_IMPORTS, MAP_LINES, MAP_OPENERS, MAP_PART, MAP_READS, MAP_UNSEEN

PROBE_TIMEOUT = 120.0  # seconds for the row's interpreter to import coverage (a cold disk, a busy host)
# asked of the row's interpreter, in the child's environment: the plugin's own check
PROBE = "import sys; from device_matrix.child.testmap import coverage_problem as p; sys.exit(p())"


UNTRACKED_FILE = "untracked.json"  # the project's untracked files as the run started (#40)


def check(run: Run) -> None:
    """Before the first test: the row's interpreter on this host has what the map needs
    (a container's image is asked with its other imports)."""
    if not run.setup.cfg.record_map or not run.setup.runs_pytest or run.setup.plan.mode == "container":
        return
    env = {**os.environ, **run.child.environment()}
    code, said = ask_tool(
        [run.executor.interpreter(), "-c", PROBE], PROBE_TIMEOUT, cwd=run.setup.cfg.project_root, env=env
    )
    if code != 0:
        raise EnvironmentProblem(
            f"row {run.setup.row.name!r} cannot record the test map: {said or f'the check exited {code}'}",
            tip="Install it where the row's tests run (pip install 'device-matrix[map]', or add "
            "'coverage>=7.10' to the row's install), or run without --record-map / record_map.",
        )


def clear(run: Run, *, resumed: bool) -> None:
    """The last run's map goes with its record: a run that records none leaves none behind
    to stand for its commit. A resumed run keeps it (it adds to it), and so does a run that
    selects by changes: it records no map, and the next one selects by the same map. A run
    that records one keeps the project's untracked files as it starts (:func:`write_map`)."""
    selecting = run.options.test_plan is not None and run.options.test_plan.mode == "changed"
    if not resumed and not selecting:
        (run.setup.folder.path / testmap.FILE_NAME).unlink(missing_ok=True)
    folder = run.setup.map_parts
    if folder is not None and not (folder / UNTRACKED_FILE).exists():  # a resumed run's: as it first started
        # #40: the project's untracked files as the run starts (:func:`write_map`)
        out, _ = git(run.setup.cfg.project_root, "ls-files", "-z", "--others", "--exclude-standard")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / UNTRACKED_FILE).write_text(json.dumps(sorted(p for p in (out or "").split("\0") if p)))


class _Parts:
    """What the run's processes (and the map a resumed run continues) recorded, gathered.
    A field that is None once a part lacks it is not known for the map (#34, #40)."""

    def __init__(self) -> None:
        self.tests: dict[str, set[str]] = {}
        self.imports: dict[str, set[int]] = {}  # #34: the lines each file ran outside every test
        # #34: nodeid -> path -> the lines it ran (None: the map goes by files)
        self.lines: dict[str, dict[str, set[int]]] | None = {}
        # #40: nodeid -> the non-Python files it opened ("": outside every test)
        self.reads: dict[str, set[str]] | None = {}
        self.openers: dict[str, set[str]] | None = {}  # #40: file -> the functions that opened it
        # #40: nodeid ("": outside every test) -> why the opens of programs it started are
        # unseen; and the functions that started them
        self.unseen: dict[str, str] | None = {}
        self.starters: set[str] = set()

    def add(self, own: Path, part: dict[str, list[Any]]) -> None:
        """One process's folder, whose ``part.json`` is ``part``."""
        for rel, numbers in (_part(own / MAP_IMPORTS) or {}).items():
            self.imports.setdefault(rel, set()).update(n for n in numbers if isinstance(n, int))
        for nodeid, files in part.items():
            self.tests.setdefault(nodeid, set()).update(f for f in files if isinstance(f, str))
        self.lines = _add_lines(self.lines, own / MAP_LINES)
        self.reads = _add_reads(self.reads, _part(own / MAP_READS))
        self.openers = _add_reads(self.openers, _part(own / MAP_OPENERS))
        self.unseen = _add_unseen(self.unseen, self.starters, _part(own / MAP_UNSEEN))

    def add_earlier(self, earlier: testmap.TestMap) -> None:
        """The map of the run a resumed run continues."""
        for nodeid, kept in earlier.tests.items():
            self.tests.setdefault(nodeid, set()).update(kept)
        for rel, seen in earlier.imports.items():
            self.imports.setdefault(rel, set()).update(seen)
        self.lines = _add_earlier(self.lines, earlier.lines)
        self.reads = _add_reads(self.reads, _reads_json(earlier))
        by = None if earlier.openers is None else {f: sorted(names) for f, names in earlier.openers.items()}
        self.openers = _add_reads(self.openers, by)
        unseen = None if earlier.reads is None else {n: [why] for n, why in earlier.unseen.items()}
        self.unseen = _add_unseen(self.unseen, self.starters, unseen)
        self.starters.update(earlier.starters)

    def map(self, row: str, commit: str | None, failed: frozenset[str]) -> testmap.TestMap:
        lines, reads, openers = self.lines, self.reads, self.openers
        # #40: what each test opened is known only with the programs each started
        reads = reads if self.unseen is not None else None
        return testmap.TestMap(
            row=row,
            commit=commit,
            created=now_iso(),
            tests={nodeid: frozenset(files) for nodeid, files in self.tests.items()},
            imports={rel: frozenset(numbers) for rel, numbers in self.imports.items()},
            lines=None if lines is None else {n: {r: frozenset(ns) for r, ns in fs.items()} for n, fs in lines.items()},
            reads=None if reads is None else {n: frozenset(rels) for n, rels in reads.items() if n},
            read_at_import=frozenset(reads.get("", ())) if reads is not None else frozenset(),
            openers=None if openers is None or reads is None else {f: frozenset(by) for f, by in openers.items()},
            unseen=self.unseen or {},
            starters=frozenset(self.starters),
            failed=failed,
        )


def write_map(run: Run) -> testmap.TestMap | None:
    """``test-map.json`` from the run's parts (None: the run records no map, or no process
    of it finished a test); what the map leaves out is told."""
    folder = run.setup.map_parts
    if folder is None:
        return None
    parts = _Parts()
    died = 0
    for own in sorted(folder.glob("cov-*")):
        part = _part(own / MAP_PART)
        if part is None:
            died += 1  # a process that died with no process after it to fold its folder
            continue
        parts.add(own, part)
    target = run.setup.folder.path / testmap.FILE_NAME
    if run.resumed and target.is_file():
        try:
            parts.add_earlier(testmap.read(target))
        except ResultsError as exc:
            run.setup.note(f"the test map of the run resumed is not kept: {exc.message}")
    untracked = _read_untracked(folder, parts)
    if died:
        run.setup.note(
            f"the test map leaves out the tests of {died} process(es) that died with none after them "
            "(they run on every selection until a map records them)",
        )
    shutil.rmtree(folder, ignore_errors=True)
    if not parts.tests:
        run.setup.note("no test map: no pytest process of the run finished a test")
        return None
    source = run.options.source
    commit = _full_id(run, source["commit"] if source is not None else None)
    if commit is not None and _changed_tree(run.setup.cfg.project_root):
        # #34: its coverage is of the changed files, not of the commit's: a selection by it would
        # diff from a commit the map does not stand for
        commit = None
        run.setup.note(
            "the test map names no commit: the tree had uncommitted changes to tracked files "
            "(a selection by it runs every test; record it from a committed tree)",
        )
    if commit is not None and untracked:
        # #40: what a test read is not in the commit: a selection by it could not see it go or change
        commit = None
        run.setup.note(
            f"the test map names no commit: its tests read untracked files ({', '.join(untracked[:3])}"
            f"{' ...' if len(untracked) > 3 else ''}; a selection by it runs every test; commit them, "
            "ignore them in .gitignore, or remove them before recording)",
        )
    failed = frozenset(n for n, t in run.execution.tests.results.items() if t["outcome"] in FAILING_OUTCOMES)
    recorded = parts.map(run.setup.row.name, commit, failed)
    testmap.write(target, recorded, run.setup.redactor)
    return recorded


def _add_lines(lines: dict[str, dict[str, set[int]]] | None, path: Path) -> dict[str, dict[str, set[int]]] | None:
    """``lines`` with a process's ``lines.json`` added; None when either has none (#34: a map
    whose line data is partial would leave out the tests of the part that lost it)."""
    try:
        part = json.loads(path.read_text("ascii"))
    except (OSError, ValueError):
        return None
    if lines is None or not isinstance(part, dict):
        return None
    for nodeid, per_file in part.items():
        if not isinstance(per_file, dict):
            return None
        mine = lines.setdefault(str(nodeid), {})
        for rel, numbers in per_file.items():
            if not isinstance(numbers, list):
                return None
            mine.setdefault(str(rel), set()).update(
                n for n in numbers if isinstance(n, int) and not isinstance(n, bool)
            )
    return lines


def _add_reads(reads: dict[str, set[str]] | None, part: dict[str, list[Any]] | None) -> dict[str, set[str]] | None:
    """``reads`` with a process's files read (or their openers) added; None when either has
    none (#40: a map that lost a part's reads would run none of that part's readers)."""
    if reads is None or part is None:
        return None
    for nodeid, rels in part.items():
        reads.setdefault(str(nodeid), set()).update(r for r in rels if isinstance(r, str))
    return reads


def _add_unseen(
    unseen: dict[str, str] | None, starters: set[str], part: dict[str, list[Any]] | None
) -> dict[str, str] | None:
    """``unseen`` with a process's tests whose programs' opens are unseen added (their
    starters into ``starters``); None when either has none (#40: a map that lost them would
    take a test that started one for a test that read nothing)."""
    if unseen is None or part is None:
        return None
    for nodeid, kept in part.items():
        if not kept or not all(isinstance(k, str) for k in kept):
            return None
        unseen.setdefault(str(nodeid), kept[0])
        starters.update(kept[1:])
    return unseen


def _reads_json(m: testmap.TestMap) -> dict[str, list[Any]] | None:
    if m.reads is None:
        return None
    return {**{n: sorted(r) for n, r in m.reads.items()}, "": sorted(m.read_at_import)}


def _add_earlier(
    lines: dict[str, dict[str, set[int]]] | None, earlier: Mapping[str, Mapping[str, frozenset[int]]] | None
) -> dict[str, dict[str, set[int]]] | None:
    """``lines`` with the line data of the map a resumed run continues (None: either has none)."""
    if lines is None or earlier is None:
        return None
    for nodeid, per_file in earlier.items():
        mine = lines.setdefault(nodeid, {})
        for rel, numbers in per_file.items():
            mine.setdefault(rel, set()).update(numbers)
    return lines


def _full_id(run: Run, commit: str | None) -> str | None:
    """The run's commit as a full object id, which a map must name (#40: a selection hands it
    to git); an abbreviation git can resolve is resolved, any other is told and left out."""
    if commit is None or testmap.COMMIT_RE.fullmatch(commit):
        return commit
    out, _ = git(
        run.setup.cfg.project_root,
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"{commit}^{{commit}}",
    )
    if out is not None and testmap.COMMIT_RE.fullmatch(out.strip()):
        return out.strip()
    run.setup.note(
        f"the test map names no commit: {commit[:60]!r} is not a full commit id git can resolve here "
        "(a selection by it runs every test)",
    )
    return None


def _read_untracked(folder: Path, parts: _Parts) -> list[str]:
    """#40: the project's files untracked as the run started that it ran, read or listed (a
    test's, an import's): the map measured what its commit does not hold."""
    try:
        listed = json.loads((folder / UNTRACKED_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return []
    seen = {*parts.imports, *(f for files in parts.tests.values() for f in files)}
    reads = {r for rels in (parts.reads or {}).values() for r in rels}
    seen |= {r.rstrip("/") for r in reads}
    # a folder listed (``data/``, ``data//``) sees the names in it, and a folder's, of what is below
    folders = tuple(f"{r.rstrip('/')}/" for r in reads if r.endswith("/"))
    return sorted(f for f in listed if isinstance(f, str) and (f in seen or f.startswith(folders)))


def _changed_tree(root: Path) -> bool:
    """Whether git sees uncommitted changes to the tracked files of the checkout at ``root``
    (False when git is missing, slow or says it is no repository: nothing is known then)."""
    out, _ = git(root, "status", "--porcelain", "--untracked-files=no")
    return bool(out and out.strip())


def _part(path: Path) -> dict[str, list[Any]] | None:
    """A process's part (or its imports); None when it wrote none (it died) or not one
    (nothing is assumed of a child: each value a list, of strings or of line numbers)."""
    try:
        part = json.loads(path.read_text("ascii"))
    except (OSError, ValueError):
        return None
    if not isinstance(part, dict) or not all(isinstance(values, list) for values in part.values()):
        return None
    return part
