"""The GitHub client under the tracker and the pull request comment (#31): conditional
reads by ETag, and who the token is, against the GitHub-compatible server."""

from __future__ import annotations

from typing import Any

from device_matrix.issues.client import ACTIONS_LOGIN, GitHubClient, Page
from tests.github_server import FakeGitHub, serve


def _client(gh: FakeGitHub, **kwargs: Any) -> GitHubClient:
    return GitHubClient(gh.token, api_url=gh.url, write_interval=0, sleep=lambda _: None, **kwargs)


def _listing(client: GitHubClient, gh: FakeGitHub) -> list[int]:
    params = {"state": "all", "per_page": 2}
    return [i["number"] for page in client.pages(f"/repos/{gh.repo}/issues", params) for i in page]


def test_a_read_again_is_conditional_and_a_304_answers_from_what_was_kept() -> None:
    with serve() as gh:
        for n in range(3):
            gh.add_issue(f"issue {n}")
        client = _client(gh)
        assert _listing(client, gh) == [1, 2, 3]
        assert gh.not_modified == 0
        assert _listing(client, gh) == [1, 2, 3]
        assert gh.not_modified == 2  # both pages
        sent = [r.headers.get("If-None-Match") for r in gh.received]
        assert sent[:2] == [None, None] and all(sent[2:])
        gh.add_issue("issue 3")  # the second page changes: read again in full
        assert _listing(client, gh) == [1, 2, 3, 4]
        assert gh.not_modified == 3


def test_the_etags_kept_can_outlive_a_client() -> None:
    with serve() as gh:
        gh.add_issue("one")
        kept: dict[str, tuple[str, Page]] = {}
        assert _listing(_client(gh, etags=kept), gh) == [1]
        assert kept and gh.not_modified == 0
        assert _listing(_client(gh, etags=kept), gh) == [1]
        assert gh.not_modified == 1


def test_the_tokens_login_is_asked_once() -> None:
    with serve() as gh:
        gh.login = "octo-bot"
        client = _client(gh)
        assert client.login() == "octo-bot" and client.login() == "octo-bot"
        assert [r.path for r in gh.received] == ["/user"]


def test_an_apps_token_that_may_not_read_its_user_is_the_actions_bot() -> None:
    with serve() as gh:
        gh.user_refused = True
        assert _client(gh).login() == ACTIONS_LOGIN
