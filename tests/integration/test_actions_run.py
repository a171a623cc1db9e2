"""This repository's GitHub workflow run by a real Actions runner (act over podman), offline.

One push to main and two pushes to a pull request, in that order (the pull request reads the
history the push stored, and its second run updates the comment its first posted); then the
workflow broken twice, to show the checks see it. ``nox -s actions`` runs this file;
tests/actions_run.py drives act; docs/github-actions.md says what stands in for GitHub.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import actions_run, engine_images, github_server
from tests.actions_run import Project, Run, Runner

WORKFLOW = Path(".github/workflows/device-matrix.yml")
REUSABLE = Path(".github/workflows/reusable.yml")
REPOSITORY = "acme/device-matrix"


@dataclass
class Offline:
    runner: Runner
    server: github_server.FakeGitHub
    work: Path
    pull_request: int  # its number on the server
    runs: int = 0

    def project(self, name: str, changes: dict[str, str] | None = None, head: dict[str, str] | None = None) -> Project:
        """This checkout as a repository on GitHub, with ``changes`` and the run's configuration."""
        dest = self.work / name
        dest.mkdir()
        pyproject = offline_configuration((actions_run.ROOT / "pyproject.toml").read_text(), self.server.url)
        project = actions_run.copy_project(
            actions_run.ROOT, dest, REPOSITORY, {"pyproject.toml": pyproject, **(changes or {})}, head or {}
        )
        actions_run.export_commits(project, self.runner.store)
        return project

    def run(self, project: Project, event_name: str) -> Run:
        self.runs += 1
        return self.runner.run(project, WORKFLOW, event_name, run_id=self.runs, number=self.pull_request)


def offline_configuration(pyproject: str, api_url: str) -> str:
    """The configuration of the run's copy: the tracker is the local server, and the cpu row
    runs the mlp suite's quick sanity tests and its gang (the whole row is ``nox -s cpu``, which .ci/run runs
    too: here the jobs around the row are under test, and the full row takes minutes)."""
    suites = 'suites = ["accumulation", "mlp", "collectives"]'
    head = "[tool.device-matrix.devices.cpu]\n"
    assert head + suites in pyproject, "the cpu row's table changed: update offline_configuration"
    quick = pyproject.replace(
        head + suites, head + 'suites = ["mlp"]\npytest_args = ["-k", "sanity and not end_to_end"]'
    )
    return quick + f'\n[tool.device-matrix.tracker]\napi_url = "{api_url}"\n'


@pytest.fixture(scope="module")
def offline() -> Iterator[Offline]:
    # minutes of act, podman and a cpu row: its own session (nox -s actions), not the suite's
    if os.environ.get("DEVICE_MATRIX_ACTIONS") != "1":
        pytest.skip("the workflow's offline run is `nox -s actions`")
    required = os.environ.get("DEVICE_MATRIX_REQUIRE_ENGINE") == "1"
    try:
        actions_run.act_binary()
        image = engine_images.ensure_actions(log=print)
    except (actions_run.Unavailable, engine_images.CannotBuild) as exc:
        if required:
            raise
        pytest.skip(f"the offline Actions run needs podman and act: {exc}")
    with tempfile.TemporaryDirectory(prefix="device-matrix-actions-", dir=engine_images.WORK) as tmp:
        work = Path(tmp)
        actions_run.prepare_store(work / "store")
        with github_server.serve(REPOSITORY, actions_run.TOKEN) as gh, actions_run.docker_api(work) as host:
            number = gh.add_issue("a pull request", pull_request=True, labels=())
            yield Offline(Runner(host, image, work / "store", work), gh, work, number)


# the pull request's change: a test that fails (a green pull request gets no comment of verdicts)
BREAKS = {
    "suites/mlp/test_sanity_offline.py": (
        "def test_sanity_of_the_pull_request():\n    assert 1 + 1 == 3, 'the pull request breaks this'\n"
    )
}


@pytest.fixture(scope="module")
def push(offline: Offline) -> Run:
    return offline.run(offline.project("project"), "push")


@pytest.fixture(scope="module")
def pull_request(offline: Offline) -> tuple[Run, Run]:
    """Two runs of a pull request whose change breaks a test."""
    project = offline.project("pull-request", head=BREAKS)
    return offline.run(project, "pull_request"), offline.run(project, "pull_request")


def check_jobs(run: Run, event_name: str, row: str = "success") -> None:
    """Every job's conclusion, and one row job per row of the plan (cpu: the others are off)."""
    issues = "success" if event_name == "push" else "skipped"
    expected = {
        "plan": "success",
        "rows-host/cpu": row,
        "rows-container": "skipped",
        "issues": issues,
        "triage": "success",
    }
    assert run.results == expected, (run.results, run.log)
    assert run.returncode == 0, run.log


def check_artifacts(run: Run, event_name: str) -> None:
    """The row uploaded its results; the triage job read them (and the issue links on a push)."""
    (upload,) = [u for u in run.of("upload", "rows-host") if u["name"] == "results-cpu"]
    assert "run.json" in upload["files"], upload
    read = sorted(name for d in run.of("download", "triage") for name in d["artifacts"])
    assert read == (["issue-links", "results-cpu"] if event_name == "push" else ["results-cpu"]), run.actions


def check_summary(run: Run) -> None:
    """The triage job's step summary is the report, with the cpu row in it."""
    summary = "\n".join(run.summaries.get("triage", []))
    assert "cpu" in summary and "triage" in summary.lower(), run.summaries


def check(run: Run, event_name: str, row: str = "success") -> None:
    check_jobs(run, event_name, row)
    check_artifacts(run, event_name)
    check_summary(run)


def test_push_to_main(push: Run) -> None:
    check(push, "push")


def test_pull_request_restores_the_base_branch_history(push: Run, pull_request: tuple[Run, Run]) -> None:
    (saved,) = [s for s in push.of("cache-save", "triage") if s["saved"]]
    restored = [r["matched"] for r in pull_request[0].of("cache-restore", "triage")]
    assert restored == [saved["key"]], (saved, restored)


def _broken(offline: Offline, name: str, old: str, new: str) -> Run:
    text = (actions_run.ROOT / REUSABLE).read_text()
    assert old in text, old
    project = offline.project(name, {str(REUSABLE): text.replace(old, new)})
    return offline.run(project, "pull_request")


def test_a_broken_row_command_fails_the_checks(offline: Offline) -> None:
    run = _broken(offline, "broken-row", 'device-matrix run --device "$ROW" --require-device', "device-matrix runn")
    with pytest.raises(AssertionError):
        check(run, "pull_request")
    assert run.results.get("rows-host/cpu") == "failure", run.results


def test_a_renamed_matrix_output_fails_the_checks(offline: Offline) -> None:
    run = _broken(
        offline,
        "renamed-output",
        "      host: ${{ steps.matrix.outputs.host }}",
        "      rows: ${{ steps.matrix.outputs.host }}",
    )
    with pytest.raises(AssertionError):
        check(run, "pull_request")
    assert "rows-host/cpu" not in run.results, run.results
