"""The pytest plugin: device markers, the disable list, the crash-proof journal.

Loaded through the ``pytest11`` entry point (or ``-p device_matrix.child.plugin`` where the
package is on ``sys.path`` but not installed, as inside a container). The device markers
and the disable list apply wherever a device is known: the row device-matrix runs, else
the ``PJRT_DEVICE`` the maintainer exported, so they mean the same under plain pytest
(#20). The journal is opt-in through ``--dm-*`` options the runner passes, so an ordinary
``pytest`` run in a project that installs device-matrix is not slowed down.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import time
import unittest
import warnings
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from device_matrix import wire
from device_matrix.child.journal import FatalStacks, JournalWriter, arm_faulthandler, end_forked_copies, follow_chdir
from device_matrix.errors import ConfigError
from device_matrix.records.cause import clip
from device_matrix.skips import (
    ONLY_ON_MARKER_HELP,
    DeviceSkip,
    SkipMode,
    disable_matches,
    find_issue_in_text,
    from_marker,
    is_by_design_text,
    load_disable_list,
    pjrt_device_name,
)

ENV_DEVICE = wire.ENV_DEVICE
ENV_SETTINGS = wire.ENV_SETTINGS
ENV_DISABLE_LIST = wire.ENV_DISABLE_LIST
LONGREPR_LIMIT = 20_000
MAP_PLUGIN = "device-matrix-map"
# #32: a failure's traceback is kept whole in the record, its one copy (the terminal's
# failures section, which would print it again into output.log, is left out); bounded
# all the same: a megabyte of a tensor's repr is not what a reader needs twice
TRACEBACK_LIMIT = 1 << 20
# a phase's duration a plugin set to something no clock gives (NaN, inf, 1e308, < 0) is
# journaled as 0: NaN and inf are not JSON, and huge ones add up to inf in the record
MAX_SECONDS = 1e9
_TEST_REPORT = pytest.TestReport  # a subclass of it is a subtest's report
_UNITTEST_ERROR = "_device_matrix_unittest_error"


_state_key = pytest.StashKey["_State"]()


class _State:
    def __init__(self) -> None:
        self.journal: JournalWriter | None = None
        self.select: list[str] | None = None
        self.deselect: frozenset[str] = frozenset()  # #34: tests selection leaves out (--dm-deselect)
        self.left_out = 0  # how many collected tests it left out
        self.device: str | None = None  # the row device-matrix runs
        self.pjrt: str | None = os.environ.get("PJRT_DEVICE")
        # what device markers apply to: the row, else (plain pytest) the PJRT device (#20)
        self.here: str | None = None
        self.meta: dict[str, dict[str, Any]] = {}
        self.fatal: FatalStacks | None = None
        self.seq = 0
        self.markers = os.environ.get(wire.ENV_MARKERS) == "1"
        # (nodeid, phase) -> where the failing phase failed, from its traceback (#20)
        self.where: dict[tuple[str, str], tuple[str, int]] = {}
        self.as_script = False
        self.unittest_files: dict[str, bool] = {}  # module name -> defines a TestCase
        self.fault_at = 0  # the fault file's size when the running test started (#29)
        self.started_at = 0.0  # when the running test started (wall clock): its copy's core is newer (#39)
        self.cores: set[Path] = set()  # the cores given to a forked copy's crash: no other copy's


def current_device() -> str | None:
    """The row being run, for suites that need it (prefer markers and settings)."""
    return os.environ.get(ENV_DEVICE)


def current_settings() -> dict[str, Any]:
    """The row's per-device settings, passed by the runner as JSON."""
    raw = os.environ.get(ENV_SETTINGS)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


