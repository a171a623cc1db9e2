"""Where a run's code came from: commit, branch or tag, event, pull request and base (#25).

Read from the ``GITHUB_*`` variables and the event payload in Actions, from git elsewhere,
and overridden field by field by flags (``--commit``, ``--branch``, ``--pr``, ``--base``,
``--base-commit``). The verdicts of a pull request compare it with the history of its base
branch; a run's *lane* in the history is its branch (``branch:main``), its pull request
(``pr:12``) or its tag.

Nothing here fails a run: an unreadable payload, no git, a detached checkout each leave a
field unknown (None).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from device_matrix.errors import UsageProblem
from device_matrix.records.schema import EventKind, SourceInfo

# the one bound on a git command (a hung git, a lock): long enough for the largest thing
# asked of it, `run --select changed`'s diff of a big repository
GIT_TIMEOUT_S = 60.0
PAYLOAD_LIMIT = 16 * 1024 * 1024  # an event payload is a few kB; a huge file is not read
_PULL_REF_RE = re.compile(r"refs/pull/(\d+)/(?:merge|head)")
_SHA_RE = re.compile(r"[0-9a-fA-F]{7,64}")
# git's own rules, loosely: no whitespace or control characters, none of ~^:?*[\ and no ".."
_REF_RE = re.compile(r"(?!.*\.\.)[^\s~^:?*\[\\\x00-\x1f\x7f]{1,255}")
_EVENTS: Mapping[str, EventKind] = {
    "push": "push",
    "pull_request": "pull_request",
    "pull_request_target": "pull_request",
    "schedule": "schedule",
    "workflow_dispatch": "manual",
}


def unknown() -> SourceInfo:
    return SourceInfo(
        commit=None,
        head_commit=None,
        ref=None,
        ref_type=None,
        event="local",
        event_name=None,
        pull_request=None,
        base_ref=None,
        base_commit=None,
        repository=None,
        run_id=None,
        run_attempt=None,
        workflow=None,
        origin="none",
    )


def git(cwd: Path | None, *args: str) -> tuple[str | None, str]:
    """git's output as it printed it, or None and why it failed (not installed, could not
    run, its last line of complaint): the one way device-matrix asks git."""
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        return None, "git is not installed here"
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return None, f"git could not run: {exc}"
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or [f"git exited {proc.returncode}"])[-1]
    return proc.stdout, ""


def _git(cwd: Path | None, *args: str) -> str | None:
    """git's output stripped; None when it failed or printed nothing."""
    out = (git(cwd, *args)[0] or "").strip()
    return out or None


def _payload(environ: Mapping[str, str]) -> dict[str, Any]:
    path = environ.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        with Path(path).open("rb") as fh:
            raw = fh.read(PAYLOAD_LIMIT + 1)
        data = json.loads(raw) if len(raw) <= PAYLOAD_LIMIT else {}
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _from_actions(environ: Mapping[str, str], cwd: Path | None) -> SourceInfo:
    src = unknown()
    src["origin"] = "actions"
    name = environ.get("GITHUB_EVENT_NAME") or None
    src["event_name"] = name
    src["event"] = _EVENTS.get(name or "", "other")
    src["commit"] = environ.get("GITHUB_SHA") or None
    src["repository"] = environ.get("GITHUB_REPOSITORY") or None
    src["run_id"] = environ.get("GITHUB_RUN_ID") or None
    attempt = environ.get("GITHUB_RUN_ATTEMPT", "")
    src["run_attempt"] = int(attempt) if attempt.isdigit() else None
    src["workflow"] = environ.get("GITHUB_WORKFLOW") or None
    # a schedule's payload has no repository and no pull request: only what is there is read
    payload = _payload(environ)
    pr = payload.get("pull_request")
    ref = environ.get("GITHUB_REF", "")
    m = _PULL_REF_RE.fullmatch(ref)
    if src["event"] == "pull_request" or isinstance(pr, dict) or m:
        src["event"] = "pull_request"
        src["pull_request"] = _number(_get(pr, "number")) or (int(m.group(1)) if m else None)
        src["head_commit"] = _text(_get(pr, "head", "sha"))
        src["ref"] = environ.get("GITHUB_HEAD_REF") or _text(_get(pr, "head", "ref"))
        src["ref_type"] = "branch" if src["ref"] else None
        src["base_ref"] = environ.get("GITHUB_BASE_REF") or _text(_get(pr, "base", "ref"))
        # the merge commit's parents are the base's tip and the head: their merge-base is
        # where the pull request started; a shallow checkout cannot tell, the payload can
        merge_base = _git(cwd, "merge-base", "HEAD^1", "HEAD^2") if src["commit"] else None
        src["base_commit"] = merge_base or _text(_get(pr, "base", "sha"))
    else:
        src["ref"] = environ.get("GITHUB_REF_NAME") or None
        kind = environ.get("GITHUB_REF_TYPE")
        src["ref_type"] = "tag" if kind == "tag" else ("branch" if src["ref"] else None)
    return src


