"""Which of a row's tests a change can break (#34): pure, given the map, the diff and the history.

A pull request's run need not run every test: the test map (:mod:`device_matrix.records.testmap`)
says which project files each test ran on the base, the diff says which files the change
touched, and the history says which tests failed, flaked or were disabled lately. This
module decides, per test, whether it runs and why; it reads no file and starts no process
(the runner finds the map and the diff, ``bench/selection.py`` replays commits through it).

Use::

    p = plan(test_map, changed, row="cpu", rules=rules_of(cfg), recent={"t.py::x": "recently failing"})
    p.full_reason            # None, or why every test runs ("no test map for row 'cpu'")
    p.decide("t.py::test_a")  # Decision(run=True, reason="covers src/a.py", why="covers")
    p.left_out()             # {nodeid: reason} of the map's tests that do not run
    p.summary(nodeids)       # the run record's `test_selection` block

A test runs when its own file changed, when it covers a changed file, when it is new (not
in the map), when the map holds no file for it, or when ``recent`` names it; the others are
deselected ("covers none of the 3 changed files"). Every test runs, and
:attr:`Plan.full_reason` says why, when there is no map, when the map is older than
``rules.max_age``, dated in the future or its date is unreadable, when ``force`` gives a reason (``--select all``,
a label), or when a change cannot be mapped: a file ``rules.full`` names (conftest.py,
pyproject.toml, lock and requirements files...) or any file but a Python one (the map
records only Python files, so a data file's readers are unknown). Files ``rules.ignore``
names (documentation) change nothing.

A Python file's change is followed by the map only where it changes function bodies that
never ran at import (``bodies_only``, which the caller finds with :func:`bodies_only` from
the file at the map's commit, the file now and the lines the diff touched): what runs when
a module is imported (a constant, a decorator, a default, a class body, a call at module
level) ran for whichever test module imported it first, so the map cannot say who relies on
it: with the project's import ``graph`` (:mod:`device_matrix.changes.importgraph`) a change there runs
the test modules from which the module is reachable by imports, and the tests under a
conftest.py from which it is (``imports``); without it, or where the graph cannot tell (a
plugin imports it, no test module does), every test runs. A change to a Python file no test
of the map ran (a new module, one where the map does not measure) runs every test. A test's
own file is followed by its tests (``own_file``); a conftest.py that holds fixtures alone
(``conftests``, :func:`fixtures_only`) by the tests under its folder (``conftest``).

With a map that holds the lines each test ran, a change in function bodies only is
narrowed to its functions (``functions``, which the caller finds with
:func:`changed_functions`): a test sees it, whether it covers the file or the file is its
own, when it ran a line of a changed function; where a changed function ran in no test of
the map, the file's rule holds (#34).

A pattern without ``/`` matches a file's name in any folder (``conftest.py``); one with
``/`` matches its whole project-relative path (``docs/*``), ``*`` crossing folders.
"""

from __future__ import annotations

import ast
import configparser
import fnmatch
import glob
import re
import urllib.parse
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal, TypeAlias, get_args

from device_matrix import tomlfile
from device_matrix.changes.importgraph import Graph, guards, main_guard, outermost
from device_matrix.config import Config
from device_matrix.records.schema import SelectionInfo, SelectMode
from device_matrix.records.testmap import TestMap

# why a test runs (all but the last) or is left out; the record counts tests by these
Why: TypeAlias = Literal[
    "full",
    "own_file",
    "covers",
    "reads",
    "opens",
    "imports",
    "conftest",
    "new",
    "no_data",
    "recent",
    "failed_at_map",
    "named",
    "deselected",
]
WHYS: tuple[Why, ...] = get_args(Why)
# the files a test map records: a change to any other kind of file is one it cannot see
MAPPED_SUFFIXES = (".py",)
# #40: what decides what is installed (packages, dependencies, entry points, version, metadata)
BUILD_FILES = frozenset({"setup.py"})
SHOWN = 3  # changed files named in a reason before "and N more"
# #40: files that are not Python but become code, or say how it is built or run: a change to
# one runs every test whoever opened it (a compiled extension is loaded, not opened)
CODE_FILES = (
    *("*.c", "*.h", "*.cc", "*.cpp", "*.cxx", "*.hpp", "*.cu", "*.cuh", "*.pyx", "*.pxd", "*.pxi"),
    *("*.so", "*.pyd", "*.dylib", "*.dll", "*.rs", "*.pth", "*.toml", "*.cfg", "*.ini", "*.lock"),
    *("Makefile", "CMakeLists.txt", "*.cmake", "MANIFEST.in", "*.sh", "Dockerfile", "*.spec"),
)
TEST_FILES = ("test_*.py", "*_test.py")  # pytest's default python_files
HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@")
CONFTEST = "conftest.py"
PYTEST_PLUGINS = "pytest_plugins"
Spans: TypeAlias = tuple[tuple[int, int], ...]  # first and last line of each, both counted
FUTURE_SLACK = timedelta(minutes=5)  # a map dated ahead of now by more than this is not trusted (clocks drift)
# #40: configuration files whose change is read table by table (:func:`unread_change`)
SECTIONED = ("pyproject.toml", "setup.cfg", "tox.ini")
# #40: the tools whose tables (pyproject.toml's [tool.NAME], setup.cfg's and tox.ini's [NAME],
# [NAME-*], [NAME:*]) only tools run apart from the tests read: linters, formatters, type
# checkers, release tools. Any other table (pytest's, the row's, the project's metadata and
# build, its dependency groups, coverage's, a tool not named here) may change what a test does.
APART_TOOLS = frozenset(
    {
        *("ruff", "black", "isort", "mypy", "pyright", "basedpyright", "ty", "pylint", "flake8", "pycodestyle"),
        *("pep8", "pydocstyle", "pydoclint", "darglint", "docformatter", "codespell", "typos", "bandit", "vulture"),
        *("interrogate", "pyprojectfmt", "tomlsort", "mdformat", "doc8", "yapf", "autopep8", "autoflake", "pycln"),
        *("refurb", "towncrier", "commitizen", "bumpversion", "bumpver", "semanticrelease", "cibuildwheel"),
        *("checkmanifest", "checkwheelcontents", "reporeview"),
        # tox's environments ([tox], [testenv], [testenv:*], [tool.tox]): a row installs its own
        # packages and runs pytest with its own arguments, never in an environment of tox's
        *("tox", "testenv"),
    }
)