@pytest.fixture
def device_settings() -> dict[str, Any]:
    """Per-device settings of the row (tolerances, feature flags) from the matrix."""
    return current_settings()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("device-matrix")
    group.addoption(wire.OPT_JOURNAL, default=None, help="the runner's FIFO for started/finished tests")
    group.addoption(wire.OPT_SELECT, default=None, help="file of nodeids to run (others deselected)")
    group.addoption(wire.OPT_DESELECT, default=None, help="file of nodeids a change cannot break, left out")
    group.addoption(wire.OPT_FAULTHANDLER, default=None, help="file for fatal-signal and hang stacks")
    group.addoption(wire.OPT_ENV, action="store_true", help="write an environment snapshot into the journal")
    group.addoption(wire.OPT_MAP, default=None, help="folder for the test map: the project files each test ran")
    group.addoption(
        wire.OPT_AS_SCRIPT,
        action="store_true",
        help="import each test file as `python FILE` does (its folder first on sys.path) and collect a "
        "unittest file as unittest does (its module-level functions are not tests)",
    )
    group.addoption(
        wire.OPT_DEVICE,
        default=None,
        help=f"device row name for skip_device/xfail_device (default: ${ENV_DEVICE}, else $PJRT_DEVICE)",
    )
    group.addoption(
        wire.OPT_DISABLE_LIST,
        default=None,
        help=f"central disable list (default: ${ENV_DISABLE_LIST} or <rootdir>/device-matrix-disabled.toml)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "skip_device(*devices, issue, reason='', expires=None): skip on these device rows; "
        "cite the issue that tracks it",
    )
    config.addinivalue_line(
        "markers",
        "xfail_device(*devices, issue, reason='', strict=True, raises=None, expires=None): "
        "expected to fail on these device rows; cite the issue that tracks it",
    )
    config.addinivalue_line("markers", ONLY_ON_MARKER_HELP)
    state = _State()
    config.stash[_state_key] = state
    _STACK.append(state)
    state.device = config.getoption(wire.OPT_DEVICE) or os.environ.get(ENV_DEVICE)
    state.here = state.device or pjrt_device_name(state.pjrt)
    state.as_script = bool(config.getoption(wire.OPT_AS_SCRIPT))
    journal = config.getoption(wire.OPT_JOURNAL)
    if journal:
        numprocesses = config.getoption("numprocesses", None) if config.pluginmanager.hasplugin("xdist") else None
        if numprocesses:
            # a crashed xdist worker is replaced and its test reported as an ordinary
            # failure: the runner could not name the signal or resume; refuse instead
            raise pytest.UsageError(
                "device-matrix: pytest-xdist (-n) cannot run under device-matrix run; "
                "remove -n/--numprocesses (crashes are isolated by the runner itself)"
            )
        state.journal = JournalWriter(Path(journal))
        config.pluginmanager.register(_FailurePlace(state, config.rootpath), "device-matrix-failure-place")
        config.pluginmanager.register(_TracebacksInTheRecord(), "device-matrix-tracebacks-in-the-record")
        end_forked_copies(state.journal)
        follow_chdir(state.journal)
        env = secrets = None
        if config.getoption(wire.OPT_ENV):
            # only when the runner cannot see this interpreter itself (a container, --python):
            # its snapshot, and its own secret values, which the runner scrubs too (#22)
            from device_matrix.diagnostics.environment import snapshot
            from device_matrix.redact import secret_values

            env, secrets = snapshot(), secret_values()
        state.journal.write("session", pid=os.getpid(), device=state.device, t=time.time(), env=env, secrets=secrets)
    select = config.getoption(wire.OPT_SELECT)
    if select:
        select_path = Path(select)
        state.select = wire.read_select(select_path)
        select_path.unlink(missing_ok=True)  # raw nodeids: not left on disk
    deselect = config.getoption(wire.OPT_DESELECT)
    if deselect:
        state.deselect = frozenset(wire.read_deselect(Path(deselect)))
    fault = config.getoption(wire.OPT_FAULTHANDLER)
    if fault:
        # the runner passes -p no:faulthandler with this option
        state.fatal = arm_faulthandler(fault)
    _record_map(config, config.getoption(wire.OPT_MAP))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """#40: the map's recording starts before pytest imports the first conftest.py files:
    what their import runs (a module they import, a function it calls) is seen at import."""
    _record_map(early_config, getattr(early_config.known_args_namespace, "dm_map", None))


def _record_map(config: pytest.Config, folder: str | None) -> None:
    """#34: the test map, recorded with coverage.py when the runner asks (--dm-map)."""
    if not folder or config.pluginmanager.has_plugin(MAP_PLUGIN):
        return
    from device_matrix.child.testmap import MapRecorder, coverage_problem

    problem = coverage_problem()
    if problem is not None:
        # before any test runs: the row's environment lacks what the map needs
        raise pytest.UsageError(f"device-matrix: {problem} (or leave out --record-map / record_map)")
    config.pluginmanager.register(MapRecorder(Path(folder), config.rootpath), MAP_PLUGIN)


