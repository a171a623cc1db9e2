"""Run a unittest file as a script, as upstream does, and journal every test it runs.

    python -m device_matrix.child.script [--dm-journal=PATH] [--dm-faulthandler=PATH]
        [--dm-select=PATH] [--dm-device=NAME] [--dm-variant=NAME] [--dm-env] [--dm-program]
        FILE [ARGS...]

The launcher checks its options and becomes ``python FILE ARGS`` (the same process, the
same interpreter and its options): nothing of it is on the stack above the script, whose
outermost frame is its own module, as under ``python FILE`` (a test that walks its
callers' frames and their locals sees what it sees there, #24). ``site`` starts the
journaling in that interpreter (:mod:`device_matrix.child.boot`) before ``__main__`` runs:

- ``__name__ == "__main__"``, ``sys.argv == [FILE, *ARGS]``, the file's folder first on
  ``sys.path``, PYTHONPATH as given; the script's own flag parsing and runner;
- unittest's own suite runs, its results and output untouched; the journal follows it
  through the attributes unittest sets on its result (:class:`_Watched`) and the parts of
  each test it runs (:class:`_PhasedOutcome`), never through a frame of its own between
  the script and a test;
- events as the pytest plugin writes them, nodeids in pytest's form (``FILE::Class::method``,
  with ``[NAME]`` after each when a file runs more than once: ``--dm-variant``).

A program (``--dm-program``: a scripts entry of ``kind = "program"``, a training script
with flags) is one test, ``FILE[NAME]``: it is collected and started before ``__main__``
runs, and nothing else is journaled; unittest is not followed in it. Its test ends with
the process: the runner reads its outcome from the exit status (:mod:`device_matrix.run.programs`),
and a death or a hang is that test's, as for any test.

Decisions the journal's one ``collected`` event forces:

- the first unittest run of the process is journaled; a later one runs as the script
  asks, unjournaled, with a warning on stderr, and the process then exits 1, so its tests
  are never counted as passed by a record that cannot see them;
- a script that runs no unittest ends with ``collected`` [] and ``end``;
- a script that fails (exception, non-zero exit) before any test ran is a
  ``collect_error`` for FILE, then ``collected`` [] and ``end``.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import json
import os
import signal
import sys
import threading
import time
import traceback
import unittest
import unittest.case
import unittest.result
import unittest.suite
import unittest.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import device_matrix
from device_matrix import wire
from device_matrix.child.journal import FatalStacks, JournalWriter, arm_faulthandler, end_forked_copies, follow_chdir
from device_matrix.skips import find_issue_in_text, is_by_design_text
from device_matrix.skips.disable import skip_disabled_tests

LONGREPR_LIMIT = 20_000
EXIT_USAGE = 2
EXIT_SIGINT = 128 + signal.SIGINT  # in ``end``: the shell's number for a death by SIGINT
USAGE = (
    "usage: python -m device_matrix.child.script [--dm-journal=PATH] [--dm-faulthandler=PATH] "
    "[--dm-select=PATH] [--dm-device=NAME] [--dm-variant=NAME] [--dm-env] [--dm-program] FILE [ARGS...]"
)
_VALUED = (wire.OPT_JOURNAL, wire.OPT_FAULTHANDLER, wire.OPT_SELECT, wire.OPT_DEVICE, wire.OPT_VARIANT)
_PHASE_ATTR = "__device_matrix_phase__"
BOOT_DIR = Path(__file__).resolve().parent / "boot"
BOOT_ENV = "DEVICE_MATRIX_SCRIPT_BOOT"  # the settings the boot's sitecustomize reads (and removes)
# unittest leaves frames of modules with this global out of the tracebacks it prints:
# a test's traceback shows none of this module's frames
__unittest = True


@dataclass
class Options:
    file: str
    args: list[str]
    journal: str | None = None
    faulthandler: str | None = None
    select: str | None = None
    device: str | None = None
    variant: str | None = None
    env: bool = False
    program: bool = False


class UsageError(Exception):
    """The launcher's own command line is wrong."""