@dataclass(frozen=True, kw_only=True)
class Rules:
    """The project's rules of selection (its configuration's ``select_*`` keys: :func:`rules_of`)."""

    max_age: timedelta  # a map older than this is not used: every test runs
    full: tuple[str, ...]  # patterns of files whose change runs every test
    ignore: tuple[str, ...]  # patterns of files no test reads (documentation): their change runs nothing


@dataclass(frozen=True)
class Decision:
    """Whether one test runs, and why, in words a record keeps."""

    run: bool
    reason: str
    why: Why


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _named(files: Sequence[str]) -> str:
    shown = ", ".join(files[:SHOWN])
    return shown if len(files) <= SHOWN else f"{shown} and {len(files) - SHOWN} more"


@dataclass(frozen=True)
class Plan:
    """The decision for each test of one run: build it with :func:`plan`."""

    mode: SelectMode
    full_reason: str | None  # why every test runs; None: each test is decided by the map
    changed: tuple[str, ...]  # the changed project files, sorted (ignored ones left out)
    map_commit: str | None
    test_map: TestMap | None = field(repr=False)
    recent: Mapping[str, str] = field(repr=False)
    named: frozenset[str] = field(default=frozenset(), repr=False)  # #34: named with --test: never left out
    # #34: test file -> why its tests run: it can see a change to what runs at import (the
    # import graph), or a conftest.py of fixtures above it changed; #40: a nodeid too, of a
    # test that ran a function that imports by a computed name or runs a string
    importers: Mapping[str, Decision] = field(default_factory=dict, repr=False)
    # #34: changed file -> the lines of the functions its change is in: a test that ran none
    # of them cannot see the change (files whose change is not narrowed are not here)
    narrowed: Mapping[str, frozenset[int]] = field(default_factory=dict, repr=False)
    # #34: changed file -> the tests that read a name its change to what runs at import
    # binds anew, with why (device_matrix/changes/namereads.py): no other test can see it
    readers: Mapping[str, Mapping[str, str]] = field(default_factory=dict, repr=False)
    # #40: the changed files that are not Python, which the map says who opened (or listed)
    data: frozenset[str] = field(default=frozenset(), repr=False)
    # #40: changed file (narrowed to its functions) -> the tests that may get what a changed
    # function made without running it (a cache, a memo, a wide fixture keeps it), with why
    kept: Mapping[str, Mapping[str, str]] = field(default_factory=dict, repr=False)
    # #40: the changed files that were there at the map's commit and are now: a folder
    # listed above one lists the same names, so the listing does not see the change
    present: frozenset[str] = field(default=frozenset(), repr=False)

    def decide(self, nodeid: str) -> Decision:
        """Whether ``nodeid`` runs, and why."""
        if self.full_reason is not None:
            return Decision(True, f"every test runs: {self.full_reason}", "full")
        assert self.test_map is not None  # a plan without a map runs everything
        covered = self.test_map.tests.get(nodeid)
        if covered is None:
            return Decision(True, f"new: not in the test map of {_commit(self.map_commit)}", "new")
        own = nodeid.split("::", 1)[0]
        ran = self.test_map.lines.get(nodeid) if self.test_map.lines is not None else None
        if own in self.changed and self._runs_changed(own, ran):
            said = "it ran a changed function of its own file" if own in self.narrowed else "its own file changed"
            return Decision(True, f"{said} ({own})", "own_file")
        touched = covered & set(self.changed)
        hit = sorted(f for f in touched if f not in self.readers and self._runs_changed(f, ran))
        if hit:
            return Decision(True, f"covers {_named(hit)}", "covers")
        mine = self.test_map.reads.get(nodeid, frozenset()) if self.test_map.reads is not None else frozenset()
        read = sorted(f for f in self.data if read_by(f, mine, listed=f not in self.present))
        if read:
            return Decision(True, f"it opened {_named(read)}", "opens")
        if self.changed and nodeid in self.test_map.unseen:
            # #40: what its program opened no hook saw (a data file, a source a linter reads), what
            # ran under a tracer of its own or on a thread coverage does not trace
            why = self.test_map.unseen[nodeid]
            return Decision(True, f"{why}: the map cannot see all it did, and {_named(self.changed)} changed", "opens")
        name = next((by[nodeid] for _, by in sorted({**self.kept, **self.readers}.items()) if nodeid in by), None)
        if name is not None:
            return Decision(True, name, "reads")
        if own in self.importers:
            return self.importers[own]
        if nodeid in self.importers:  # #40: a test that ran a function that imports dynamically
            return self.importers[nodeid]
        if not covered:
            return Decision(True, "no map data: the test map holds no file it ran", "no_data")
        if nodeid in self.recent:
            return Decision(True, self.recent[nodeid], "recent")
        if nodeid in self.test_map.failed:  # #40: whether or not triage has put it in the history
            return Decision(
                True, f"it failed in the run that recorded the map of {_commit(self.map_commit)}", "failed_at_map"
            )
        if nodeid in self.named:
            return Decision(True, "named with --test", "named")
        if not self.changed:
            return Decision(False, f"nothing changed since {_commit(self.map_commit)}", "deselected")
        if touched or own in self.changed:
            files = sorted(touched | ({own} & set(self.changed)))
            if all(f in self.readers for f in files):
                return Decision(False, f"reads none of the names {_named(files)} binds anew", "deselected")
            return Decision(False, f"ran none of the changed functions of {_named(files)}", "deselected")
        if self.readers and all(f in self.readers for f in self.changed):
            return Decision(False, f"reads none of the names {_named(self.changed)} binds anew", "deselected")
        return Decision(False, f"covers none of the {_plural(len(self.changed), 'changed file')}", "deselected")

    def _runs_changed(self, path: str, ran: Mapping[str, frozenset[int]] | None) -> bool:
        """Whether a test that ran ``ran`` (path -> lines; None: unknown) can see the change to
        ``path``: any change but one narrowed to functions, or a line of a changed function (#34)."""
        lines = self.narrowed.get(path)
        return lines is None or ran is None or not lines.isdisjoint(ran.get(path, ()))

    def split(self, nodeids: Iterable[str]) -> tuple[list[str], dict[str, str]]:
        """The tests that run, in the order given, and those left out with their reasons."""
        run: list[str] = []
        left_out: dict[str, str] = {}
        for nodeid in nodeids:
            d = self.decide(nodeid)
            if d.run:
                run.append(nodeid)
            else:
                left_out[nodeid] = d.reason
        return run, left_out

    def left_out(self) -> dict[str, str]:
        """The map's tests this plan leaves out, with why: what the child is told to deselect
        (a test the map does not know is never left out)."""
        if self.test_map is None or self.full_reason is not None:
            return {}
        decided = ((n, self.decide(n)) for n in self.test_map.tests)
        return {n: d.reason for n, d in decided if not d.run}

    def summary(self, nodeids: Iterable[str]) -> SelectionInfo:
        """The run record's block of this selection over the run's tests ``nodeids``."""
        counts = Counter(self.decide(n).why for n in nodeids)
        total = sum(counts.values())
        return SelectionInfo(
            mode=self.mode,
            full_reason=self.full_reason,
            map_commit=self.map_commit,
            changed=list(self.changed),
            ran=total - counts["deselected"],
            total=total,
            by_reason={w: counts[w] for w in WHYS if counts[w]},
        )