def _device_skips(item: pytest.Item, state: _State, disabled: list[DeviceSkip]) -> DeviceSkip | None:
    """The first device skip/xfail that applies to this item on this row (or PJRT device)."""
    if state.here is None:
        return None
    candidates: list[DeviceSkip] = []
    for mark in item.iter_markers():
        if mark.name not in ("skip_device", "xfail_device"):
            continue
        where = f"{item.nodeid} ({mark.name})"
        mode: SkipMode = "skip" if mark.name == "skip_device" else "xfail"
        skip = from_marker(mode, mark.args, mark.kwargs, where=where)
        path, line, _ = item.location
        candidates.append(
            DeviceSkip(
                mode=skip.mode,
                devices=skip.devices,
                issue=skip.issue,
                reason=skip.reason,
                source="marker",
                expires=skip.expires,
                strict=skip.strict,
                file=path,
                line=(line + 1) if line is not None else None,
            )
        )
        if mark.kwargs.get("raises") is not None:
            state.meta.setdefault(item.nodeid, {})["raises"] = mark.kwargs["raises"]
    candidates.extend(d for d in disabled if disable_matches(d, item.nodeid))
    today = dt.date.today()
    for skip in candidates:
        if not skip.applies_to(state.here, state.pjrt):
            continue
        if skip.expired(today):
            warnings.warn(
                f"{item.nodeid}: device {skip.mode} expired on {skip.expires}; the test runs "
                f"again. Remove the marker or extend it (issue {skip.issue}).",
                stacklevel=1,
            )
            continue
        return skip
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = config.stash[_state_key]
    if state.select is not None:
        from device_matrix.wanted import selected

        # a nodeid as a record names it (a shard's plan, a resume: redacted) selects its test too
        position = selected((i.nodeid for i in items), state.select)
        keep = [i for i in items if i.nodeid in position]
        dropped = [i for i in items if i.nodeid not in position]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        # run in the order the runner asked for (resume keeps the first attempt's order)
        keep.sort(key=lambda i: position[i.nodeid])
        items[:] = keep
    if state.deselect:
        # #34: what the change cannot break is left out, and journaled: the runner records
        # each deselected with the reason it holds
        left = [i for i in items if i.nodeid in state.deselect]
        if left:
            state.left_out += len(left)
            items[:] = [i for i in items if i.nodeid not in state.deselect]
            config.hook.pytest_deselected(items=left)
            if state.journal is not None:
                state.journal.write("deselected", nodeids=[i.nodeid for i in left])

    disable_path = (
        config.getoption(wire.OPT_DISABLE_LIST)
        or os.environ.get(ENV_DISABLE_LIST)
        or str(config.rootpath / "device-matrix-disabled.toml")
    )
    try:
        disabled = load_disable_list(Path(disable_path)) if state.here else []
    except ConfigError as exc:
        raise pytest.UsageError(f"device-matrix: {exc}") from exc

    for item in items:
        try:
            skip = _device_skips(item, state, disabled)
        except ConfigError as exc:
            raise pytest.UsageError(f"device-matrix: {exc}") from exc
        if skip is None:
            continue
        text = skip.text(str(state.here))
        if skip.mode == "skip":
            item.add_marker(pytest.mark.skip(reason=text))
        else:
            raises = state.meta.get(item.nodeid, {}).get("raises")
            item.add_marker(pytest.mark.xfail(reason=text, strict=skip.strict, raises=raises))
        state.meta[item.nodeid] = {"device_skip": skip.as_meta()}

    if state.journal is not None:
        state.journal.write("collected", nodeids=[i.nodeid for i in items], t=time.time())


