"""#34: the test map, recorded inside the test process: which project files each test ran.

coverage.py measures the project's own files (the root, without virtualenvs, hidden
folders such as ``.nox`` and ``.venv``, and installed packages) with one context per test:
switched as the test's setup starts, so its fixtures, its call and its teardown count for
it. What runs outside every test (a module's import, conftest.py, collection) is kept
apart, line by line: a change to those lines can break any test, whichever module
imported the file first (#34). A subprocess the test starts
(a Python one that has coverage) measures itself with the test's context, read from
:data:`~device_matrix.wire.ENV_MAP_CONTEXT`: coverage starts it from the configuration
file named in ``COVERAGE_PROCESS_START``, whose ``context`` expands that variable. A
forked copy (multiprocessing, pytest-forked) measures itself under the test's context too.

Each process works in a folder of its own (``cov-PID-RANDOM``) under the runner's ``--dm-map`` folder:
coverage's data, and one line a test as each test finishes. At its end it folds them into
``part.json`` (nodeid -> project-relative POSIX paths), ``lines.json`` (nodeid -> path -> the
lines of it the test ran: a change to one function selects the tests that ran it, #34) and
``imports.json`` (path -> the lines that ran outside every test) that the runner reads. A process
that died leaves its folder without a part: the next process of the run folds it, so the
tests that finished before the death keep their files, and the test that was running when
it died is never in the map (it did not finish: the map cannot say what it ran).
"""

from __future__ import annotations

import _thread
import atexit
import contextlib
import importlib.machinery
import json
import os
import re
import secrets
import sys
import types
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, TextIO

import pytest

from device_matrix.child import opens
from device_matrix.wire import ENV_MAP_CONTEXT, MAP_IMPORTS, MAP_LINES, MAP_OPENERS, MAP_PART, MAP_READS, MAP_UNSEEN

PART_FILE = MAP_PART  # in each process's folder: the tests it finished and their files
EARLY_FILE = "early.json"  # the project's files imported before the recording started (#40)
FINISHED_FILE = "finished.jsonl"  # one line a finished test: its context and its nodeid
ENDED_FILE = "ended.json"  # what was still running as the process ended, and the starters' code
FORKED_PREFIX = "forked-"  # forked-PID.jsonl: what a forked copy (PID) opened and started, a line each
DATA_NAME = "data"  # coverage's data files: data.<host>.<pid>.<random>, one a process
CONFIG_NAME = "coverage.ini"
MIN_COVERAGE = (7, 10)  # COVERAGE_PROCESS_START read by coverage's own .pth file
NEEDS = "coverage>=7.10"
DATA_PID_RE = re.compile(r"\.(?:pid)?(\d+)\.X[0-9A-Za-z]+x(?:\.|\Z)")


def _config_text(folder: Path, root: Path) -> str:
    """coverage's configuration: only the project's files, a context a test, forks followed."""

    def escaped(path: Path) -> str:
        return str(path).replace("$", "$$")  # coverage expands variables in every value

    venvs = [child for child in _children(root) if (child / "pyvenv.cfg").is_file()]
    omit = [
        *(f"*/{name}/*" for name in opens.NOT_PROJECT),
        f"{escaped(root)}/.*/*",  # .nox, .venv, .tox, .git: never the project's own source
        *(f"{escaped(venv)}/*" for venv in venvs),
    ]
    lines = [
        "[run]",
        f"data_file = {escaped(folder / DATA_NAME)}",
        "parallel = true",  # every process its own data file, combined at the end
        f"source = {escaped(root)}",
        "omit =",
        *(f"    {pattern}" for pattern in omit),
        # a subprocess's context: the running test's, from the variable the recorder sets
        f"context = ${{{ENV_MAP_CONTEXT}}}",
        # a forked copy measures itself, and saves what it measured when it ends with os._exit
        "patch =",
        "    fork",
        "    _exit",
        "disable_warnings =",
        "    no-data-collected",
        "    module-not-measured",
        "    module-not-imported",
        "    couldnt-parse",
        "",
    ]
    return "\n".join(lines)


def _children(root: Path) -> Iterator[Path]:
    try:
        yield from (child for child in root.iterdir() if child.is_dir())
    except OSError:
        return


def coverage_problem() -> str | None:
    """Why this interpreter cannot record the map (None: it can)."""
    try:
        import coverage
    except ImportError:
        return f"recording the test map needs coverage.py in the row's environment: pip install '{NEEDS}'"
    if tuple(coverage.version_info[:2]) < MIN_COVERAGE:
        return f"recording the test map needs {NEEDS}, the row's environment has coverage {coverage.__version__}"
    return None


