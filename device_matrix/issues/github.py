"""GitHub issues over REST (``requests``), within GitHub's limits.

* at least ``write_interval`` (1 s) between writes (GitHub's guidance for content creation);
* ``Retry-After`` obeyed on 403/429 (secondary rate limits), ``x-ratelimit-reset`` when the
  primary limit is spent; a wait longer than ``max_wait`` gives up cleanly instead;
* 5xx retried with exponential backoff;
* 401, 403, 404 and 422 each end in a :class:`TrackerError` that says what to do.

The token is read from the environment variable named in the configuration and only ever
put in the ``Authorization`` header.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import requests

from device_matrix.errors import TrackerError
from device_matrix.issues.base import Issue

USER_AGENT = "device-matrix"
API_VERSION = "2022-11-28"
MAX_5XX_RETRIES = 4
PER_PAGE = 100


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
        max_wait: float = 300.0,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if "/" not in repository:
            raise TrackerError(f"repository {repository!r} is not owner/name")
        self.repository = repository
        self.api = api_url.rstrip("/")
        self.labels = list(labels)
        self.write_interval = write_interval
        self.max_wait = max_wait
        self.timeout = timeout
        self._sleep = sleep
        self._clock = clock
        self._wall = wall_clock
        self._last_write: float | None = None
        self.session = requests.Session()
        self.session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": USER_AGENT,
            }
        )
        if token:
            self.session.headers["Authorization"] = f"Bearer {token}"
        self.requests_made = 0

    # --- transport ------------------------------------------------------------------

    def _wait_for_write_slot(self) -> None:
        if self._last_write is not None:
            gap = self._clock() - self._last_write
            if gap < self.write_interval:
                self._sleep(self.write_interval - gap)

    def _rate_limit_wait(self, resp: requests.Response) -> float | None:
        """Seconds to wait before retrying, when ``resp`` is a rate limit; else None."""
        if resp.status_code not in (403, 429):
            return None
        retry_after = resp.headers.get("Retry-After")
        if retry_after is not None:
            try:
                return max(0.0, float(retry_after))
            except ValueError:
                return 60.0
        if resp.headers.get("x-ratelimit-remaining") == "0":
            reset = resp.headers.get("x-ratelimit-reset")
            try:
                return max(0.0, float(reset) - self._wall()) + 1.0 if reset else 60.0
            except ValueError:
                return 60.0
        text = resp.text.lower()
        if "secondary rate limit" in text or "abuse" in text:
            return 60.0
        return None

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        url: str | None = None,
    ) -> requests.Response:
        write = method != "GET"
        attempt_5xx = 0
        waited = 0.0
        while True:
            if write:
                self._wait_for_write_slot()
            try:
                resp = self.session.request(
                    method,
                    url or f"{self.api}{path}",
                    json=json,
                    params=params,
                    timeout=self.timeout,
                )
            except requests.RequestException as exc:
                if attempt_5xx < MAX_5XX_RETRIES:
                    self._sleep(2.0**attempt_5xx)
                    attempt_5xx += 1
                    continue
                raise TrackerError(
                    f"GitHub unreachable at {self.api}: {exc.__class__.__name__}",
                    tip="Check the network, or api_url under [tool.device-matrix.tracker].",
                ) from None
            finally:
                if write:
                    self._last_write = self._clock()
            self.requests_made += 1
            wait = self._rate_limit_wait(resp)
            if wait is not None:
                if waited + wait > self.max_wait:
                    raise TrackerError(
                        f"GitHub rate limit: asked to wait {wait:.0f} s more (already waited {waited:.0f} s)",
                        tip="Run `device-matrix issues sync` again later; nothing is filed twice.",
                    )
                self._sleep(wait)
                waited += wait
                continue
            if resp.status_code >= 500 and attempt_5xx < MAX_5XX_RETRIES:
                self._sleep(2.0**attempt_5xx)
                attempt_5xx += 1
                continue
            self._raise_for(resp, method, path)
            return resp

    def _raise_for(self, resp: requests.Response, method: str, path: str) -> None:
        code = resp.status_code
        if code < 400:
            return
        try:
            message = str(resp.json().get("message", ""))
        except ValueError:
            message = resp.text[:200]
        where = f"{method} {path}"
        if code == 401:
            raise TrackerError(
                f"GitHub rejected the token (401) on {where}: {message}",
                tip="Set a valid token in the variable named by tracker.token_env (GITHUB_TOKEN).",
            )
        if code == 403:
            raise TrackerError(
                f"GitHub refused {where} (403): {message}",
                tip="The token needs `issues: write` on the repository (in Actions: permissions: issues: write).",
            )
        if code == 404:
            raise TrackerError(
                f"not found (404) on {where}: {message}",
                tip=f"Check tracker.repository ({self.repository}) and that the token can see it.",
            )
        if code == 422:
            raise TrackerError(
                f"GitHub did not accept {where} (422): {message} {_errors(resp)}",
                tip="A label or field was refused; check tracker.labels.",
            )
        raise TrackerError(f"GitHub answered {code} on {where}: {message}")

    # --- API ------------------------------------------------------------------------

    def _pages(self, path: str, params: Mapping[str, Any]) -> Iterator[list[dict[str, Any]]]:
        resp = self._request("GET", path, params=params)
        while True:
            data = resp.json()
            if not isinstance(data, list):
                raise TrackerError(f"unexpected answer from GET {path}: not a list")
            yield data
            nxt = resp.links.get("next", {}).get("url")
            if not nxt:
                return
            resp = self._request("GET", path, url=nxt)

    def _issue(self, data: Mapping[str, Any]) -> Issue:
        number = int(data["number"])
        return Issue(
            key=f"{self.repository}#{number}",
            number=number,
            title=str(data.get("title", "")),
            body=str(data.get("body") or ""),
            state="closed" if data.get("state") == "closed" else "open",
            url=data.get("html_url"),
            labels=[str(lbl["name"]) if isinstance(lbl, dict) else str(lbl) for lbl in data.get("labels", [])],
        )

    def list_issues(self) -> list[Issue]:
        """All issues with our label, open and closed (listing, since search lags writes)."""
        params: dict[str, Any] = {"state": "all", "per_page": PER_PAGE}
        if self.labels:
            params["labels"] = self.labels[0]
        out: list[Issue] = []
        for page in self._pages(f"/repos/{self.repository}/issues", params):
            out.extend(self._issue(d) for d in page if "pull_request" not in d)
        return out

    def _number(self, ref: str) -> int | None:
        if ref.startswith("#"):
            return int(ref[1:])
        repo, _, num = ref.partition("#")
        if repo.lower() == self.repository.lower() and num.isdigit():
            return int(num)
        return None

    def get(self, ref: str) -> Issue | None:
        number = self._number(ref)
        if number is None:
            return None
        try:
            resp = self._request("GET", f"/repos/{self.repository}/issues/{number}")
        except TrackerError as exc:
            if "(404)" in exc.message:
                return None
            raise
        return self._issue(resp.json())

    def create(self, title: str, body: str, labels: Sequence[str]) -> Issue:
        resp = self._request(
            "POST",
            f"/repos/{self.repository}/issues",
            json={"title": title, "body": body, "labels": list(labels)},
        )
        return self._issue(resp.json())

    def comment(self, issue: Issue, body: str) -> None:
        self._request("POST", f"/repos/{self.repository}/issues/{issue.number}/comments", json={"body": body})


def _errors(resp: requests.Response) -> str:
    try:
        errors = resp.json().get("errors") or []
    except ValueError:
        return ""
    parts = []
    for e in errors:
        if isinstance(e, dict):
            parts.append(f"{e.get('resource', '')}.{e.get('field', '')}: {e.get('code', '')}")
    return f"[{'; '.join(parts)}]" if parts else ""
