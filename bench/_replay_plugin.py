"""The pytest plugin bench/selection.py loads (``-p _replay_plugin``) into the runs it replays.

It writes, to the JSON file $REPLAY_OUT, each test's outcome and seconds (a module that
fails to import counts as an error of its file) and, with $REPLAY_COVER=1, the project
files each test ran and their lines: coverage.py with one context per test, only files under the rootdir
outside hidden folders (.venv, .nox), the Python subprocesses a test starts included (they
read its context from $REPLAY_CONTEXT through the configuration in $COVERAGE_PROCESS_START),
a test module's import counted for each of its tests: what a device-matrix test map holds
(the programs a test starts by an audit event too; not a forked copy's opens, a process of
multiprocessing's spawn, nor one alive beside a test: the suites replayed start none).
It stands alone (pytest and coverage only), so that a replay of device-matrix's own
history never imports two device-matrix packages.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_STATE: dict[str, Any] = {"outcomes": {}, "seconds": {}, "cov": None, "config": None, "context": ""}
# #40: the files that are not Python each test opened or listed, who opened each, and those
# the project's code opened outside every test, as device-matrix's map keeps them
# (and the programs each started, whose opens no audit hook sees, and who started them)
_READS: dict[str, Any] = {"tests": {}, "openers": {}, "at_import": set(), "opens": None}
_READS.update(unseen={}, starters=set())
CONTEXT = "REPLAY_CONTEXT"
IMPORT = "import:"  # the context of a test module's import


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("REPLAY_COVER") != "1":
        return
    import coverage

    # in the replay's own temporary folder ($REPLAY_TMP): gone with it, even after a timeout
    folder = Path(tempfile.mkdtemp(prefix="replay-cov-", dir=os.environ.get("REPLAY_TMP")))
    ini = folder / "coverage.ini"
    root = str(config.rootpath).replace("$", "$$")
    ini.write_text(
        f"[run]\ndata_file = {folder}/data\nparallel = true\nsource = {root}\nomit = {root}/.*\n"
        f"context = ${{{CONTEXT}}}\ndisable_warnings = no-data-collected module-not-measured\n"
    )
    os.environ.pop(CONTEXT, None)
    cov = coverage.Coverage(config_file=str(ini))
    cov.start()
    os.environ["COVERAGE_PROCESS_START"] = str(ini)  # every Python process started from here
    _STATE.update(cov=cov, config=ini)
    _audit(config.rootpath.resolve(), folder)


def _audit(root: Path, folder: Path) -> None:
    """#40: every open and listing, seen by an audit hook: device-matrix's own rules of what
    counts (device_matrix/child/opens.py, loaded by its path from $REPLAY_OPENS: the replayed
    project may be another device_matrix)."""
    where = os.environ.get("REPLAY_OPENS")
    spec = importlib.util.spec_from_file_location("_replay_opens", where) if where else None
    if spec is None or spec.loader is None:
        return
    opens = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(opens)
    _READS["opens"] = opens

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if not args or _READS["opens"] is None:
            return
        if event == "open" or event in opens.LISTING or event in opens.NATIVE_OPENS:
            with contextlib.suppress(Exception):  # never the opener's failure
                opens.once(_saw, opens, root, folder, args[0], event)
        elif event in opens.STARTS:
            with contextlib.suppress(Exception):
                _started(opens, root, event, args)

    sys.addaudithook(hook)

    opens.wrap_probes(lambda path: _saw(opens, root, folder, path, opens.PROBE))


def _saw(opens: Any, root: Path, folder: Path, path: Any, event: str) -> None:
    found = opens.read_paths(path, root, folder)
    if not found or opens.tools_own(found, event, root, __file__):
        return  # coverage's, pytest's or the import system's own
    running = _running(opens, root)
    if running is None and opens.by_pytest(__file__):
        return  # outside every test, pytest's own collection lists and opens what it collects
    test, by = running or ("", None)  # a plugin's read outside every test (``.env``) is the session's
    for rel in (opens.marked(r, event, __file__) for r in found):
        if test:
            _READS["tests"].setdefault(test, set()).add(rel)
            _READS["openers"].setdefault(rel, set()).add(by or "")
        else:
            _READS["at_import"].add(rel)


def _started(opens: Any, root: Path, event: str, args: tuple[Any, ...]) -> None:
    """#40: a program started, whose opens no audit hook sees (device-matrix's rule)."""
    running = _running(opens, root)
    if running is None:
        return  # pytest's or a plugin's own
    test, by = running
    _READS["unseen"].setdefault(test, f"it started `{opens.started(event, args)}`")
    _READS["starters"].add(by or "")


