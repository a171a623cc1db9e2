"""Run one device row: a tuple of steps over one run state.

:data:`STEPS`, each a function of the :class:`~device_matrix.run.context.Run` and the
verdict so far, returning the next :class:`~device_matrix.run.context.Verdict`:

1. :func:`prepare`: clear the last run's files (or keep them to resume) and write the
   ``running`` record;
2. :func:`run_tests`: pytest in attempts until every collected test has an outcome,
   resuming after a death and collecting again without a module whose import kills the
   process (:mod:`device_matrix.run.attempts`, the policy decides);
3. :func:`run_scripts`: each of the row's scripts in a process of its own;
4. :func:`rerun_crashes`: each crashed test alone, to call it deterministic or flaky;
5. :func:`reconcile`: a collected test without an outcome is ``not_run`` with the
   reason, and the row is green only when every test ran and pytest agreed;
6. :func:`write`: ``run.json``, ``junit.xml`` and ``report.json``.

A step that returns a verdict with ``stop`` set ends the run there: the steps after it do
not run, but the record is written (:func:`run_steps`).

:func:`run_row` runs them all. A driver that spreads a row (shards) opens the run
itself (:func:`opened`), prepares it (its ``running`` record), collects
(:func:`collect`) and runs the rest over its part (:func:`finish`). Whatever ends a run
(an interrupt, an error), the child's processes are ended by the attempt and the record
says what is known: ``interrupted`` with the rest ``not_run``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shlex
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from device_matrix.config import Config
from device_matrix.errors import DeviceMatrixError, ResultsError
from device_matrix.issues.disables import apply as apply_disables
from device_matrix.issues.disables import settle as settle_disables
from device_matrix.records.outcomes import (
    CRASHING_OUTCOMES,
    INFRASTRUCTURE_STATUSES,
    TESTS_FAILED_STATUSES,
    UNFINISHED_STATUSES,
)
from device_matrix.records.schema import Classification, RunRecord, SpreadRef, load_run, selection_words
from device_matrix.records.source import unknown
from device_matrix.run import crashes, selection, testmap
from device_matrix.run.attempt import AttemptSpec, Interrupted, run_attempt
from device_matrix.run.attempts import attempts, limits, note_attempt, one_attempt
from device_matrix.run.context import (
    Execution,
    Part,
    Quiet,
    Run,
    RunListener,
    RunOptions,
    RunSetup,
    Verdict,
    repro_of,
    worst,
)
from device_matrix.run.folder import ATTEMPTS_DIR, RUN_FILE
from device_matrix.run.lock import row_lock
from device_matrix.run.plan import RowPlan
from device_matrix.run.selection import refuse_xdist, selecting_options
from device_matrix.run.state import RunState, now_iso
from device_matrix.run.targets import of_script, script_node
from device_matrix.wire import write_deselect

DESELECT_FILE = "deselect.json"  # #34: in the attempts folder, the tests the child leaves out

PYTEST_EXIT_WORDS = {
    0: "no failure reported",  # not "all passed": pytest.exit(returncode=0) exits 0 too
    1: "tests failed",
    2: "interrupted",
    3: "internal error",
    4: "usage error",
    5: "no tests collected",
}
NO_UNITTEST = (
    "the script ran no unittest test in its own process (unittest.main() never ran, or ran in a subprocess)\n"
    'TIP: a script that is not a unittest file is one test with kind = "program" in its [[scripts]] entry: '
    "its exit status is its outcome (docs/upstream.md)"
)
NOT_NAMED = (
    "--test named no test that {file} runs: {named} (or it ran no unittest test in its own process)\n"
    "TIP: name its tests as FILE::Class::test, or a class as FILE::Class (`python FILE -v` lists them "
    "as test (module.Class.test)); --test FILE runs all of them"
)
NO_PROGRAM = "the program never started: the launcher's process ended before it (see output.log)"
RUNNING = Verdict("running", "the run is in progress (or its runner was killed)")


@dataclass(frozen=True)
class Collection:
    """The row's tests as a ``--collect-only`` pass found them (:func:`collect`)."""

    nodeids: tuple[str, ...] | None  # raw nodeids, in collection order; None: nothing could be collected
    problem: str | None = None  # why nothing was collected