def _forked() -> None:
    """In a forked copy: coverage restarted itself (patch = fork); the running test's context again."""
    import coverage

    if _RECORDERS:
        with contextlib.suppress(OSError):  # the map's folder gone: a copy that outlived the run
            _RECORDERS[0].fork_started()  # #40: a forked copy is followed; its pid says so
    restarted = coverage.Coverage.current()
    # a fork after the session's coverage stopped (an atexit handler's) measures nothing
    with contextlib.suppress(coverage.CoverageException):
        if restarted is not None:
            restarted.switch_context(os.environ.get(ENV_MAP_CONTEXT, ""))
    # #40: coverage's restart here registers its own for this copy's copies, after this one:
    # in a copy of a copy it would run last and measure outside every test; this one runs after it
    os.register_at_fork(after_in_child=_forked)


class MapRecorder:
    """The pytest hooks of the map: coverage on, one context a test, the part at the end."""

    def __init__(self, folder: Path, root: Path) -> None:
        import coverage

        self.root = root.resolve()
        # #40: a file of the repository above the project's folder is one a change may touch
        self.top = _work_tree_top(self.root)
        # not the pid alone: every process of a container's attempts may have the same one
        self.own = folder / f"cov-{os.getpid()}-{secrets.token_hex(4)}"
        self.own.mkdir(parents=True)
        config = self.own / CONFIG_NAME
        config.write_text(_config_text(self.own, self.root), "utf-8")
        self.finished = (self.own / FINISHED_FILE).open("a", encoding="ascii")
        self.count = 0
        self.pid = os.getpid()
        self.forked: TextIO | None = None  # in a forked copy: its own forked-PID.jsonl
        self.forked_pid = self.pid
        # #40: whether it started a process: then each test keeps those alive as it starts and
        # ends (a pool, a server a fixture holds, which serves the tests after it)
        self.parent = False
        self.alive: set[str] = set()
        # the processes alive as the first test starts, which no code of the project started
        # (a plugin's display server): pytest's or a plugin's, beside every test and none's
        self.foreign: set[str] = set()
        self.started_outside = False  # whether the project's code started one outside every test
        self.starter_lines: dict[str, set[int]] = {}  # #40: the code of the functions that started one
        # #40: the files each context opened or listed (path -> rel, "" the session's own)
        self.context = ""
        self.reads: dict[str, set[str]] = {}
        self.read_at_import: set[str] = set()
        # #40: what the running test opened -> the project functions that opened it
        self.openers: dict[str, set[str]] = {}
        # #40: a program the running test started (what it opens is unseen), and who started it
        self.unseen: dict[str, str] = {}
        self.starters: set[str] = set()
        # #40: whether a line tracer other than coverage's replaced it: coverage starts again
        # as the test ends, for the tests after it
        self.retrace = False
        # #34: what coverage measures in now besides the test's own context: a wide fixture's
        # setup (``f<k>``), a module's import (``i`` and the context it is imported in), innermost last
        self.inner: list[str] = []
        # #34: each wide fixture (its name, where it is defined) -> the context of its last
        # setup, and those of them the running test requested
        self.setups: dict[tuple[str, str], str] = {}
        self.fixture_setups = 0
        self.requested: list[str] = []
        _RECORDERS[:] = [self]
        _audit_once()
        _probes_once()
        _follow_processes()
        _follow_raw_threads()
        _follow_imports()
        os.environ.pop(ENV_MAP_CONTEXT, None)  # the session's own context is the empty one
        self.cov = coverage.Coverage(config_file=str(config))
        # #40: the project's modules imported before the recording (a plugin's): what their
        # import ran is unknown, so every line of them counts as run at import
        _write(self.own / EARLY_FILE, {"early": sorted(_imported_already(self.root))})
        self.cov.start()
        # every Python process started from here starts coverage with this configuration
        os.environ["COVERAGE_PROCESS_START"] = str(config)
        os.register_at_fork(after_in_child=_forked, after_in_parent=_parented)

    def saw(self, path: Any, event: str = "open") -> None:
        """A file opened or asked about, or a folder listed, by the running test (or outside
        every test)."""
        opens.once(self._saw, path, event)

    def _saw(self, path: Any, event: str) -> None:
        found = opens.read_paths(path, self.root, self.own.parent, self.top)
        if not found or opens.tools_own(found, event, self.root):
            return
        opener = opens.opener(self.root)
        if not self.context and opener is None and opens.by_pytest():
            return  # outside every test, pytest's own collection lists and opens what it collects
        for rel in (opens.marked(r, event) for r in found):
            if os.getpid() != self.pid:
                self._from_fork({"reads": [rel], "openers": {rel: [opener or ""]}})
            elif self.context:
                self.reads.setdefault(self.context, set()).add(rel)
                self.openers.setdefault(rel, set()).add(opener or "")
                if self.inner and self.inner[-1].startswith("i"):
                    self._read_at_import(rel)  # #34: by a module's import, in a test: at import too
            else:
                self._read_at_import(rel)

    def _read_at_import(self, rel: str) -> None:
        if rel not in self.read_at_import:
            self.read_at_import.add(rel)
            # at once: a process that dies keeps what ran before every test read
            _line(self.finished, {"c": "", "nodeid": "", "reads": [rel]})

    def start(self, why: str) -> None:
        """A program (or a process of multiprocessing's spawn) started by the running test, or
        by the project's code outside every test: what it opens no audit hook of this process
        sees (#40). ``why``: what it started, in words. The starting function's lines are kept:
        a test that runs them later may use what it started (a server it left running)."""
        found = opens.opener_code(self.root)
        self.parent = True
        if not self.context and found is None:
            return  # pytest's or a plugin's own (xdist's workers), outside every test
        self.started_outside |= not self.context
        starter = opens.named(*found) if found is not None else ""
        lines = {found[0]: sorted({n for *_, n in found[1].co_lines() if n})} if found is not None and starter else {}
        if os.getpid() != self.pid:
            self._from_fork({"unseen": why, "starters": [starter], "starter_lines": lines})
        elif self.context:
            self.unseen.setdefault(self.context, why)
            self.starters.add(starter)
            for path, numbers in lines.items():
                self.starter_lines.setdefault(path, set()).update(numbers)
        else:
            # at once, as a file read outside every test: a process that dies keeps it
            line = {"c": "", "nodeid": "", "reads": [], "unseen": why, "starters": [starter], "starter_lines": lines}
            _line(self.finished, line)

    def unseen_work(self, why: str) -> None:
        """#40: the running test ran code where coverage does not see it (``why``, in words):
        under a line tracer of its own, on a thread coverage does not trace. The map lacks
        that work, as a program's: the test runs on any change. Outside every test, what it
        ran is lost to the files' imports; coverage starts again as the next test starts."""
        self.retrace |= os.getpid() == self.pid
        if os.getpid() != self.pid:
            self._from_fork({"unseen": why, "starters": []})
        elif self.context:
            self.unseen.setdefault(self.context, why)

    def fork_started(self) -> None:
        """In a forked copy (multiprocessing's fork, pytest-forked): it is followed, and what it
        opens or starts is written at once to a file of its own (it may end by ``os._exit``)."""
        if self.forked_pid != os.getpid():  # a copy of a copy writes a file of its own too
            self.forked_pid = os.getpid()
            self.forked = (self.own / f"{FORKED_PREFIX}{self.forked_pid}.jsonl").open("a", encoding="ascii")
            # the context it measures in: a data file of its pid and another context is a
            # process that got the same pid later, not this copy
            self._from_fork({})
            # and that it ended as a copy ends (``os._exit``, or the interpreter's exit), its
            # coverage saved: one killed (a pool's terminate()) saved none of what it ran
            exit_now = os._exit

            def _exit(status: int) -> NoReturn:
                self._ended()
                exit_now(status)

            os._exit = _exit
            atexit.register(self._ended)

    def _ended(self) -> None:
        """A forked copy's end: its coverage saved first, then said so (a copy killed while
        it saves, by a pool's terminate(), is one that saved nothing)."""
        import coverage

        with contextlib.suppress(Exception):  # never the copy's own end
            current = coverage.Coverage.current()
            if current is not None:
                current.stop()
                current.save()
            self._from_fork({"ended": True})

    def _from_fork(self, entry: dict[str, Any]) -> None:
        self.fork_started()
        assert self.forked is not None
        _line(self.forked, {"c": self.context, **entry})

    def _switch(self, context: str) -> None:
        self.context = context
        self.inner = []
        # switching flushes what the last context measured into coverage's data file
        self.cov.switch_context(context)
        if context:
            os.environ[ENV_MAP_CONTEXT] = context
        else:
            os.environ.pop(ENV_MAP_CONTEXT, None)

    def _retraced(self) -> None:
        """coverage's tracer installed again where another replaced it (``sys.settrace``)."""
        if self.retrace:
            self.retrace = False
            self.cov.stop()
            self.cov.start()

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self._retraced()
        self.count += 1
        # a context is a number, not the nodeid: a nodeid may hold what SQLite cannot store
        self._switch(f"t{self.count}")
        alive = _alive() if self.parent else set()
        if self.count == 1 and not self.started_outside:
            self.foreign = alive
        self.alive = alive - self.foreign

    def _enter(self, context: str) -> None:
        """coverage measures in ``context`` until :meth:`_leave`, within the test's."""
        self.inner.append(context)
        self.cov.switch_context(context)

    def _leave(self) -> None:
        self.inner.pop()
        self.cov.switch_context(self.inner[-1] if self.inner else self.context)

    def importing(self, path: str) -> bool:
        """#34: whether a module of the project's file ``path``, executed by the import system
        while a test runs, is measured in a context of its own until :meth:`imported`: what its
        import runs counts as run at import, which the tests after it may see without running
        it, and for the test (or the wide fixture's setup) that imported it too."""
        if not self.context or os.getpid() != self.pid or not _project_file(path, self.root):
            return False
        current = self.inner[-1] if self.inner else self.context
        self._enter(current if current.startswith("i") else f"i{current}")
        return True

    def imported(self) -> None:
        self._leave()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any) -> Iterator[None]:
        """#34: a fixture of a wider scope than a test's is set up in the first test that
        requests it, the tests after it get its value: what its setup ran counts for each
        test that requests it, in a context of its own (``f<k>``)."""
        if fixturedef.scope == "function" or os.getpid() != self.pid:
            yield
            return
        self.fixture_setups += 1
        context = f"f{self.fixture_setups}"
        self.setups[(fixturedef.argname, fixturedef.baseid)] = context
        self._enter(context)
        try:
            yield
        finally:
            self._leave()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        """#34: the setups of the wide fixtures the test requested: each of its fixtures'
        names defined where the test sees it (its folder, its module, a plugin's)."""
        names, nodeid = set(getattr(item, "fixturenames", ())), item.nodeid
        self.requested = sorted(
            context
            for (name, where), context in self.setups.items()
            if name in names and (not where or nodeid == where or nodeid.startswith((f"{where}/", f"{where}::")))
        )

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        context = f"t{self.count}"
        self._retraced()
        self._switch("")  # the test's files are in the data file before it counts as finished
        reads = sorted(self.reads.pop(context, ()))
        openers = {rel: sorted(by) for rel, by in self.openers.items()}
        self.openers = {}
        entry = {"c": context, "nodeid": nodeid, "reads": reads, "openers": openers}
        if self.requested:
            entry.update(fixtures=self.requested)
            self.requested = []
        if context in self.unseen:
            entry.update(unseen=self.unseen.pop(context), starters=sorted(self.starters))
        alive = self.alive | ((_alive() - self.foreign) if self.parent else set())
        if alive:  # #40: what those did while it ran is the test's too
            entry.update(alive=sorted(alive))
        self.starters = set()
        _line(self.finished, entry)

    @pytest.hookimpl(trylast=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        _RECORDERS.clear()
        self.cov.stop()
        self.cov.save()
        self.finished.close()
        os.environ.pop("COVERAGE_PROCESS_START", None)
        # #40: the processes still running (a pool's workers end at the interpreter's exit, after
        # this: what they ran is not in the data), and the code that started programs
        starters = {path: sorted(numbers) for path, numbers in self.starter_lines.items()}
        _write(self.own / ENDED_FILE, {"alive": sorted(_alive() if self.parent else ()), "starter_lines": starters})
        # a process of this run that died left its folder unfolded: its finished tests count
        for folder in sorted(self.own.parent.glob("cov-*")):
            if folder == self.own or not (folder / PART_FILE).exists():
                fold(folder, self.root)


def fold(folder: Path, root: Path) -> None:
    """One process's folder into its ``part.json``, ``lines.json`` and ``imports.json``: each
    finished test, the files and lines it ran, and what ran outside every test."""
    finished = _finished(folder / FINISHED_FILE)
    tests = {str(entry["c"]): str(entry["nodeid"]) for entry in finished}  # context -> its test
    # each forked copy's pid -> what it wrote
    forked = {
        f.name.removeprefix(FORKED_PREFIX).removesuffix(".jsonl"): _finished(f, context_only=True)
        for f in sorted(folder.glob(f"{FORKED_PREFIX}*.jsonl"))
    }
    # #40: a process alive while a test ran (a pool, a server a fixture holds) may have done
    # that test's work: what it ran and opened is each such test's too
    shared: dict[str, set[str]] = {}
    for entry in finished:
        alive = entry.get("alive")
        for pid in alive if isinstance(alive, list) and entry["nodeid"] else ():
            shared.setdefault(str(pid), set()).add(str(entry["nodeid"]))
    ran, imports, unfollowed, by_pid, damaged = _measured(folder, root, _followed(folder, forked), shared)
    reads, openers, unseen = _opened(finished, forked, unfollowed, shared, tests=tests)
    part: dict[str, set[str]] = {}
    lines: dict[str, dict[str, set[int]]] = {}
    for entry in finished:
        if not entry["nodeid"]:
            continue  # what was read outside every test: no test's
        # #34: only what ran while the test ran: its module's import ran for whichever test
        # module imported the file first, and is kept apart (imports.json)
        nodeid = str(entry["nodeid"])
        mine = lines.setdefault(nodeid, {})
        # #34: with what the setups of the wide fixtures it requested ran, whoever set them up
        fixtures = entry.get("fixtures")
        for context in [str(entry["c"]), *(fixtures if isinstance(fixtures, list) else ())]:
            measured = ran.get(str(context), {})
            part.setdefault(nodeid, set()).update(measured)  # a rerun: both
            for rel, numbers in measured.items():
                mine.setdefault(rel, set()).update(numbers)
    for pid, nodeids in shared.items():
        for nodeid, (rel, numbers) in ((n, r) for n in nodeids for r in by_pid.get(pid, {}).items()):
            part.setdefault(nodeid, set()).add(rel)
            lines.setdefault(nodeid, {}).setdefault(rel, set()).update(numbers)
    # a forked copy that did not end as one ends (killed) saved no coverage of what it ran
    lost = {pid for pid, entries in forked.items() if not _ended_well(entries)} | damaged
    ended = _read_json(folder / ENDED_FILE)
    _unfinished(ended, lost, finished, forked, tests=tests, shared=shared, lines=lines, unseen=unseen)
    for rel in _early(folder / EARLY_FILE):
        imports.setdefault(rel, set()).update(_every_line(root / rel))
    _write(folder / MAP_IMPORTS, {rel: sorted(numbers) for rel, numbers in imports.items()})
    _write(folder / MAP_LINES, {n: {rel: sorted(ns) for rel, ns in fs.items()} for n, fs in lines.items()})
    _write(folder / MAP_READS, {n: sorted(rels) for n, rels in reads.items()})
    _write(folder / MAP_OPENERS, {rel: sorted(names) for rel, names in openers.items()})
    _write(folder / MAP_UNSEEN, unseen)
    _write(folder / PART_FILE, {nodeid: sorted(files) for nodeid, files in part.items()})
    for leftover in folder.glob(f"{DATA_NAME}*"):
        leftover.unlink(missing_ok=True)


def _unfinished(
    ended: Mapping[str, Any],
    lost: Collection[str],
    finished: list[dict[str, Any]],
    forked: Mapping[str, list[dict[str, Any]]],
    *,
    tests: Mapping[str, str],
    shared: Mapping[str, set[str]],
    lines: Mapping[str, Mapping[str, set[int]]],
    unseen: dict[str, list[str]],
) -> None:
    """#40: into ``unseen``, the tests whose processes' work the map lacks: one beside them,
    or forked under them, that left no coverage (``lost``: killed by a pool's ``terminate()``),
    or still running as the recording ended (a pool's workers end at the interpreter's exit:
    their coverage comes too late); and a test that ran code that started
    a program (``ensure_server()``), which may serve it although it started nothing itself
    (the server already ran, or left this process's tree)."""
    entries = [finished, *forked.values()]
    alive = ended.get("alive")
    for pid in sorted({*lost, *([str(p) for p in alive] if isinstance(alive, list) else [])}):
        ran_under = [tests.get(str(e["c"])) for e in forked.get(pid, ())]
        said = f"a process beside it (pid {pid}) left no coverage as the map was written (killed, or running)"
        # one whose tests are not known (its data cut short): outside every test, any test's
        for nodeid in sorted({*shared.get(pid, ()), *(n for n in ran_under if n)}) or [""]:
            unseen.setdefault(nodeid, [said, ""] if not nodeid else [said])
    code: dict[str, set[int]] = {}
    for kept in [ended.get("starter_lines"), *(e.get("starter_lines") for es in entries for e in es)]:
        for rel, numbers in kept.items() if isinstance(kept, dict) else ():
            code.setdefault(str(rel), set()).update(n for n in numbers if isinstance(n, int))
    for nodeid, per_file in sorted(lines.items()):
        started = next(
            (rel for rel, numbers in sorted(code.items()) if not numbers.isdisjoint(per_file.get(rel, ()))), None
        )
        if started is not None:
            unseen.setdefault(nodeid, [f"it ran code of {started} that starts a program, which may serve it"])


def _ended_well(entries: list[dict[str, Any]]) -> bool:
    return any(e.get("ended") is True for e in entries)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("ascii"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _opened(
    finished: list[dict[str, Any]],
    forked: Mapping[str, list[dict[str, Any]]],
    unfollowed: Mapping[str, str],
    shared: Mapping[str, set[str]],
    *,
    tests: Mapping[str, str],
) -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, list[str]]]:
    """#40: nodeid ("": outside every test) -> the files it opened; file -> who opened it; and
    nodeid -> [why its opens are unseen, who started the program...]. What a forked copy opened
    and started is the test's it ran under (a test the process did not finish is not in the
    map) and every test it was alive for; a process the recording did not follow makes the
    tests it ran under, or was alive for, unseen."""
    reads: dict[str, set[str]] = {}
    openers: dict[str, set[str]] = {}
    unseen: dict[str, list[str]] = {}
    found: list[tuple[str, dict[str, Any]]] = [(str(e["nodeid"]), e) for e in finished]
    for pid, entries in forked.items():
        also = shared.get(pid, set())
        for e in entries:
            ran_under = tests.get(e["c"]) if e["c"] else ""
            found += [(n, e) for n in {*also, *([ran_under] if ran_under is not None else [])}]
    for nodeid, entry in found:
        reads.setdefault(nodeid, set()).update(r for r in entry.get("reads", ()) if isinstance(r, str))
        by = entry.get("openers")
        for rel, names in by.items() if isinstance(by, dict) else ():
            openers.setdefault(str(rel), set()).update(n for n in names if isinstance(n, str))
        why, starters = entry.get("unseen"), entry.get("starters")
        if isinstance(why, str) and isinstance(starters, list):
            kept = unseen.setdefault(nodeid, [why])
            kept.extend(s for s in starters if isinstance(s, str) and s not in kept[1:])
    for context, pid in sorted(unfollowed.items()):
        # a Python process no audit hook of the recording was in and whose start it was not
        # told of: a program the test started, else code the recording cannot name
        said = f"a process {'it started' if context else 'started outside every test'} (pid {pid})"
        test = tests.get(context) if context else ""
        if test is not None and test not in unseen:
            unseen[test] = [f"{said} ran Python the recording does not follow", ""]
    for pid, nodeids in sorted(shared.items()):
        for nodeid in sorted(nodeids) if pid not in forked else ():
            # who started it, the test that did says (or its own process, unfollowed)
            unseen.setdefault(nodeid, [f"a process started before it ended (pid {pid}) ran beside it"])
    return reads, openers, unseen


