"""One run of one row: what the command line asks (:class:`RunOptions`), the plan of the run,
fixed before anything starts (:class:`RunSetup`, made by :meth:`RunSetup.open` alone), what
the steps change as the run goes (:class:`Execution`: its state; a :class:`Run` is the two),
and the verdict each step returns (:class:`Verdict`).

The steps are in :mod:`device_matrix.run.runner`; the attempts they start in
:mod:`device_matrix.run.attempts`; what a crash leaves in :mod:`device_matrix.run.crashes`,
given the few values of the run it needs (:attr:`Run.evidence`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from device_matrix.config import Config, Row, Script
from device_matrix.errors import DeviceMatrixError, UsageProblem
from device_matrix.executors.base import Executor, LaunchSpec
from device_matrix.executors.container import ContainerExecutor
from device_matrix.issues.disables import RowDisables, read_for_row
from device_matrix.records.schema import DisablesRef, RowStatus, RunRecord, SourceInfo, SpreadRef
from device_matrix.records.summary import most_serious
from device_matrix.redact import Redactor, remember_secrets
from device_matrix.run import crashes, selection
from device_matrix.run import executor as factory
from device_matrix.run.folder import ATTEMPTS_DIR, FolderState, RowFolder
from device_matrix.run.plan import RowPlan
from device_matrix.run.state import RunState, now_iso
from device_matrix.run.targets import as_nodeid, script_node
from device_matrix.wire import PLUGIN, SCRIPT_MODULE, ChildCommand

if TYPE_CHECKING:  # #41: the selection engine loads only for a run that selects (cli/select.py)
    from device_matrix.selection import Plan

DEFAULT_CORE_LIMIT = 4 << 30  # bytes; enough for a backtrace of a torch_xla process
DEFAULT_MAX_LOG = 512 << 20  # bytes of output.log; the rest is cut with a note


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """What the command line asks of a run; changed only with :func:`dataclasses.replace`."""

    suites: Sequence[str] | None = None
    tests: Sequence[str] = ()
    pytest_args: Sequence[str] = ()
    python: str | None = None
    use_gdb: bool = True
    keep_cores: bool = False
    core_limit: int | None = DEFAULT_CORE_LIMIT
    poll_interval: float = 0.05
    run_url: str | None = None
    source: SourceInfo | None = None  # commit, branch, pull request (#25)
    resume: bool = False
    # #41: the digest of the code the run runs (run/worktree.py), which --resume compares;
    # None: not known (a resume then runs the row whole)
    worktree: str | None = None
    max_log_bytes: int | None = DEFAULT_MAX_LOG
    # a shard (device_matrix.spread.driver): only these tests (raw nodeids), into results/<row>/<results_subdir>, with
    # its device slot's variables over the row's own
    select: Sequence[str] | None = None
    results_subdir: str | None = None
    slot_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    command: Sequence[str] = ()  # the record's `command` when not the whole row's (a shard's own)
    spread: SpreadRef | None = None  # a shard's record names its split and its index (#23)
    # #34: the tests a change can break (--select); None: every test the run is given
    test_plan: Plan | None = None

    def __post_init__(self) -> None:
        # frozen all the way down: a list handed over (argparse's) is copied, not shared
        for name in ("suites", "tests", "pytest_args", "select", "command"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))
        object.__setattr__(self, "slot_env", MappingProxyType(dict(self.slot_env)))


@dataclass(frozen=True)
class Verdict:
    """The row's status so far and why; each step returns the next one.

    ``stop``: the steps after the one that returned it do not run; the record of what is
    known is still written (:func:`device_matrix.run.runner.run_steps`, #31).
    """

    status: RowStatus
    reason: str | None = None
    stop: bool = False


def worst(verdicts: Sequence[Verdict]) -> Verdict:
    """Several processes' verdicts as one: the most serious status, every reason once."""
    status = most_serious(v.status for v in verdicts)
    reasons = "; ".join(dict.fromkeys(v.reason for v in verdicts if v.reason))
    return Verdict(status, reasons or None)


class RunListener(Protocol):
    """What a run tells the person watching it (the terminal implements it)."""

    def row_group(self, title: str) -> contextlib.AbstractContextManager[None]: ...

    def test_running(self, row: str, nodeid: str) -> None: ...

    def test_done(
        self, row: str, nodeid: str, outcome: str, *, duration: float, done: int, total: int | None
    ) -> None: ...

    def crash(self, row: str, nodeid: str | None, *, outcome: str, phase: str, what: str, fingerprint: str) -> None: ...

    def note(self, row: str, text: str) -> None: ...


class Progress:
    """Journal events to the listener: progress lines and the running test."""

    def __init__(
        self,
        listener: RunListener,
        row: str,
        redactor: Redactor,
        scripts: Sequence[Script] = (),
        programs: Mapping[int, str] | None = None,
    ) -> None:
        self.listener = listener
        self.row = row
        self.redactor = redactor
        self.done = 0  # tests reported so far, for the progress counter
        self.counted: set[str] = set()  # each test counted once (a teardown error, a resume)
        # every nodeid a process of this run collected; a program's is known from the start
        self.programs = dict(programs or {})  # id(script) -> the program's nodeid
        self.collected: set[str] = set(self.programs.values())
        # scripts whose tests are not known yet (neither collected nor kept from the last
        # run): until every script's are, the total is not known either (#24)
        self.pending = {id(script) for script in scripts if id(script) not in self.programs}

    @property
    def total(self) -> int | None:
        return None if self.pending else len(self.collected) or None

    def known(self, script: Script) -> None:
        """The tests of ``script`` are known: its process collected them."""
        self.pending.discard(id(script))

    def kept(self, script: Script) -> None:
        """The tests of ``script`` keep the last run's outcomes (a resume): none runs in this one."""
        self.pending.discard(id(script))
        self.collected.discard(self.programs.get(id(script), ""))

    def of(self, script: Script | None) -> Progress | ScriptProgress:
        """What an attempt's journal events go to: a script's process makes its tests known."""
        return self if script is None else ScriptProgress(self, script)

    def journal_event(self, event: dict[str, Any]) -> None:
        kind = event["e"]
        if kind == "collected":
            # every process's tests once: a resume collects some again, a script its own
            self.collected.update(event["nodeids"])
        elif kind == "start":
            self.listener.test_running(self.row, event["nodeid"])
        elif kind == "report":
            when, outcome = event["when"], event["outcome"]
            if outcome == "rerun" or event.get("sub") is not None:
                return  # the test runs again, or a subtest: the test's own report is the one counted
            failed_phase = outcome == "failed" and when != "call"
            if when == "call" or failed_phase or (when == "setup" and outcome == "skipped"):
                shown = outcome
                if event.get("wasxfail") is not None:
                    shown = "xfailed" if outcome == "skipped" else "xpassed"
                elif failed_phase:
                    shown = "error"
                if event["nodeid"] not in self.counted:
                    self.counted.add(event["nodeid"])
                    self.done += 1
                self.listener.test_done(
                    self.row,
                    self.redactor.ident(event["nodeid"]),
                    shown,
                    duration=float(event["duration"]),
                    done=self.done,
                    total=self.total,
                )


@dataclass(frozen=True)
class ScriptProgress:
    """The events of one script's process, to the run's :class:`Progress`."""

    progress: Progress
    script: Script

    def journal_event(self, event: dict[str, Any]) -> None:
        if event["e"] == "collected":
            self.progress.known(self.script)
        self.progress.journal_event(event)


class Quiet:
    """The events of an attempt nobody watches (a crash's rerun, a shard's collection)."""

    def journal_event(self, event: dict[str, Any]) -> None:
        pass


class LocalEnvironment:
    """The environment snapshot of a child that is this interpreter, taken here on the other core."""

    def __init__(self) -> None:
        self.taken: dict[str, Any] = {}
        self._thread: threading.Thread | None = None

    def start(self, child_env: Mapping[str, str]) -> None:
        def snap() -> None:
            from device_matrix.diagnostics.environment import snapshot

            env = dict(os.environ)
            env.update(child_env)
            self.taken = snapshot(env)

        self._thread = threading.Thread(target=snap, daemon=True)
        self._thread.start()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()


def _keep_named(options: RunOptions, root: Path) -> RunOptions:
    """#34: --test always runs what it names (a file, a class, a test): the change's
    selection never leaves it out."""
    plan = options.test_plan
    if plan is None or not options.tests or plan.test_map is None:
        return options
    given = [as_nodeid(w, root) for w in options.tests]  # #39: ./FILE, an absolute path
    named = frozenset(n for n in plan.test_map.tests if any(_named_by(w, n) for w in given))
    return replace(options, test_plan=replace(plan, named=named))


def _named_by(word: str, nodeid: str) -> bool:
    """Whether ``--test word`` (as a nodeid: :func:`as_nodeid`) names ``nodeid``: its file,
    its class or the test (any of its parameters); a folder is the tests the selection picks
    in it."""
    return nodeid == word or nodeid.startswith((f"{word}::", f"{word}["))


@dataclass(frozen=True)
class Part:
    """The tests a run is given (raw nodeids; None: every test) and its place in a split: a
    driver of shards learns them once the opened run has collected (#23), so they are the
    run's state, set by :func:`~device_matrix.run.runner.finish`, never its plan."""

    select: tuple[str, ...] | None = None
    spread: SpreadRef | None = None


@dataclass(frozen=True)
class Unresolved:
    """Why a run's targets cannot be resolved (the row or the command line is wrong): the
    run's check refuses the run with it, as the error it was (#41: the plan keeps the reason,
    never a raised exception)."""

    kind: type[DeviceMatrixError]  # ConfigError (exit 3), UsageProblem (exit 2)
    message: str
    tip: str | None

    def error(self) -> DeviceMatrixError:
        return self.kind(self.message, tip=self.tip)


def resolve_targets(
    cfg: Config, row: Row, *, suites: Sequence[str] | None, tests: Sequence[str]
) -> tuple[str, ...] | Unresolved:
    """What pytest is given (:func:`selection.targets`), or why it cannot be resolved."""
    try:
        return tuple(selection.targets(cfg, row, suites=suites, tests=tests))
    except DeviceMatrixError as exc:
        return Unresolved(type(exc), exc.message, exc.tip)


@dataclass(frozen=True, eq=False)
class RunSetup:
    """The plan of a run, made before anything starts and fixed from then on (#31, #41): the
    project, where the row runs and its executor (this host's interpreter or the row's
    container, made by the one factory), the command line's options (its test selection
    resolved), the tracker's disables it applies, who is told, the row's results folder, the
    redactor, when it began, and what it runs (its scripts; pytest's targets, resolved from
    these by :meth:`Run.check`).

    Made by :meth:`open` alone; what changes as the run goes is its :class:`Run`'s.
    """

    cfg: Config
    plan: RowPlan
    options: RunOptions  # as asked, --select's tests --test names kept in (#34)
    listener: RunListener
    folder: RowFolder
    redactor: Redactor
    scripts: tuple[Script, ...]
    project_tests: bool  # the run gives pytest nothing: the row runs what plain pytest runs (#20)
    own_env: bool  # the child is another interpreter (a container, --python): it snapshots its own environment
    # where the children run (made, not checked: Run.make_executor refuses or readies it)
    executor: Executor
    # #33: the tracker's open disables, read before the run starts (None: none, or a row that
    # cannot run here); the run's first step writes them into its folder
    disables: RowDisables | None
    # the command line's selection (--suite, --test), which the targets are resolved from
    suites: Sequence[str] | None
    tests: Sequence[str]
    # what pytest is given, resolved by the maker (#41); why not, refused by the run's check
    resolved: tuple[str, ...] | Unresolved
    started_at: str
    t0: float  # time.monotonic() when the run began

    @classmethod
    def open(cls, cfg: Config, plan: RowPlan, options: RunOptions, listener: RunListener) -> RunSetup:
        """The setup of a run of ``plan``'s row with ``options``, begun now."""
        row = plan.row
        path = cfg.results_dir / row.name
        folder = RowFolder(path / options.results_subdir if options.results_subdir else path, row.name)
        scripts = selection.scripts(row, cfg.project_root, suites=options.suites, tests=options.tests)
        return cls(
            cfg=cfg,
            plan=plan,
            options=_keep_named(options, cfg.project_root),
            listener=listener,
            folder=folder,
            redactor=Redactor(),
            scripts=scripts,
            project_tests=selection.project_tests(row, suites=options.suites, tests=options.tests),
            own_env=plan.mode == "container" or options.python is not None,
            executor=factory.build(plan, cfg, python=options.python, folder=folder.path),
            disables=None
            if plan.mode == "unavailable"
            else read_for_row(
                cfg,
                (row.name, row.pjrt_device),
                [s.file for s in scripts],
                lambda text: listener.note(row.name, text),
            ),
            suites=options.suites,
            tests=options.tests,
            resolved=resolve_targets(cfg, row, suites=options.suites, tests=options.tests),
            started_at=now_iso(),
            t0=time.monotonic(),
        )

    @property
    def row(self) -> Row:
        return self.plan.row

    @property
    def targets(self) -> tuple[str, ...]:
        """What pytest is given, the same for the whole run; its error (a ConfigError, a
        UsageProblem) when the row or the command line is wrong (the run's check raises it)."""
        if isinstance(self.resolved, Unresolved):
            raise self.resolved.error()
        return self.resolved

    @property
    def runs_pytest(self) -> bool:
        """Whether the run starts pytest at all (not a row of scripts only)."""
        return bool(self.targets) or self.project_tests

    @property
    def map_parts(self) -> Path | None:
        """#34: where the run's pytest processes leave their parts of the test map (under
        attempts/: cleared with them, kept by --resume); None: the run records no map."""
        return self.folder.path / ATTEMPTS_DIR / "map" if self.cfg.record_map else None

    def launch_spec(
        self, env: Mapping[str, str] | None = None, args: Sequence[str] = (), *, module: str = "pytest"
    ) -> LaunchSpec:
        """A child of the run: ``python -m module args`` with ``env``, in the project's folder
        with the run's core limit (an attempt's, the image check's, the repro lines')."""
        root = self.cfg.project_root
        return LaunchSpec(
            module=module,
            pytest_args=args,
            env=env or {},
            workdir=root,
            project_root=root,
            core_limit=self.options.core_limit,
        )

    def elapsed(self) -> float:
        """Seconds since the run began."""
        return time.monotonic() - self.t0

    def note(self, text: str) -> None:
        """``text`` told to the person watching, as a line of the row's."""
        self.listener.note(self.row.name, text)


@dataclass(eq=False)
class Execution:
    """What the steps of a run change as it goes (#41), and nothing else does: the state of its
    tests, its part, the deadline, what a crash leaves, where the last output lies, the record
    last written, the disable list its children read, what it holds of its folder (its lock,
    the evidence a test deleted), where the children run once checked (a container's image
    asked what it has). Its plan (:class:`RunSetup`) never changes."""

    tests: RunState
    # a shard's part from its options; a driver's once it has collected (runner.finish)
    part: Part
    progress: Progress
    deadline: float  # set again when the run starts (prepare)
    environment: LocalEnvironment
    disable_list: Path  # with the tracker's disables once prepared (#33)
    # what the run holds of its folder: its lock, its attempts' folders, the evidence lost
    folder_state: FolderState
    left_out: list[str] = field(default_factory=list)  # modules whose import kills or hangs the process
    origins: dict[str, crashes.CrashOrigin] = field(default_factory=dict)  # crash id -> what its process was given
    previous: Verdict | None = None  # the verdict of the run --resume continues
    resume: str | None = None  # #41: what --resume did (the record's `resume`); None: not asked
    # where the output of the last attempt lies in the log: its start, and its end (the
    # attempt's end lines after it are the runner's, #20)
    last_output: tuple[int, int | None] = (0, None)
    reader: crashes.CoreReader | None = None
    record: RunRecord | None = None  # the record last written
    disables: DisablesRef | None = None  # the tracker's list it applied: its age (#33)
    deselect_file: Path | None = None  # #34: the tests selection leaves out, once prepared
    # where the children run, readied by make_executor (the run's check): the container is
    # known before its image is asked, so that a refusal's record names the engine; once
    # asked, it is the checked one (the image's interpreter found), the plan's left as made
    container: ContainerExecutor | None = None
    executor: Executor | None = None

    @classmethod
    def start(cls, setup: RunSetup) -> Execution:
        """The state of a run of ``setup`` before its first step."""
        root = setup.cfg.project_root
        programs = {id(s): script_node(s, root) + s.suffix for s in setup.scripts if s.kind == "program"}
        options = setup.options
        return cls(
            tests=RunState(setup.redactor),
            part=Part(None if options.select is None else tuple(options.select), options.spread),
            progress=Progress(setup.listener, setup.row.name, setup.redactor, setup.scripts, programs),
            deadline=setup.t0 + setup.row.run_timeout,
            environment=LocalEnvironment(),
            disable_list=setup.cfg.disable_list,
            folder_state=FolderState(setup.folder),
        )


class Run:
    """One run of one row: its :class:`RunSetup`, fixed when it was opened, and its
    :class:`Execution`, what the steps change; nothing else (#41).

    Made by :func:`~device_matrix.run.runner.opened`, which holds the row's lock while the
    steps run.
    """

    __slots__ = ("execution", "setup")

    def __init__(self, cfg: Config, plan: RowPlan, options: RunOptions, listener: RunListener) -> None:
        # the row's and its scripts' variables hold secrets too (a token set in the config):
        # every redactor of this process scrubs them, the terminal's and the files' too
        row = plan.row
        for variables in (row.env, row.slot_env, *(script.env for script in row.scripts)):
            remember_secrets(variables)
        self.setup = RunSetup.open(cfg, plan, options, listener)
        self.execution = Execution.start(self.setup)

    @property
    def options(self) -> RunOptions:
        """The command line's options, as the plan holds them (read-only)."""
        return self.setup.options

    @property
    def executor(self) -> Executor:
        """Where the children run, as :meth:`make_executor` made it (the run's :meth:`check`)."""
        executor = self.execution.executor
        assert executor is not None, "the run's check makes its executor before a child starts"
        return executor

    def make_executor(self) -> Executor:
        """Where the children run: the plan's executor (this host's interpreter, or the row's
        container), refused when it cannot run (:func:`~device_matrix.run.executor.refuse`), a
        container's image asked what it has first (#21: the run's state holds the checked
        executor, #41). Readied once: a later call gives the same executor."""
        setup, execution = self.setup, self.execution
        if execution.executor is not None:
            return execution.executor
        factory.refuse(setup.plan, python=self.options.python)
        executor = setup.executor
        if isinstance(executor, ContainerExecutor):
            execution.container = executor  # known before its image is asked: a refusal's record names the engine
            # before the first attempt: the image's interpreter, its pytest, the modules (#21)
            imports = [*([PLUGIN] if setup.runs_pytest else []), *([SCRIPT_MODULE] if setup.scripts else [])]
            if setup.cfg.record_map and setup.runs_pytest:
                imports.append("coverage")  # #34: the test map needs it in the image
            executor = execution.container = executor.checked(setup.launch_spec(self.child.environment()), imports)
        execution.executor = executor
        return executor

    @property
    def resumed(self) -> bool:
        """Whether this run continues an earlier one (--resume, and it had collected tests)."""
        return self.execution.previous is not None

    @property
    def child(self) -> ChildCommand:
        """The arguments and variables every child of this run gets."""
        setup, row = self.setup, self.setup.row
        return ChildCommand(
            device=row.name,
            pjrt_device=row.pjrt_device,
            rootdir=str(setup.cfg.project_root),
            disable_list=str(self.execution.disable_list),
            settings=row.settings,
            env=row.env,
            slot_env=self.options.slot_env,
            pytest_args=(*row.pytest_args, *self.options.pytest_args),
            # #30: the record keeps the first snapshot a child sent: the children after it
            # are not asked for theirs (its driver tools, a hanging nvidia-smi, once per run)
            own_env=setup.own_env and not self.execution.tests.environment,
            script_files=tuple(script.file for script in setup.scripts),
            as_script=row.as_script,
            deselect=str(self.execution.deselect_file or ""),
            map_dir=None if setup.map_parts is None else str(setup.map_parts),
        )

    @property
    def repro(self) -> crashes.Repro:
        """The repro commands of this run's crashes: its interpreter, or its container's own command."""
        return repro_of(self.setup, self.execution)

    @property
    def evidence(self) -> crashes.Evidence:
        """What this run's crash recorders are given: its state, folder, repro, listener, core reader."""
        setup, execution = self.setup, self.execution
        return crashes.Evidence(
            row=setup.row,
            state=execution.tests,
            folder=setup.folder,
            redactor=setup.redactor,
            repro=self.repro,
            listener=setup.listener,
            origins=execution.origins,
            reader=execution.reader,
            project_root=setup.cfg.project_root,
            phase_min=setup.cfg.phase_timeout_min,
        )

    def check(self) -> None:
        """Refuse what cannot run before anything runs: xdist, cache options, bad targets, no
        interpreter, an image that cannot run the row; the executor is made here."""
        setup = self.setup
        selection.refuse_xdist([*setup.row.pytest_args, *self.options.pytest_args])
        addopts = self._pytest_addopts()
        if addopts:
            # #30: the child's pytest reads these as if given on its command line
            try:
                selection.refuse_xdist(shlex.split(addopts))
            except (UsageProblem, ValueError) as exc:
                said = exc.message if isinstance(exc, UsageProblem) else str(exc)
                raise UsageProblem(
                    f"PYTEST_ADDOPTS={addopts!r}: {said}",
                    tip="Remove it from PYTEST_ADDOPTS (the environment's, or the row's env) for device-matrix run.",
                ) from None
        setup.targets  # noqa: B018 - resolved by the plan's maker: why not is the refusal
        if setup.runs_pytest:
            selection.refuse_ini_addopts(setup.cfg.project_root)  # #30: the project's own addopts
        self.make_executor()

    def _pytest_addopts(self) -> str | None:
        """PYTEST_ADDOPTS as the child gets it: the row's own, else this host's (a container
        gets the host's only by its env_allowlist)."""
        own = self.setup.row.env.get("PYTEST_ADDOPTS")
        if own is not None:
            return own
        if self.setup.plan.mode == "container" and "PYTEST_ADDOPTS" not in self.setup.cfg.env_allowlist:
            return None
        return os.environ.get("PYTEST_ADDOPTS")

    def output_tail(self, lines: int = 3) -> str:
        """The last lines of the last attempt: where pytest says why it stopped."""
        log = self.setup.folder.log
        tail = crashes.read_log(log, *self.execution.last_output).strip().splitlines()[-lines:]
        return " | ".join(tail) or f"see {log}"

    def close_reader(self) -> None:
        """Wait for gdb to read the cores it was given: their backtraces go in the record."""
        if self.execution.reader is not None:
            self.execution.reader.close()
            self.execution.reader = None


def repro_of(setup: RunSetup, execution: Execution) -> crashes.Repro:
    """The repro commands of a run's crashes: its interpreter, or its container's own command."""
    return crashes.Repro(
        row=setup.row,
        project_root=setup.cfg.project_root,
        python=setup.options.python or sys.executable,
        container=execution.container,
        launch=setup.launch_spec(),
        pytest_args=setup.options.pytest_args,
    )