# --- the steps ----------------------------------------------------------------------------

Step = Callable[[Run, Verdict], Verdict]


def prepare(run: Run, verdict: Verdict = RUNNING) -> Verdict:
    """Clear the last run's files (or keep them to resume); write the ``running`` record.

    From here a runner killed with SIGKILL leaves a ``running`` record with its pid,
    never the last run's verdict; a driver of shards calls it before it collects.
    """
    setup, previous = run.setup, None
    if run.options.resume:
        try:
            previous = load_run(setup.folder.path / RUN_FILE)
        except ResultsError as exc:
            raise ResultsError(f"nothing to resume: {exc.message}", tip="Run the row without --resume.") from None
        previous = _resumable(run, previous)
    setup.folder.clear_files(keep_attempts=previous is not None)
    testmap.clear(run, resumed=previous is not None)  # #34
    # #33: the open disable issues the plan read before the row started (never a failed run for it)
    run.execution.disable_list, run.execution.disables = apply_disables(setup.cfg, setup.folder.path, setup.disables)
    if previous is not None:
        run.execution.previous = _adopt(run.execution.tests, previous)
    _deselect(run)
    write_record(run, verdict, final=False)
    run.execution.deadline = time.monotonic() + setup.row.run_timeout
    container = run.execution.container
    run.execution.reader = crashes.CoreReader(
        interpreter=run.executor.interpreter(),  # made by the run's check, before this step
        redactor=setup.redactor,
        use_gdb=run.options.use_gdb,
        keep=run.options.keep_cores,
        # a container's core is read with the image's own executable and libraries (#21)
        image_files=None if container is None else lambda core: container.image_files(core, run.setup.launch_spec()),
    )
    return verdict


def _resumable(run: Run, previous: RunRecord) -> RunRecord | None:
    """The record --resume continues; None when the row runs whole, said on the terminal and
    in the record: it collected nothing, or it ran other code (#41: its outcomes are not this
    code's; a digest not known on either side counts as other code)."""
    why = None
    if not previous["tests"]:
        # it never got as far as collecting: there is nothing to keep, run it all
        why = "the last run collected no tests"
    elif previous.get("worktree") is None or run.options.worktree is None:
        why = "the code the last run ran cannot be told from this code (no digest of its commit and working tree)"
    elif previous.get("worktree") != run.options.worktree:
        commits = [(source or unknown())["commit"] for source in (previous.get("source"), run.options.source)]
        what = (
            "its files differ"  # outside git: the project's files
            if None in commits
            else f"its {'working tree' if commits[0] == commits[1] else 'commit'} differs"
        )
        why = f"the code changed since the last run ({what}): its outcomes are not this code's"
    if why is None:
        run.execution.resume = f"continued the run started at {previous['started_at']}"
        return previous
    run.execution.resume = f"ran the row whole: {why}"
    run.setup.note(f"{why}: running the row again")
    return None


def _deselect(run: Run) -> None:
    """#34: the file of the tests the change cannot break, which the child leaves out; the
    run says what its selection is (every test, and why, or how many are left out)."""
    plan = run.options.test_plan  # --test's tests kept in by the run's plan (selection.keep_named)
    if plan is None:
        return
    left_out = plan.left_out()
    run.execution.tests.deselect = left_out
    if plan.full_reason is not None:
        run.setup.note(f"--select {plan.mode}: every test runs: {plan.full_reason}")
        return
    changed = len(plan.changed)
    words = f"{changed} changed file{'' if changed == 1 else 's'}"
    run.setup.note(f"--select {plan.mode}: {words}; {len(left_out)} test(s) of the map left out")
    if left_out:
        run.execution.deselect_file = run.setup.folder.path / ATTEMPTS_DIR / DESELECT_FILE
        run.execution.deselect_file.parent.mkdir(parents=True, exist_ok=True)
        write_deselect(run.execution.deselect_file, left_out)