def _commit(commit: str | None) -> str:
    return f"commit {commit[:12]}" if commit else "a checkout outside git"


def matches(path: str, patterns: Iterable[str]) -> bool:
    """Whether a project-relative POSIX ``path`` matches one of ``patterns`` (see the module)."""
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(path if "/" in p else name, p) for p in patterns)


def unmappable(
    changed: Iterable[str],
    rules: Rules,
    test_map: TestMap | None = None,
    unread: Collection[str] = (),
    present: Collection[str] = (),
) -> list[str]:
    """The changed files whose change the map cannot follow, sorted: every test must run
    (with ``test_map``, a file that is not Python is followed by who opened it: :func:`opened`;
    so is a configuration file of ``unread``, whose change no run reads: :func:`unread_change`)."""
    return sorted(
        f
        for f in changed
        if not matches(f, rules.ignore)
        and (
            (
                not opened(f, rules, test_map, unread, present)
                and (matches(f, rules.full) or not f.endswith(MAPPED_SUFFIXES))
            )
            # #40: code outside the project's folder, which the map does not measure; a
            # Python file read as a file outside every test (by code run at import)
            or (f.endswith(MAPPED_SUFFIXES) and (outside(f) or _read_at_import(f, test_map, present)))
        )
    )


def _read_at_import(path: str, test_map: TestMap | None, present: Collection[str]) -> bool:
    return (
        test_map is not None
        and test_map.reads is not None
        and read_by(path, test_map.read_at_import, listed=path not in present)
    )


def runs_all_alone(path: str, test_map: TestMap, rules: Rules) -> bool:
    """Whether a change to ``path`` runs every test by a rule of its own, whatever it does
    at import (#40): a file ``select_full`` names (``setup.py``, the build; not a
    ``conftest.py``, which may hold fixtures alone), or a Python file no test of the map ran
    that is no test file (:func:`at_import`); neither ``select_ignore`` names."""
    if matches(path, rules.ignore) or path.rsplit("/", 1)[-1] == CONFTEST:
        return False
    unran = path.endswith(MAPPED_SUFFIXES) and path not in test_map.known() and not is_test_file(path, test_map)
    return matches(path, rules.full) or unran


def read_by(path: str, reads: Collection[str], *, listed: bool = True) -> bool:
    """Whether ``path`` was opened, or is in a folder listed (``data/``), as ``reads`` says.
    A listing of names (``os.listdir``) sees names, not contents (#40): with ``listed``
    False (the file was there at the map's commit and is now: its change is to its
    contents) it does not count. A listing of entries (``data//``: ``os.scandir`` called by
    the project's code, not by the standard library's walkers) sees each entry's type and,
    by ``stat()``, its size and time, which a change to its contents moves: the file's own
    folder's counts for any change. A read below ``path`` is one through it: a link to a
    folder pointed elsewhere."""
    folders = path.split("/")[:-1]
    above = ["/".join(folders[:i]) for i in range(1, len(folders) + 1)] if listed else []
    return (
        path in reads
        or any(f"{folder}/" in reads or f"{folder}//" in reads for folder in above)
        or (bool(folders) and "/".join(folders) + "//" in reads)
        or any(r.startswith(f"{path}/") for r in reads)
    )


def outside(path: str) -> bool:
    """Whether a changed ``path`` is the repository's, outside the project's folder (``../``)."""
    return path.startswith("../")


def read_as_text(path: str, test_map: TestMap | None, present: Collection[str] = ()) -> bool:
    """Whether the map says who read ``path``, a Python file, as a file (#40: a hygiene test
    reads the sources, a linter's test its inputs): those tests run, whatever else its
    change runs."""
    return (
        test_map is not None
        and test_map.reads is not None
        and path.endswith(MAPPED_SUFFIXES)
        and any(read_by(path, reads, listed=path not in present) for reads in test_map.reads.values())
    )


