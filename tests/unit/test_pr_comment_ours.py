"""The verdicts comment is the one the token's own user wrote (#30): a copy of its marker
in someone else's comment is never written to, and an edit after the marker does not make
the next triage post a second comment."""

from __future__ import annotations

from device_matrix.issues.github import GitHubTracker
from device_matrix.issues.pr_comment import body_of, post, run_marker
from device_matrix.redact import Redactor
from tests.github_server import FakeGitHub, serve

PR = 3


def _client(gh: FakeGitHub, token: str | None = None) -> GitHubTracker:
    return GitHubTracker(gh.repo, token or gh.token, api_url=gh.url, write_interval=0, sleep=lambda _: None)


def _pull_request(gh: FakeGitHub) -> int:
    for _ in range(PR - 1):
        gh.add_issue("an earlier one", pull_request=True, labels=())
    return gh.add_issue("Make the optimizer faster", pull_request=True, labels=())


def _body(text: str = "**1 new failure from this change**", run: str = "acme/xla/11/1/abc") -> str:
    return body_of(text, run, Redactor({}))


def _patched(gh: FakeGitHub) -> list[str]:
    return [r.path for r in gh.writes() if r.method == "PATCH"]


def test_a_copy_of_the_marker_in_another_users_older_comment_is_never_written_to() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        spoof = gh.add_comment(
            number, "quoting the bot\n\n" + run_marker("acme/xla/1/1/x"), login="mallory", kind="User"
        )
        made = post(_client(gh), number, _body())
        assert made.action == "created" and made.comment_id != spoof
        again = post(_client(gh), number, _body(run="acme/xla/12/1/abc"))
        assert again.action == "updated" and again.comment_id == made.comment_id
        # not even tried: a token that may edit others' comments (a maintainer's) would have
        assert all(not p.endswith(f"/comments/{spoof}") for p in _patched(gh)), _patched(gh)
        assert [r.path for r in gh.received if r.path == "/user"] == ["/user", "/user"]  # once a client


def test_a_maintainers_token_leaves_other_users_comments_alone() -> None:
    with serve() as gh:
        gh.may_edit_any = True  # an admin's token: GitHub lets it edit anyone's comment
        number = _pull_request(gh)
        theirs = gh.add_comment(number, "a bot of theirs\n\n" + run_marker("r0"), login="other-bot[bot]")
        made = post(_client(gh), number, _body())
        assert made.action == "created"
        assert gh.comments[number][0] == "a bot of theirs\n\n" + run_marker("r0")
        assert made.comment_id != theirs and _patched(gh) == []


def test_an_edit_after_the_marker_is_updated_in_place_not_posted_again() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        first = post(_client(gh), number, _body())
        assert first.action == "created"
        (ours,) = [c for c in gh.comment_list if c["id"] == first.comment_id]
        ours["body"] += "\n\n_edited: this one is known flaky, see the thread_"
        again = post(_client(gh), number, _body("**no failures**", run="acme/xla/12/1/def"))
        assert again.action == "updated" and again.comment_id == first.comment_id
        assert gh.comments[number] == [_body("**no failures**", run="acme/xla/12/1/def")]


def test_an_edited_comment_is_found_for_an_update_only_triage_too() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        first = post(_client(gh), number, _body())
        (ours,) = [c for c in gh.comment_list if c["id"] == first.comment_id]
        ours["body"] = "> quoted by an editor\n\n" + ours["body"] + "\n\nmore"
        green = post(_client(gh), number, _body("**no failures: nothing to judge**", run="r2"), create=False)
        assert green.action == "updated" and green.comment_id == first.comment_id
        assert len(gh.comments[number]) == 1


def test_a_token_that_cannot_name_its_user_is_the_actions_bot() -> None:
    # Actions' GITHUB_TOKEN is an app's: GET /user is refused (403); it writes as github-actions[bot]
    with serve() as gh:
        gh.user_refused = True
        number = _pull_request(gh)
        gh.add_comment(number, "spoof\n\n" + run_marker("r0"), login="mallory", kind="User")
        made = post(_client(gh), number, _body())
        again = post(_client(gh), number, _body(run="r3"))
        assert made.action == "created" and again.action == "updated" and again.comment_id == made.comment_id
        assert _patched(gh) == [f"/repos/{gh.repo}/issues/comments/{made.comment_id}"]