def _adopt(state: RunState, previous: RunRecord) -> Verdict:
    """Resume: keep every outcome of the earlier run but its not_run tests; its verdict."""
    for test in previous["tests"]:
        state.expect([test["nodeid"]])
        if test["outcome"] != "not_run":
            state.results[test["nodeid"]] = test
    state.crashes.extend(previous["crashes"])
    state.attempts.extend(previous["attempts"])
    state.environment.update(previous.get("environment") or {})
    return Verdict(previous["status"], previous["reason"])


def run_tests(run: Run, verdict: Verdict) -> Verdict:
    """Every test of the row: in one process, or one per file or class (``isolation``)."""
    setup, state = run.setup, run.execution.tests
    targets, row = setup.targets, setup.row
    if not setup.own_env:
        # the child is this interpreter: its environment is taken here, on the other
        # core, while it starts (another interpreter takes its own: --dm-env)
        run.execution.environment.start(run.child.environment())
    # a shard runs the tests it was given (its part), and only those
    chosen = None if run.execution.part.select is None else list(run.execution.part.select)
    scope = None if chosen is None else set(chosen)
    if chosen is not None:
        state.expect(chosen)  # each needs an outcome, even if collection dies first
    if not targets and not setup.project_tests:
        return Verdict(state.status())  # a row of scripts only
    if run.resumed:
        root, scripts = setup.cfg.project_root, setup.scripts
        nodeids = [n for n in state.remaining() if not any(of_script(n, s, scripts, root) for s in scripts)]
        if not nodeids:
            # the earlier verdict stands (a pytest exit it reported is not lost)
            earlier = run.execution.previous or Verdict(state.status())
            status = state.status() if earlier.status in UNFINISHED_STATUSES else earlier.status
            return Verdict(status, earlier.reason or "nothing to resume: every test of the last run has an outcome")
    elif row.isolation == "row":
        return attempts(run, targets, select=chosen, purpose="run", scope=scope)
    else:
        # collect once (a module that crashes or hangs on import is handled as ever),
        # then give each file or class a process of its own
        # (a module whose import kills the process is left out and recorded; when
        # collection stops for good, every test is marked not_run and nothing is left)
        collected = attempts(run, targets, select=chosen, purpose="collect", scope=scope)
        nodeids = state.remaining(scope)
        if not nodeids:
            return collected
    if row.isolation == "row":
        return attempts(run, targets, select=nodeids, purpose="resume")
    verdicts = [
        attempts(run, selection.files_of(target, targets), select=group, purpose="run", scope=set(group))
        for target, group in selection.isolation_groups(nodeids, row.isolation)
    ]
    return worst(verdicts) if verdicts else Verdict(state.status())


def run_scripts(run: Run, verdict: Verdict) -> Verdict:
    """Each script in a process of its own, after the suites: ``python FILE ARGS``."""
    setup, state = run.setup, run.execution.tests
    scripts, root = setup.scripts, setup.cfg.project_root
    verdicts = [verdict]
    for script in scripts:
        # a test --test names runs through its script (#29)
        select = named = selection.script_selection(script, setup.row, root, run.options.tests)
        if run.resumed:
            select = [n for n in state.remaining() if of_script(n, script, scripts, root)]
            if not select and any(of_script(n, script, scripts, root) for n in state.results):
                run.execution.progress.kept(script)
                continue  # every test of this script has its outcome
        verdicts.append(attempts(run, [script.file], select=select, purpose="run", script=script))
        if not any(of_script(n, script, scripts, root) for n in state.results):
            # no unittest ran in the script's own process (a program: it never started), or
            # none of the tests --test named is one it has (#39): nothing was tested, never green
            message = NO_PROGRAM if script.kind == "program" else NO_UNITTEST
            if named is not None and not run.resumed:
                message = NOT_NAMED.format(file=script.file, named=", ".join(named))
            state.put(
                script_node(script, root) + script.suffix,
                "error",
                duration=0.0,
                message=message,
                attempt=len(state.attempts),
            )
            verdicts.append(Verdict("failed", f"{script.file}{script.suffix}: no test ran"))  # #29: which run
    return worst(verdicts)