def _line(out: TextIO, entry: dict[str, Any]) -> None:
    """One line of a process's record, flushed at once: a process that dies keeps it."""
    out.write(json.dumps(entry) + "\n")
    out.flush()


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data), "ascii")
    tmp.replace(path)


def _followed(folder: Path, children: Mapping[str, list[dict[str, Any]]]) -> dict[str, frozenset[str] | None]:
    """The pids of the processes the recording followed -> the contexts each measured in
    (None: any): this process; each forked copy, in the contexts its file names (a process
    that got its pid later is another); and every other recording process of the run, outside
    every test (an xdist worker's coverage, started by the configuration it inherits)."""
    followed: dict[str, frozenset[str] | None] = {
        _pid_of(other): frozenset({""}) for other in folder.parent.glob("cov-*")
    }
    followed.update((pid, frozenset(str(e["c"]) for e in entries)) for pid, entries in children.items())
    followed[_pid_of(folder)] = None
    return followed


def _pid_of(folder: Path) -> str:
    """The pid of the process whose folder (``cov-PID-RANDOM``) it is."""
    return folder.name.split("-")[1]


class _Measured(NamedTuple):
    ran: dict[str, dict[str, set[int]]]  # context -> path -> the lines it ran
    imports: dict[str, set[int]]  # path -> the lines that ran outside every test
    # each context ("": outside every test) a process the recording did not follow measured in -> its pid
    unfollowed: dict[str, str]
    by_pid: dict[str, dict[str, set[int]]]  # of the processes alive beside a test: pid -> path -> its lines
    damaged: set[str]  # the pids whose data cannot be read (cut short: a process killed as it saved)