def pytest_collectstart(collector: pytest.Collector) -> None:
    if isinstance(collector, pytest.Module) and collector.config.stash[_state_key].as_script:
        # `python FILE` puts the file's folder first: its helpers import by bare name (#24)
        folder = str(collector.path.parent)
        if not sys.path or sys.path[0] != folder:
            sys.path.insert(0, folder)
    state = _journal_state()
    # a module (or a directory's conftest.py) is about to be imported: if the process
    # dies now, this one did it
    if state is not None and state.journal is not None and isinstance(collector, (pytest.File, pytest.Directory)):
        state.journal.write("collecting", nodeid=collector.nodeid, path=str(collector.path))
        state.journal.importing = collector.nodeid


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Module | pytest.Class, name: str, obj: object) -> list[Any] | None:
    """In a unittest file, only what unittest's loader runs: its TestCase classes."""
    state = collector.config.stash[_state_key]
    if not state.as_script or not isinstance(collector, pytest.Module):
        return None
    if isinstance(obj, type) and issubclass(obj, unittest.TestCase):
        return None  # pytest collects it as unittest would
    module = collector.obj
    if module.__name__ not in state.unittest_files:
        state.unittest_files[module.__name__] = any(
            isinstance(v, type) and issubclass(v, unittest.TestCase) and v.__module__ == module.__name__
            for v in vars(module).values()
        )
    # a module-level def test_x(self) of a unittest file is a helper, never run by unittest
    return [] if state.unittest_files[module.__name__] else None


def pytest_collectreport(report: pytest.CollectReport) -> None:
    state = _journal_state()
    if state is None or state.journal is None:
        return
    state.journal.importing = ""
    if report.failed:
        state.journal.write("collect_error", nodeid=report.nodeid, longrepr=_text(report.longrepr), t=time.time())
    elif report.skipped:
        state.journal.write("collect_skip", nodeid=report.nodeid, longrepr=_text(report.longrepr))
    elif "::" not in report.nodeid:  # a file or a directory, as journaled at its start
        state.journal.write("collect_done", nodeid=report.nodeid)


# The states of the configs alive in this process, innermost last (an in-process
# pytester run nests a second config inside the first).
_STACK: list[_State] = []


def _journal_state() -> _State | None:
    return _STACK[-1] if _STACK else None


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    state = _journal_state()
    if state is not None and state.fatal is not None:
        state.fatal.keep_first()  # #29: a handler installed since (XLA's) goes behind faulthandler
        state.fault_at = state.fatal.size()
    if state is not None:
        state.started_at = time.time()
    if state is not None and state.journal is not None:
        meta = {k: v for k, v in state.meta.get(nodeid, {}).items() if k != "raises"}
        state.seq += 1
        line = location[1] + 1 if location[1] is not None else None
        state.journal.start(nodeid, time.time(), meta, state.seq, (location[0], line))
        if state.markers:
            # where this test's output begins in the run log (the runner strips the marker)
            try:
                os.write(1, wire.marker(state.seq))
            except OSError:
                pass


class _FailurePlace:
    """Where each failing phase failed: registered only with the journal, so a plain pytest
    run pays nothing for it."""

    def __init__(self, state: _State, root: Path) -> None:
        self.state = state
        self.root = root

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if report.failed and call.excinfo is not None:
            self.state.where[(item.nodeid, report.when)] = failure_place(item, call.excinfo, self.root)
        return report


class _TracebacksInTheRecord:
    """#32: under the runner, each failure's traceback is in the record (run.json whole,
    junit.xml and report.json its ends); the terminal's failures and errors sections would
    print every one again into output.log, at pytest's cost of printing them (which grows
    with the square of the failures). They are left out, with a line that says where the
    tracebacks are; the short summary (a line a failure) stays."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> Generator[None, None, None]:
        failed = sum(len(terminalreporter.stats.get(key, ())) for key in ("failed", "error"))
        style = config.option.tbstyle
        if failed and style != "no":
            terminalreporter.write_sep("=", f"device-matrix: {failed} tracebacks are in run.json, not repeated here")
            config.option.tbstyle = "no"  # what the failures and errors sections are printed by
        try:
            return (yield)
        finally:
            config.option.tbstyle = style


def failure_place(item: pytest.Item, excinfo: pytest.ExceptionInfo[BaseException], root: Path) -> tuple[str, int]:
    """The deepest line of the test's own file in the traceback, else of another file of the
    project (a conftest.py fixture, a helper), else the test's own line; relative to ``root``."""
    own: tuple[str, int] | None = None
    project: tuple[str, int] | None = None
    prefix = str(root)
    for entry in excinfo.traceback:
        # #32: the frame's file as a string first (pytest's entry.path costs a stat a frame,
        # a tenth of a failing test under the runner): Path work only for the few frames
        # under the project root, and those that exist, as entry.path has them
        raw = entry.frame.code.raw.co_filename
        filename = os.path.abspath(raw) if raw else ""  # noqa: PTH100 - as pytest: symlinks kept
        if not filename.startswith(prefix):
            continue
        path = Path(filename)
        if not path.is_relative_to(root):
            continue
        mine = path == item.path
        if not mine and {"site-packages", "dist-packages"} & set(path.parts):
            continue  # a virtual environment inside the project
        if not path.exists():
            continue  # "<string>" and the like
        place = (path.relative_to(root).as_posix(), entry.lineno + 1)
        if mine:
            own = place
        else:
            project = place
    found = own or project
    if found is not None:
        return found
    file, line, _ = item.location
    return file, (line or 0) + 1