def opened(
    path: str, rules: Rules, test_map: TestMap | None, unread: Collection[str] = (), present: Collection[str] = ()
) -> bool:
    """Whether a change to ``path``, a file that is not Python, is followed by the tests that
    opened it (#40): the map knows what each test opened, no code outside every test opened
    it, and it is no configuration (``rules.full``) nor a file that becomes code (:data:`CODE_FILES`),
    or it is a configuration file whose change no run reads (``unread``: :func:`unread_change`).
    A folder listed outside every test counts only where the file was added or removed:
    one of ``present`` was there at the map's commit and is now, its folder's names the same."""
    return (
        test_map is not None
        and test_map.reads is not None
        and "" not in test_map.unseen  # #40: the project's code started a program outside every test
        and not path.endswith(MAPPED_SUFFIXES)
        and (path in unread or not (matches(path, rules.full) or matches(path, CODE_FILES)))
        and not read_by(path, test_map.read_at_import, listed=path not in present)
    )


def unread_change(path: str, old: str | None, new: str | None, tests: Iterable[str] = ()) -> bool:
    """Whether a change to ``path``, a pyproject.toml, setup.cfg or tox.ini that was there at
    the map's commit (``old``) and is now (``new``; ``""``: absent, None: unreadable), is in
    the tables of tools run apart from the tests alone (:data:`APART_TOOLS`), comments and
    layout aside (#40): pytest, the row and the installed project read none of it. A tool
    one of the map's ``tests`` is named by is not apart (a pytest plugin that runs it as a
    test: pytest-mypy's ``file.py::mypy``). A pyproject.toml added or removed (pytest's
    rootdir may move with it, whatever it holds) or a file that does not parse is no such
    change; a tox.ini or setup.cfg added or removed reads as an empty one: pytest takes one
    for its configuration, and its folder for the rootdir, only with its own section."""
    name = path.rsplit("/", 1)[-1]
    if name not in SECTIONED or old is None or new is None or (name == "pyproject.toml" and not (old and new)):
        return False
    run_as_tests = {_tool(part) for nodeid in tests for part in nodeid.split("::")[1:]}
    apart = frozenset(t for t in APART_TOOLS if not any(n.startswith(t) for n in run_as_tests))
    read = _toml_read if name == "pyproject.toml" else _ini_read
    was = read(old, apart)
    return was is not None and was == read(new, apart)


def _tool(name: str) -> str:
    """A tool's name as :data:`APART_TOOLS` spells it: ``flake-8`` is ``flake8``."""
    return name.lower().replace("-", "").replace("_", "")


def _toml_read(text: str, apart: frozenset[str]) -> dict[str, object] | None:
    """The TOML ``text`` without the tables of the ``apart`` tools; None: not TOML."""
    try:
        data = tomlfile.loads(text)
    except ValueError:  # tomllib's decode error
        return None
    tools = data.get("tool")
    if isinstance(tools, dict):
        data["tool"] = {k: v for k, v in tools.items() if _tool(k) not in apart}
    return data


def _ini_read(text: str, apart: frozenset[str]) -> dict[str, object] | None:
    """The ini ``text``'s sections but the ``apart`` tools' (``[mypy-pkg.*]`` is mypy's), as
    configparser reads them; None: not read as one (a section or key given twice)."""
    ini = configparser.ConfigParser(interpolation=None)
    try:
        ini.read_string(text)
    except configparser.Error:
        return None
    kept = [s for s in ini.sections() if _tool(re.split(r"[-:.]", s, maxsplit=1)[0]) not in apart]
    return {"": dict(ini.defaults()), **{s: dict(ini.items(s, raw=True)) for s in kept}}


def _too_old(test_map: TestMap, rules: Rules, now: datetime) -> str | None:
    """Why the map is too old to use; None when it is young enough."""
    try:
        created = datetime.fromisoformat(test_map.created)
    except ValueError:
        return f"the test map of row {test_map.row!r} has no readable date ({test_map.created!r})"
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    age = now - created
    if age < -FUTURE_SLACK:
        # #34: a map from the future would never age out: its clock, or its date, is wrong
        ahead = -age
        return (
            f"the test map is dated in the future (created {test_map.created}, "
            f"{ahead.days} days and {ahead.seconds // 60} minutes ahead of now)"
        )
    if age <= rules.max_age:
        return None
    return (
        f"the test map of row {test_map.row!r} is {age.days} days old "
        f"(select_map_max_age_days allows {rules.max_age.days})"
    )


def is_test_file(path: str, test_map: TestMap) -> bool:
    """Whether ``path`` is a test file: the file of a test the map holds, or named as pytest
    names them (a new one's tests are new, and run)."""
    return matches(path, TEST_FILES) or any(n.split("::", 1)[0] == path for n in test_map.tests)


def at_import(
    changed: Sequence[str],
    test_map: TestMap,
    rules: Rules,
    bodies: Collection[str],
    *,
    graph: Graph | None = None,
    conftests: Sequence[str] = (),
) -> tuple[str | None, dict[str, Decision]]:
    """Why a change to Python files runs every test (see the module), or None; and, with the
    import ``graph``, the test files whose tests run because they can see a change to what
    runs at import, or are under a changed ``conftests`` of fixtures (test file -> why).
    Without the graph a change to what runs at import runs every test."""
    source = [f for f in changed if f.endswith(MAPPED_SUFFIXES) and not matches(f, rules.ignore)]
    tests = [f for f in source if is_test_file(f, test_map)]
    source = [f for f in source if f not in tests]
    known = test_map.known()
    unknown = [f for f in source if f not in known]
    if unknown:
        verb = "is a Python file" if len(unknown) == 1 else "are Python files"
        return f"{_named(unknown)} {verb} no test of the map ran (new, or where the map does not measure)", {}
    imported = [f for f in source if f not in bodies]
    if graph is None:
        if imported:
            verb = "changes" if len(imported) == 1 else "change"
            return f"{_named(imported)} {verb} code that runs when it is imported", {}
        return None, {}
    # #34: a test file's import is its own tests' (own_file), and also of the test modules importing it
    return _importers(imported, [*(f for f in tests if f not in bodies), *conftests], test_map, graph)