def rerun_crashes(run: Run, verdict: Verdict) -> Verdict:
    """Each crashed test alone, ``crash_reruns`` times: deterministic, or flaky once it passes."""
    setup = run.setup
    if setup.cfg.crash_reruns <= 0:
        return verdict
    for crash in run.execution.tests.crashes:
        nodeid = crash["nodeid"]
        if crash["kind"] != "crash" or nodeid is None or crash["phase"] != "test" or crash["reruns"]:
            continue
        origin = run.execution.origins.get(crash["id"])
        script = origin.script if origin else None
        classification: Classification = "deterministic"
        for _ in range(setup.cfg.crash_reruns):
            if time.monotonic() > run.execution.deadline:
                return verdict
            # alone: its own file is the only module imported
            files = selection.files_of(nodeid.split("::", 1)[0], setup.targets)
            attempt = one_attempt(run, "rerun", files, [nodeid], script=script)
            cores = run.evidence.cores(attempt, copies=True)  # a copy's is the rerun's own
            rerun = crashes.rerun_record(attempt, nodeid, setup.folder.log, setup.redactor, cores)
            run.evidence.attach_cores(None, attempt)
            crash["reruns"].append(rerun)
            if rerun["outcome"] not in CRASHING_OUTCOMES:
                classification = "flaky"
                break
            if not crashes.same_crash(crash, rerun):
                classification = "flaky"  # #29: it crashed again, but not as it did: no one fingerprint
        crash["classification"] = classification
        if classification == "flaky" and script is None:
            # alone it passed: the repro runs it with the neighbours it crashed beside
            crash["repro"] = run.repro.of(None, origin.targets if origin else setup.targets)
        setup.note(f"{nodeid} crash is {classification} ({len(crash['reruns'])} rerun(s))")
    return verdict


def reconcile(run: Run, verdict: Verdict) -> Verdict:
    """Every collected test ends with one outcome; green only when pytest agrees.

    First what is still on its way (core files gdb reads, the environment snapshot); a
    run that ran no test because of the command line's selection is a usage error
    (:class:`~device_matrix.run.selection.NothingSelected`), its record written first.
    """
    run.close_reader()
    run.execution.environment.join()
    state = run.execution.tests
    if not (state.expected or state.results):
        nothing = selection.nothing_selected(
            row=run.setup.row.name,
            tests=run.options.tests,
            pytest_args=run.options.pytest_args,
            pytest_exit=state.pytest_exit,
            output=crashes.read_log(run.setup.folder.log, *run.execution.last_output),
            project_root=run.setup.cfg.project_root,
        )
        if nothing is not None:
            raise selection.NothingSelected(nothing, write_record(run, Verdict("error", nothing)))
    if state.remaining():
        state.mark_not_run(
            "not run: pytest ended the session before this test "
            f"(exit status {state.pytest_exit}: {PYTEST_EXIT_WORDS.get(state.pytest_exit or 0, '?')})"
        )
    status, reason = verdict.status, verdict.reason
    computed = state.status()
    if status == "passed" and computed != "passed":
        status = computed
    if status == "passed" and state.pytest_exit not in (0, None):
        # pytest said otherwise: never green
        word = PYTEST_EXIT_WORDS.get(state.pytest_exit, "unknown")
        status = "error" if state.pytest_exit in (3, 4) else "failed"
        return Verdict(status, f"pytest exited {state.pytest_exit} ({word}): {run.output_tail()}")
    not_run = sum(1 for t in state.results.values() if t["outcome"] == "not_run")
    if not_run and reason is None:
        reason = f"{not_run} collected test(s) did not run"
    if status in TESTS_FAILED_STATUSES and state.pytest_exit in (3, 4):
        # said beside any other reason: tests not run because pytest broke are not the story
        word = PYTEST_EXIT_WORDS[state.pytest_exit]
        said = f"pytest exited {state.pytest_exit} ({word}): {run.output_tail()}"
        reason = f"{reason}; {said}" if reason else said
    return Verdict(status, reason)