def parse_args(argv: list[str]) -> Options:
    """``--dm-*`` options up to the first other word, which is FILE; the rest is the script's."""
    values: dict[str, str] = {}
    env = program = False
    for k, word in enumerate(argv):
        if not word.startswith("--dm-"):
            return Options(
                file=word,
                args=argv[k + 1 :],
                journal=values.get(wire.OPT_JOURNAL),
                faulthandler=values.get(wire.OPT_FAULTHANDLER),
                select=values.get(wire.OPT_SELECT),
                device=values.get(wire.OPT_DEVICE),
                variant=values.get(wire.OPT_VARIANT),
                env=env,
                program=program,
            )
        name, eq, value = word.partition("=")
        if name == wire.OPT_ENV and not eq:
            env = True
        elif name == wire.OPT_PROGRAM and not eq:
            program = True
        elif name in _VALUED and eq and value:
            values[name] = value
        else:
            raise UsageError(f"unknown or malformed option {word!r} (options are one word: --dm-x=VALUE)")
    raise UsageError("no script given")


def clip(text: str) -> str:
    """Long tracebacks keep their head and tail, as the plugin keeps them."""
    if len(text) > LONGREPR_LIMIT:
        return text[: LONGREPR_LIMIT // 2] + "\n...[truncated]...\n" + text[-LONGREPR_LIMIT // 2 :]
    return text


def skip_meta(text: str, xfail: bool) -> dict[str, Any]:
    """Skip metadata in the plugin's shape, so a skip reads the same however its file ran."""
    issue = find_issue_in_text(text)
    return {
        "mode": "xfail" if xfail else "skip",
        "devices": [],
        "issue": issue,
        "reason": text,
        "source": "unittest" if issue else "pytest",
        "by_design": is_by_design_text(text),
    }


def node_path(file: str) -> str:
    """FILE as pytest would name it: relative to the working directory when under it."""
    absolute = Path(os.path.normpath(Path.cwd() / file))
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


def flatten(test: unittest.TestSuite | unittest.TestCase) -> Iterator[unittest.TestCase]:
    if isinstance(test, unittest.TestSuite):
        for child in test:
            yield from flatten(child)
    else:
        yield test


def _location(test: unittest.TestCase, path: str) -> list[Any]:
    """[FILE, line of the method's ``def``], as pytest locates a test (None when unknown)."""
    method = getattr(type(test), getattr(test, "_testMethodName", ""), None)
    if method is None:
        return [path, None]
    try:
        lines, first = inspect.getsourcelines(inspect.unwrap(method))
    except (OSError, TypeError, ValueError):
        return [path, None]
    # decorators come first in the source; pytest points at the def
    offset = next((k for k, text in enumerate(lines) if text.lstrip().startswith(("def ", "async def "))), 0)
    return [path, first + offset]


@dataclass
class _Test:
    """What one journaled test did so far."""

    nodeid: str
    test: unittest.TestCase
    began: float
    call_began: float | None = None  # setUp returned or raised
    call_ended: float | None = None  # tearDown began
    reported: float | None = None  # when the last report was written
    started: bool = False  # unittest called startTest (class and module setup passed)
    stopped: bool = False
    parts: int = 0  # parts of the test unittest began: setUp, the method, tearDown, cleanups
    setup_ok: bool = True
    phase: str | None = None  # the part running now
    errors: dict[str, list[str]] = field(default_factory=lambda: {"setup": [], "call": [], "teardown": []})
    # an exception of the method that is not the test's failureException: unittest's "error"
    call_error: bool = False
    skipped: str | None = None
    xfail: str | None = None
    unexpected_success: bool = False
    succeeded: bool = False
    interrupted: bool = False  # stopped with no outcome: KeyboardInterrupt went through


class Recorder:
    """Turns one unittest run into journal events."""

    def __init__(
        self, journal: JournalWriter | None, path: str, select: list[str] | None, variant: str | None = None
    ) -> None:
        self.journal = journal
        self.path = path
        self.select = select
        self.suffix = f"[{variant}]" if variant else ""
        self.device: str | None = None  # the row's, for its disable list (#33)
        self.disable_list = os.environ.get(wire.ENV_DISABLE_LIST)  # read before the launcher takes it (#39)
        self.disabled: dict[str, dict[str, Any]] = {}  # nodeid -> the disable's skip, as the plugin records it
        self.markers = os.environ.get(wire.ENV_MARKERS) == "1"
        self.runs = 0  # top-level unittest runs seen in this process
        self.collected = False
        self.running: unittest.TestResult | None = None  # the result of the journaled run, while it runs
        self.seq = 0
        self.nodeids: dict[int, str] = {}  # id(test) -> nodeid, for the journaled run
        self.current: _Test | None = None
        # errors of class and module fixtures, for tests unittest then never starts
        self.fixture_errors: dict[str, tuple[str, str]] = {}  # "setUpClass (m.C)" -> (kind, text)
        # how the script ends: its sys.exit() argument, or its uncaught exception
        self.fatal: FatalStacks | None = None  # the faulthandler kept first (#29)
        self.exit_code: object = None
        self.failure: str | None = None
        self.interrupted = False

    @property
    def file_nodeid(self) -> str:
        return self.path + self.suffix

    def write(self, event: str, **fields: Any) -> None:
        if self.journal is not None:
            self.journal.write(event, **fields)

    # --- the run ----------------------------------------------------------------------

    def begin_run(self, suite: unittest.TestSuite, result: unittest.TestResult) -> None:
        """A top-level unittest run begins: the first is journaled, a later one is not."""
        self.runs += 1
        if self.runs > 1:
            print(
                f"device-matrix: {self.path} starts a second unittest run; only the first is "
                "recorded, and the process is reported as failed",
                file=sys.stderr,
            )
            return
        self.prepare(suite)
        self.running = journaled_result(result, self)

    def end_run(self, result: unittest.TestResult) -> None:
        if result is self.running:
            self.close()
            self.running = None
            self.nodeids = {}  # ids of freed tests may be reused by a later run's

    def prepare(self, suite: unittest.TestSuite) -> None:
        """Name each test of the suite once, keep the selected ones, write ``collected``.

        The script's own suite runs: only with a selection are its tests put in the order
        the runner asked for (a resume keeps the first attempt's order).
        """
        names: list[tuple[str, unittest.TestCase]] = []
        seen: dict[str, int] = {}
        for test in flatten(suite):
            name = f"{self.path}::{type(test).__name__}::{getattr(test, '_testMethodName', 'runTest')}"
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:  # the same test loaded twice: the journal needs one name each
                name = f"{name}[{seen[name]}]"
            names.append((name + self.suffix, test))
        if self.select is not None:
            position = self.picked([name for name, _ in names], self.select)
            names = sorted((x for x in names if x[0] in position), key=lambda x: position[x[0]])
            suite._tests[:] = [test for _, test in names]
        # #33: the row's disable list, as the plugin applies it and records it (its source)
        hits = skip_disabled_tests(names, self.device, self.disable_list)
        self.disabled = {n: hit.as_meta() for n, hit in hits.items()}
        self.nodeids = {id(test): name for name, test in names}
        self.write("collected", nodeids=[name for name, _ in names], t=time.time())
        self.collected = True

    def picked(self, names: list[str], select: list[str]) -> dict[str, int]:
        """Which of ``names`` ``select`` names, each with its place in it: a nodeid (as a
        record names it too: a resume's, redacted), a class (each of its tests, in the
        script's order, as ``python FILE Class`` runs them), and in a file run more than
        once a test or class without this run's [NAME] (#39)."""
        from device_matrix.wanted import selected

        position = selected(names, select)
        bases = [(k, word.removesuffix(self.suffix)) for k, word in enumerate(select)]
        for name in names:
            base = name.removesuffix(self.suffix)
            k = next((k for k, word in bases if base == word or base.startswith(word + "::")), None)
            if name not in position and k is not None:
                position[name] = k
        return position

    def announce(self, test: object) -> None:
        """Test ``test`` is next: its class and module fixtures are about to run."""
        nodeid = self.nodeids.get(id(test))
        if nodeid is None or not isinstance(test, unittest.TestCase):
            return
        if self.current is not None and self.current.test is test:
            return
        self.close()
        self.seq += 1
        self.current = _Test(nodeid, test, time.monotonic())
        self.write("start", nodeid=nodeid, t=time.time(), meta={}, seq=self.seq, loc=_location(test, self.path))
        if self.markers:
            # the script's buffered output belongs before the marker, not after it
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            try:
                os.write(1, wire.marker(self.seq))
            except OSError:
                pass

    def close(self) -> None:
        """Finish the current test: later fixture errors (tearDownClass) were its own."""
        cur, self.current = self.current, None
        if cur is None or cur.interrupted:
            return
        if not cur.started:
            # unittest skipped it: its class or module setup failed or skipped
            kind, text = self._fixture_failure(cur.test)
            if kind == "skip":
                self._report(cur, "setup", "passed")
                self._report(cur, "call", "skipped", longrepr=text, skip=skip_meta(text, xfail=False))
            else:
                self._report(cur, "setup", "failed", longrepr=text)
            self._report(cur, "teardown", "passed")
        self.write("finish", nodeid=cur.nodeid, t=time.time())

    def _fixture_failure(self, test: unittest.TestCase) -> tuple[str, str]:
        cls = type(test)
        for key in (f"setUpClass ({unittest.util.strclass(cls)})", f"setUpModule ({cls.__module__})"):
            if key in self.fixture_errors:
                return self.fixture_errors[key]
        return "error", f"not run: a class or module fixture of {cls.__name__} failed"

    def _report(
        self,
        cur: _Test,
        when: str,
        outcome: str,
        *,
        duration: float | None = None,
        longrepr: str | None = None,
        wasxfail: str | None = None,
        skip: dict[str, Any] | None = None,
    ) -> None:
        now = time.monotonic()
        self.write(
            "report",
            nodeid=cur.nodeid,
            when=when,
            outcome=outcome,
            duration=round(duration if duration is not None else now - (cur.reported or cur.began), 6),
            longrepr=None if longrepr is None else clip(longrepr),
            wasxfail=wasxfail,
            skip=skip,
        )
        cur.reported = now

    # --- the parts of a test (setUp, the method, tearDown and cleanups) -------------------

    def part_begins(self, test: object) -> str | None:
        """unittest begins a part of ``test``: the phase it belongs to (None: not journaled)."""
        cur = self.current
        if cur is None or cur.test is not test:
            return None
        if self.fatal is not None:
            # #29: XLA's runtime started since (in setUpClass, setUp): its handler goes behind
            self.fatal.keep_first()
        now = time.monotonic()
        k, cur.parts = cur.parts, cur.parts + 1
        was = cur.phase
        if k == 0:
            cur.phase = "setup"
        elif k == 1 and cur.setup_ok:
            cur.phase = "call"
        else:
            cur.phase = "teardown"
            if cur.call_ended is None:
                cur.call_ended = now
        if cur.phase not in (was, "setup"):
            # #29: the reports come at the test's end; a crash before it is this phase's
            self.write("phase", nodeid=cur.nodeid, when=cur.phase)
        return cur.phase

    def part_ends(self, test: object, phase: str, success: bool) -> None:
        cur = self.current
        if cur is None or cur.test is not test:
            return
        if phase == "setup":
            cur.setup_ok = success
            cur.call_began = time.monotonic()

    # --- the result's callbacks ----------------------------------------------------

    def start_test(self, test: unittest.TestCase) -> None:
        self.announce(test)
        if self.current is not None and self.current.test is test:
            self.current.started = True

    def stop_test(self, test: unittest.TestCase) -> None:
        cur = self.current
        if cur is None or cur.test is not test or cur.stopped:
            return
        cur.stopped = True
        outcomes = (*cur.errors.values(), cur.xfail, cur.skipped, cur.unexpected_success)
        if not cur.succeeded and not any(x for x in outcomes if x is not None):
            # no outcome at all: the test did not complete, and stays started without finish
            cur.interrupted = True
            return
        # durations that add up: fixtures and setUp, the method, tearDown and cleanups
        end = time.monotonic()
        call_began = cur.call_began or end
        call_ended = max(cur.call_ended or end, call_began)
        setup, call, teardown = call_began - cur.began, call_ended - call_began, end - call_ended
        if cur.errors["setup"]:
            self._report(cur, "setup", "failed", duration=setup + call, longrepr="\n".join(cur.errors["setup"]))
        else:
            self._report(cur, "setup", "passed", duration=setup)
            if cur.errors["call"]:
                # unittest tells an error (any other exception) from a failure: so does the record
                outcome = "error" if cur.call_error else "failed"
                self._report(cur, "call", outcome, duration=call, longrepr="\n".join(cur.errors["call"]))
            elif cur.xfail is not None:
                meta = skip_meta("", xfail=True)
                self._report(cur, "call", "skipped", duration=call, longrepr=cur.xfail, wasxfail="", skip=meta)
            elif cur.unexpected_success:
                # unittest counts it against wasSuccessful(), pytest as a failure: so do we
                self._report(cur, "call", "failed", duration=call, longrepr="Unexpected success")
            elif cur.skipped is not None:
                meta = self.disabled.get(cur.nodeid) or skip_meta(cur.skipped, xfail=False)
                self._report(cur, "call", "skipped", duration=call, longrepr=cur.skipped, skip=meta)
            else:
                self._report(cur, "call", "passed", duration=call)
        errors = cur.errors["teardown"]
        outcome = "failed" if errors else "passed"
        self._report(cur, "teardown", outcome, duration=teardown, longrepr="\n".join(errors) if errors else None)
        cur.reported = end

    def error(self, test: object, text: str, exc: BaseException | None, *, failure: bool) -> None:
        """An exception of ``test``: ``failure`` when it is the test's failureException."""
        cur = self.current
        if isinstance(test, unittest.TestCase) and cur is not None and cur.test is test:
            phase = getattr(exc, _PHASE_ATTR, None) or cur.phase
            if phase not in cur.errors:
                # no part seen: the method, or a cleanup (they run after tearDown or a failed setUp)
                phase = "teardown" if cur.call_ended is not None or cur.errors["setup"] else "call"
            cur.errors[phase].append(text)
            if phase == "call" and not failure:
                cur.call_error = True
            if cur.stopped:  # e.g. a failure reported after stopTest: still this test's
                self._report(cur, "teardown", "failed", longrepr=text)
            return
        description = str(test)
        if description.startswith(("setUpClass", "setUpModule")):
            self.fixture_errors[description] = ("error", text)
        elif cur is not None and cur.stopped:
            # tearDownClass / tearDownModule run while the last test of its class is open
            self._report(cur, "teardown", "failed", longrepr=text)

    def skip(self, test: object, reason: str) -> None:
        text = f"Skipped: {reason}"
        cur = self.current
        if isinstance(test, unittest.TestCase) and cur is not None and cur.test is test:
            cur.skipped = text
        elif str(test).startswith(("setUpClass", "setUpModule")):
            self.fixture_errors[str(test)] = ("skip", text)
        # a skipped subTest leaves its test's outcome to the other subtests

    def success(self, test: unittest.TestCase) -> None:
        if self.current is not None and self.current.test is test:
            self.current.succeeded = True

    def expected_failure(self, test: unittest.TestCase, text: str) -> None:
        if self.current is not None and self.current.test is test:
            self.current.xfail = text

    def unexpected_success(self, test: unittest.TestCase) -> None:
        if self.current is not None and self.current.test is test:
            self.current.unexpected_success = True

    # --- the end of the process --------------------------------------------------------

    def status(self) -> int:
        """The exit status as this process knows it (the runner reads the real one)."""
        if self.interrupted:
            return EXIT_SIGINT
        if self.failure is not None:
            return 1
        code = self.exit_code
        status = 0 if code is None else (int(code) if isinstance(code, int) else 1)
        return 1 if self.runs > 1 and status == 0 else status


class _JournalResult(unittest.TestResult):
    """Mixed in before the script's own result class: journal first, then its behaviour."""

    _dm_recorder: Recorder

    def startTest(self, test: unittest.TestCase) -> None:
        self._dm_recorder.start_test(test)
        super().startTest(test)

    def stopTest(self, test: unittest.TestCase) -> None:
        self._dm_recorder.stop_test(test)
        super().stopTest(test)

    def addSuccess(self, test: unittest.TestCase) -> None:
        self._dm_recorder.success(test)
        super().addSuccess(test)

    def addError(self, test: unittest.TestCase, err: Any) -> None:
        self._dm_recorder.error(test, self._dm_text(test, err), _exc(err), failure=False)
        super().addError(test, err)

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:
        self._dm_recorder.error(test, self._dm_text(test, err), _exc(err), failure=True)
        super().addFailure(test, err)

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase, err: Any) -> None:
        if err is not None:
            failure = isinstance(_exc(err), test.failureException)
            self._dm_recorder.error(test, f"{subtest}\n{self._dm_text(test, err)}", _exc(err), failure=failure)
        super().addSubTest(test, subtest, err)

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        self._dm_recorder.skip(test, reason)
        super().addSkip(test, reason)

    def addExpectedFailure(self, test: unittest.TestCase, err: Any) -> None:
        self._dm_recorder.expected_failure(test, self._dm_text(test, err))
        super().addExpectedFailure(test, err)

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        self._dm_recorder.unexpected_success(test)
        super().addUnexpectedSuccess(test)

    def _dm_text(self, test: unittest.TestCase, err: Any) -> str:
        try:
            return str(self._exc_info_to_string(err, test))  # type: ignore[attr-defined]
        except Exception:  # an odd result class must not cost the journal
            return "".join(traceback.format_exception(*err)) if isinstance(err, tuple) else str(err)


