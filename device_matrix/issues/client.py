"""GitHub's REST and GraphQL API over ``requests``, within GitHub's limits: the transport
under the tracker (issues/github.py) and the pull request comment (issues/pr_comment.py).

* writes: at least ``write_interval`` apart, and at most ``writes_per_hour`` in any hour
  (GitHub's guidance for content creation; the configuration's [tracker] keys, whose
  defaults are defaults.toml's); a spent budget ends the sync cleanly;
* rate limits (429, or 403 saying so): ``Retry-After`` when given, else
  ``x-ratelimit-reset`` when the primary limit is spent, else at least a minute, doubling,
  with jitter; more than ``max_wait`` in all gives up cleanly;
* a create or a comment is never retried blindly: a 5xx, a reset connection or a timeout
  raise :class:`AmbiguousWrite`, and the caller looks again before writing again; reads
  are retried on 5xx with backoff;
* reads are conditional: each answer's ``ETag`` is kept (in ``etags``, which a caller may
  keep between runs) and sent back as ``If-None-Match``; a 304 (which GitHub does not count
  against the rate limit) is answered from what was kept;
* pagination follows ``Link: rel=next`` only to the configured API origin, never to the
  same page twice, and at most ``MAX_PAGES`` pages;
* the token goes in the ``Authorization`` header of requests to the configured API origin
  only (``requests`` drops it on a redirect to another host).
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import requests

from device_matrix.config import packaged_default
from device_matrix.errors import TrackerError
from device_matrix.issues.base import AmbiguousWrite

USER_AGENT = "device-matrix"
API_VERSION = "2022-11-28"
MAX_READ_RETRIES = 4
PER_PAGE = 100
MAX_PAGES = 100  # 10,000 issues: beyond that the listing is not trusted to be complete
RATE_LIMIT_FLOOR = 60.0  # GitHub: "wait at least one minute" when it names no time
# #30: who writes with an app's token (Actions' GITHUB_TOKEN), which may not read /user
ACTIONS_LOGIN = "github-actions[bot]"


class RefusedError(TrackerError):
    """403 that is no rate limit: the token may not do this (a fork's pull request gets a
    read-only token)."""


class GoneError(TrackerError):
    """404 or 410: no such thing (or deleted); a state for a cited issue, an error elsewhere."""

    def __init__(self, status: int, message: str, *, tip: str | None = None) -> None:
        super().__init__(message, tip=tip)
        self.status = status


@dataclass(frozen=True)
class Page:
    """A read's answer: its JSON, where it was read, and the next page's address."""

    data: Any
    url: str
    next_url: str | None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme.lower(), (parts.hostname or "").lower(), port


# the client's limits where its caller gives none (the tracker's own defaults are these):
# those a project may set are defaults.toml's [tracker] keys, read from it (#31: one source)
API_URL: str = packaged_default("tracker", "api_url")
WRITE_INTERVAL: float = packaged_default("tracker", "write_interval")  # seconds between two writes
WRITES_PER_HOUR: int = packaged_default("tracker", "writes_per_hour")
MAX_WAIT = 600.0  # seconds a rate limit may be waited out
TIMEOUT = 30.0  # seconds one request may take


class GitHubClient:
    """One token's requests to one API origin."""

    def __init__(
        self,
        token: str | None,
        *,
        repository: str = "",
        api_url: str = API_URL,
        write_interval: float = WRITE_INTERVAL,
        writes_per_hour: int = WRITES_PER_HOUR,
        max_wait: float = MAX_WAIT,
        timeout: float = TIMEOUT,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
        etags: MutableMapping[str, tuple[str, Page]] | None = None,
    ) -> None:
        self.repository = repository  # the one the tracker names in its tips
        self.api = api_url.rstrip("/")
        self._api_origin = _origin(self.api)
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
        self._login: str | None = None
        self.etags: MutableMapping[str, tuple[str, Page]] = {} if etags is None else etags
        self.session = requests.Session()
        self.session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT,
            }
        )

    # --- who the token is -----------------------------------------------------------

    def login(self) -> str:
        """The login of the token's user, asked once (#30: only what it wrote is ours). An
        app's token may not ask (403): Actions' GITHUB_TOKEN writes as github-actions[bot]."""
        if self._login is None:
            try:
                data = self.get("/user").data
            except (RefusedError, GoneError):
                data = None
            login = data.get("login") if isinstance(data, dict) else None
            self._login = login if isinstance(login, str) and login else ACTIONS_LOGIN
        return self._login

    # --- reading --------------------------------------------------------------------

    def get(self, path: str, params: Mapping[str, Any] | None = None, *, url: str | None = None) -> Page:
        """One GET of JSON, conditional on the ETag of the last answer to the same address."""
        target = url or f"{self.api}{path}" + (f"?{urlencode(params, doseq=True)}" if params else "")
        kept = self.etags.get(target)
        headers = {"If-None-Match": kept[0]} if kept else {}
        resp = self.request("GET", path, url=target, headers=headers)
        if resp.status_code == 304 and kept:
            return kept[1]
        page = Page(self.json(resp, "GET", path), resp.url, resp.links.get("next", {}).get("url"))
        etag = resp.headers.get("ETag")
        if etag:
            self.etags[target] = (etag, page)
        return page

    def pages(self, path: str, params: Mapping[str, Any]) -> Iterator[list[Any]]:
        """Pages of ``path``; a loop (a link back to a page already read, by address or by
        content) ends the listing, and more than ``MAX_PAGES`` pages is an error."""
        page = self.get(path, params)
        seen_urls = {page.url}
        seen_items: set[Any] = set()
        for _ in range(MAX_PAGES):
            data = page.data
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
            nxt = page.next_url
            if not nxt or nxt in seen_urls:
                return
            seen_urls.add(nxt)
            page = self.get(path, url=nxt)
        raise TrackerError(
            f"GET {path}: more than {MAX_PAGES} pages",
            tip="Narrow tracker.labels to the label device-matrix uses, so the listing stays small.",
        )

    def json(self, resp: requests.Response, method: str, path: str) -> Any:
        try:
            return resp.json()
        except ValueError:
            kind = resp.headers.get("Content-Type", "no content type")
            raise TrackerError(
                f"GitHub answered {resp.status_code} to {method} {path} with a body that is not JSON ({kind})",
                tip=f"Check api_url under [tool.device-matrix.tracker] ({self.api}): it must be the REST API, "
                "not a web page or a proxy's login page.",
            ) from None

    # --- any request ----------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Mapping[str, Any] | None = None,
        url: str | None = None,
        read: bool | None = None,
        headers: Mapping[str, str] | None = None,
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
        sent = {**(headers or {}), **({"Authorization": f"Bearer {self._token}"} if self._token else {})}
        # a create or a comment applied twice is a duplicate; a PATCH to a state is not
        ambiguous = method == "POST" and not read
        retries = 0
        strikes = 0
        waited = 0.0
        while True:
            if not read:
                self._before_write()
            try:
                resp = self.session.request(method, target, json=json, timeout=self.timeout, headers=sent)
            except requests.RequestException as exc:
                if not read:
                    self._last_write = self._clock()
                if ambiguous:
                    raise AmbiguousWrite(f"{method} {path}: {exc.__class__.__name__}") from None
                retries = self._retry(retries, f"GitHub unreachable at {self.api}: {exc.__class__.__name__}")
                continue
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
                    retries = self._retry(retries, "")
                    continue
            _raise_for(resp, method, path, self.repository)
            return resp

    def _retry(self, retries: int, unreachable: str) -> int:
        """Back off before another try of a read; out of tries, ``unreachable`` is the error."""
        if retries >= MAX_READ_RETRIES:
            raise TrackerError(unreachable, tip="Check the network, or api_url under [tool.device-matrix.tracker].")
        self._sleep(2.0**retries)
        return retries + 1

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


def author(item: Mapping[str, Any]) -> str | None:
    """The login of who wrote an issue or a comment, as GitHub answers it."""
    user = item.get("user")
    login = user.get("login") if isinstance(user, dict) else None
    return login if isinstance(login, str) else None


def _raise_for(resp: requests.Response, method: str, path: str, repository: str) -> None:
    code = resp.status_code
    if code < 400:
        return
    try:
        data = resp.json()
        message = str(data.get("message", "")) if isinstance(data, dict) else ""
    except ValueError:
        # #30: a cut says so, so that a secret it splits is still known by its piece
        message = resp.text[:200] + ("…" if len(resp.text) > 200 else "")
    where = f"{method} {path}"
    if code in (404, 410):
        raise GoneError(
            code,
            f"not found ({code}) on {where}: {message}",
            tip=f"Check tracker.repository ({repository}) and that the token can see it.",
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


def _item_key(item: Any) -> Any:
    if isinstance(item, dict):
        return item.get("id", item.get("number", item.get("body")))
    return repr(item)


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
