"""Run a unittest file as a script, as upstream does, and journal every test it runs.

    python -m device_matrix.child.script [--dm-journal=PATH] [--dm-faulthandler=PATH]
        [--dm-select=PATH] [--dm-device=NAME] [--dm-env] FILE [ARGS...]

The file runs as ``python FILE ARGS`` would run it: ``__name__ == "__main__"``,
``sys.argv == [FILE, *ARGS]``, its folder first on ``sys.path``, its own flag parsing and
environment checks in ``__main__``. The launcher hooks the top-level ``TestSuite.run``
that any unittest runner ends in, so the script's runner, output and
``result.wasSuccessful()`` stay as they are, and writes the same journal events as the
pytest plugin, with nodeids in pytest's form (``FILE::Class::method``).

Decisions the journal's one ``collected`` event forces:

- the first unittest run of the process is journaled; a later one runs as the script
  asks, unjournaled, with a warning on stderr and a non-zero ``end`` status, so its tests
  are never counted as passed by a record that cannot see them;
- a script that runs no unittest ends with ``collected`` [] and ``end``;
- a script that fails (exception, non-zero exit) before any test ran is a
  ``collect_error`` for FILE, then ``collected`` [] and ``end``.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import inspect
import os
import signal
import sys
import time
import traceback
import types
import unittest
import unittest.suite
import unittest.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from device_matrix import wire
from device_matrix.child.journal import JournalWriter, arm_faulthandler, end_forked_copies, follow_chdir
from device_matrix.skips import find_issue_in_text, is_by_design_text

LONGREPR_LIMIT = 20_000
EXIT_USAGE = 2
EXIT_SIGINT = 128 + signal.SIGINT  # in ``end``: the shell's number for a death by SIGINT
USAGE = (
    "usage: python -m device_matrix.child.script [--dm-journal=PATH] [--dm-faulthandler=PATH] "
    "[--dm-select=PATH] [--dm-device=NAME] [--dm-env] FILE [ARGS...]"
)
_VALUED = (wire.OPT_JOURNAL, wire.OPT_FAULTHANDLER, wire.OPT_SELECT, wire.OPT_DEVICE)
_PHASE_ATTR = "__device_matrix_phase__"
# unittest leaves frames of modules with this global out of the tracebacks it prints:
# the script's output shows no launcher frame (the setUp/tearDown wrappers)
__unittest = True


@dataclass
class Options:
    file: str
    args: list[str]
    journal: str | None = None
    faulthandler: str | None = None
    select: str | None = None
    device: str | None = None
    env: bool = False


class UsageError(Exception):
    """The launcher's own command line is wrong."""


def parse_args(argv: list[str]) -> Options:
    """``--dm-*`` options up to the first other word, which is FILE; the rest is the script's."""
    values: dict[str, str] = {}
    env = False
    for k, word in enumerate(argv):
        if not word.startswith("--dm-"):
            return Options(
                file=word,
                args=argv[k + 1 :],
                journal=values.get(wire.OPT_JOURNAL),
                faulthandler=values.get(wire.OPT_FAULTHANDLER),
                select=values.get(wire.OPT_SELECT),
                device=values.get(wire.OPT_DEVICE),
                env=env,
            )
        name, eq, value = word.partition("=")
        if name == wire.OPT_ENV and not eq:
            env = True
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
    errors: dict[str, list[str]] = field(default_factory=lambda: {"setup": [], "call": [], "teardown": []})
    skipped: str | None = None
    xfail: str | None = None
    unexpected_success: bool = False
    succeeded: bool = False
    interrupted: bool = False  # stopped with no outcome: KeyboardInterrupt went through


