"""One comment of verdicts on a pull request, updated in place (#25).

The comment is found again by the marker that ends its body; what it guarantees, as the
issue sync does for issues:

* never posted twice: the pull request's comments are read before anything is written; a
  comment already marked is updated: the oldest one that the token's own user wrote (its
  login asked once, #30), wherever in it the marker stands (someone may have edited it after
  the marker); a copy of the marker in anyone else's comment is never written to, even with
  a token that may edit it;
* a create whose answer is unclear (5xx, reset, timeout) is never repeated blindly: the
  comments are read again and a comment carrying this run's marker is taken as made;
* two triages that raced to create: each reads the comments again after creating, and
  the newer one updates the oldest comment of the token's user and deletes its own;
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
from device_matrix.issues.client import PER_PAGE, GitHubClient, GoneError, RefusedError, author
from device_matrix.issues.github import GitHubTracker
from device_matrix.redact import Redactor

MARKER = "<!-- device-matrix:verdicts run={} -->"
MARKER_RE = re.compile(r"<!-- device-matrix:verdicts run=([0-9a-f]{16}) -->")
MARKER_END_RE = re.compile(MARKER_RE.pattern + r"\s*\Z")
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


class PullRequestComments:
    """The comments of one repository's issues and pull requests, over the client."""

    def __init__(self, client: GitHubClient, repository: str) -> None:
        self.client = client
        self.repository = repository

    def listed(self, number: int) -> list[dict[str, Any]]:
        """Every comment on issue or pull request ``number``, oldest first."""
        path = f"/repos/{self.repository}/issues/{number}/comments"
        out: list[dict[str, Any]] = []
        for page in self.client.pages(path, {"per_page": PER_PAGE}):
            out.extend(page)
        return out

    def create(self, number: int, body: str) -> dict[str, Any]:
        """A new comment; an unclear answer raises :class:`AmbiguousWrite` (look before writing again)."""
        path = f"/repos/{self.repository}/issues/{number}/comments"
        resp = self.client.request("POST", path, json={"body": body})
        try:
            data = self.client.json(resp, "POST", path)
        except TrackerError as exc:
            raise AmbiguousWrite(f"POST {path}: {exc.message}") from None
        if not isinstance(data, dict) or not isinstance(data.get("id"), int):
            raise AmbiguousWrite(f"POST {path}: GitHub answered without the comment's id")
        return data

    def update(self, comment_id: int, body: str) -> None:
        self.client.request("PATCH", f"/repos/{self.repository}/issues/comments/{comment_id}", json={"body": body})

    def delete(self, comment_id: int) -> None:
        self.client.request("DELETE", f"/repos/{self.repository}/issues/comments/{comment_id}")

    def ours(self, number: int) -> list[dict[str, Any]]:
        """The comments of verdicts on ``number`` the token's own user wrote, oldest first."""
        return _marked(self.listed(number), self.client.login())


def _marked(comments: list[dict[str, Any]], login: str) -> list[dict[str, Any]]:
    out = [
        c
        for c in comments
        if isinstance(c.get("id"), int)
        and isinstance(c.get("body"), str)
        and author(c) == login
        and MARKER_RE.search(c["body"])
    ]
    return sorted(out, key=lambda c: int(c["id"]))


def post(tracker: GitHubTracker, number: int, body: str, *, create: bool = True) -> CommentOutcome:
    """Create or update the one comment of verdicts on pull request ``number``. ``create``
    False: only update one made before (a pull request with nothing to judge gets no new
    comment, but one that said it was red says it is not any more)."""
    marker = MARKER_END_RE.search(body)
    if marker is None:
        raise ValueError("the body does not end with the verdicts marker (see body_of)")
    comments = PullRequestComments(tracker.client, tracker.repository)
    try:
        return _post(comments, number, body, marker.group(0).strip(), create=create)
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


def _post(comments: PullRequestComments, number: int, body: str, marker: str, *, create: bool) -> CommentOutcome:
    for existing in comments.ours(number):
        if existing["body"] == body:
            return CommentOutcome(
                "unchanged", f"pull request {number}: its verdicts comment is up to date", existing["id"]
            )
        try:
            comments.update(existing["id"], body)
        except GoneError:
            continue  # deleted since it was listed
        return CommentOutcome("updated", f"pull request {number}: verdicts comment updated", existing["id"])
    if not create:
        return CommentOutcome("unchanged", f"pull request {number}: no failures to judge, no comment posted")
    made: dict[str, Any] | None = None
    for _ in range(MAX_TRIES):
        try:
            made = comments.create(number, body)
            break
        except AmbiguousWrite:
            # it may have been made: look before writing again
            again = [c for c in comments.ours(number) if marker in c["body"]]
            if again:
                made = again[0]
                break
    if made is None:
        raise TrackerError(
            f"commenting on pull request {number}: {MAX_TRIES} unclear answers from GitHub",
            tip="Run the triage again: a comment that was made after all is found and updated, not repeated.",
        )
    return _settle(comments, number, made, body)


def _settle(comments: PullRequestComments, number: int, made: dict[str, Any], body: str) -> CommentOutcome:
    """After creating: an older comment of verdicts of the token's user (another triage
    raced us) wins; it gets this body and ours is deleted."""
    mine = int(made["id"])
    rivals = [c for c in comments.ours(number) if c["id"] < mine]
    if not rivals:
        return CommentOutcome("created", f"pull request {number}: verdicts comment posted", mine)
    first = rivals[0]
    comments.update(first["id"], body)
    comments.delete(mine)
    return CommentOutcome(
        "updated", f"pull request {number}: verdicts comment updated (a duplicate removed)", first["id"]
    )