def _measured(
    folder: Path, root: Path, followed: Mapping[str, frozenset[str] | None], shared: Collection[str] = ()
) -> _Measured:
    """coverage's data in ``folder`` (:class:`_Measured`); a "t" context is a test's, an "f"
    context a wide fixture's setup, an "i" one a module's import within either; who is
    followed: :func:`_followed`."""
    import coverage

    out = _Measured({}, {}, {}, {}, set())
    for found in map(str, folder.glob(f"{DATA_NAME}.*")):
        pid = _data_pid(found)
        allowed = followed.get(pid, frozenset())
        one = coverage.CoverageData(basename=found)
        try:
            one.read()
            contexts = one.measured_contexts()
        except coverage.CoverageException:
            out.damaged.add(pid)
            continue
        if allowed is not None:
            out.unfollowed.update((c, pid) for c in contexts if c not in allowed and c not in out.unfollowed)
        for path in one.measured_files():
            rel = opens.relative(path, root)
            if rel is None:
                continue
            for line, labels in one.contexts_by_lineno(path).items():
                for context in labels:
                    # an import in a test (``i`` and its context) ran for it and at import
                    out.ran.setdefault(context.removeprefix("i"), {}).setdefault(rel, set()).add(line)
                    if not context.startswith(("t", "f")):  # a test's, a wide fixture's setup
                        out.imports.setdefault(rel, set()).add(line)
                if pid in shared:
                    out.by_pid.setdefault(pid, {}).setdefault(rel, set()).add(line)
    return out


