"""GitHub issues over REST and GraphQL (``requests``), within GitHub's limits.

* writes: at least ``write_interval`` (1 s) apart, and at most ``writes_per_hour`` in any
  hour (GitHub's guidance for content creation); a spent budget ends the sync cleanly;
* rate limits (429, or 403 saying so): ``Retry-After`` when given, else
  ``x-ratelimit-reset`` when the primary limit is spent, else at least a minute, doubling,
  with jitter; more than ``max_wait`` in all gives up cleanly;
* a create or a comment is never retried blindly: a 5xx, a reset connection, a timeout or
  a 2xx without an issue number raise :class:`AmbiguousWrite`, and the sync looks again
  before writing again; reads are retried on 5xx with backoff;
* pagination follows ``Link: rel=next`` only to the configured API origin, never to the
  same page twice, and at most ``MAX_PAGES`` pages;
* the token goes in the ``Authorization`` header of requests to the configured API origin
  only (``requests`` drops it on a redirect to another host).
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import urlsplit

import requests

from device_matrix.errors import TrackerError
from device_matrix.issues.base import FINGERPRINT_MARKER, AmbiguousWrite, Cited, CitedState, Issue

USER_AGENT = "device-matrix"
API_VERSION = "2022-11-28"
MAX_READ_RETRIES = 4
PER_PAGE = 100
MAX_PAGES = 100  # 10,000 issues: beyond that the listing is not trusted to be complete
RATE_LIMIT_FLOOR = 60.0  # GitHub: "wait at least one minute" when it names no time
SEARCH_TERMS = 5  # fingerprints OR-ed in one search (GitHub allows at most 5 operators)
GRAPHQL_BATCH = 50  # cited issues per GraphQL query


class RefusedError(TrackerError):
    """403 that is no rate limit: the token may not do this (a fork's pull request gets a
    read-only token)."""


class GoneError(TrackerError):
    """404 or 410: no such thing (or deleted); a state for a cited issue, an error elsewhere."""

    def __init__(self, status: int, message: str, *, tip: str | None = None) -> None:
        super().__init__(message, tip=tip)
        self.status = status


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


class GitHubTracker:
    name = "github"

    def __init__(
        self,
        repository: str,
        token: str | None,
        *,
        api_url: str = "https://api.github.com",
        labels: Sequence[str] = ("device-matrix",),
        write_interval: float = 1.0,
        writes_per_hour: int = 400,
        max_wait: float = 600.0,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        if "/" not in repository:
            raise TrackerError(f"repository {repository!r} is not owner/name")
        self.repository = repository
        self.api = api_url.rstrip("/")
        self._api_origin = _origin(self.api)
        self.labels = list(labels)
        self.write_interval = write_interval
        self.writes_per_hour = writes_per_hour
        self.max_wait = max_wait
        self.timeout = timeout
        self._sleep = sleep
        self._clock = clock
        self._wall = wall_clock
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not cryptography
        self._last_write: float | None = None
        self._writes: deque[float] = deque()
        self._token = token
        self._high_water: int | None = None  # the newest issue number seen so far
        self._baseline: int | None = None  # the newest issue number when this sync began
        self.session = requests.Session()
        self.session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT,
            }
        )

    # --- transport ------------------------------------------------------------------

    def _before_write(self) -> None:
        now = self._clock()
        while self._writes and now - self._writes[0] >= 3600.0:
            self._writes.popleft()
        if len(self._writes) >= self.writes_per_hour:
            raise TrackerError(
                f"the hourly write budget ({self.writes_per_hour} writes) is spent",
                tip="Run `device-matrix issues sync --apply` again in an hour; what is filed is linked, "
                "nothing is filed twice.",
            )
        if self._last_write is not None:
            gap = now - self._last_write
            if gap < self.write_interval:
                self._sleep(self.write_interval - gap)
        self._writes.append(self._clock())

    def _rate_limit_wait(self, resp: requests.Response, strikes: int) -> float | None:
        """Seconds to wait before retrying, when ``resp`` is a rate limit; else None."""
        if resp.status_code not in (403, 429):
            return None
        retry_after = resp.headers.get("Retry-After")
        if retry_after is not None:
            try:
                return max(0.0, float(retry_after))
            except ValueError:
                pass
        if resp.headers.get("x-ratelimit-remaining") == "0":
            try:
                return max(0.0, float(resp.headers.get("x-ratelimit-reset", "")) - self._wall()) + 1.0
            except ValueError:
                pass
        text = resp.text.lower()
        if resp.status_code == 429 or "rate limit" in text or "abuse" in text:
            # no time named: at least a minute, doubling, with jitter so that parallel
            # clients do not come back in step
            base = RATE_LIMIT_FLOOR * 2.0**strikes
            return base + self._rng.uniform(0.0, base / 4)
        return None

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        url: str | None = None,
        read: bool | None = None,
    ) -> requests.Response:
        """One request. ``read`` (default: GET) may be retried; a POST that is not a read is
        never retried after an unclear outcome, and every non-read spends the write budget."""
        read = method == "GET" if read is None else read
        target = url or f"{self.api}{path}"
        if _origin(target) != self._api_origin:
            raise TrackerError(
                f"GitHub pointed {method} {path} at another host ({urlsplit(target).hostname}); not followed",
                tip="Check api_url under [tool.device-matrix.tracker]; the token is sent to that origin only.",
            )
        headers = {"Authorization": f"Bearer {self._token}"} if self._token else {}
        # a create or a comment applied twice is a duplicate; a PATCH to a state is not
        ambiguous = method == "POST" and not read
        retries = 0
        strikes = 0
        waited = 0.0
        while True:
            if not read:
                self._before_write()
            try:
                resp = self.session.request(
                    method, target, json=json, params=params, timeout=self.timeout, headers=headers
                )
            except requests.RequestException as exc:
                if not read:
                    self._last_write = self._clock()
                if ambiguous:
                    raise AmbiguousWrite(f"{method} {path}: {exc.__class__.__name__}") from None
                if retries < MAX_READ_RETRIES:
                    self._sleep(2.0**retries)
                    retries += 1
                    continue
                raise TrackerError(
                    f"GitHub unreachable at {self.api}: {exc.__class__.__name__}",
                    tip="Check the network, or api_url under [tool.device-matrix.tracker].",
                ) from None
            if not read:
                self._last_write = self._clock()
            wait = self._rate_limit_wait(resp, strikes)
            if wait is not None:
                if waited + wait > self.max_wait:
                    raise TrackerError(
                        f"GitHub rate limit: asked to wait {wait:.0f} s more (already waited {waited:.0f} s)",
                        tip="Run `device-matrix issues sync` again later; nothing is filed twice.",
                    )
                self._sleep(wait)
                waited += wait
                strikes += 1
                continue
            if resp.status_code >= 500:
                if ambiguous:
                    raise AmbiguousWrite(f"{method} {path}: GitHub answered {resp.status_code}")
                if retries < MAX_READ_RETRIES:
                    self._sleep(2.0**retries)
                    retries += 1
                    continue
            self._raise_for(resp, method, path)
            return resp

    def _raise_for(self, resp: requests.Response, method: str, path: str) -> None:
        code = resp.status_code
        if code < 400:
            return
        try:
            data = resp.json()
            message = str(data.get("message", "")) if isinstance(data, dict) else ""
        except ValueError:
            message = resp.text[:200]
        where = f"{method} {path}"
        if code in (404, 410):
            raise GoneError(
                code,
                f"not found ({code}) on {where}: {message}",
                tip=f"Check tracker.repository ({self.repository}) and that the token can see it.",
            )
        if code == 401:
            raise TrackerError(
                f"GitHub rejected the token (401) on {where}: {message}",
                tip="Set a valid token in the variable named by tracker.token_env (GITHUB_TOKEN).",
            )
        if code == 403:
            raise RefusedError(
                f"GitHub refused {where} (403): {message}",
                tip="The token needs `issues: write` on the repository (in Actions: permissions: issues: write).",
            )
        if code == 422:
            raise TrackerError(
                f"GitHub did not accept {where} (422): {message} {_errors(resp)}",
                tip="A label or field was refused; check tracker.labels.",
            )
        raise TrackerError(f"GitHub answered {code} on {where}: {message}")

    def _json(self, resp: requests.Response, method: str, path: str) -> Any:
        try:
            return resp.json()
        except ValueError:
            kind = resp.headers.get("Content-Type", "no content type")
            raise TrackerError(
                f"GitHub answered {resp.status_code} to {method} {path} with a body that is not JSON ({kind})",
                tip=f"Check api_url under [tool.device-matrix.tracker] ({self.api}): it must be the REST API, "
                "not a web page or a proxy's login page.",
            ) from None

    # --- reading --------------------------------------------------------------------

    def _pages(self, path: str, params: Mapping[str, Any]) -> Iterator[list[Any]]:
        """Pages of ``path``; a loop (a link back to a page already read, by address or by
        content) ends the listing, and more than ``MAX_PAGES`` pages is an error."""
        resp = self._request("GET", path, params=params)
        seen_urls = {resp.url}
        seen_items: set[Any] = set()
        for _ in range(MAX_PAGES):
            data = self._json(resp, "GET", path)
            items = data.get("items") if isinstance(data, dict) and "items" in data else data
            if not isinstance(items, list):
                raise TrackerError(
                    f"unexpected answer from GET {path}: not a list",
                    tip=f"Check api_url under [tool.device-matrix.tracker] ({self.api}).",
                )
            keys = {_item_key(x) for x in items}
            if items and keys <= seen_items:
                return  # the same items again: a page read before under another address
            seen_items |= keys
            yield [x for x in items if isinstance(x, dict)]
            nxt = resp.links.get("next", {}).get("url")
            if not nxt or nxt in seen_urls:
                return
            seen_urls.add(nxt)
            resp = self._request("GET", path, url=nxt)
        raise TrackerError(
            f"GET {path}: more than {MAX_PAGES} pages",
            tip="Narrow tracker.labels to the label device-matrix uses, so the listing stays small.",
        )

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
        for page in self._pages(f"/repos/{self.repository}/issues", params):
            out.extend(self._issues(page))
        return out

    def _newest(self, since: int | None) -> list[Issue]:
        """Issues and pull requests numbered above ``since``, newest first, any label."""
        path = f"/repos/{self.repository}/issues"
        # a full page, so that issues filed meanwhile (which shift the pages) stay on it
        params = {"state": "all", "sort": "created", "direction": "desc", "per_page": 1 if since is None else PER_PAGE}
        found: list[Issue] = []
        for page in self._pages(path, params):
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
        for page in self._pages("/search/issues", params):
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
        self._request(
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
            resp = self._request("GET", f"/repos/{repo}/issues/{number}")
        except GoneError as exc:
            return Cited(ref, "deleted" if exc.status == 410 else "missing")
        issue = self._issue(self._json(resp, "GET", f"/repos/{repo}/issues/{number}"), repo)
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
            resp = self._request("POST", "/graphql", json={"query": query}, read=True)
        except TrackerError:
            return {}  # no GraphQL here (an older server): the REST lookup answers instead
        data = self._json(resp, "POST", "/graphql")
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
        resp = self._request("POST", path, json={"title": title, "body": body, "labels": list(labels)})
        try:
            return self._issue(self._json(resp, "POST", path))
        except TrackerError as exc:
            # the request went through but the answer does not say which issue it made
            raise AmbiguousWrite(f"POST {path}: {exc.message}") from None

    def comment(self, issue: Issue, body: str) -> None:
        self._request("POST", f"/repos/{self.repository}/issues/{issue.number}/comments", json={"body": body})

    def comments(self, issue: Issue) -> list[str]:
        path = f"/repos/{self.repository}/issues/{issue.number}/comments"
        out: list[str] = []
        for page in self._pages(path, {"per_page": PER_PAGE}):
            out.extend(str(c.get("body") or "") for c in page if isinstance(c, dict))
        return out

    def reopen(self, issue: Issue) -> Issue:
        path = f"/repos/{self.repository}/issues/{issue.number}"
        resp = self._request("PATCH", path, json={"state": "open"})
        return self._issue(self._json(resp, "PATCH", path))

    # --- a pull request's comments (#25: one comment of verdicts, updated in place) ------

    def pr_comments(self, number: int) -> list[dict[str, Any]]:
        """Every comment on issue or pull request ``number``, oldest first."""
        path = f"/repos/{self.repository}/issues/{number}/comments"
        out: list[dict[str, Any]] = []
        for page in self._pages(path, {"per_page": PER_PAGE}):
            out.extend(page)
        return out

    def create_comment(self, number: int, body: str) -> dict[str, Any]:
        """A new comment; an unclear answer raises :class:`AmbiguousWrite` (look before writing again)."""
        path = f"/repos/{self.repository}/issues/{number}/comments"
        resp = self._request("POST", path, json={"body": body})
        try:
            data = self._json(resp, "POST", path)
        except TrackerError as exc:
            raise AmbiguousWrite(f"POST {path}: {exc.message}") from None
        if not isinstance(data, dict) or not isinstance(data.get("id"), int):
            raise AmbiguousWrite(f"POST {path}: GitHub answered without the comment's id")
        return data

    def update_comment(self, comment_id: int, body: str) -> None:
        self._request("PATCH", f"/repos/{self.repository}/issues/comments/{comment_id}", json={"body": body})

    def delete_comment(self, comment_id: int) -> None:
        self._request("DELETE", f"/repos/{self.repository}/issues/comments/{comment_id}")


def _item_key(item: Any) -> Any:
    if isinstance(item, dict):
        return item.get("id", item.get("number", item.get("body")))
    return repr(item)


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


def _errors(resp: requests.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return ""
    errors = data.get("errors") if isinstance(data, dict) else None
    parts = []
    for e in errors if isinstance(errors, list) else []:
        if isinstance(e, dict):
            parts.append(f"{e.get('resource', '')}.{e.get('field', '')}: {e.get('code', '')}")
    return f"[{'; '.join(parts)}]" if parts else ""
