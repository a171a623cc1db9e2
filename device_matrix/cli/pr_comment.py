"""``triage --pr-comment``: the verdicts as one comment on the pull request (#25).

A comment that cannot be made never changes triage's exit code: the note says why, and the
step summary carries the verdicts anyway.
"""

from __future__ import annotations

import dataclasses
import os

from device_matrix.config import REPOSITORY_RE, Config
from device_matrix.errors import TrackerError
from device_matrix.issues import open_tracker
from device_matrix.issues.github import GitHubTracker
from device_matrix.issues.pr_comment import body_of, post
from device_matrix.output import Output
from device_matrix.records.source import is_pull_request
from device_matrix.redact import Redactor
from device_matrix.report.model import Triage
from device_matrix.report.verdict_views import comment


def _skip(out: Output, note: str) -> None:
    out.line(f"--pr-comment: {note}")
    out.annotate("warning", note, title="pull request comment")


def comment_on_pull_request(t: Triage, cfg: Config, out: Output, *, repository: str | None) -> None:
    src = t["source"]
    v = t["verdicts"]
    if v is None or src is None or not is_pull_request(src) or src["pull_request"] is None:
        out.line("--pr-comment: this run is no pull request's (or its number is unknown): nothing to comment on")
        return
    number = src["pull_request"]
    repo = repository or cfg.tracker.repository or src["repository"] or ""
    if not REPOSITORY_RE.fullmatch(repo):
        _skip(out, f"no repository to comment in ({repo!r}); pass --repository owner/name")
        return
    try:
        tracker = open_tracker(
            dataclasses.replace(cfg, tracker=dataclasses.replace(cfg.tracker, repository=repo)),
            cfg.results_dir,
            kind="github",
        )
    except TrackerError as exc:
        _skip(out, f"not commented on pull request {number}: {exc.message}; the verdicts are in the step summary")
        return
    assert isinstance(tracker, GitHubTracker)
    run = "/".join(str(x) for x in (src["repository"], src["run_id"], src["run_attempt"], src["commit"]))
    run_url = next((r["run_url"] for r in t["rows"] if r["run_url"]), None)
    body = body_of(comment(t, run_url), run, Redactor(os.environ))
    try:
        outcome = post(tracker, number, body, create=bool(v["items"]))
    except TrackerError as exc:
        _skip(out, f"not commented on pull request {number}: {exc.message}; the verdicts are in the step summary")
        return
    if outcome.action == "skipped":
        _skip(out, outcome.note)
    else:
        out.line(f"--pr-comment: {outcome.note}")