def write(run: Run, verdict: Verdict) -> Verdict:
    """``run.json``, ``junit.xml`` and ``report.json`` with the verdict; the test map (#34)."""
    write_record(run, verdict)
    testmap.write_map(run)
    return verdict


STEPS: tuple[Step, ...] = (prepare, run_tests, run_scripts, rerun_crashes, reconcile, write)


def run_steps(run: Run, verdict: Verdict, steps: Sequence[Step]) -> Verdict:
    """``steps`` in their order, each given the verdict of the one before, until one says stop.

    #31: a verdict with ``stop`` keeps the steps after it from running, but not the record:
    what is on its way (the cores gdb reads, the environment snapshot) is waited for and
    the record written with that verdict, as :func:`write` writes it.
    """
    for k, step in enumerate(steps):
        if verdict.stop:
            if write in steps[k:]:
                run.close_reader()
                run.execution.environment.join()
                return write(run, verdict)
            return verdict
        verdict = step(run, verdict)
    return verdict


def record_of(
    setup: RunSetup,
    execution: Execution,
    verdict: Verdict,
    *,
    finished_at: str,
    duration: float,
    runner_pid: int | None,
) -> RunRecord:
    """The record of a run of ``setup`` as ``execution`` stands, with ``verdict`` (#41): pure,
    it reads the plan and the state alone and changes neither (:func:`write_record` writes it)."""
    state, opts = execution.tests, setup.options
    record = state.to_record(
        row=setup.row.name,
        pjrt_device=setup.row.pjrt_device,
        status=verdict.status,
        # the record stays truthful: what it cannot show any more is said
        reason=execution.folder_state.lost_reason(verdict.reason),
        mode=setup.plan.mode,
        image=setup.plan.image,  # only an image the tests ran in
        suites=list(opts.suites or setup.row.suites),
        started_at=setup.started_at,
        finished_at=finished_at,
        duration=duration,
        run_url=opts.run_url,
        runner_pid=runner_pid,
        source=opts.source,
    )
    if opts.command:
        record["command"] = [setup.redactor.text(word) for word in opts.command]
    record["repro"] = repro_of(setup, execution).of_run(record["command"])  # the command that ran (#24)
    if execution.part.spread is not None:
        record["spread"] = SpreadRef(**execution.part.spread)
    # #30: what it selected, so that triage compares it with runs of the same selection
    record["selection"] = selection_words(
        suites=opts.suites, tests=opts.tests, pytest_args=opts.pytest_args, spread=record.get("spread")
    )
    if execution.disables is not None:
        record["disables"] = execution.disables  # #33: how old the tracker's list was
    record["worktree"] = opts.worktree  # #41: what --resume compares
    if execution.resume is not None:
        record["resume"] = execution.resume
    if execution.tests.warnings:
        record["warnings"] = list(execution.tests.warnings)
    if opts.test_plan is not None:  # #34: how the change chose the tests, and why
        record["test_selection"] = opts.test_plan.summary(t["nodeid"] for t in record["tests"])
    if execution.container is not None:
        # the engine and the image's interpreter: the child's own snapshot cannot see them
        record["environment"].update(execution.container.facts())
    return record