def _exc(err: Any) -> BaseException | None:
    return err[1] if isinstance(err, tuple) and len(err) == 3 else None


def journaled_result(result: unittest.TestResult, recorder: Recorder) -> unittest.TestResult:
    """``result`` with journaling mixed in; its class, output and counts otherwise unchanged."""
    cls = type(result)
    # a result class this cannot extend raises here: the script fails with the reason, and
    # its collected tests are recorded as not run rather than guessed at. It keeps the
    # script's class name: a test that looks at its callers' locals sees what python FILE
    # shows it (#24)
    names = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
    result.__class__ = type(cls.__name__, (_JournalResult, cls), {"_dm_recorder": recorder, **names})
    return result


# --- following unittest without a frame in its way ----------------------------------------
#
# unittest's suite sets and reads a few attributes on its result at the points the journal
# needs: `_testRunEntered` when the top-level run begins and ends, `_moduleSetUpFailed`
# right before a test's setUpModule, `_previousTestClass` right before its setUpClass. A
# data descriptor on TestResult sees each of them and returns before the suite goes on, so
# no frame of the launcher stays between the script and its tests.

_SUITE = unittest.suite.TestSuite


class _Watched:
    """An attribute unittest's suite keeps on its result, with a hook on reads or writes."""

    def __init__(
        self,
        name: str,
        *,
        on_get: Callable[[unittest.TestResult, Any, Any], None] | None = None,
        on_set: Callable[[unittest.TestResult, Any, Any], None] | None = None,
    ) -> None:
        self.key = f"_dm_{name}"
        self.on_get, self.on_set = on_get, on_set

    def __get__(self, result: unittest.TestResult | None, owner: type) -> Any:
        if result is None:
            return self
        value = result.__dict__.get(self.key, _UNSET)
        if self.on_get is not None:
            self.on_get(result, value, sys._getframe(1))
        if value is _UNSET:
            raise AttributeError(self.key[4:])
        return value

    def __set__(self, result: unittest.TestResult, value: Any) -> None:
        previous = result.__dict__.get(self.key, _UNSET)
        result.__dict__[self.key] = value
        if self.on_set is not None:
            self.on_set(result, (previous, value), sys._getframe(1))


