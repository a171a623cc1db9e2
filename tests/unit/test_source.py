"""Where a run's code came from (#25): Actions variables and payloads, and records that carry it.

The part of these tests that starts no process; the rest is in tests/integration/test_source.py (#41)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from device_matrix.records.schema import load_run
from device_matrix.records.source import base_lane, detect, lane
from tests import records as R

ACTIONS = {
    "GITHUB_ACTIONS": "true",
    "GITHUB_SHA": "1" * 40,
    "GITHUB_REPOSITORY": "acme/xla",
    "GITHUB_RUN_ID": "4242",
    "GITHUB_RUN_ATTEMPT": "2",
    "GITHUB_WORKFLOW": "devices",
}


def _env(tmp_path: Path, payload: Any, **extra: str) -> dict[str, str]:
    path = tmp_path / "event.json"
    path.write_text(payload if isinstance(payload, str) else json.dumps(payload))
    return {**ACTIONS, "GITHUB_EVENT_PATH": str(path), **extra}


def test_a_push_in_actions(tmp_path: Path) -> None:
    src = detect(
        _env(
            tmp_path,
            {"ref": "refs/heads/main"},
            GITHUB_EVENT_NAME="push",
            GITHUB_REF="refs/heads/main",
            GITHUB_REF_NAME="main",
            GITHUB_REF_TYPE="branch",
        ),
        cwd=tmp_path,
    )
    assert src["event"] == "push" and src["ref"] == "main" and src["ref_type"] == "branch"
    assert src["commit"] == "1" * 40 and src["run_id"] == "4242" and src["run_attempt"] == 2
    assert src["workflow"] == "devices" and src["repository"] == "acme/xla" and src["origin"] == "actions"
    assert src["pull_request"] is None and lane(src) == "branch:main" and base_lane(src) is None


@pytest.mark.parametrize("payload", ["{not json", "[1, 2]", '{"pull_request": "x"}'], ids=["garbage", "list", "odd"])
def test_a_payload_that_is_not_what_it_should_be_loses_nothing_else(tmp_path: Path, payload: str) -> None:
    src = detect(_env(tmp_path, payload, GITHUB_EVENT_NAME="push", GITHUB_REF_NAME="main", GITHUB_REF_TYPE="branch"))
    assert src["commit"] == "1" * 40 and src["ref"] == "main"


def test_a_schedule_payload_has_no_repository_and_that_is_fine(tmp_path: Path) -> None:
    src = detect(
        _env(
            tmp_path,
            {"schedule": "17 3 * * *"},
            GITHUB_EVENT_NAME="schedule",
            GITHUB_REF="refs/heads/main",
            GITHUB_REF_NAME="main",
            GITHUB_REF_TYPE="branch",
        )
    )
    assert src["event"] == "schedule" and lane(src) == "branch:main" and src["repository"] == "acme/xla"


def test_a_tag(tmp_path: Path) -> None:
    src = detect(_env(tmp_path, {}, GITHUB_EVENT_NAME="push", GITHUB_REF_NAME="v1.2", GITHUB_REF_TYPE="tag"))
    assert lane(src) == "tag:v1.2"


def test_a_record_without_a_source_still_loads_and_one_with_it_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    rec = R.record("cpu", [R.test("s/t.py::test_a")])
    path.write_text(json.dumps(rec))
    assert "source" not in load_run(path)
    rec["source"] = {"commit": 5}
    path.write_text(json.dumps(rec))
    with pytest.raises(Exception, match=r"\.source"):
        load_run(path)
