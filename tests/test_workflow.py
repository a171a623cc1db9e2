"""The GitHub workflow: parses, emits the configured rows, keeps least privilege."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from device_matrix import config
from tests.conftest import REPO

WORKFLOW = REPO / ".github" / "workflows" / "device-matrix.yml"


def load() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def test_workflow_shape_and_least_privilege() -> None:
    wf = load()
    on = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads `on` as true
    assert "pull_request_target" not in on
    assert wf["permissions"] == {"contents": "read"}
    jobs = wf["jobs"]
    assert set(jobs) == {"plan", "rows-host", "rows-container", "triage", "issues"}
    writers = {name for name, job in jobs.items() if "issues" in (job.get("permissions") or {})}
    assert writers == {"issues"}
    assert jobs["issues"]["permissions"]["issues"] == "write"
    assert "pull_request" not in jobs["issues"]["if"] and "default_branch" in jobs["issues"]["if"]
    assert "github.ref" in wf["concurrency"]["group"]
    for name in ("rows-host", "rows-container"):
        upload = next(s for s in jobs[name]["steps"] if "upload-artifact" in s.get("uses", ""))
        assert upload["if"] == "always()"
    assert jobs["triage"]["if"] == "always()"


def test_no_expression_is_interpolated_into_a_script() -> None:
    for job in load()["jobs"].values():
        for step in job.get("steps", []):
            assert "${{" not in step.get("run", ""), step


def test_actions_are_pinned_by_commit() -> None:
    for job in load()["jobs"].values():
        for step in job.get("steps", []):
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), step["uses"]


def test_emitted_matrix_equals_the_configured_rows(tmp_path: Path) -> None:
    out = tmp_path / "github_output"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "emit_matrix.py"), "--output", str(out)], check=True, capture_output=True
    )
    values = dict(line.split("=", 1) for line in out.read_text().splitlines())
    host, container = json.loads(values["host"]), json.loads(values["container"])
    cfg = config.load(REPO)
    emitted = {e["row"]: e for e in host["include"] + container["include"]}
    assert sorted(emitted) == sorted(cfg.rows)
    for name, row in cfg.rows.items():
        e = emitted[name]
        assert e["runs_on"] == list(row.runner_labels)
        assert e["image"] == row.image
        assert e["container_options"] == " ".join(row.container_options)
    assert host["include"][0]["row"] == "cpu"
    # a row whose options need host globs runs on the host and starts its container there
    assert "neuron" in [e["row"] for e in host["include"]]
    assert {e["row"] for e in container["include"]} == {"tpu", "cuda"}
