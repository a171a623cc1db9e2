"""GitHub issues as a tracker (the protocol of issues/base.py), over :class:`GitHubClient`.

What it reads and writes: our label's listing and a search by marker to find a finding's
issues, the newest issues right before each create (another sync may have filed it), the
lowest number of a race kept and the others closed as its duplicates, cited issues in any
repository in batched GraphQL queries (REST where GraphQL is not served). How it talks to
GitHub (limits, retries, rate limits, conditional reads, pagination) is the client's.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from device_matrix.errors import TrackerError
from device_matrix.issues import client
from device_matrix.issues.base import FINGERPRINT_MARKER, AmbiguousWrite, Cited, CitedState, Issue
from device_matrix.issues.client import PER_PAGE, GitHubClient, GoneError, author

SEARCH_TERMS = 5  # fingerprints OR-ed in one search (GitHub allows at most 5 operators)
GRAPHQL_BATCH = 50  # cited issues per GraphQL query


class GitHubTracker:
    name = "github"

    def __init__(
        self,
        repository: str,
        token: str | None,
        *,
        api_url: str = client.API_URL,
        labels: Sequence[str] = ("device-matrix",),
        write_interval: float = client.WRITE_INTERVAL,
        writes_per_hour: int = client.WRITES_PER_HOUR,
        max_wait: float = client.MAX_WAIT,
        timeout: float = client.TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        if "/" not in repository:
            raise TrackerError(f"repository {repository!r} is not owner/name")
        self.repository = repository
        self.labels = list(labels)
        self.client = GitHubClient(
            token,
            repository=repository,
            api_url=api_url,
            write_interval=write_interval,
            writes_per_hour=writes_per_hour,
            max_wait=max_wait,
            timeout=timeout,
            sleep=sleep,
            clock=clock,
            wall_clock=wall_clock,
            rng=rng,
        )
        self._high_water: int | None = None  # the newest issue number seen so far
        self._baseline: int | None = None  # the newest issue number when this sync began

    # --- reading --------------------------------------------------------------------

    def _issue(self, data: Any, repository: str | None = None) -> Issue:
        repo = repository or self.repository
        number = data.get("number") if isinstance(data, dict) else None
        if not isinstance(number, int) or isinstance(number, bool):
            raise TrackerError(f"GitHub sent an issue without a number ({repo})")
        labels = data.get("labels")
        return Issue(
            key=f"{repo}#{number}",
            number=number,
            title=str(data.get("title") or ""),
            body=str(data.get("body") or ""),
            state="closed" if data.get("state") == "closed" else "open",
            url=str(data["html_url"]) if isinstance(data.get("html_url"), str) else None,
            labels=[
                str(lbl.get("name", "")) if isinstance(lbl, dict) else str(lbl)
                for lbl in (labels if isinstance(labels, list) else [])
            ],
            locked=bool(data.get("locked")),
        )

    def _issues(self, items: Sequence[Any]) -> list[Issue]:
        return [self._issue(d) for d in items if not (isinstance(d, dict) and "pull_request" in d)]

    def list_issues(self) -> list[Issue]:
        """Every issue with our label, open and closed (a listing: search lags writes)."""
        params: dict[str, Any] = {"state": "all", "per_page": PER_PAGE}
        if self.labels:
            params["labels"] = self.labels[0]
        out: list[Issue] = []
        for page in self.client.pages(f"/repos/{self.repository}/issues", params):
            out.extend(self._issues(page))
        return out

    def _newest(self, since: int | None) -> list[Issue]:
        """Issues and pull requests numbered above ``since``, newest first, any label."""
        path = f"/repos/{self.repository}/issues"
        # a full page, so that issues filed meanwhile (which shift the pages) stay on it
        params = {"state": "all", "sort": "created", "direction": "desc", "per_page": 1 if since is None else PER_PAGE}
        found: list[Issue] = []
        for page in self.client.pages(path, params):
            for item in page:
                number = item.get("number") if isinstance(item, dict) else None
                if not isinstance(number, int) or (since is not None and number <= since):
                    return found
                if self._high_water is None or number > self._high_water:
                    self._high_water = number
                if "pull_request" not in item:
                    found.append(self._issue(item))
            if since is None:
                return found
        return found

    def _search(self, fingerprints: Sequence[str]) -> list[Issue]:
        terms = " OR ".join(f'"{FINGERPRINT_MARKER.format(fp)[5:-4]}"' for fp in fingerprints)
        params = {"q": f"repo:{self.repository} is:issue in:body {terms}", "per_page": PER_PAGE}
        out: list[Issue] = []
        for page in self.client.pages("/search/issues", params):
            out.extend(self._issues(page))
        return out

    def find(self, fingerprints: Collection[str]) -> dict[str, list[Issue]]:
        """Our label's listing first (fresh), then a search by marker for the rest.

        The search finds an issue whose label a maintainer replaced; the listing finds one
        filed seconds ago that search has not indexed yet. Either way only the marker that
        ends the body counts.
        """
        wanted = set(fingerprints)
        out: dict[str, list[Issue]] = {}

        def add(issue: Issue) -> None:
            fp = issue.fingerprint
            if fp in wanted and all(i.number != issue.number for i in out.get(fp, [])):
                out.setdefault(fp, []).append(issue)

        self._newest(None)  # the high-water mark for the re-checks before each create
        self._baseline = self._high_water or 0
        for issue in self.list_issues():
            add(issue)
        rest = sorted(wanted - set(out))
        for i in range(0, len(rest), SEARCH_TERMS):
            for issue in self._search(rest[i : i + SEARCH_TERMS]):
                add(issue)
        return out

    def recheck(self, fingerprint: str) -> Issue | None:
        """Issues filed since the last look (any label): another sync may have filed it."""
        for issue in self._newest(self._high_water if self._high_water is not None else 0):
            if issue.fingerprint == fingerprint:
                return issue
        return None

    def settle(self, issue: Issue) -> Issue:
        """Lowest number wins: every sync that raced to file the same fingerprint agrees."""
        fingerprint = issue.fingerprint
        rivals = [
            i
            for i in self._newest(self._baseline or 0)
            if i.fingerprint == fingerprint and i.state == "open" and i.number < issue.number
        ]
        if not rivals:
            return issue
        first = min(rivals, key=lambda i: i.number)
        # closed without its marker, so no later sync links or reopens the duplicate
        path = f"/repos/{self.repository}/issues/{issue.number}"
        self.client.request(
            "PATCH",
            path,
            json={"state": "closed", "state_reason": "duplicate", "body": f"Duplicate of {first.key}."},
        )
        return first

    def transaction(self) -> AbstractContextManager[None]:
        # GitHub has no transactions: concurrent syncs are kept apart by the workflow's
        # concurrency group, and by the re-check right before each create
        return nullcontext()

    def _rest_cited(self, repo: str, number: int, ref: str) -> Cited:
        try:
            resp = self.client.request("GET", f"/repos/{repo}/issues/{number}")
        except GoneError as exc:
            return Cited(ref, "deleted" if exc.status == 410 else "missing")
        issue = self._issue(self.client.json(resp, "GET", f"/repos/{repo}/issues/{number}"), repo)
        return Cited(ref, issue.state, issue.locked, issue.title, issue.url)

    def lookup(self, refs: Sequence[str]) -> dict[str, Cited]:
        """Every cited GitHub issue, in any repository, in batched GraphQL queries."""
        out: dict[str, Cited] = {}
        targets: list[tuple[str, str, str, int]] = []
        for ref in dict.fromkeys(refs):
            where = _github_ref(ref, self.repository)
            if where is None:
                out[ref] = Cited(ref, "unknown")
            else:
                targets.append((ref, *where))
        for i in range(0, len(targets), GRAPHQL_BATCH):
            batch = targets[i : i + GRAPHQL_BATCH]
            answered = self._graphql_cited(batch)
            for ref, owner, name, number in batch:
                out[ref] = answered[ref] if ref in answered else self._rest_cited(f"{owner}/{name}", number, ref)
        return out

    def _graphql_cited(self, batch: Sequence[tuple[str, str, str, int]]) -> dict[str, Cited]:
        fields = "state locked title url"
        parts = []
        for j, (_ref, owner, name, number) in enumerate(batch):
            parts.append(
                f"r{j}: repository(owner: {_gql_string(owner)}, name: {_gql_string(name)}) "
                f"{{ i: issueOrPullRequest(number: {number}) "
                f"{{ ... on Issue {{ {fields} }} ... on PullRequest {{ {fields} }} }} }}"
            )
        query = "query { " + " ".join(parts) + " }"
        try:
            resp = self.client.request("POST", "/graphql", json={"query": query}, read=True)
        except TrackerError:
            return {}  # no GraphQL here (an older server): the REST lookup answers instead
        data = self.client.json(resp, "POST", "/graphql")
        answers = data.get("data") if isinstance(data, dict) else None
        if not isinstance(answers, dict):
            return {}
        out: dict[str, Cited] = {}
        for j, (ref, _owner, _name, _number) in enumerate(batch):
            repo_node = answers.get(f"r{j}")
            node = repo_node.get("i") if isinstance(repo_node, dict) else None
            if not isinstance(node, dict) or not isinstance(node.get("state"), str):
                out[ref] = Cited(ref, "missing")
                continue
            state: CitedState = "open" if node["state"] == "OPEN" else "closed"
            out[ref] = Cited(
                ref,
                state,
                bool(node.get("locked")),
                str(node.get("title") or ""),
                node["url"] if isinstance(node.get("url"), str) else None,
            )
        return out

    # --- writing --------------------------------------------------------------------

    def create(self, title: str, body: str, labels: Sequence[str]) -> Issue:
        path = f"/repos/{self.repository}/issues"
        resp = self.client.request("POST", path, json={"title": title, "body": body, "labels": list(labels)})
        try:
            return self._issue(self.client.json(resp, "POST", path))
        except TrackerError as exc:
            # the request went through but the answer does not say which issue it made
            raise AmbiguousWrite(f"POST {path}: {exc.message}") from None

    def comment(self, issue: Issue, body: str) -> None:
        self.client.request("POST", f"/repos/{self.repository}/issues/{issue.number}/comments", json={"body": body})

    def comments(self, issue: Issue) -> list[str]:
        """The comments on ``issue`` the token's own user wrote: a run's marker copied into
        anyone else's neither stops nor stands for the sync's own comment (#30)."""
        path = f"/repos/{self.repository}/issues/{issue.number}/comments"
        login = self.client.login()
        out: list[str] = []
        for page in self.client.pages(path, {"per_page": PER_PAGE}):
            out.extend(str(c.get("body") or "") for c in page if isinstance(c, dict) and author(c) == login)
        return out

    def reopen(self, issue: Issue) -> Issue:
        path = f"/repos/{self.repository}/issues/{issue.number}"
        resp = self.client.request("PATCH", path, json={"state": "open"})
        return self._issue(self.client.json(resp, "PATCH", path))


def _github_ref(ref: str, default_repo: str) -> tuple[str, str, int] | None:
    """(owner, name, number) of ``#N`` or ``owner/name#N``; None for other trackers' refs."""
    repo, sep, num = ref.partition("#")
    if not sep or not num.isdigit():
        return None
    owner, _, name = (repo or default_repo).partition("/")
    if not owner or not name:
        return None
    return owner, name, int(num)


def _gql_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