def write_record(run: Run, verdict: Verdict, *, final: bool = True) -> RunRecord:
    """The record of what is known now, with ``verdict``; ``final``: junit.xml and report.json too."""
    setup, execution = run.setup, run.execution
    state = execution.tests
    if not state.environment and execution.environment.taken:
        state.environment = dict(execution.environment.taken)
    record = record_of(
        setup, execution, verdict, finished_at=now_iso(), duration=setup.elapsed(), runner_pid=os.getpid()
    )
    if (
        setup.disables is not None
        and execution.disables is not None
        and final
        and record["selection"] is None
        and record["status"] not in INFRASTRUCTURE_STATUSES
        and record["tests"]
    ):
        # #42: the whole row collected: its disables that name none of its tests are said
        execution.disables = record["disables"] = settle_disables(
            setup.cfg,
            setup.row.name,
            setup.folder.path,
            [s.file for s in setup.scripts],
            got=setup.disables,
            ref=execution.disables,
            nodeids=[t["nodeid"] for t in record["tests"]],
        )
    execution.record = setup.folder.write(record, state, setup.cfg.project_root, setup.redactor, final=final)
    return execution.record


# --- the public surface: a whole row, or a row a driver spreads ------------------------------


def _unstarted(run: Run, verdict: Verdict) -> None:
    """A run refused or interrupted before it started: its record says so, not the last run's.

    Nothing is written while another run holds the row: its record is the current one.
    """
    try:
        with row_lock(run.setup.folder.path):
            run.setup.folder.clear_reports()
            write_record(run, verdict)
    except (DeviceMatrixError, OSError):
        pass  # the refusal itself is what the user is told


def _interrupted(run: Run, exc: Interrupted) -> None:
    """The runner was told to stop: what finished keeps its outcome, the rest is not_run."""
    attempt, state = exc.attempt, run.execution.tests
    if attempt is not None:
        note_attempt(state, run.setup.folder, attempt)
        if attempt.purpose != "rerun":  # the crash it reran keeps its outcome
            state.record_finished(attempt)
            if attempt.fold.running:
                state.put(
                    attempt.fold.running,
                    "not_run",
                    duration=0.0,
                    message=f"interrupted by {exc} while it ran",
                    attempt=attempt.index,
                )
    # a program's test is known before it runs: one the interrupt came before is not_run too
    root, scripts = run.setup.cfg.project_root, run.setup.scripts
    state.expect(
        [
            script_node(script, root) + script.suffix
            for script in scripts
            if script.kind == "program" and not any(of_script(n, script, scripts, root) for n in state.results)
        ]
    )
    state.mark_not_run(f"not run: device-matrix was interrupted ({exc})")
    run.close_reader()
    # the command of this run's own record (a shard's is its --shard K/N) continues it
    again = shlex.join([*(run.options.command or ["device-matrix", "run", "--device", run.setup.row.name]), "--resume"])
    write_record(run, Verdict("interrupted", f"interrupted by {exc}; `{again}` continues"))


@contextlib.contextmanager
def opened(cfg: Config, plan: RowPlan, options: RunOptions, listener: RunListener) -> Iterator[Run]:
    """A run of the row, its results folder locked for the block.

    What cannot run is refused first (xdist, the disabled cache's options, a suite the
    row lacks, a missing interpreter, an image that cannot run the row): the record says
    so, and the error is raised; so does an interrupt while the image is checked. An
    interrupt inside the block writes the ``interrupted`` record of what is known (the
    tests of an attempt it cut short included), then goes on up.
    """
    run = Run(cfg, plan, options, listener)
    if plan.mode != "unavailable":
        try:
            run.check()
            testmap.check(run)  # #34: coverage where the tests run, before the first test
        except DeviceMatrixError as exc:
            _unstarted(run, Verdict("error", f"refused: {exc.message} (exit {exc.exit_code})"))
            raise
        except Interrupted as exc:
            # checking the image takes seconds, or minutes of a pull: the last run's record
            # must not stand for this one
            _unstarted(run, Verdict("interrupted", f"interrupted by {exc} before the first attempt"))
            raise
    with row_lock(run.setup.folder.path) as lock:
        run.execution.folder_state.lock = lock
        if run.execution.container is not None:
            # #30: a runner killed with SIGKILL left its container running; the lock says
            # no live run owns one of this folder's now
            left = run.execution.container.remove_leftovers()
            if left:
                run.setup.note(f"removed {len(left)} container(s) a killed run left: {', '.join(left)}")
        try:
            yield run
        except Interrupted as exc:
            _interrupted(run, exc)
            raise
        finally:
            run.close_reader()