def _under(path: str, folder: str) -> bool:
    return not folder or path.startswith(f"{folder}/")


def _importers(
    imported: Sequence[str], others: Sequence[str], test_map: TestMap, graph: Graph
) -> tuple[str | None, dict[str, Decision]]:
    """(why every test runs, or None; test file -> why it runs) for changes to what runs at
    import of the source files ``imported`` and of ``others`` (test files, conftest.py files
    of fixtures: whose importers run, and nothing more) (#34)."""
    targets = [*imported, *others]
    if not targets:
        return None, {}
    verb = "changes" if len(targets) == 1 else "change"
    head = f"{_named(targets)} {verb} code that runs when it is imported"
    if graph.everywhere is not None:
        return f"{head}, and which tests import it cannot be followed: {graph.everywhere}", {}
    blind = next((u for u in sorted(graph.unknown) if any(f in graph.plugins for f in graph.importers(u))), None)
    if blind is not None:  # a plugin acts on every test, and may import anything
        loader = next(graph.plugins[f] for f in sorted(graph.importers(blind)) if f in graph.plugins)
        return f"{head}, and what {loader} imports cannot be followed: {graph.unknown[blind]}", {}
    files = sorted({n.split("::", 1)[0] for n in test_map.tests})
    conftests = sorted(f for f in graph.imports if f.rsplit("/", 1)[-1] == CONFTEST)
    seen: dict[str, Decision] = {}
    for target in targets:
        reach = graph.importers(target)
        plugin = next((graph.plugins[f] for f in sorted(reach) if f in graph.plugins), None)
        why = f"{target} changes code that runs when it is imported"
        if plugin is not None:  # its hooks act on every test: whatever it imports is every test's
            return f"{why}: {plugin} imports it, for every test", {}
        direct = [f for f in files if f in reach and f != target]
        through = [c for c in conftests if c in reach]
        if not direct and not through and target in imported and target in test_map.imports:
            # #34: it ran at import, yet no test module imports it: an importer the graph cannot see
            return f"{why}, and no test module imports it: what imported it the import graph cannot tell", {}
        n = len(direct)
        imports = Decision(True, f"{why}: {_plural(n, 'test module')} import{'s' * (n == 1)} it", "imports")
        for f in direct:
            seen.setdefault(f, imports)
        for c in through:
            folder = c.rpartition("/")[0]
            under = f"for the tests under {folder or 'the project'}"
            d = (
                Decision(True, f"{c} changed: it holds fixtures, {under}", "conftest")
                if c == target
                else Decision(True, f"{why}: {c} imports it, {under}", "imports")
            )
            for f in files:
                if _under(f, folder):
                    seen.setdefault(f, d)
    _blind(head, files, conftests, graph, seen, m=test_map)
    if imported and all(f in seen for f in files):
        return head, {}  # every test module can see it: every test runs, as it always did
    return None, seen


def _blind(
    head: str, files: Sequence[str], conftests: Sequence[str], graph: Graph, seen: dict[str, Decision], *, m: TestMap
) -> None:
    """Add to ``seen`` the test files from which a file whose imports cannot be known is
    reachable (itself, or a conftest.py above it): such a test may import anything (#34).
    Where every dynamic import of such a file is in a function that ran in no import (the
    map's), only the tests that ran one of those functions can have imported by it: each
    of those is added by its nodeid, not its file (#40)."""
    reaching = {u: graph.importers(u) for u in sorted(graph.unknown)}
    for f in files:
        if f in seen:
            continue
        if not f.endswith(".py"):  # a text file of doctests: its examples may import anything
            seen[f] = Decision(True, f"{head}, and what the examples of {f} import cannot be followed", "imports")
            continue
        roots = [f, *(c for c in conftests if _under(f, c.rpartition("/")[0]))]
        for u in (u for u, reach in reaching.items() if any(r in reach for r in roots)):
            why = f"{head}, and what {f} imports cannot be followed: {graph.unknown[u]}"
            ran = _ran_dynamic(u, graph, m)
            if ran is None:
                seen[f] = Decision(True, why, "imports")
                break
            for nodeid in (n for n in ran if n.split("::", 1)[0] == f):
                seen.setdefault(nodeid, Decision(True, f"{why}, in a function it ran", "imports"))


def _ran_dynamic(unknown: str, graph: Graph, m: TestMap) -> list[str] | None:
    """The tests that ran a function of ``unknown`` that imports dynamically (#40); None when
    that cannot narrow it: a dynamic import outside every function, or in one that ran at
    import, or a map without lines."""
    spans = graph.unknown_in.get(unknown)
    if spans is None or m.lines is None:
        return None
    lines = frozenset(n for a, b in spans for n in range(a, b + 1))
    if not lines.isdisjoint(m.imports.get(unknown, frozenset())):
        return None
    return [n for n, per in m.lines.items() if not lines.isdisjoint(per.get(unknown, ()))]


def _literal(node: ast.expr | None) -> bool:
    if node is None:
        return True
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _is_fixture(decorator: ast.expr) -> bool:
    """``@pytest.fixture``, ``@fixture``, or either called with literal arguments."""
    call = decorator if isinstance(decorator, ast.Call) else None
    args = [*call.args, *(k.value for k in call.keywords)] if call is not None else []
    return _called(decorator) == "fixture" and all(_literal(a) for a in args)