class Recorder:
    """Turns one unittest run into journal events."""

    def __init__(self, journal: JournalWriter | None, path: str, select: list[str] | None) -> None:
        self.journal = journal
        self.path = path
        self.select = select
        self.markers = os.environ.get(wire.ENV_MARKERS) == "1"
        self.runs = 0  # top-level unittest runs seen in this process
        self.collected = False
        self.seq = 0
        self.nodeids: dict[int, str] = {}  # id(test) -> nodeid, for the journaled run
        self.current: _Test | None = None
        # errors of class and module fixtures, for tests unittest then never starts
        self.fixture_errors: dict[str, tuple[str, str]] = {}  # "setUpClass (m.C)" -> (kind, text)

    def write(self, event: str, **fields: Any) -> None:
        if self.journal is not None:
            self.journal.write(event, **fields)

    # --- the suite ------------------------------------------------------------------

    def prepare(self, suite: unittest.TestSuite) -> unittest.TestSuite:
        """The suite to run: flattened, selected, each test named once; ``collected`` written."""
        names: list[tuple[str, unittest.TestCase]] = []
        seen: dict[str, int] = {}
        for test in flatten(suite):
            name = f"{self.path}::{type(test).__name__}::{getattr(test, '_testMethodName', 'runTest')}"
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:  # the same test loaded twice: the journal needs one name each
                name = f"{name}[{seen[name]}]"
            names.append((name, test))
        if self.select is not None:
            from device_matrix.redact import selected

            # a nodeid as a record names it (a resume: redacted) selects its test too
            position = selected((name for name, _ in names), self.select)
            names = sorted((x for x in names if x[0] in position), key=lambda x: position[x[0]])
        self.nodeids = {id(test): name for name, test in names}
        self.write("collected", nodeids=[name for name, _ in names], t=time.time())
        self.collected = True
        flat = _JournalSuite([test for _, test in names], recorder=self)
        if getattr(suite, "_cleanup", False):
            # unittest frees each test once run (and the tensors it holds); the flat suite
            # does that now, so the script's own suite lets go of them too, counts kept
            for index in range(len(getattr(suite, "_tests", ()))):
                suite._removeTestAtIndex(index)  # type: ignore[attr-defined]
        return flat

    def announce(self, test: unittest.TestCase) -> None:
        """Test ``test`` is next: its class and module fixtures are about to run."""
        nodeid = self.nodeids.get(id(test))
        if nodeid is None or (self.current is not None and self.current.test is test):
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
                self._report(cur, "call", "failed", duration=call, longrepr="\n".join(cur.errors["call"]))
            elif cur.xfail is not None:
                meta = skip_meta("", xfail=True)
                self._report(cur, "call", "skipped", duration=call, longrepr=cur.xfail, wasxfail="", skip=meta)
            elif cur.unexpected_success:
                # unittest counts it against wasSuccessful(), pytest as a failure: so do we
                self._report(cur, "call", "failed", duration=call, longrepr="Unexpected success")
            elif cur.skipped is not None:
                meta = skip_meta(cur.skipped, xfail=False)
                self._report(cur, "call", "skipped", duration=call, longrepr=cur.skipped, skip=meta)
            else:
                self._report(cur, "call", "passed", duration=call)
        errors = cur.errors["teardown"]
        outcome = "failed" if errors else "passed"
        self._report(cur, "teardown", outcome, duration=teardown, longrepr="\n".join(errors) if errors else None)
        cur.reported = end

    def error(self, test: object, text: str, exc: BaseException | None) -> None:
        cur = self.current
        if isinstance(test, unittest.TestCase) and cur is not None and cur.test is test:
            phase = getattr(exc, _PHASE_ATTR, None)
            if phase not in cur.errors:
                # untagged: the method, or a cleanup (they run after tearDown or a failed setUp)
                phase = "teardown" if cur.call_ended is not None or cur.errors["setup"] else "call"
            cur.errors[phase].append(text)
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


class _JournalSuite(unittest.TestSuite):
    """A flat suite that announces each test after the previous one's class and module
    teardowns and before its own setUpModule and setUpClass, as pytest splits them."""

    def __init__(self, tests: list[unittest.TestCase], recorder: Recorder) -> None:
        super().__init__(tests)
        self._recorder = recorder
        self._next: unittest.TestCase | None = None

    def _handleModuleFixture(self, test: unittest.TestCase, result: unittest.TestResult) -> None:
        # a new module: the previous one's tearDownModule runs first (see below)
        self._next = test
        try:
            super()._handleModuleFixture(test, result)  # type: ignore[misc]
        finally:
            self._announce_next()  # the same module: nothing ran in between

    def _handleModuleTearDown(self, result: unittest.TestResult) -> None:
        super()._handleModuleTearDown(result)  # type: ignore[misc]
        # next comes setUpModule: a crash there is the next test's
        self._announce_next()

    def _announce_next(self) -> None:
        test, self._next = self._next, None
        if test is not None:
            self._recorder.announce(test)
            if self._recorder.current is not None and self._recorder.current.test is test:
                _tag_phases(test, self._recorder.current)


def _tag_phases(test: unittest.TestCase, record: _Test) -> None:
    """Mark exceptions from setUp and tearDown, which unittest reports like the test's own,
    and note where the call begins and ends: the phases' durations add up to the test's."""
    for attr, phase in (("setUp", "setup"), ("tearDown", "teardown")):
        method = getattr(test, attr, None)
        if callable(method):
            setattr(test, attr, _tagging(method, phase, record))


def _tagging(method: Callable[[], object], phase: str, record: _Test) -> Callable[[], object]:
    def tagged() -> object:
        if phase == "teardown":
            record.call_ended = time.monotonic()
        try:
            return method()
        except BaseException as exc:
            try:
                setattr(exc, _PHASE_ATTR, phase)
            except (AttributeError, TypeError):
                pass
            raise
        finally:
            if phase == "setup":
                record.call_began = time.monotonic()

    return tagged


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
        self._dm_recorder.error(test, self._dm_text(test, err), _exc(err))
        super().addError(test, err)

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:
        self._dm_recorder.error(test, self._dm_text(test, err), _exc(err))
        super().addFailure(test, err)

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase, err: Any) -> None:
        if err is not None:
            self._dm_recorder.error(test, f"{subtest}\n{self._dm_text(test, err)}", _exc(err))
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
    # its collected tests are recorded as not run rather than guessed at
    result.__class__ = type(f"Journaled{cls.__name__}", (_JournalResult, cls), {"_dm_recorder": recorder})
    return result