_UNSET = object()


class _PhasedOutcome(unittest.case._Outcome):  # type: ignore[name-defined,misc]
    """unittest's outcome of one test, noting which part of the test runs: the journal's
    phases (setup, call, teardown) and their durations. Its context managers are suspended
    while the part runs: not on the stack of the test."""

    _dm_recorder: Recorder | None = None
    # a test that looks at its callers' locals sees unittest's own outcome (#24)
    __module__ = "unittest.case"
    __qualname__ = "_Outcome"

    @contextlib.contextmanager
    def testPartExecutor(self, test_case: Any, *args: Any, **kwargs: Any) -> Iterator[None]:
        recorder = self._dm_recorder
        phase = recorder.part_begins(test_case) if recorder is not None else None
        if phase is None:  # a subtest's part, or a test the journal does not follow
            with super().testPartExecutor(test_case, *args, **kwargs):
                yield
            return
        errors = getattr(self, "errors", None)  # Python 3.10 reports errors after the test
        before = len(errors) if isinstance(errors, list) else 0
        try:
            with super().testPartExecutor(test_case, *args, **kwargs):
                yield
        finally:
            if isinstance(errors, list):
                for _, exc_info in errors[before:]:
                    _tag(exc_info, phase)
            if recorder is not None:
                recorder.part_ends(test_case, phase, bool(self.success))