def _cause(report: pytest.TestReport) -> str | None:
    """The exception line(s) of a failed report, as pytest's E lines show them."""
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None)
    return clip(message) if isinstance(message, str) and message.strip() else None


def _text(longrepr: object, limit: int = LONGREPR_LIMIT) -> str | None:
    if longrepr is None:
        return None
    # a skip's longrepr is (path, line, reason); anything else prints itself
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    if len(text) > limit:
        text = text[: limit // 2] + "\n...[truncated]...\n" + text[-limit // 2 :]
    return text


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A unittest test whose call raised what unittest calls an error (not its failureException)."""
    report = yield
    cls = getattr(item, "cls", None)
    if (
        report.when == "call"
        and report.failed
        and call.excinfo is not None
        and isinstance(cls, type)
        and issubclass(cls, unittest.TestCase)
        # pytest.fail() (and pytest's own "Unexpected success") is a failure, as in pytest
        and not call.excinfo.errisinstance((cls.failureException, pytest.fail.Exception))
    ):
        setattr(report, _UNITTEST_ERROR, True)
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    state = _journal_state()
    if state is not None and state.fatal is not None and report.when == "setup":
        # #29: XLA's runtime started in the test's fixtures: its handler goes behind before
        # the call (the next test's start looks again)
        state.fatal.keep_first()
    if state is None or state.journal is None:
        return
    if report.when not in wire.PHASES:
        _plugin_crash(state, report)
        return
    sub = None if type(report) is _TEST_REPORT else _subtest(report)
    if sub is not None and not report.failed:
        # a subtest that passed or skipped leaves its test's outcome as pytest counts it
        # (the test's own call report follows): nothing to journal
        return
    if report.passed and report.longrepr is None and not hasattr(report, "wasxfail"):
        # most phases of most tests: a short event; a teardown's waits for the finish
        # right after it, which writes both at once
        duration = report.duration if 0.0 <= report.duration < MAX_SECONDS else 0.0
        state.journal.passed(report.when, duration, hold=report.when == "teardown")
        return
    skip_meta: dict[str, Any] | None = None
    device_skip = state.meta.get(report.nodeid, {}).get("device_skip")
    wasxfail = getattr(report, "wasxfail", None)
    if report.skipped or wasxfail is not None:
        if device_skip is not None:
            skip_meta = dict(device_skip)
        else:
            text = _text(report.longrepr) if wasxfail is None else str(wasxfail)
            issue = find_issue_in_text(text)
            skip_meta = {
                "mode": "xfail" if wasxfail is not None else "skip",
                "devices": [],
                "issue": issue,
                "reason": text or "",
                "source": "unittest" if issue else "pytest",
                # only_on: not applicable on this device, not a defect that needs an issue
                "by_design": is_by_design_text(text),
            }
    failed = report.outcome not in ("passed", "skipped")  # failed, or "rerun" (pytest-rerunfailures)
    where = state.where.pop((report.nodeid, report.when), None) if sub is None else None
    state.journal.write(
        "report",
        nodeid=report.nodeid,
        when=report.when,
        # unittest's "error" stays an error in the record, however its file ran (#24)
        outcome="error" if getattr(report, _UNITTEST_ERROR, False) else report.outcome,
        duration=round(report.duration, 6) if 0.0 <= report.duration < MAX_SECONDS else 0.0,
        longrepr=_text(report.longrepr, TRACEBACK_LIMIT if report.failed else LONGREPR_LIMIT)
        if report.failed or report.skipped
        else None,
        wasxfail=wasxfail,
        skip=skip_meta,
        sub=sub,
        cause=_cause(report) if failed else None,
        where=list(where) if where else None,
    )


# pytest-forked's report of a forked copy that died: "FILE:LINE: running the test CRASHED with
# signal 11"; of one that exited: "... EXITED with status 3" (before 1.7: "CRASHED with signal 0")
_FORKED_CRASH_RE = re.compile(r"CRASHED with signal (\d+)")
_FORKED_EXIT_RE = re.compile(r"EXITED with status (\d+)")
# the phase the copy died in, by pytest's own hook in its Python stack
_PHASE_HOOKS = {"pytest_runtest_setup": "setup", "pytest_runtest_call": "call", "pytest_runtest_teardown": "teardown"}
_HOOK_RE = re.compile(r"line \d+ in (pytest_runtest_(?:setup|call|teardown))$", re.M)


def _plugin_crash(state: _State, report: pytest.TestReport) -> None:
    """#29: a phase pytest does not have (pytest-forked's ``'???'``): the plugin's report of
    the test's crash in the copy it forked. Journaled as the crash of the phase the copy
    was in, with the copy's signal or exit status, its Python stack (faulthandler wrote it
    into the fault file, inherited) and its output, so the record names the crash as the
    test's own. A copy that exited wrote no core: only one a signal ended is looked for."""
    assert state.journal is not None
    text = _text(report.longrepr) or ""
    signalled = _FORKED_CRASH_RE.search(text)
    exited = _FORKED_EXIT_RE.search(text)
    signum = int(signalled.group(1)) if signalled else 0  # 0: the copy exited, no signal
    fault = state.fatal.read_from(state.fault_at) if state.fatal is not None else ""
    hooks = _HOOK_RE.findall(fault)
    output = "\n".join(content for _, content in report.sections)
    state.journal.write(
        "report",
        nodeid=report.nodeid,
        when=_PHASE_HOOKS[hooks[0]] if hooks else "call",  # most recent first: the innermost
        outcome="failed",
        duration=round(report.duration, 6) if 0.0 <= report.duration < MAX_SECONDS else 0.0,
        longrepr=text,
        cause=_cause(report),
        crash={
            "signal": signum or None,
            "status": int(exited.group(1)) if exited else None,
            "fault": fault,
            "output": _text(output) or "",
            "core": _copy_core(state) if signum else None,
        },
    )