def _called(decorator: ast.expr) -> str:
    """The name a decorator ends in (``fixture`` of ``@pytest.fixture(scope=...)``)."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""


def _plain(decorator: ast.expr) -> bool:
    """A decorator that is a name (``@property``, ``@staticmethod``), not a call."""
    return isinstance(decorator, (ast.Name, ast.Attribute))


def _definition_only(stmt: ast.stmt, decorated: Callable[[ast.expr], bool]) -> bool:
    """Whether ``stmt`` runs nothing at import but a definition: an import, a docstring, a
    literal assigned to a name, a function (no hook, literal defaults, ``decorated``
    decorators), a class of such (#34)."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
        return True
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant)
    if isinstance(stmt, ast.Assign):
        names = all(isinstance(t, ast.Name) and t.id != PYTEST_PLUGINS for t in stmt.targets)
        return names and _literal(stmt.value)
    if isinstance(stmt, ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id != PYTEST_PLUGINS and _literal(stmt.value)
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        defaults = [*stmt.args.defaults, *stmt.args.kw_defaults]
        return (
            not stmt.name.startswith("pytest_")
            and all(decorated(d) for d in stmt.decorator_list)
            and all(_literal(d) for d in defaults)
        )
    if isinstance(stmt, ast.ClassDef):
        bases = all(isinstance(b, (ast.Name, ast.Attribute)) for b in stmt.bases) and not stmt.keywords
        return not stmt.decorator_list and bases and all(_definition_only(b, _plain) for b in stmt.body)
    return False


def fixtures_only(source: str | None) -> bool:
    """Whether a ``conftest.py`` acts only on the tests under its folder: it holds imports,
    fixtures and other definitions, and no hook (``pytest_*``: a hook acts on the whole
    session), no ``pytest_plugins``, nothing else run at import (a call, an ``if``: the
    process's state, every test's) (#34)."""
    if source is None:
        return False
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return all(_definition_only(stmt, _is_fixture) for stmt in tree.body)


def _skeleton(source: str) -> str | None:
    """The module as it runs at import: every function's body left out but its docstring
    (``f.__doc__`` is made at import), and the body of an ``if __name__ == "__main__":``
    (:func:`main_guard`); None: not Python."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            node.body = [ast.Expr(ast.Constant(doc)), ast.Pass()] if doc is not None else [ast.Pass()]
    for stmt in tree.body:
        if main_guard(stmt):
            stmt.body = [ast.Pass()]  # #40: run as the program only, never at import
    return ast.dump(tree)


def touched_lines(diff: str) -> frozenset[int]:
    """The lines of the old file a ``git diff -U0`` of one file touched: those it removed or
    replaced, and both neighbours of an insertion."""
    touched: set[int] = set()
    for line in diff.splitlines():
        found = HUNK_RE.match(line)
        if found is None:
            continue
        start, count = int(found[1]), int(found[2] if found[2] is not None else 1)
        touched.update(range(start, start + count) if count else (start, start + 1))
    return frozenset(touched)


def import_guard(old: str | None, diff: str) -> frozenset[int]:
    """The lines of :func:`touched_lines` a change is held against what ran at import by: all
    of them, but a function's ``def`` line where lines were only inserted right after it,
    before its body's first statement (#34: the inserted lines are that body's; the def line
    ran at import as the definition, which the skeleton compares, and the body's first line
    stays, so a body that ran at import is still seen)."""
    touched = touched_lines(diff)
    try:
        tree = ast.parse(old) if old is not None else None
    except (SyntaxError, ValueError):
        tree = None
    if tree is None:
        return touched
    # #40: the body of an ``if __name__ == "__main__":`` too (its ``if`` line ran at import)
    bodies = [*(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), *guards(tree)]
    firsts = {node.body[0].lineno for node in bodies if node.body[0].lineno > node.lineno}
    headers = set()
    for line in diff.splitlines():
        found = HUNK_RE.match(line)
        if found is not None and found[2] == "0" and int(found[1]) + 1 in firsts:
            headers.add(int(found[1]))  # inserted after the line before a body's first statement
    return touched - headers


def bodies_only(old: str | None, new: str | None, touched: frozenset[int], ran_at_import: frozenset[int]) -> bool:
    """Whether a file's change (``old`` at the map's commit, ``new`` now: None where it is
    not) changes only function bodies, none of whose touched lines ran at import."""
    if old is None or new is None:
        return False
    before = _skeleton(old)
    return before is not None and before == _skeleton(new) and not touched & ran_at_import


def _wide_fixture(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A fixture of a scope wider than a test's (or a scope not written out): set up in the
    first test that asks for it, which alone names its lines, for every test that uses it."""
    for d in fn.decorator_list:
        if not isinstance(d, ast.Call) or _called(d) != "fixture":
            continue
        scope = next((k.value for k in d.keywords if k.arg == "scope"), None)
        if d.args or (scope is not None and not (isinstance(scope, ast.Constant) and scope.value == "function")):
            return True
    return False


def changed_functions(old: str | None, new: str | None, touched: frozenset[int]) -> Spans | None:
    """The line spans, in ``old``, of the bodies of the functions a change that is in
    function bodies only (:func:`bodies_only`) changed: those whose code differs, or holding
    a line the diff ``touched`` (an ``if __name__ == "__main__":``'s body too); None when it
    cannot be told by function (not parsed, not the same functions, a fixture of a wider scope
    changed, no function changed) (#34)."""
    if old is None or new is None:
        return None
    try:
        old_tree, new_tree = ast.parse(old), ast.parse(new)
    except (SyntaxError, ValueError):
        return None
    before, after = outermost(old_tree), outermost(new_tree)
    was_run, now_run = guards(old_tree), guards(new_tree)
    if [f.name for f in before] != [f.name for f in after] or len(was_run) != len(now_run):
        return None
    spans: list[tuple[int, int]] = []
    for was_if, now_if in zip(was_run, now_run, strict=True):
        last = was_if.end_lineno or was_if.lineno
        if ast.dump(was_if) != ast.dump(now_if) or any(was_if.lineno <= n <= last for n in touched):
            spans.append((was_if.body[0].lineno, last))  # #40: the lines a test ran it by (runpy)
    for was, now in zip(before, after, strict=True):
        last = was.end_lineno or was.lineno
        if ast.dump(was) == ast.dump(now) and not any(was.lineno <= n <= last for n in touched):
            continue
        if _wide_fixture(was) or _wide_fixture(now):
            return None
        # the body's lines: the def line ran at import, for every importer
        spans.append((was.body[0].lineno, last))
    return tuple(spans) or None