def _tag(exc_info: Any, phase: str) -> None:
    exc = _exc(exc_info)
    if exc is not None:
        with contextlib.suppress(AttributeError, TypeError):
            setattr(exc, _PHASE_ATTR, phase)


def install(recorder: Recorder) -> Callable[[], None]:
    """Follow every unittest run of this process; returns the undo."""
    run_code = _SUITE.run.__code__
    module_fixture = _SUITE._handleModuleFixture.__code__  # type: ignore[attr-defined]
    class_setup = _SUITE._handleClassSetUp.__code__  # type: ignore[attr-defined]

    def entered(result: unittest.TestResult, value: Any, caller: Any) -> None:
        # TestSuite.run asks whether a run is under way: when not, this one is the top level
        if value in (_UNSET, False) and caller.f_code is run_code:
            recorder.begin_run(caller.f_locals["self"], result)

    def left(result: unittest.TestResult, values: tuple[Any, Any], caller: Any) -> None:
        if values == (True, False):  # the top-level run is over, its last teardowns done
            recorder.end_run(result)

    def module_next(result: unittest.TestResult, values: tuple[Any, Any], caller: Any) -> None:
        # the previous module's tearDownModule is done; next comes this test's setUpModule
        if caller.f_code is module_fixture:
            recorder.announce(caller.f_locals.get("test"))

    def class_next(result: unittest.TestResult, value: Any, caller: Any) -> None:
        # next comes this test's setUpClass: a crash there is this test's
        if caller.f_code is class_setup:
            recorder.announce(caller.f_locals.get("test"))

    base = unittest.result.TestResult
    watched = {
        "_testRunEntered": _Watched("_testRunEntered", on_get=entered, on_set=left),
        "_moduleSetUpFailed": _Watched("_moduleSetUpFailed", on_set=module_next),
        "_previousTestClass": _Watched("_previousTestClass", on_get=class_next),
    }
    before = {name: base.__dict__.get(name, _UNSET) for name in watched}
    for name, descriptor in watched.items():
        setattr(base, name, descriptor)
    outcome = unittest.case._Outcome  # type: ignore[attr-defined]
    _PhasedOutcome._dm_recorder = recorder
    unittest.case._Outcome = _PhasedOutcome  # type: ignore[attr-defined]

    def undo() -> None:
        unittest.case._Outcome = outcome  # type: ignore[attr-defined]
        _PhasedOutcome._dm_recorder = None
        for name, value in before.items():
            if value is _UNSET:
                delattr(base, name)
            else:
                setattr(base, name, value)

    return undo