def _data_pid(name: str) -> str:
    """The pid in the name of a coverage data file: ``data.HOST.pidPID.XRANDx`` and what a
    newer coverage adds after it (coverage 7.10: ``data.HOST.PID.XRANDx``, whose host may hold
    dots); "" when it names none (a process not followed, as far as it can tell)."""
    found = DATA_PID_RE.search(Path(name).name)
    return found[1] if found else ""


# the recorder of this process, which the audit hook (installed once: one cannot be removed) tells
_RECORDERS: list[MapRecorder] = []
_AUDITED: list[bool] = []
_PROBED: list[bool] = []


def _audit_once() -> None:
    if _AUDITED:
        return
    _AUDITED.append(True)

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "sys.settrace" and _RECORDERS:
            with contextlib.suppress(Exception):
                if not opens.coverage_tracer():
                    _RECORDERS[0].unseen_work("it ran code under a line tracer of its own (sys.settrace)")
            return
        if not (_RECORDERS and args):
            return
        if event == "open" or event in opens.LISTING:
            with contextlib.suppress(Exception):  # never the opener's failure
                _RECORDERS[0].saw(args[0], event)
        elif event in opens.NATIVE_OPENS:
            with contextlib.suppress(Exception):
                path = opens.native_path(args[0])
                if path is not None:
                    _RECORDERS[0].saw(path)
        elif event in opens.STARTS:
            with contextlib.suppress(Exception):
                _RECORDERS[0].start(f"it started `{opens.started(event, args)}`")

    sys.addaudithook(hook)