def _from_git(cwd: Path | None) -> SourceInfo:
    src = unknown()
    commit = _git(cwd, "rev-parse", "HEAD")
    if commit is None:
        return src
    src["origin"] = "git"
    src["commit"] = commit
    branch = _git(cwd, "symbolic-ref", "--short", "-q", "HEAD")
    if branch:
        src["ref"], src["ref_type"] = branch, "branch"
    else:
        tag = _git(cwd, "describe", "--tags", "--exact-match", "HEAD")
        if tag:
            src["ref"], src["ref_type"] = tag, "tag"
    return src


def detect(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> SourceInfo:
    """The source of the code in ``cwd``: from Actions when running there, else from git."""
    env = os.environ if environ is None else environ
    if env.get("GITHUB_ACTIONS") == "true":
        return _from_actions(env, cwd)
    return _from_git(cwd)


def check_commit(text: str) -> str:
    if not _SHA_RE.fullmatch(text):
        raise UsageProblem(
            f"{text!r} is not a commit id", tip="Pass 7 to 64 hexadecimal digits, e.g. --commit abc1234."
        )
    return text.lower()


def check_ref(text: str) -> str:
    if not _REF_RE.fullmatch(text) or text.startswith(("-", "/")) or text.endswith(("/", ".lock")):
        raise UsageProblem(
            f"{text!r} is not a branch name",
            tip="Pass a branch as git names it, e.g. --branch main (no spaces, no ~^:?*[\\ or '..').",
        )
    return text


def override(
    src: SourceInfo,
    *,
    commit: str | None = None,
    branch: str | None = None,
    pull_request: int | None = None,
    base: str | None = None,
    base_commit: str | None = None,
    cwd: Path | None = None,
) -> SourceInfo:
    """``src`` with the fields a flag names replaced; a new base gets its merge-base from git."""
    out = SourceInfo(**src)
    if commit is not None:
        out["commit"] = check_commit(commit)
    if branch is not None:
        out["ref"], out["ref_type"] = check_ref(branch), "branch"
    if pull_request is not None:
        if pull_request <= 0:
            raise UsageProblem(f"--pr {pull_request}: not a pull request number", tip="Pass e.g. --pr 12.")
        out["pull_request"] = pull_request
        out["event"] = "pull_request"
    if base is not None:
        out["base_ref"] = check_ref(base)
        if base_commit is None and base != src["base_ref"]:
            head = out["commit"] or "HEAD"
            out["base_commit"] = _git(cwd, "merge-base", head, base)
    if base_commit is not None:
        out["base_commit"] = check_commit(base_commit)
    return out


def is_pull_request(src: SourceInfo | None) -> bool:
    return src is not None and (src["event"] == "pull_request" or src["pull_request"] is not None)


def lane(src: SourceInfo | None) -> str:
    """The history lane a run belongs to: ``pr:12``, ``branch:main``, ``tag:v1``, or "" (unknown)."""
    if src is None:
        return ""
    if is_pull_request(src):
        if src["pull_request"] is not None:
            return f"pr:{src['pull_request']}"
        return f"pr:{src['ref']}" if src["ref"] else "pr:?"
    if src["ref"]:
        return f"{'tag' if src['ref_type'] == 'tag' else 'branch'}:{src['ref']}"
    return ""


def base_lane(src: SourceInfo | None) -> str | None:
    """The lane a run's verdicts compare with: its base branch's (None: nothing to compare)."""
    if src is None or not src["base_ref"]:
        return None
    base = f"branch:{src['base_ref']}"
    return base if base != lane(src) else None


def lane_words(name: str) -> str:
    """A lane as a reader says it: "main", "pull request 12", "tag v1"."""
    kind, _, rest = name.partition(":")
    if kind == "branch":
        return rest
    if kind == "pr":
        return f"pull request {rest}" if rest.isdigit() else f"pull request ({rest})"
    if kind == "tag":
        return f"tag {rest}"
    return "runs without a recorded source"


def short(commit: str | None) -> str:
    return commit[:10] if commit else "?"
