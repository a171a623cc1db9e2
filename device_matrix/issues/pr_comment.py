"""One comment of verdicts on a pull request, updated in place (#25).

The comment is found again by the marker that ends its body; what it guarantees, as the
issue sync does for issues:

* never posted twice: the pull request's comments are read before anything is written; a
  comment already marked is updated (the oldest one that the token may edit: a marker in
  someone else's comment, which the token cannot edit, is passed over);
* a create whose answer is unclear (5xx, reset, timeout) is never repeated blindly: the
  comments are read again and a comment carrying this run's marker is taken as made;
* two triages that raced to create: each reads the comments again after creating, and
  the newer one updates the oldest comment of the same author and deletes its own;
* a token that may not write (a fork's pull request gets a read-only one): skipped, with a
  note that says so; the step summary still carries the verdicts.

The body is redacted and neutralised (@mentions, #N links, hidden HTML) like an issue body.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any, Literal

from device_matrix.errors import TrackerError
from device_matrix.issues.base import BODY_LIMIT, AmbiguousWrite
from device_matrix.issues.github import GitHubTracker, GoneError, RefusedError
from device_matrix.redact import Redactor

MARKER = "<!-- device-matrix:verdicts run={} -->"
MARKER_END_RE = re.compile(r"<!-- device-matrix:verdicts run=([0-9a-f]{16}) -->\s*\Z")
MAX_TRIES = 3
CLIPPED = "\n\n_(clipped to fit GitHub's comment size; the full verdicts are in the triage report)_\n"


@dataclass(frozen=True)
class CommentOutcome:
    action: Literal["created", "updated", "unchanged", "skipped"]
    note: str
    comment_id: int | None = None


def run_marker(run: str) -> str:
    return MARKER.format(hashlib.sha256(run.encode()).hexdigest()[:16])


def body_of(text: str, run: str, redactor: Redactor) -> str:
    """The comment's body: ``text`` (Markdown already neutralised by its renderer) redacted,
    clipped to GitHub's limit, then the marker."""
    marker = run_marker(run)
    clean = redactor.text(text).rstrip()
    room = BODY_LIMIT - len(marker) - len(CLIPPED) - 8
    if len(clean) > room:
        cut = clean[:room]
        clean = (cut[: cut.rfind("\n")] if "\n" in cut else cut) + CLIPPED
    return f"{clean}\n\n{marker}"


def _marked(comments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [
        c
        for c in comments
        if isinstance(c.get("id"), int) and isinstance(c.get("body"), str) and MARKER_END_RE.search(c["body"])
    ]
    return sorted(out, key=lambda c: int(c["id"]))


def _author(comment: dict[str, Any]) -> str | None:
    user = comment.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) else None


def post(tracker: GitHubTracker, number: int, body: str, *, create: bool = True) -> CommentOutcome:
    """Create or update the one comment of verdicts on pull request ``number``. ``create``
    False: only update one made before (a pull request with nothing to judge gets no new
    comment, but one that said it was red says it is not any more)."""
    marker = MARKER_END_RE.search(body)
    if marker is None:
        raise ValueError("the body does not end with the verdicts marker (see body_of)")
    try:
        return _post(tracker, number, body, marker.group(0).strip(), create=create)
    except RefusedError as exc:
        return CommentOutcome(
            "skipped",
            f"not commented on pull request {number}: the token may not write there ({exc.message}); "
            "a fork's pull request gets a read-only token. The verdicts are in the step summary.",
        )
    except GoneError as exc:
        return CommentOutcome(
            "skipped",
            f"not commented on pull request {number}: {exc.message}. The verdicts are in the step summary.",
        )


def _post(tracker: GitHubTracker, number: int, body: str, marker: str, *, create: bool) -> CommentOutcome:
    refused: list[str] = []
    for existing in _marked(tracker.pr_comments(number)):
        if existing["body"] == body:
            return CommentOutcome(
                "unchanged", f"pull request {number}: its verdicts comment is up to date", existing["id"]
            )
        try:
            tracker.update_comment(existing["id"], body)
        except (RefusedError, GoneError) as exc:
            refused.append(f"comment {existing['id']}: {exc.message}")
            continue  # someone else's comment that ends with our marker: not ours to edit
        return CommentOutcome("updated", f"pull request {number}: verdicts comment updated", existing["id"])
    if not create:
        return CommentOutcome("unchanged", f"pull request {number}: no failures to judge, no comment posted")
    made: dict[str, Any] | None = None
    for _ in range(MAX_TRIES):
        try:
            made = tracker.create_comment(number, body)
            break
        except AmbiguousWrite:
            # it may have been made: look before writing again
            again = [c for c in _marked(tracker.pr_comments(number)) if marker in c["body"]]
            if again:
                made = again[0]
                break
    if made is None:
        raise TrackerError(
            f"commenting on pull request {number}: {MAX_TRIES} unclear answers from GitHub",
            tip="Run the triage again: a comment that was made after all is found and updated, not repeated.",
        )
    return _settle(tracker, number, made, body)


def _settle(tracker: GitHubTracker, number: int, made: dict[str, Any], body: str) -> CommentOutcome:
    """After creating: an older marked comment of the same author (another triage raced us)
    wins; it gets this body and ours is deleted."""
    mine = int(made["id"])
    author = _author(made)
    rivals = [c for c in _marked(tracker.pr_comments(number)) if c["id"] < mine and author and _author(c) == author]
    if not rivals:
        return CommentOutcome("created", f"pull request {number}: verdicts comment posted", mine)
    first = rivals[0]
    tracker.update_comment(first["id"], body)
    tracker.delete_comment(mine)
    return CommentOutcome(
        "updated", f"pull request {number}: verdicts comment updated (a duplicate removed)", first["id"]
    )
