"""The tests of this concept that start a process; the rest are in tests/unit/test_workflow.py (#41)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from device_matrix import config
from device_matrix.workflow import (
    GATE_LABEL,
)
from tests.conftest import REPO
from tests.unit.test_workflow import DM, ROWS, _cfg


def test_ci_matrix_command(tmp_path: Path) -> None:
    cfg_dir = tmp_path / "p"
    cfg_dir.mkdir()
    _cfg(cfg_dir, ROWS)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "labeled", "label": {"name": GATE_LABEL}, "pull_request": {"labels": []}}))
    out = tmp_path / "github_output"
    args = ["--event-name", "pull_request", "--event-path", str(event), "--rows", "cpu,tpu", "--rows", "neuron"]
    proc = subprocess.run(
        [*DM, "--project", str(cfg_dir), "ci", "matrix", "--output", str(out), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    values = dict(line.split("=", 1) for line in out.read_text().splitlines())
    host = json.loads(values["host"])["include"]
    assert [e["row"] for e in host] == ["tpu"]
    assert values["has_host"] == "true" and values["has_container"] == "false"
    assert "::notice title=row neuron not run::ci = off" in proc.stdout
    assert "::notice title=row cpu not run::runs in the pull request's own run" in proc.stdout
    assert "::warning title=unpinned image::row tpu" in proc.stdout


def test_emit_matrix_tool_is_the_subcommand(tmp_path: Path) -> None:
    out = tmp_path / "github_output"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "emit_matrix.py"), "--output", str(out), "--event-name", "schedule"],
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    values = dict(line.split("=", 1) for line in out.read_text().splitlines())
    cfg = config.load(REPO)
    host = json.loads(values["host"])["include"]
    assert [e["row"] for e in host] == [n for n, r in cfg.rows.items() if r.ci != "off"]
    for e in host:
        row = cfg.row(e["row"])
        assert e["runs_on"] == list(row.runner_labels)
        assert e["image"] == row.image
        assert e["container_options"] == " ".join(row.container_options)


def test_collect_lays_out_rows_and_issue_links(tmp_path: Path) -> None:
    art = tmp_path / "artifacts"
    (art / "results-cpu").mkdir(parents=True)
    (art / "results-cpu" / "run.json").write_text("{}")
    (art / "issue-links").mkdir()
    (art / "issue-links" / "issues.json").write_text("[]")
    (art / "triage-report").mkdir()
    res = tmp_path / "results"
    subprocess.run([sys.executable, str(REPO / "tools" / "collect_artifacts.py"), str(art), str(res)], check=True)
    assert sorted(p.relative_to(res).as_posix() for p in res.rglob("*")) == ["cpu", "cpu/run.json", "issues.json"]
    # no artifacts at all: nothing to lay out, not an error
    proc = subprocess.run(
        [sys.executable, "-m", "device_matrix", "ci", "collect", str(tmp_path / "none"), str(res)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0 and "no artifacts" in proc.stdout


def test_ci_install_installs_only_for_a_local_row(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.device-matrix.devices.here]\n"
        'pjrt_device = "CPU"\nrun_in = "host"\npresence = ["always"]\n'
        'install = ["./no-such-package-folder"]\n'
        "[tool.device-matrix.devices.nothing]\n"
        'pjrt_device = "CPU"\nrun_in = "host"\npresence = ["always"]\n'
    )
    base = [*DM, "--project", str(tmp_path), "ci", "install", "--device"]
    ok = subprocess.run([*base, "nothing"], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert ok.returncode == 0 and "nothing to install" in ok.stdout
    bad = subprocess.run([*base, "here"], capture_output=True, text=True, check=False, cwd=tmp_path)
    assert bad.returncode == 5, bad.stdout + bad.stderr
    assert "pip install ./no-such-package-folder" in bad.stdout
    assert "installing the row's packages of the here row failed" in bad.stderr


def test_ci_install_installs_the_project_and_in_the_rows_image_only_the_project(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.device-matrix]\nproject_install = ["./no-such-project"]\n'
        "[tool.device-matrix.devices.here]\n"
        'pjrt_device = "CPU"\nrun_in = "host"\npresence = ["always"]\n'
        'install = ["./no-such-package-folder"]\n'
    )
    base = [*DM, "--project", str(tmp_path), "ci", "install", "--device", "here"]
    env = {k: v for k, v in os.environ.items() if k != "DEVICE_MATRIX_IN_IMAGE"}
    host = subprocess.run(base, capture_output=True, text=True, check=False, cwd=tmp_path, env=env)
    assert host.returncode == 5 and "pip install ./no-such-package-folder" in host.stdout  # the row's first
    image = subprocess.run(
        base, capture_output=True, text=True, check=False, cwd=tmp_path, env={**env, "DEVICE_MATRIX_IN_IMAGE": "here"}
    )
    assert image.returncode == 5, image.stdout + image.stderr
    assert "no-such-package-folder" not in image.stdout and "pip install ./no-such-project" in image.stdout
    assert "installing the project (project_install) of the here row failed" in image.stderr