def _probes_once() -> None:
    """#40: a path a test asked about (``exists()``: a search path, a template overridden) is
    one it reads, there or not (:func:`device_matrix.child.opens.wrap_probes`)."""
    if _PROBED:
        return
    _PROBED.append(True)

    def tell(path: Any) -> None:
        if _RECORDERS:
            _RECORDERS[0]._saw(path, opens.PROBE)

    opens.wrap_probes(tell)


def _follow_raw_threads() -> None:
    """#40: a thread started by ``_thread`` itself runs no tracer (threading's own threads
    start coverage's): the test that starts one ran code the map cannot see. threading keeps
    its own reference to the function, unwrapped."""
    original = _thread.start_new_thread
    if getattr(original, "__device_matrix__", False):
        return

    def start_new_thread(function: Any, args: Any, *kwargs: Any) -> int:
        if _RECORDERS:
            with contextlib.suppress(Exception):  # never the starter's failure
                _RECORDERS[0].unseen_work(
                    "it ran code on a thread of _thread.start_new_thread, which coverage does not trace"
                )
        return original(function, args, *kwargs)

    start_new_thread.__device_matrix__ = True  # type: ignore[attr-defined]
    _thread.start_new_thread = _thread.start_new = start_new_thread


def _work_tree_top(root: Path) -> Path:
    """The top of the git work tree ``root`` is in (the nearest folder holding ``.git``),
    or ``root`` itself outside one."""
    for folder in (root, *root.parents):
        if (folder / ".git").exists():
            return folder
    return root


