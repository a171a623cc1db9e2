"""The pull request's comment of verdicts (#25): one, updated in place, never twice, skipped
where the token cannot write; against the GitHub-compatible server and its faults."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from device_matrix.cli import main
from device_matrix.cli.pr_comment import comment_on_pull_request
from device_matrix.cli.triage import run_triage
from device_matrix.config import load
from device_matrix.issues.github import GitHubTracker
from device_matrix.issues.pr_comment import MARKER_END_RE, body_of, post, run_marker
from device_matrix.output import Output
from device_matrix.redact import Redactor
from tests import records as R
from tests.github_server import FakeGitHub, Scripted, serve

TOKEN = "t0ken-for-tests"
PR = 7


def _client(gh: FakeGitHub, token: str = TOKEN) -> GitHubTracker:
    return GitHubTracker(gh.repo, token, api_url=gh.url, write_interval=0, sleep=lambda _: None)


def _pull_request(gh: FakeGitHub) -> int:
    """Pull request number PR (after PR - 1 others)."""
    for _ in range(PR - 1):
        gh.add_issue("an earlier one", pull_request=True, labels=())
    number = gh.add_issue("Make the optimizer faster", pull_request=True, labels=())
    assert number == PR
    return number


def _body(text: str = "### Verdicts\n\n**1 new failure from this change**", run: str = "acme/xla/11/1/abc") -> str:
    return body_of(text, run, Redactor({}))


def test_one_comment_posted_then_updated_in_place() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        gh.add_comment(number, "LGTM", login="maintainer", kind="User")
        first = post(_client(gh), number, _body())
        assert first.action == "created"
        second = post(_client(gh), number, _body("### Verdicts\n\n**no failures**", run="acme/xla/12/1/def"))
        assert second.action == "updated" and second.comment_id == first.comment_id
        bodies = gh.comments[number]
        assert len(bodies) == 2 and bodies[0] == "LGTM" and "no failures" in bodies[1]
        assert MARKER_END_RE.search(bodies[1])
        third = post(_client(gh), number, _body("### Verdicts\n\n**no failures**", run="acme/xla/12/1/def"))
        assert third.action == "unchanged"
        assert [r.method for r in gh.writes()] == ["POST", "PATCH"]


def test_nothing_to_judge_posts_nothing_but_updates_a_comment_made_before() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        quiet = post(_client(gh), number, _body("**no failures: nothing to judge**"), create=False)
        assert quiet.action == "unchanged" and gh.writes() == []
        post(_client(gh), number, _body())
        green = post(_client(gh), number, _body("**no failures: nothing to judge**", run="r2"), create=False)
        assert green.action == "updated" and "no failures" in gh.comments[number][0]


def test_a_marker_in_someone_elses_comment_is_passed_over() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        spoof = gh.add_comment(number, "pwned\n\n" + run_marker("x"), login="mallory", kind="User")
        made = post(_client(gh), number, _body())
        assert made.action == "created" and made.comment_id != spoof
        again = post(_client(gh), number, _body(run="acme/xla/13/1/abc"))
        assert again.action == "updated" and again.comment_id == made.comment_id
        assert gh.comments[number][0] == "pwned\n\n" + run_marker("x")
        assert len(gh.comments[number]) == 2


def test_a_read_only_token_skips_with_a_note_that_says_why() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        outcome = post(_client(gh, gh.readonly_token), number, _body())
        assert outcome.action == "skipped"
        assert "fork" in outcome.note and "step summary" in outcome.note and "403" in outcome.note
        assert gh.comments.get(number) is None


def test_an_unclear_create_that_went_through_is_not_repeated() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        gh.fail_next("POST", "comments", Scripted(502, {"message": "Bad Gateway"}, apply=True))
        outcome = post(_client(gh), number, _body())
        assert outcome.action == "created"
        assert len(gh.comments[number]) == 1


def test_an_unclear_create_that_did_not_go_through_is_made_once() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        gh.fail_next("POST", "comments", Scripted(reset=True), Scripted(502, {"message": "Bad Gateway"}))
        outcome = post(_client(gh), number, _body())
        assert outcome.action == "created"
        assert len(gh.comments[number]) == 1
        assert [r.method for r in gh.writes()] == ["POST", "POST", "POST"]


def test_two_triages_racing_to_create_leave_one_comment() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        raced: list[int] = []

        def rival(method: str, route: str) -> None:
            # another triage of the same pull request creates its comment first
            if method == "POST" and route == "comments" and not raced:
                raced.append(gh.add_comment(number, _body(run="acme/xla/11/2/abc")))

        gh.hooks.append(rival)
        outcome = post(_client(gh), number, _body())
        assert outcome.action == "updated" and outcome.comment_id == raced[0]
        assert gh.comments[number] == [_body()]


def test_the_comment_is_found_on_a_later_page() -> None:
    with serve() as gh:
        number = _pull_request(gh)
        for i in range(130):
            gh.add_comment(number, f"comment {i}", login="someone", kind="User")
        first = post(_client(gh), number, _body())
        assert first.action == "created"
        again = post(_client(gh), number, _body(run="acme/xla/14/1/abc"))
        assert again.action == "updated" and again.comment_id == first.comment_id
        assert len(gh.comments[number]) == 131


@pytest.mark.parametrize(
    ("url", "linked"),
    [
        ("https://github.com/acme/xla/actions/runs/99", True),
        ("https://evil.example/x) [click](https://evil.example", False),
        ("javascript:alert(1)", False),
        ("http://github.com/acme/xla/actions/runs/99", False),
    ],
)
def test_the_comment_links_the_run_only_by_a_plain_address(tmp_path: Path, url: str, linked: bool) -> None:
    from device_matrix.report.verdict_views import comment

    results = _pr_results(tmp_path, "AssertionError: x")
    t = run_triage(results, tmp_path / "out", None, "pr 7", Output(io.StringIO(), environ={}))
    text = comment(t, url)
    assert (f"[the run]({url})" in text) is linked
    assert ("evil.example" in text) is False


def test_a_long_body_is_clipped_and_keeps_its_marker() -> None:
    body = _body("x" * 100 + "\n" + "y" * 70_000)
    assert len(body) <= 65_536 and MARKER_END_RE.search(body) and "clipped" in body


# --- through triage ----------------------------------------------------------------------


def _pr_results(tmp_path: Path, message: str) -> Path:
    results = tmp_path / "results"
    (results / "cpu").mkdir(parents=True)
    rec = R.record("cpu", [R.test("s/t.py::test_@octocat", "failed", message=message), R.test("s/t.py::test_b")])
    rec["source"] = {
        "commit": "a" * 40,
        "head_commit": "b" * 40,
        "ref": "feature",
        "ref_type": "branch",
        "event": "pull_request",
        "event_name": "pull_request",
        "pull_request": PR,
        "base_ref": "main",
        "base_commit": "c" * 40,
        "repository": "acme/xla",
        "run_id": "99",
        "run_attempt": 1,
        "workflow": "device-matrix",
        "origin": "actions",
    }
    (results / "cpu" / "run.json").write_text(json.dumps(rec))
    return results


def _project(tmp_path: Path, gh: FakeGitHub) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.device-matrix.tracker]\nrepository = '{gh.repo}'\napi_url = '{gh.url}'\nwrite_interval = 0\n"
    )


def test_triage_comments_redacted_and_neutralised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serve() as gh:
        _pull_request(gh)
        _project(tmp_path, gh)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        # main fails the test one way; the pull request another, with a message that
        # mentions people, links an issue and holds the token: the evidence quotes it
        history = tmp_path / "h.sqlite"
        main_results = tmp_path / "main"
        (main_results / "cpu").mkdir(parents=True)
        rec = R.record("cpu", [R.test("s/t.py::test_@octocat", "failed", message="AssertionError: old")])
        (main_results / "cpu" / "run.json").write_text(json.dumps(rec))
        quiet = Output(io.StringIO(), environ={})
        run_triage(main_results, tmp_path / "m", history, "main 1", quiet, overrides={"branch": "main"})
        results = _pr_results(tmp_path, "AssertionError: ping @maintainers, supersecretvalue leaked, see #12")
        stream = io.StringIO()
        out = Output(stream, environ={})
        t = run_triage(results, tmp_path / "out", history, "pr 7", out, read_only=True)
        assert t["verdicts"] is not None and t["verdicts"]["items"][0]["verdict"] == "new"
        # the triage did not know the token (it redacts records with its own secrets, #22):
        # the evidence holds it, and the comment, made where the token is known, must not
        assert "supersecretvalue" in t["verdicts"]["items"][0]["evidence"]
        monkeypatch.setenv("DEPLOY_TOKEN", "supersecretvalue")
        comment_on_pull_request(t, load(tmp_path, environ={}), out, repository=None)
        assert "verdicts comment posted" in stream.getvalue()
        (body,) = gh.comments[PR]
        assert "supersecretvalue" not in body and "ping @\u200bmaintainers" in body
        assert "@maintainers" not in body
        assert "`s/t.py::test_@octocat`" in body  # in code: GitHub mentions no one there


def test_triage_on_a_fork_skips_the_comment_and_exits_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve() as gh:
        _pull_request(gh)
        _project(tmp_path, gh)
        monkeypatch.setenv("GITHUB_TOKEN", gh.readonly_token)
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
        summary = tmp_path / "summary.md"
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
        _pr_results(tmp_path, "AssertionError: x")
        code = main(["--project", str(tmp_path), "triage", str(tmp_path / "results"), "--no-history", "--pr-comment"])
        out = capsys.readouterr().out
        assert code == 0
        assert "--pr-comment: not commented on pull request 7: the token may not write there" in out
        assert "::warning title=pull request comment::not commented on pull request 7" in out
        assert gh.comments.get(PR) is None
        # the step summary carries the verdicts all the same
        assert "## Verdicts: is this failure mine?" in summary.read_text()
        assert "**1 unknown (no history of main to compare with)**" in summary.read_text()


def test_triage_without_a_token_skips_the_comment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve() as gh:
        _project(tmp_path, gh)
        monkeypatch.delenv("GITHUB_TOKEN", raising=False)
        _pr_results(tmp_path, "AssertionError: x")
        code = main(["--project", str(tmp_path), "triage", str(tmp_path / "results"), "--no-history", "--pr-comment"])
        assert code == 0
        assert "no token in $GITHUB_TOKEN" in capsys.readouterr().out
        assert gh.received == []


def _gate(tmp_path: Path, *args: str) -> tuple[int, Any]:
    _pr_results(tmp_path, "AssertionError: x")
    code = main(["--project", str(tmp_path), "triage", str(tmp_path / "results"), *args])
    data = json.loads((tmp_path / "results" / "triage" / "triage.json").read_text())
    return code, data


def test_the_gate_turns_red_only_for_the_verdicts_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # no history: the failure is unknown; --fail-on new lets it through, --fail-on unknown does not
    (tmp_path / "pyproject.toml").write_text("")
    code, data = _gate(tmp_path, "--no-history", "--fail-on", "new")
    assert code == 0 and data["verdicts"]["counts"]["unknown"] == 1
    code, _ = _gate(tmp_path / "again", "--no-history", "--fail-on", "new,unknown")
    assert code == 1
    assert "--fail-on new,unknown: 1 unknown" in capsys.readouterr().err


def test_the_gate_on_a_pull_request_with_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    history = tmp_path / "h.sqlite"
    main_results = tmp_path / "main"
    (main_results / "cpu").mkdir(parents=True)
    rec = R.record("cpu", [R.test("s/t.py::test_@octocat"), R.test("s/t.py::test_b")])
    (main_results / "cpu" / "run.json").write_text(json.dumps(rec))
    for i in range(3):
        assert (
            main(
                [
                    "--project",
                    str(tmp_path),
                    "triage",
                    str(main_results),
                    "--history",
                    str(history),
                    "--branch",
                    "main",
                    "--commit",
                    f"{i:07d}",
                ]
            )
            == 0
        )
    code, data = _gate(tmp_path, "--history", str(history), "--history-read-only", "--fail-on", "broken on base,new")
    assert code == 1, capsys.readouterr()
    assert data["verdicts"]["line"] == "1 new failure from this change"
    assert "--fail-on broken-on-base,new: 1 new" in capsys.readouterr().err


def test_a_gate_naming_no_verdict_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    _pr_results(tmp_path, "x")
    code = main(["--project", str(tmp_path), "triage", str(tmp_path / "results"), "--fail-on", "newish"])
    err = capsys.readouterr().err
    assert code == 2 and "'newish' is not a verdict" in err and "TIP" in err