def _running(opens: Any, root: Path) -> tuple[str, str | None] | None:
    """The test running ("": outside every test) and the project's code on the stack (None:
    none); None outside every test with no code of the project on it (pytest's own, a plugin's)."""
    by = opens.opener(root)
    context = _STATE["context"]
    test = context if context and not context.startswith(IMPORT) else ""
    return (test, by) if test or by is not None else None


def _switch(context: str) -> None:
    _STATE["context"] = context
    if _STATE["cov"] is not None:
        _STATE["cov"].switch_context(context)
        os.environ[CONTEXT] = context


def pytest_collectstart(collector: pytest.Collector) -> None:
    if isinstance(collector, pytest.Module):
        _switch(IMPORT + collector.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    _switch(item.nodeid)
    yield
    _switch("")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    outcomes, seconds = _STATE["outcomes"], _STATE["seconds"]
    seconds[report.nodeid] = seconds.get(report.nodeid, 0.0) + report.duration
    if report.failed:
        outcomes[report.nodeid] = "failed"
    elif report.when == "call" or (report.skipped and report.nodeid not in outcomes):
        outcomes.setdefault(report.nodeid, report.outcome)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    _switch("")
    if report.failed:
        _STATE["outcomes"][report.nodeid] = "error"


def pytest_unconfigure(config: pytest.Config) -> None:
    out = os.environ.get("REPLAY_OUT")
    if not out:
        return
    tests: dict[str, dict[str, list[int]]] = {}
    imports: dict[str, list[int]] = {}
    if _STATE["cov"] is not None:
        _READS["opens"] = None  # what the recording itself writes is not the tests'
        tests, imports = _measured(config.rootpath)
    record = {
        "reads": {t: sorted(rels) for t, rels in _READS["tests"].items()} if _STATE["cov"] is not None else None,
        "openers": {rel: sorted(by) for rel, by in _READS["openers"].items()},
        "read_at_import": sorted(_READS["at_import"]),
        "unseen": _READS["unseen"],
        "starters": sorted(_READS["starters"]),
        "outcomes": _STATE["outcomes"],
        "seconds": _STATE["seconds"],
        "files": {t: sorted(fs) for t, fs in tests.items()},
        "lines": tests,
        "imports": imports,
    }
    Path(out).write_text(json.dumps(record))


def _measured(root: Path) -> tuple[dict[str, dict[str, list[int]]], dict[str, list[int]]]:
    """nodeid -> the files it ran and their lines, from this process's data and its subprocesses'; and each
    file's lines that ran outside every test (imports, conftest.py), kept apart as
    device-matrix's map keeps them."""
    import coverage

    cov = _STATE["cov"]
    cov.stop()
    cov.save()
    os.environ.pop("COVERAGE_PROCESS_START", None)
    combined = coverage.Coverage(config_file=str(_STATE["config"]))
    combined.combine()
    data = combined.get_data()
    files: dict[str, dict[str, set[int]]] = {}
    imported: dict[str, set[int]] = {}
    for path in data.measured_files():
        try:
            rel = Path(path).resolve().relative_to(root).as_posix()
        except ValueError:
            continue
        for line, contexts in data.contexts_by_lineno(path).items():
            for context in contexts:
                # the session labels each test by switching (a dynamic context), a subprocess
                # by its configuration (a static one): never both, so a label is one nodeid
                files.setdefault(context, {}).setdefault(rel, set()).add(line)
                if not context or context.startswith(IMPORT):
                    imported.setdefault(rel, set()).add(line)
    shutil.rmtree(_STATE["config"].parent, ignore_errors=True)
    tests = {
        t: {rel: sorted(lines) for rel, lines in fs.items()}
        for t, fs in files.items()
        if t and not t.startswith(IMPORT)
    }
    return tests, {rel: sorted(lines) for rel, lines in imported.items()}