def _parented() -> None:
    if _RECORDERS:
        recorder = _RECORDERS[0]
        recorder.parent = True
        # a fork outside every test: whose it was the recording cannot tell
        recorder.started_outside |= not recorder.context


def _alive() -> set[str]:
    """The pids of this process's descendants alive now (none where ``/proc`` cannot tell),
    but multiprocessing's own helpers (its resource tracker, its fork server: not the
    processes they fork), which run no code of the project."""
    children: dict[str, list[str]] = {}
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    stat = Path(entry.path, "stat").read_text("ascii", errors="replace")
                    parent = stat.rsplit(")", 1)[1].split()[1]  # its name may hold spaces and ")"
                    children.setdefault(parent, []).append(entry.name)
    found: set[str] = set()
    todo = [str(os.getpid())]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found - _helpers()


def _helpers() -> set[str]:
    tracker = sys.modules.get("multiprocessing.resource_tracker")
    server = sys.modules.get("multiprocessing.forkserver")
    pids = [
        getattr(getattr(tracker, "_resource_tracker", None), "_pid", None),
        getattr(getattr(server, "_forkserver", None), "_forkserver_pid", None),
    ]
    return {str(pid) for pid in pids if isinstance(pid, int)}


def _follow_processes() -> None:
    """#40: a process of multiprocessing's spawn or forkserver start methods starts with no
    audit event: its start is told to the recorder, with the code that started it (a fork's
    copy carries the audit hook and is followed as the test itself)."""
    import multiprocessing.process

    original = multiprocessing.process.BaseProcess.start
    if getattr(original, "__device_matrix__", False):
        return

    def start(process: multiprocessing.process.BaseProcess) -> None:
        original(process)
        kind = type(getattr(process, "_popen", None)).__module__.rsplit(".", 1)[-1]
        if _RECORDERS and kind != "popen_fork":
            with contextlib.suppress(Exception):  # never the starter's failure
                method = kind.removeprefix("popen_").removesuffix("_posix")
                _RECORDERS[0].start(f"it started a process of multiprocessing's {method} ({process.name})")

    start.__device_matrix__ = True  # type: ignore[attr-defined]
    multiprocessing.process.BaseProcess.start = start  # type: ignore[method-assign,assignment]


