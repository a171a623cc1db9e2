"""Only what the token's own user wrote on an issue is the sync's (#30): a copy of a run's
"seen" marker in someone else's comment neither stops the sync's own comment for that run
nor passes for it after an unclear answer."""

from __future__ import annotations

import hashlib
from typing import Any

from device_matrix.issues.base import SEEN_MARKER
from device_matrix.issues.github import GitHubTracker
from device_matrix.issues.sync import sync
from tests import records as R
from tests.github_server import FakeGitHub, Scripted, serve

RUN1 = "https://github.com/acme/xla/actions/runs/1"
RUN2 = "https://github.com/acme/xla/actions/runs/2"


def _client(gh: FakeGitHub) -> GitHubTracker:
    return GitHubTracker(gh.repo, gh.token, api_url=gh.url, write_interval=0, sleep=lambda _: None)


def _records(run_url: str) -> list[Any]:
    rec = R.record(
        "cpu",
        [R.test("suites/a/test_a.py::test_crash", "crashed", crash_id="cpu-1")],
        [R.crash("cpu", "suites/a/test_a.py::test_crash", "fp1111")],
        run_url=run_url,
    )
    return [rec]


def _seen(gh: FakeGitHub, run: str) -> str:
    (issue,) = gh.filed()
    fp = next(line for line in issue["body"].splitlines() if "fingerprint=" in line).split("=", 1)[1][:-4]
    return SEEN_MARKER.format(fp, hashlib.sha256(run.encode()).hexdigest()[:16])


def test_a_copy_of_a_runs_marker_in_another_users_comment_does_not_stop_ours() -> None:
    with serve() as gh:
        sync(_records(RUN1), _client(gh), apply=True, labels=["device-matrix"])
        (issue,) = gh.filed()
        gh.add_comment(issue["number"], "me too\n\n" + _seen(gh, RUN2), login="mallory", kind="User")
        report = sync(_records(RUN2), _client(gh), apply=True, labels=["device-matrix"])
        assert report.commented == [(f"acme/xla#{issue['number']}", "cpu")]
        mine = [c for c in gh.comment_list if c["user"]["login"] == gh.login]
        assert len(mine) == 1 and RUN2 in mine[0]["body"]


def test_after_an_unclear_comment_only_our_own_comments_say_it_was_made() -> None:
    with serve() as gh:
        sync(_records(RUN1), _client(gh), apply=True, labels=["device-matrix"])
        (issue,) = gh.filed()
        marker = _seen(gh, RUN2)

        def copy_first(method: str, route: str) -> None:
            # someone quotes the marker between our unclear comment and the look after it
            if method == "POST" and route == "comments" and len(gh.comment_list) == 0:
                gh.add_comment(issue["number"], "copied\n\n" + marker, login="mallory", kind="User")

        gh.hooks.append(copy_first)
        gh.fail_next("POST", "comments", Scripted(reset=True))
        sync(_records(RUN2), _client(gh), apply=True, labels=["device-matrix"])
        mine = [c for c in gh.comment_list if c["user"]["login"] == gh.login]
        assert len(mine) == 1 and marker in mine[0]["body"]