def install(recorder: Recorder) -> Callable[[], None]:
    """Hook the top-level ``TestSuite.run`` every unittest runner ends in; returns the undo."""
    original = unittest.suite.TestSuite.run

    def journaled_run(
        self: unittest.TestSuite, result: unittest.TestResult, debug: bool = False
    ) -> unittest.TestResult:
        if isinstance(self, _JournalSuite) or getattr(result, "_testRunEntered", False):
            return original(self, result, debug)
        recorder.runs += 1
        if recorder.runs > 1:
            print(
                f"device-matrix: {recorder.path} starts a second unittest run; only the first is "
                "recorded, and the process is reported as failed",
                file=sys.stderr,
            )
            return original(self, result, debug)
        suite = recorder.prepare(self)
        try:
            return original(suite, journaled_result(result, recorder), debug)
        finally:
            recorder.close()

    unittest.suite.TestSuite.run = journaled_run  # type: ignore[method-assign]

    def undo() -> None:
        unittest.suite.TestSuite.run = original  # type: ignore[method-assign]

    return undo


def _exit_status(code: object) -> int:
    """What ``python FILE`` exits with for ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):  # unittest.main exits with a bool: sys.exit(False) is 0
        return int(code)
    return 1


def _script_traceback(exc: BaseException, file: str) -> str:
    """The traceback ``python FILE`` prints: from the script's frames on."""
    tb = exc.__traceback__
    target = Path(file).resolve()
    while tb is not None and Path(tb.tb_frame.f_code.co_filename).resolve() != target:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))


def main(argv: list[str] | None = None) -> int:
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"ERROR: {exc}\nTIP: {USAGE}", file=sys.stderr)
        return EXIT_USAGE
    if not Path(opts.file).is_file():
        print(f"ERROR: no script {opts.file!r}\nTIP: {USAGE}", file=sys.stderr)
        return EXIT_USAGE
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
    if opts.faulthandler:
        arm_faulthandler(opts.faulthandler)
    path = node_path(opts.file)
    recorder = Recorder(journal, path, select)
    if journal is not None:
        # a copy made by os.fork() that returns into unittest would run the rest again
        end_forked_copies(journal, lambda: recorder.current.nodeid if recorder.current is not None else None)
        # the script's import is its collection: a crash there names the file
        journal.write("collecting", nodeid=path, path=str(Path(opts.file).resolve()))
    status, failure, interrupted = _run_script(opts.file, opts.args, recorder)
    if not recorder.collected:
        if failure is not None:
            recorder.write("collect_error", nodeid=path, longrepr=clip(failure), t=time.time())
        recorder.write("collected", nodeids=[], t=time.time())
    if recorder.runs > 1 and status == 0:
        status = 1
    recorder.write("end", exitstatus=status, t=time.time())
    if journal is not None:
        journal.close()
    if interrupted:
        # python FILE ends an uncaught KeyboardInterrupt by SIGINT: the parent sees the signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return status


def _exec_main(path: Path) -> None:
    """Run ``path`` as the ``__main__`` module, as ``python FILE`` does.

    Not ``runpy.run_path``: it sets ``sys.argv[0]`` to the path it runs and puts the
    previous ``__main__`` back afterwards, where the script's atexit handlers and pickled
    classes expect its own module.
    """
    code = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=str(path),  # absolute, as python FILE gives it (3.9+)
        __cached__=None,
        __package__=None,
        __spec__=None,
        __loader__=importlib.machinery.SourceFileLoader("__main__", str(path)),
        __builtins__=builtins,
    )
    sys.modules["__main__"] = module
    exec(code, module.__dict__)  # noqa: S102 - running the script is the point


def _run_script(file: str, args: list[str], recorder: Recorder) -> tuple[int, str | None, bool]:
    """Run FILE as ``__main__``: its exit status, why it failed, whether it was interrupted."""
    undo = install(recorder)
    sys.argv = [file, *args]
    sys.path[0] = str(Path(file).resolve().parent)  # as python FILE sets it
    try:
        _exec_main(Path(file).absolute())
    except SystemExit as exc:
        status = _exit_status(exc.code)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
        return status, None if status == 0 else f"SystemExit: {exc.code}", False
    except BaseException as exc:  # the script's uncaught exception, reported as python does
        text = _script_traceback(exc, file)
        sys.stderr.write(text)
        interrupted = isinstance(exc, KeyboardInterrupt)
        return (EXIT_SIGINT if interrupted else 1), text, interrupted
    finally:
        undo()
    return 0, None, False


if __name__ == "__main__":
    sys.exit(main())