def _full_reason(
    test_map: TestMap | None,
    changed: Sequence[str],
    *,
    row: str,
    rules: Rules,
    force: str | None,
    now: datetime,
    bodies: Collection[str],
    graph: Graph | None,
    conftests: Collection[str],
    unread: Collection[str],
    present: Collection[str],
) -> tuple[str | None, dict[str, Decision]]:
    if force is not None:
        return force, {}
    if test_map is None:
        return f"no test map for row {row!r}", {}
    old = _too_old(test_map, rules, now)
    if old is not None:
        return old, {}
    cannot = unmappable(changed, rules, test_map, unread, present)
    # #34: a conftest.py of fixtures acts on the tests under its folder alone, which the graph
    # can tell from the rest (the top one's folder holds every test: it stays a full run)
    narrowed = [f for f in cannot if f in conftests and not _holds_all(f, test_map)] if graph is not None else []
    cannot = [f for f in cannot if f not in narrowed]
    if cannot:
        verb = "changes" if len(cannot) == 1 else "change"
        build = [f for f in cannot if f.rsplit("/", 1)[-1] in BUILD_FILES]
        cannot = [*build, *(f for f in cannot if f not in build)]  # named first: the reason says what it is
        said = f" ({_named(build)} {'is' if len(build) == 1 else 'are'} the build: what is installed)" if build else ""
        started = test_map.unseen.get("")
        if started is not None and not said and any(not f.endswith(MAPPED_SUFFIXES) for f in cannot):
            said = f" (the project's code outside every test: {started}, whose opens the map cannot see)"
        code = [f for f in cannot if outside(f) and f.endswith(MAPPED_SUFFIXES)]
        if code and not said:
            said = f" ({_named(code)}: code outside the project's folder, which the map does not measure)"
        read = [f for f in cannot if f.endswith(MAPPED_SUFFIXES) and _read_at_import(f, test_map, present)]
        if read and not said:
            said = f" ({_named(read)}: read as a file outside every test, by code run at import)"
        return f"{_named(cannot)} {verb}, which the test map cannot follow{said}", {}
    kept = [f for f in changed if f not in narrowed]
    return at_import(kept, test_map, rules, bodies, graph=graph, conftests=narrowed)


def _holds_all(conftest: str, test_map: TestMap) -> bool:
    folder = conftest.rpartition("/")[0]
    return all(_under(n, folder) for n in test_map.tests)


def plan(
    test_map: TestMap | None,
    changed: Iterable[str],
    *,
    row: str,
    rules: Rules,
    recent: Mapping[str, str] | None = None,
    force: str | None = None,
    mode: SelectMode = "changed",
    now: datetime | None = None,
    bodies: Collection[str] = (),
    graph: Graph | None = None,
    conftests: Collection[str] = (),
    functions: Mapping[str, Spans] | None = None,
    readers: Mapping[str, Mapping[str, str]] | None = None,
    kept: Mapping[str, Mapping[str, str]] | None = None,
    unread: Collection[str] = (),
    present: Collection[str] = (),
) -> Plan:
    """The plan of one run of ``row``.

    ``test_map``: the row's map (None: there is none, every test runs); ``changed``: the
    project-relative POSIX paths the change touched; ``recent``: the tests that failed,
    flaked or were disabled lately (nodeid -> the reason it runs, e.g. "recently failing");
    ``force``: a reason to run every test whatever the map says ("--select all", "git is
    not installed here"); ``mode``: what was asked for, as the record keeps it; ``now``: the
    time the map's age is measured at (default: now); ``bodies``: the changed Python files
    whose change :func:`bodies_only` found to be in function bodies only; ``graph``: the
    project's import graph, by which a change to any other changed Python file runs the test
    modules that can see it (None: it runs every test); ``conftests``: the changed conftest.py
    files :func:`fixtures_only` found to hold fixtures alone (with the graph, each runs the
    tests under its folder; any other runs every test); ``functions``: of the ``bodies``, the
    line spans of the functions each change is in (:func:`changed_functions`): with a map
    that holds lines, only the tests that ran a line of one of them see it (#34);
    ``readers``: of the other changed Python files, those whose change to what runs at import
    binds names that :func:`device_matrix.changes.namereads.readers` followed, each with the tests
    that read them (no other test can see it); ``kept``: of the ``functions``, the tests that
    may get what a changed function made without running it (#40: a cache, a memo, a fixture
    of a wider scope keeps it; :func:`device_matrix.changes.namereads.keepers`), and of the changed
    files that are not Python, the tests that may get what the code that opened one kept;
    ``unread``: the changed configuration files whose change no run reads (#40:
    :func:`unread_change`), followed as a file that is not Python is, by who opened them;
    ``present``: the changed files that were there at the map's commit and are now (#40: a
    content change, which a listing of a folder above one does not see).
    """
    files = sorted({f.removeprefix("./") for f in changed} - {""})
    read = {f: by for f, by in (readers or {}).items() if f in files and f not in bodies}
    reason, importers = _full_reason(
        test_map,
        files,
        row=row,
        rules=rules,
        force=force,
        now=now or datetime.now(UTC),
        bodies=frozenset(bodies) | frozenset(read),
        graph=graph,
        conftests=frozenset(conftests),
        unread=frozenset(unread),
        present=frozenset(present),
    )
    return Plan(
        mode=mode,
        full_reason=reason,
        changed=tuple(f for f in files if not matches(f, rules.ignore)),
        map_commit=test_map.commit if test_map is not None else None,
        test_map=test_map,
        recent=dict(recent or {}),
        importers=importers,
        narrowed=_narrowed(test_map, {f: v for f, v in (functions or {}).items() if f in bodies}),
        readers=read,
        data=(data := followed_by_reads(files, rules, test_map, unread, present)),
        kept={f: by for f, by in (kept or {}).items() if f in files and (f in bodies or f in data)},
        present=frozenset(present),
    )


