"""This repository's GitHub workflow run by a real Actions runner (act over podman), offline.

One push to main and two pushes to a pull request, in that order (the pull request reads the
history the push stored, and its second run updates the comment its first posted); then a
user's project calling reusable.yml as the README shows; then the workflow broken twice, to
show the checks see it. ``nox -s actions`` runs this file (.ci/run: the pull request's
first run); tests/actions_run.py drives act; docs/github-actions.md says what stands in
for GitHub.
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests import actions_run, engine_images, github_server
from tests.actions_run import Project, Run, Runner
from tests.userproject import user_project

WORKFLOW = Path(".github/workflows/device-matrix.yml")
REUSABLE = Path(".github/workflows/reusable.yml")
REPOSITORY = "acme/device-matrix"


@dataclass
class Offline:
    runner: Runner
    server: github_server.FakeGitHub
    work: Path
    pull_request: int  # its number on the server
    say: Callable[[str], None]  # a line on pytest's terminal, captured or not
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

    def run(self, project: Project, event_name: str, workflow: Path = WORKFLOW, **how: Any) -> Run:
        """``how``: Runner.run's ``called`` and ``env``."""
        self.runs += 1
        run = self.runner.run(project, workflow, event_name, run_id=self.runs, number=self.pull_request, **how)
        jobs = ", ".join(f"{job} {seconds:.0f} s" for job, seconds in run.durations.items())
        self.say(f"actions run {self.runs} ({project.root.name}, {event_name}): {run.seconds:.0f} s; {jobs}")
        return run

    def comments(self) -> list[dict[str, Any]]:
        """The pull request's comments now, each a copy."""
        with self.server.lock:
            return [copy.deepcopy(c) for c in self.server.comment_list if c["issue"] == self.pull_request]


def offline_configuration(pyproject: str, api_url: str) -> str:
    """The configuration of the run's copy: the tracker is the local server, and the cpu row
    runs one of the mlp suite's sanity tests (it starts torch_xla on the CPU) and what the
    pull request adds, without its gang: the jobs around the row are under test here, the
    whole row is ``nox -s cpu``, which .ci/run runs too."""
    suites = 'suites = ["accumulation", "mlp", "collectives"]'
    head = "[tool.device-matrix.devices.cpu]\n"
    gang = pyproject.index("[[tool.device-matrix.devices.cpu.gangs]]")
    gang_end = pyproject.index("\n[", gang + 1)
    assert head + suites in pyproject and gang_end > gang, "the cpu row's table changed: update offline_configuration"
    quick = (pyproject[:gang] + pyproject[gang_end + 1 :]).replace(
        head + suites, head + 'suites = ["mlp"]\npytest_args = ["-k", "upstream_flag_spellings or offline"]'
    )
    return quick + f'\n[tool.device-matrix.tracker]\napi_url = "{api_url}"\n'


def _terminal(config: pytest.Config) -> Callable[[str], None]:
    """A line on pytest's terminal while it captures the tests' output (each run's timings)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return print

    def say(line: str) -> None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(line)

    return say


@pytest.fixture(scope="module")
def offline(pytestconfig: pytest.Config) -> Iterator[Offline]:
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
            yield Offline(Runner(host, image, work / "store", work), gh, work, number, _terminal(pytestconfig))


# the pull request's change: a test that fails (a green pull request gets no comment of verdicts)
BREAKS = {
    "suites/mlp/test_sanity_offline.py": (
        "def test_sanity_of_the_pull_request():\n    assert 1 + 1 == 3, 'the pull request breaks this'\n"
    )
}


@pytest.fixture(scope="module")
def push(offline: Offline) -> Run:
    return offline.run(offline.project("project"), "push")


@dataclass(frozen=True)
class PullRequestRun:
    """A run of a pull request, and the pull request's comments after it."""

    project: Project
    run: Run
    comments: list[dict[str, Any]]


@pytest.fixture(scope="module")
def pull_request(offline: Offline) -> PullRequestRun:
    """The first run of a pull request whose change breaks a test."""
    project = offline.project("pull-request", head=BREAKS)
    run = offline.run(project, "pull_request")
    return PullRequestRun(project, run, offline.comments())


@pytest.fixture(scope="module")
def pull_request_again(offline: Offline, pull_request: PullRequestRun) -> PullRequestRun:
    """Its second run (a new push to it: its own run id)."""
    return PullRequestRun(pull_request.project, offline.run(pull_request.project, "pull_request"), offline.comments())


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
    assert run.results == expected, f"{run.results}\n{run.tail()}"
    # act exits non-zero when a job failed, as a red check on GitHub
    assert (run.returncode == 0) == (row == "success"), run.tail()


def check_artifacts(run: Run, event_name: str) -> None:
    """The row uploaded its results; the triage job read them (and the issue links on a push)."""
    (upload,) = [u for u in run.of("upload", "rows-host") if u["name"] == "results-cpu"]
    assert "run.json" in upload["files"], upload
    read = sorted(name for d in run.of("download", "triage") for name in d["artifacts"])
    assert read == (["issue-links", "results-cpu"] if event_name == "push" else ["results-cpu"]), run.actions


def check_summary(run: Run) -> None:
    """The triage job's step summary is the report it uploads, with the cpu row in it; the
    row job's own summary names its row."""
    summary = "\n".join(run.summaries.get("triage", []))
    assert "cpu" in summary and "triage" in summary.lower(), run.summaries
    assert summary.strip() == run.artifact("triage-report", "triage.md").strip(), run.summaries
    assert any("cpu" in s for s in run.summaries.get("rows-host", [])), run.summaries


