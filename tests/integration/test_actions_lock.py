"""Two offline Actions runs on one machine take turns at act (#43).

act names a job's containers after the workflow and the job in the engine's storage that
every run shares: two runs at once removed each other's containers. Each run holds
tests/actions_run.py's ACT_LOCK while act runs (a stand-in act here, which says when it ran).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests import actions_run
from tests.actions_run import Project, Runner

FAKE_ACT = """#!/bin/sh
echo "start $(date +%s.%N)" >> "{spans}"
sleep 0.5
echo "end $(date +%s.%N)" >> "{spans}"
"""


def test_two_runs_take_turns_at_act(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spans = tmp_path / "spans"
    act = tmp_path / "act"
    act.write_text(FAKE_ACT.format(spans=spans))
    act.chmod(0o755)
    monkeypatch.setattr(actions_run, "act_binary", lambda: str(act))
    monkeypatch.setattr(actions_run, "ACT_LOCK", tmp_path / "act.lock")
    project = Project(tmp_path / "project", "acme/project", "0" * 40, "1" * 40)
    (project.root / ".github" / "workflows").mkdir(parents=True)

    def one(n: int) -> None:
        work = tmp_path / f"session-{n}"
        work.mkdir()
        Runner("unix:///nonexistent", "image", work / "store", work).run(
            project, Path("wf.yml"), "push", run_id=n, timeout=60
        )

    threads = [threading.Thread(target=one, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = [line.split() for line in spans.read_text().splitlines()]
    # one run's act ends before the other's starts
    assert [kind for kind, _ in events] == ["start", "end", "start", "end"], events
    assert float(events[1][1]) <= float(events[2][1]), events
