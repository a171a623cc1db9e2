"""``device-matrix run --select changed`` (#34): the workflow switches it on for pull requests.

The part of these tests that starts no process; the rest is in tests/integration/test_selection_run.py (#41)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _workflow_cfg(tmp_path: Path, top: str) -> Any:
    from device_matrix import config

    (tmp_path / "pyproject.toml").write_text(
        f"[tool.device-matrix]\n{top}\n[tool.device-matrix.devices.split]\npjrt_device = 'CPU'\nshards = 2\n"
    )
    return config.load(tmp_path, environ={})


def _run_args(cfg: Any, event: Any) -> dict[str, list[str]]:
    from device_matrix.workflow import plan_jobs

    plan = plan_jobs(cfg, event)
    found: dict[str, list[str]] = {}
    for e in plan.host + plan.container:
        found.setdefault(e["row"], []).append(e["run_args"])
    return found


def test_the_workflow_selects_on_pull_requests_when_switched_on(tmp_path: Path) -> None:
    from device_matrix.workflow import Event

    pr = Event(name="pull_request", action="synchronize")
    off = _workflow_cfg(tmp_path, "")
    assert _run_args(off, pr)["cpu"] == [""]  # off by default: every test
    on = _workflow_cfg(tmp_path, "select_pull_requests = true")
    assert _run_args(on, pr) == {"cpu": ["--select changed"], "split": ["--shard 1/2", "--shard 2/2"]}
    # pushes to the base branch, schedules and manual runs always run in full, and record the
    # map the pull requests select by (a split row's parts map nothing triage reads)
    for name in ("push", "schedule", "workflow_dispatch"):
        assert _run_args(on, Event(name=name)) == {"cpu": ["--record-map"], "split": ["--shard 1/2", "--shard 2/2"]}
        assert _run_args(off, Event(name=name))["cpu"] == [""], name
    # the label forces the full run; adding it runs the rows again, in full
    labelled = Event(name="pull_request", action="synchronize", labels=("run-all-tests",))
    assert _run_args(on, labelled)["cpu"] == [""]
    added = Event(name="pull_request", action="labeled", labels=("run-all-tests",), added_label="run-all-tests")
    assert _run_args(on, added)["cpu"] == [""]
    other = Event(name="pull_request", action="labeled", labels=("docs",), added_label="docs")
    assert "cpu" not in _run_args(on, other)  # another label runs nothing, as before
    named = _workflow_cfg(tmp_path, 'select_pull_requests = true\nselect_full_label = "full"')
    assert _run_args(named, Event(name="pull_request", labels=("full",)))["cpu"] == [""]
    assert _run_args(named, labelled)["cpu"] == ["--select changed"]
