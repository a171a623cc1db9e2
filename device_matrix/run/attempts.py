"""Attempts until every test has an outcome.

:func:`attempts` starts one child after another (:func:`one_attempt`) and asks the
policy (:func:`device_matrix.run.policy.decide`) what each one's end means: done, resume
after a death with the tests not yet run, collect again without a module whose import
killed the process, or stop with the rest ``not_run``. What a crash leaves in the run's
state (its record, its test's outcome, the listener told) is
:mod:`device_matrix.run.crashes`' (#31).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from device_matrix.config import Script
from device_matrix.diagnostics import outputlog
from device_matrix.errors import EnvironmentProblem
from device_matrix.run import crashes, programs
from device_matrix.run.attempt import AttemptResult, AttemptSpec, Limits, Purpose, run_attempt
from device_matrix.run.context import Quiet, Run, Verdict
from device_matrix.run.folder import RowFolder
from device_matrix.run.policy import Decision, Observation, decide
from device_matrix.run.state import RunState
from device_matrix.wire import SCRIPT_MODULE


def attempts(
    run: Run,
    targets: Sequence[str],
    *,
    select: list[str] | None,
    purpose: Purpose,
    scope: set[str] | None = None,
    script: Script | None = None,
) -> Verdict:
    """Attempts until every test in ``scope`` (all, when None) has an outcome."""
    state = run.execution.tests
    restarts = 0
    while True:
        attempt = one_attempt(run, purpose, targets, select, script=script, tell_end=False)
        state.record_finished(attempt)
        evidence = run.evidence
        crashes.record_plugin_crashes(evidence, attempt, targets)
        crashes.record_worker_crashes(evidence, attempt, targets)
        crashes.record_forked_copies(evidence, attempt)
        # one non-zero pytest exit anywhere is never overwritten by a later 0; a
        # collection's own status counts only when pytest refused the session or found
        # nothing (3 internal error, 4 usage error: a --test path that does not exist;
        # 5 nothing collected): then no process runs after it to say so
        counts = purpose != "collect" or attempt.returncode in (3, 4, 5)
        if script is not None and script.kind == "program":
            counts = False  # a program's exit status is its test's outcome, not pytest's
        normal = attempt.fold.ended and not attempt.abnormal and counts
        if normal and state.pytest_exit in (None, 0):
            state.pytest_exit = attempt.returncode
        decision = decide(_observe(state, attempt, restarts, scope, max_restarts=run.setup.cfg.max_restarts))
        crash = crashes.record_crash(evidence, attempt, decision.crash, targets, script) if decision.crash else None
        # how the attempt ended, with its crash: told once (#31)
        end = outputlog.attempt_end(attempt, crash=crash, tests=list(state.results.values()))
        if crash is not None:
            evidence.tell(end)
        else:
            outputlog.append_quietly(evidence.folder.log, end, evidence.redactor)
        if crash is None and attempt.fold.ended and attempt.fold.running:
            # pytest.exit() or a KeyboardInterrupt inside a test: the session ended with it
            state.put(
                attempt.fold.running,
                "error",
                duration=attempt.fold.tests[attempt.fold.running].lasted(attempt.ended),
                message=f"the session ended while this test ran (pytest exit status {attempt.returncode})",
                attempt=attempt.index,
            )
        if decision.next == "done":
            return Verdict(state.status(), decision.reason)
        if decision.next == "stop":
            assert decision.status is not None
            state.mark_not_run(f"not run: {decision.reason}", scope)
            return Verdict(decision.status, _with_output(run, decision))
        restarts += 1
        remaining = state.remaining(scope)
        if decision.next == "collect_again":
            assert decision.reason is not None
            run.execution.left_out.append(decision.reason)
            module = decision.crash.nodeid if decision.crash and decision.crash.nodeid else decision.reason
            run.setup.note(f"collecting again without {module}")
            select = remaining if scope is not None else None
            continue
        select, purpose = remaining, ("collect" if purpose == "collect" else "resume")
        run.setup.note(f"resuming with {len(select)} test(s) not yet run")


def _with_output(run: Run, decision: Decision) -> str | None:
    if decision.status != "error":
        return decision.reason
    return f"{decision.reason}: {run.output_tail()}"


def _observe(
    state: RunState, attempt: AttemptResult, restarts: int, scope: set[str] | None, *, max_restarts: int
) -> Observation:
    fold = attempt.fold
    culprit = fold.collect_culprit
    if culprit is not None and (Path(culprit[1]) / "conftest.py").is_file():
        # a directory dies while its conftest.py is imported: that file is named, and
        # the directory left out (its conftest.py would be imported again otherwise)
        nodeid = f"{culprit[0]}/conftest.py" if culprit[0] else "conftest.py"
        culprit = (nodeid, culprit[1])
    return Observation(
        abnormal=attempt.abnormal,
        signal=attempt.signal,
        returncode=attempt.returncode,
        overrun=attempt.overrun.activity if attempt.overrun else None,
        broken=fold.broken is not None,
        session_started=fold.session_started,
        collected=fold.collected is not None,
        ended=fold.ended,
        running=fold.running,
        collect_culprit=culprit,
        # the running test gets its outcome from this very decision
        remaining=len([n for n in state.remaining(scope) if n != fold.running]),
        restarts=restarts,
        max_restarts=max_restarts,
    )


def limits(run: Run) -> Limits:
    """The deadlines and bounds of the run's attempts, from the row and the configuration."""
    return Limits(
        test_timeout=run.setup.row.test_timeout,
        phase_min=run.setup.cfg.phase_timeout_min,
        run_deadline=run.execution.deadline,
        poll=run.options.poll_interval,
        max_log_bytes=run.options.max_log_bytes,
    )