def _imported_already(root: Path) -> set[str]:
    """The project's files (as the recording measures them) whose modules are imported now."""
    found: set[str] = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        rel = opens.relative(path, root) if isinstance(path, str) and path.endswith(".py") else None
        if rel is not None and _project_rel(rel):
            found.add(rel)
    return found


def _project_rel(rel: str) -> bool:
    """Whether a path relative to the root is one the recording measures: not in a hidden
    folder nor one of installed packages."""
    return not rel.startswith(".") and not any(f"/{n}/" in f"/{rel}" for n in opens.NOT_PROJECT)


def _project_file(path: str, root: Path) -> bool:
    """Whether ``path`` (a module's file) is one of the project's the recording measures, told
    from its name alone: asking the file system here would be a probe of the test's."""
    full = os.path.abspath(path)  # noqa: PTH100
    inside = f"{root}{os.sep}"
    return full.startswith(inside) and _project_rel(Path(full[len(inside) :]).as_posix())


def _follow_imports() -> None:
    """#34: a module of the project's imported while a test runs (an import in a function)
    runs its module's code then, and the functions it calls: those lines are run at import,
    as the tests after it see them, and the test's. Source files the import system loads
    (``SourceFileLoader``: not pytest's rewrite of test modules, nor any other loader) are
    executed in a context of their own (:meth:`MapRecorder.importing`)."""
    loader = importlib.machinery.SourceFileLoader
    original = loader.exec_module
    if getattr(original, "__device_matrix__", False):
        return

    def exec_module(self: importlib.machinery.SourceFileLoader, module: types.ModuleType) -> None:
        recorder = _RECORDERS[0] if _RECORDERS else None
        measured = False
        with contextlib.suppress(Exception):  # never the import's failure
            measured = recorder is not None and recorder.importing(str(self.path))
        if recorder is None or not measured:
            original(self, module)
            return
        try:
            original(self, module)
        finally:
            with contextlib.suppress(Exception):  # never the import's failure
                recorder.imported()

    exec_module.__device_matrix__ = True  # type: ignore[attr-defined]
    loader.exec_module = exec_module  # type: ignore[method-assign,assignment]


def _early(path: Path) -> list[str]:
    early = _read_json(path).get("early")
    return [rel for rel in early if isinstance(rel, str)] if isinstance(early, list) else []


def _every_line(path: Path) -> range:
    """Every line number of ``path`` (none when it cannot be read)."""
    try:
        with path.open("rb") as fh:
            return range(1, sum(1 for _ in fh) + 1)
    except OSError:
        return range(0)


def _finished(path: Path, *, context_only: bool = False) -> list[dict[str, Any]]:
    """The finished tests a process wrote (``context_only``: the lines of a forked copy,
    which name no test); a last line cut by its death is not one."""
    out: list[dict[str, Any]] = []
    try:
        lines = path.read_text("ascii", errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        named = context_only or (isinstance(entry, dict) and isinstance(entry.get("nodeid"), str))
        if named and isinstance(entry, dict) and isinstance(entry.get("c"), str):
            out.append(entry)
    return out