def followed_by_reads(
    files: Iterable[str], rules: Rules, test_map: TestMap | None, unread: Collection[str], present: Collection[str]
) -> frozenset[str]:
    """The changed files whose readers the map names (#40): those that are not Python (or a
    configuration no run reads) that only tests opened, and Python files read as files."""
    return frozenset(
        f
        for f in files
        if not matches(f, rules.ignore)
        and (opened(f, rules, test_map, unread, present) or read_as_text(f, test_map, present))
    )


def _narrowed(test_map: TestMap | None, functions: Mapping[str, Spans]) -> dict[str, frozenset[int]]:
    """Changed file -> the lines of its changed functions, for the files each of whose changed
    functions some test of the map ran (#34: one no test ran may run where the map does not
    measure, and its file keeps the file's rule); none for a map without line data."""
    if test_map is None or test_map.lines is None:
        return {}
    out: dict[str, frozenset[int]] = {}
    for path, spans in functions.items():
        seen: set[int] = set()
        for per_file in test_map.lines.values():
            seen.update(per_file.get(path, ()))
        ranges = [frozenset(range(first, last + 1)) for first, last in spans]
        if ranges and all(not r.isdisjoint(seen) for r in ranges):
            out[path] = frozenset().union(*ranges)
    return out


def rules_of(cfg: Config) -> Rules:
    """The project's rules from its configuration; the project's own device-matrix files
    (its disable list, its ledger's seed) and what its install commands name
    (:func:`install_inputs`) always run every test when they change."""
    root = cfg.project_root
    own = [cfg.disable_list.relative_to(root).as_posix()] if cfg.disable_list.is_relative_to(root) else []
    return Rules(
        max_age=timedelta(days=cfg.select_map_max_age_days),
        full=(*cfg.select_full, *own, cfg.tracker.ledger_seed, *install_inputs(cfg)),
        ignore=cfg.select_ignore,
    )


# pip's options whose value is a file to read more of its arguments from (a requirements or
# constraints file), and those whose value is a folder or a file to install from
LIST_OPTIONS = ("-r", "--requirement", "-c", "--constraint")
PATH_OPTIONS = (*LIST_OPTIONS, "-e", "--editable", "-f", "--find-links")


def install_inputs(cfg: Config) -> tuple[str, ...]:
    """#40: patterns of the project's files its install commands name (``project_install``,
    each row's ``install`` and ``install_args``): a requirements or constraints file and what
    it names in turn, a folder, a wheel or a folder of wheels installed from (``-f``,
    ``file://``); not the project's own folder, which the map follows. What is installed
    changes with them, whatever their names."""
    root = cfg.project_root.resolve()
    tokens = [t for step in cfg.project_install for t in step]
    tokens += [t for row in cfg.rows.values() for t in (*row.install, *row.install_args)]
    todo = [((root / p).resolve(), listing) for p, listing in _named_paths(tokens)]
    found: dict[str, tuple[str, ...]] = {}
    while todo:
        path, listing = todo.pop()
        if path == root or not path.is_relative_to(root):
            continue
        rel = path.relative_to(root).as_posix()
        if rel in found:
            continue
        # a folder's files; one not there now may be a file or a folder when pip runs
        found[rel] = (glob.escape(rel),) + (() if path.is_file() else (glob.escape(rel) + "/*",))
        if listing and path.is_file():
            try:
                lines = path.read_text("utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                continue  # pip cannot read it either: what it names is not known here
            words = [w for line in lines for w in line.split("#", 1)[0].split()]
            todo += [((path.parent / p).resolve(), more) for p, more in _named_paths(words)]
    return tuple(pattern for patterns in found.values() for pattern in patterns)


def _named_paths(tokens: Sequence[str]) -> list[tuple[str, bool]]:
    """The local paths among pip's arguments or a requirements file's words, each with whether
    it is a file of more of them (``-r``, ``-c``): an option's value (``-r FILE``, ``-rFILE``,
    ``--constraint=FILE``, ``-f DIR``), a ``file://`` URL, or a path written as one (``./x``,
    ``../x``, ``dir/x.whl``); not another URL, nor a requirement."""
    found: list[tuple[str, bool]] = []
    pairs = zip(["", *tokens], tokens, strict=False)  # each token with the one before it
    for before, token in pairs:
        option, _, value = token.partition("=") if token.startswith("--") else (token[:2], "", token[2:])
        if before in PATH_OPTIONS:
            found.append((token, before in LIST_OPTIONS))
        elif option in PATH_OPTIONS and value:
            found.append((value, option in LIST_OPTIONS))
        elif not token.startswith("-") and (token.startswith(".") or "/" in token):
            found.append((token, False))
    local = [(_file_url(p), listing) for p, listing in found if "://" not in p or "file://" in p]
    return [(p, listing) for p, listing in local if p and "\0" not in p]


def _file_url(text: str) -> str:
    """A path as it is, or the path of a ``file://`` URL in it (``dep @ file:///x/dep.whl``)."""
    if "file://" not in text:
        return text
    return urllib.parse.unquote(urllib.parse.urlparse(text[text.index("file://") :]).path)
