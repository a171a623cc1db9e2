"""A step of the runner may say stop (#31): the steps after it do not run, and the record
of what is known is still written."""

from __future__ import annotations

import inspect
import io
import json
from collections.abc import Callable
from typing import cast

import pytest

from device_matrix import config
from device_matrix.output import Output
from device_matrix.run import runner
from device_matrix.run.context import Run, Verdict
from device_matrix.run.plan import plan_row
from tests.conftest import Project


def _steps(ran: list[str], says: dict[str, Verdict]) -> list[runner.Step]:
    """Steps that note their name as they run and return ``says[name]``, or the verdict given."""

    def step(name: str) -> runner.Step:
        def run(run: Run, verdict: Verdict) -> Verdict:
            ran.append(name)
            return says.get(name, verdict)

        run.__name__ = name
        return run

    return [step(name) for name in ("first", "second", "third")]


def test_steps_that_never_say_stop_all_run_in_their_order() -> None:
    ran: list[str] = []
    verdict = runner.run_steps(cast(Run, None), Verdict("running"), _steps(ran, {"second": Verdict("failed", "x")}))
    assert ran == ["first", "second", "third"]
    assert verdict == Verdict("failed", "x")  # each step is given the one before's verdict


def test_a_step_that_says_stop_keeps_the_steps_after_it_from_running() -> None:
    ran: list[str] = []
    stop = Verdict("error", "the second step said stop", stop=True)
    verdict = runner.run_steps(cast(Run, None), Verdict("running"), _steps(ran, {"second": stop}))
    assert ran == ["first", "second"]
    assert verdict == stop
    # a verdict that says stop before the first step: none runs
    ran.clear()
    assert runner.run_steps(cast(Run, None), stop, _steps(ran, {})) == stop and ran == []


def test_todays_steps_never_say_stop() -> None:
    # behaviour unchanged: no step of the runner returns a verdict that stops
    source = "".join(inspect.getsource(step) for step in runner.STEPS)
    assert "stop=" not in source


@pytest.mark.slow
def test_a_run_whose_step_says_stop_still_writes_its_record(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    p = project("passing")
    ran: list[str] = []

    def stops(run: Run, verdict: Verdict) -> Verdict:
        ran.append("stops")
        return Verdict("error", "the step said stop", stop=True)

    def later(run: Run, verdict: Verdict) -> Verdict:
        ran.append("later")
        return Verdict("passed")

    monkeypatch.setattr(runner, "STEPS", (runner.prepare, stops, later, runner.reconcile, runner.write))
    cfg = config.load(p.root)
    record = runner.run_row(cfg, plan_row(cfg, cfg.row("fixture")), runner.RunOptions(), Output(io.StringIO()))
    assert ran == ["stops"]  # neither `later` nor reconcile ran
    assert (record["status"], record["reason"]) == ("error", "the step said stop")
    # the record on disk is the final one: not `running`, with the reports of a run that ended
    folder = p.root / "results" / "fixture"
    on_disk = json.loads((folder / "run.json").read_text())
    assert (on_disk["status"], on_disk["reason"]) == ("error", "the step said stop")
    assert (folder / "junit.xml").is_file() and (folder / "report.json").is_file()