# --- the launcher, and the interpreter it becomes ------------------------------------------


def interpreter_flags() -> list[str]:
    """The options of this interpreter that the one it becomes must repeat."""
    flags = sys.flags
    args = ["-O"] * flags.optimize + ["-b"] * flags.bytes_warning
    if flags.dont_write_bytecode:
        args.append("-B")
    if flags.no_user_site:
        args.append("-s")
    if getattr(flags, "safe_path", False):
        args.append("-P")
    for warning in sys.warnoptions:
        args += ["-W", warning]
    for name, value in sys._xoptions.items():
        if name == "faulthandler":
            # #39: the runner's (the launcher's start is watched from its first instruction);
            # the script's faulthandler is armed into the attempt's file before its __main__,
            # and python FILE's interpreter, and the children it starts with its options
            # (multiprocessing's), have no such option
            continue
        args += ["-X", name if value is True else f"{name}={value}"]
    return args


def main(argv: list[str] | None = None) -> int:  # noqa: RET503 - os.execve does not return
    """Check the command line, then become ``python FILE ARGS`` (returns only on a usage error)."""
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"ERROR: {exc}\nTIP: {USAGE}", file=sys.stderr)
        return EXIT_USAGE
    if not Path(opts.file).is_file():
        print(f"ERROR: no script {opts.file!r}\nTIP: {USAGE}", file=sys.stderr)
        return EXIT_USAGE
    if sys.flags.no_site or sys.flags.ignore_environment or sys.flags.isolated:
        print(
            "ERROR: the launcher starts the script through `site` and PYTHONPATH\nTIP: run it without -S, -E and -I.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    pythonpath = os.environ.get("PYTHONPATH")
    settings = {
        "file": opts.file,
        "journal": opts.journal,
        "faulthandler": opts.faulthandler,
        "select": opts.select,
        "device": opts.device,
        "variant": opts.variant,
        "env": opts.env,
        "program": opts.program,
        "pythonpath": pythonpath,
        "package": str(Path(device_matrix.__file__).resolve().parent.parent),
    }
    env = dict(os.environ)
    env[BOOT_ENV] = json.dumps(settings)
    env["PYTHONPATH"] = os.pathsep.join([str(BOOT_DIR), *([pythonpath] if pythonpath else [])])
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    # the same process becomes python FILE ARGS: no shell, the launcher's own argv checked above
    os.execve(sys.executable, [sys.executable, *interpreter_flags(), opts.file, *opts.args], env)  # noqa: S606


def boot(raw: dict[str, Any]) -> None:
    """In the interpreter the launcher became, before ``__main__``: start the journal."""
    opts = Options(
        file=str(raw["file"]),
        args=[],
        journal=raw.get("journal"),
        faulthandler=raw.get("faulthandler"),
        select=raw.get("select"),
        device=raw.get("device"),
        variant=raw.get("variant"),
        env=bool(raw.get("env")),
        program=bool(raw.get("program")),
    )
    device = opts.device or os.environ.get(wire.ENV_DEVICE)
    journal = JournalWriter(Path(opts.journal)) if opts.journal else None
    if journal is not None:
        follow_chdir(journal)
        env = secrets = None
        if opts.env:  # its snapshot, and its own secret values (see the plugin)
            from device_matrix.diagnostics.environment import snapshot
            from device_matrix.redact import secret_values

            env, secrets = snapshot(), secret_values()
        journal.write("session", pid=os.getpid(), device=device, t=time.time(), env=env, secrets=secrets)
    select = None
    if opts.select:
        select_path = Path(opts.select)
        select = wire.read_select(select_path)
        select_path.unlink(missing_ok=True)  # raw nodeids: not left on disk
    fatal = arm_faulthandler(opts.faulthandler) if opts.faulthandler else None
    path = node_path(opts.file)
    recorder = Recorder(journal, path, select, opts.variant)
    recorder.fatal = fatal
    recorder.device = device
    # #39: the script's environment is python FILE's: the variables the runner gave the
    # launcher are read (above) and gone before its __main__ (and its children) see them
    for name in wire.LAUNCHER_TAKES:
        os.environ.pop(name, None)
    if opts.program:
        _start_program(journal, recorder.file_nodeid, path, markers=recorder.markers)
        return
    if journal is not None:
        # a copy made by os.fork() that returns into unittest would run the rest again
        end_forked_copies(journal, lambda: recorder.current.nodeid if recorder.current is not None else None)
        # the script's import is its collection: a crash there names the file
        journal.write("collecting", nodeid=recorder.file_nodeid, path=str(Path(opts.file).resolve()))
    install(recorder)
    _watch_the_end(recorder)


def _start_program(journal: JournalWriter | None, nodeid: str, path: str, *, markers: bool) -> None:
    """A program is one test, from before its ``__main__`` to the process's exit: collected
    and started here, never finished by the process (the runner reads its exit status)."""
    if journal is None:
        return
    # a fork's copy never writes the journal, nor keeps the runner's reader open
    end_forked_copies(journal, lambda: nodeid)
    journal.write("collected", nodeids=[nodeid], t=time.time())
    journal.write("start", nodeid=nodeid, t=time.time(), meta={}, seq=1, loc=[path, None])
    if markers:
        with contextlib.suppress(OSError):
            os.write(1, wire.marker(1))


def _watch_the_end(recorder: Recorder) -> None:
    """How the script ends (sys.exit, an uncaught exception), and ``end`` at its exit."""
    exit_ = sys.exit
    excepthook = sys.excepthook

    def journaled_exit(status: str | int | None = None) -> NoReturn:
        recorder.exit_code = status
        exit_(status)

    def journaled_excepthook(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
        recorder.interrupted = issubclass(kind, KeyboardInterrupt)
        recorder.failure = "".join(traceback.format_exception(kind, exc, tb))
        excepthook(kind, exc, tb)

    def session_end() -> None:
        if recorder.journal is not None and recorder.journal.in_copy:
            # #29: a multiprocessing child made by fork ends here (threading's exit hook runs
            # in it as in any process): its end is its own, as under python FILE
            return
        # the script's __main__ is done (its end, sys.exit(), an uncaught exception): its
        # session ended, as pytest's does at sessionfinish; what hangs after this (a runtime's
        # exit handler, a thread joined) is a hang at exit, as under pytest
        recorder.close()
        status = recorder.status()
        if not recorder.collected:
            failure = recorder.failure
            if failure is None and status != 0:
                failure = f"SystemExit: {recorder.exit_code}"
            if failure is not None:
                recorder.write("collect_error", nodeid=recorder.file_nodeid, longrepr=clip(failure), t=time.time())
            recorder.write("collected", nodeids=[], t=time.time())
        recorder.write("end", exitstatus=status, t=time.time())
        if recorder.journal is not None:
            recorder.journal.close()

    def at_exit() -> None:
        # registered first, so it runs last: after the script's own exit handlers
        if recorder.runs > 1 and recorder.exit_code in (None, 0, False):
            # a run the record cannot see never passes: python would have exited 0
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(OSError, ValueError):
                    stream.flush()
            os._exit(1)

    sys.exit = journaled_exit
    sys.excepthook = journaled_excepthook
    # before the interpreter joins its threads and runs its exit handlers (CPython's hook,
    # as concurrent.futures uses it); else with the exit handlers
    before_threads = getattr(threading, "_register_atexit", None)
    (before_threads or atexit.register)(session_end)
    atexit.register(at_exit)


if __name__ == "__main__":
    sys.exit(main())