def one_attempt(
    run: Run,
    purpose: Purpose,
    targets: Sequence[str],
    select: Sequence[str] | None,
    *,
    script: Script | None = None,
    tell_end: bool = True,
) -> AttemptResult:
    """One child of this run, into ``attempts/NN/`` and the row's log, and what it showed;
    ``tell_end``: how it ended is written into the log now (else by the caller, #31)."""
    setup, state, child = run.setup, run.execution.tests, run.child
    folder = setup.folder
    index = len(state.attempts) + 1
    if script is None:
        args = child.pytest(targets, left_out=run.execution.left_out, collect_only=purpose == "collect")
        launch = setup.launch_spec(child.environment(), args)
    else:
        launch = setup.launch_spec(
            child.environment(script.env, script=True),
            child.script(script.file, script.args, script.variant, program=script.kind == "program"),
            module=SCRIPT_MODULE,
        )
    spec = AttemptSpec(index=index, purpose=purpose, child=launch, select=select)
    before = folder.identities()
    progress = Quiet() if purpose == "rerun" else run.execution.progress.of(script)
    try:
        attempt = run_attempt(
            run.executor,
            spec,
            folder=run.execution.folder_state.attempt(index),
            log_path=folder.log,
            redactor=setup.redactor,
            limits=limits(run),
            progress=progress,
            tell_end=tell_end,
        )
        if script is not None and script.kind == "program":
            # its test ends with its process: the exit status is the outcome
            output = crashes.read_log(folder.log, attempt.log_start, attempt.log_end)
            for event in programs.conclude(attempt, output):
                progress.journal_event(event)
    except OSError as exc:
        raise folder.unwritable(exc) from exc
    note_attempt(state, folder, attempt)
    lost = run.execution.folder_state.check(attempt.index, before)
    if lost is not None:
        setup.note(f"evidence {lost}")
    run.execution.last_output = (attempt.log_start, attempt.log_end)
    if attempt.output_error is not None:
        err = attempt.output_error
        raise EnvironmentProblem(
            f"the output of row {setup.row.name!r} could not be written to {folder.path}: {err.strerror or err}",
            tip="Free space on the results folder's disk, or pick another with --results.",
        )
    if attempt.fold.env and not state.environment:
        state.environment = dict(attempt.fold.env)
    elif not state.environment and run.execution.environment.taken:
        state.environment = dict(run.execution.environment.taken)
    return attempt


def note_attempt(state: RunState, folder: RowFolder, attempt: AttemptResult) -> None:
    """The attempt in the run's record (once); its files are named under the row's ``folder``."""
    if any(a["index"] == attempt.index for a in state.attempts):
        return
    path = folder.path
    state.attempts.append(
        crashes.attempt_record(
            index=attempt.index,
            purpose=attempt.purpose,
            returncode=attempt.returncode,
            duration=attempt.duration,
            selected=attempt.selected,
            finished=len(attempt.fold.finished_ids()),
            journal=str((attempt.folder / "journal.jsonl").relative_to(path)),
            log=str(folder.log.relative_to(path)),
        )
    )