def check(run: Run, event_name: str, row: str = "success") -> None:
    check_jobs(run, event_name, row)
    check_artifacts(run, event_name)
    check_summary(run)


def test_push_to_main(push: Run) -> None:
    check(push, "push")


def check_pull_request(pr: PullRequestRun) -> None:
    # the row's check is red: the pull request breaks a test
    check(pr.run, "pull_request", row="failure")
    # the failure the change makes, in the report and its verdicts
    assert "test_sanity_of_the_pull_request" in "\n".join(pr.run.summaries["triage"]), pr.run.summaries


def test_pull_request_posts_one_comment_of_verdicts(offline: Offline, pull_request: PullRequestRun) -> None:
    check_pull_request(pull_request)
    (posted,) = pull_request.comments
    assert posted["user"]["login"] == offline.server.login, posted
    assert "test_sanity_of_the_pull_request" in posted["body"] and "device-matrix:verdicts" in posted["body"], posted
    path = f"/repos/{REPOSITORY}/issues/{offline.pull_request}/comments"
    assert [r.method for r in offline.server.writes() if r.path.split("?")[0] == path] == ["POST"]


def test_pull_request_restores_the_base_branch_history(push: Run, pull_request: PullRequestRun) -> None:
    (saved,) = [s for s in push.of("cache-save", "triage") if s["saved"]]
    restored = [r["matched"] for r in pull_request.run.of("cache-restore", "triage")]
    assert restored == [saved["key"]], (saved, restored)


def test_the_second_run_updates_the_comment_in_place(
    offline: Offline, pull_request: PullRequestRun, pull_request_again: PullRequestRun
) -> None:
    check_pull_request(pull_request_again)
    (posted,) = pull_request.comments
    (updated,) = pull_request_again.comments
    assert posted["id"] == updated["id"], (posted, updated)
    assert "test_sanity_of_the_pull_request" in updated["body"], updated
    # each run's marker: the second run wrote its own into the same comment
    assert posted["body"] != updated["body"], updated
    path = f"/repos/{REPOSITORY}/issues/{offline.pull_request}/comments"
    assert [r.method for r in offline.server.writes() if r.path.split("?")[0] == path] == ["POST"]
    edits = [r for r in offline.server.writes() if r.path == f"/repos/{REPOSITORY}/issues/comments/{posted['id']}"]
    assert [r.method for r in edits] == ["PATCH"], edits


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


# A user's project, as the README has one start: the workflow it says to copy, calling
# reusable.yml of acme/device-matrix at a tag (this checkout, committed), and a test of its own.
USER_TEST = """\
import torch
import torch_xla


def test_add_on_the_device():
    t = torch.ones(2, device=torch_xla.device())
    assert (t + t).sum().item() == 4.0
"""
USER_WORKFLOW = Path(".github/workflows/devices.yml")


def readme_workflow() -> str:
    """The whole workflow the README tells a user to copy, for this repository's name."""
    found = re.search(r"```yaml\n(name: devices\n.*?)```", (actions_run.ROOT / "README.md").read_text(), re.DOTALL)
    assert found, "README.md has no workflow that starts `name: devices`: update readme_workflow"
    return found.group(1).replace("OWNER/device-matrix", REPOSITORY)


@dataclass(frozen=True)
class UserRun:
    run: Run
    release: Project  # the commit of acme/device-matrix the workflow is called at


@pytest.fixture(scope="module")
def user_push(offline: Offline) -> UserRun:
    """A push to main of a user's project, outside this checkout and its own repository."""
    workflow = readme_workflow()
    found = re.search(r"uses: (\S+)/\.github/workflows/reusable\.yml@(\S+)", workflow)
    assert found and found.group(1) == REPOSITORY, workflow
    release = offline.project("device-matrix-release")
    root = offline.work / "user-project"
    user_project(root, {"tests/test_user.py": USER_TEST, str(USER_WORKFLOW): workflow})
    project = actions_run.copy_project(None, root, "acme/userproj")
    actions_run.export_commits(project, offline.runner.store)
    # act's job context has no workflow_repository/workflow_sha: reusable.yml reads them from env there
    env = {"DEVICE_MATRIX_WORKFLOW_REPOSITORY": REPOSITORY, "DEVICE_MATRIX_WORKFLOW_SHA": release.head}
    called = {f"{REPOSITORY}@{found.group(2)}": release}
    return UserRun(offline.run(project, "push", USER_WORKFLOW, called=called, env=env), release)


def test_a_users_project_calling_the_reusable_workflow(user_push: UserRun) -> None:
    run = user_push.run
    check_jobs(run, "push")
    check_summary(run)
    (upload,) = [u for u in run.of("upload", "rows-host") if u["name"] == "results-cpu"]
    assert "run.json" in upload["files"], upload
    # every job installed device-matrix from the commit the workflow was called at
    own = {a["job"] for a in run.actions if a["action"] == "checkout" and a["path"] == ".device-matrix-src"}
    assert own == {"plan", "rows-host", "issues", "triage"}, run.actions
    for a in run.actions:
        if a["action"] == "checkout" and a["path"] == ".device-matrix-src":
            assert (a["repository"], a["ref"]) == (REPOSITORY, user_push.release.head), a