def collect(run: Run) -> Collection:
    """The row's tests, from ``--collect-only`` passes of the run's own child, with the journal.

    A module whose import kills or hangs the process is left out and collection tried
    again (up to ``max_restarts`` times), as a whole run does; the run over the tests
    then records that crash. Nothing of the passes goes in the record: they run in a
    folder of their own under the results folder (a row in a container sees it).
    Needs no lock, writes no record: a driver calls it after :func:`prepare`, a Ray node
    on its own.
    """
    run.check()  # what cannot run is refused here too (raised, not recorded: no run has begun)
    setup = run.setup
    targets = setup.targets
    left_out: list[str] = []
    deadline = time.monotonic() + setup.row.run_timeout
    setup.folder.path.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".collect-", dir=setup.folder.path) as tmp:
        log = Path(tmp) / "output.log"
        for index in range(1, setup.cfg.max_restarts + 2):
            args = [*run.child.pytest(targets, left_out=left_out, collect_only=True), "-q"]
            launch = dataclasses.replace(setup.launch_spec(run.child.environment(), args), core_limit=None)
            spec = AttemptSpec(index=index, purpose="run", child=launch, select=None)
            try:
                attempt = run_attempt(
                    run.executor,
                    spec,
                    folder=Path(tmp) / f"{index:02d}",
                    log_path=log,
                    redactor=setup.redactor,
                    limits=dataclasses.replace(limits(run), run_deadline=deadline, max_log_bytes=None),
                    progress=Quiet(),
                )
            except Interrupted as exc:
                exc.attempt = None  # a collection pass is not an attempt of the record
                raise
            fold = attempt.fold
            if fold.collected is not None:
                return Collection(tuple(fold.collected))
            if fold.collect_culprit is None:
                tail = crashes.read_log(log, attempt.log_start, attempt.log_end).strip().splitlines()[-3:]
                return Collection(None, f"collection ended with exit status {attempt.returncode}: {' | '.join(tail)}")
            left_out.append(fold.collect_culprit[1])
    return Collection(None, f"collection died {setup.cfg.max_restarts + 1} times")


def finish(run: Run, verdict: Verdict, *, part: Part | None = None) -> RunRecord:
    """The steps after :func:`prepare`, over ``part`` (a driver's, once collected; None: the
    one the run was opened with); the record. The part is the run's state: its plan is
    never changed."""
    assert run.execution.reader is not None, "prepare(run) comes before finish(run)"
    if part is not None:
        run.execution.part = part
    plan = run.setup.plan
    with run.setup.listener.row_group(f"{plan.row.name}: {plan.mode} ({plan.reason})"):
        run_steps(run, verdict, STEPS[1:])
    assert run.execution.record is not None
    return run.execution.record


def run_row(cfg: Config, plan: RowPlan, options: RunOptions, listener: RunListener) -> RunRecord:
    """Run the planned row (every step) and write ``results/<row>/``; its record."""
    with opened(cfg, plan, options, listener) as run:
        if plan.mode == "unavailable":
            return write_record(run, Verdict("unavailable", plan.reason))
        return finish(run, prepare(run))


# refuse_xdist, selecting_options and row_lock live in run.selection and run.lock; the
# names stay importable from here for the modules that import them from the runner
__all__ = [
    "STEPS",
    "Collection",
    "Part",
    "Run",
    "RunListener",
    "RunOptions",
    "Verdict",
    "collect",
    "finish",
    "opened",
    "prepare",
    "record_of",
    "refuse_xdist",
    "row_lock",
    "run_row",
    "run_steps",
    "selecting_options",
    "write_record",
]