def _copy_core(state: _State) -> str | None:
    """#39: the core the dead copy left where it ran, under a name of its own, for the runner
    to read its Python stack from (a handler of the copy may have taken the signal before
    faulthandler wrote it). The copy's own: a core that says its process's parent is this
    one, written since the test started, and given to no earlier copy's crash (a copy that
    died a moment before left one too). Renamed in its folder: the next copy's would take
    the name ``core``."""
    from device_matrix.diagnostics.core import new_cores, parent_id  # only when a copy died

    me = os.getpid()
    found = [c for c in new_cores([Path.cwd()], state.started_at) if c not in state.cores and parent_id(c) == me]
    if not found:
        return None
    core = found[0]
    if core.name == "core":  # a core_pattern with the pid (core.%p) names each copy's own
        named = core.with_name(f"{wire.FORKED_CORE_PREFIX}{me}.{time.time_ns()}")
        try:
            core.rename(named)
            core = named
        except OSError:
            pass
    state.cores.add(core)
    return str(core)


def _subtest(report: pytest.TestReport) -> str | None:
    """Which subtest a report of a subclass of TestReport is (pytest's or pytest-subtests')."""
    describe = getattr(report, "_sub_test_description", None) or getattr(report, "sub_test_description", None)
    if not callable(describe):
        return None
    try:
        return str(describe())
    except Exception:
        # a plugin's own description failed: the report is still a subtest's
        return "(<subtest>)"


def pytest_runtest_logfinish(nodeid: str, location: tuple[str, int | None, str]) -> None:
    state = _journal_state()
    if state is not None and state.journal is not None:
        state.journal.finish(nodeid, time.time())


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    state = session.config.stash.get(_state_key, None)
    nothing = exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and not session.testscollected
    if state is not None and state.left_out and nothing:
        # #34: selection left every test out: nothing broke, nothing was to run
        session.exitstatus = exitstatus = pytest.ExitCode.OK
    if state is not None and state.journal is not None:
        state.journal.write("end", exitstatus=int(exitstatus), t=time.time())


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_state_key, None)
    if state is None:
        return
    if state in _STACK:
        _STACK.remove(state)
    if state.journal is not None:
        state.journal.close()
    # The fault file stays open and faulthandler stays armed: a crash at interpreter
    # exit (atexit handlers, C++ static destructors) is diagnosed too.
