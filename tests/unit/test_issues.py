"""Issue tracker: the GitHub client against a local GitHub-compatible server, the ledger, sync."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from device_matrix.errors import TrackerError
from device_matrix.issues.base import (
    BODY_LIMIT,
    TITLE_LIMIT,
    clip_body,
    clip_title,
    code_block,
    neutralize,
)
from device_matrix.issues.ledger import Ledger
from device_matrix.issues.sync import sync
from tests import records as R
from tests.builders import TOKEN, FakeTime, client
from tests.github_server import Scripted, serve


def test_listing_follows_link_pagination_and_drops_pull_requests() -> None:
    with serve() as gh:
        for i in range(230):
            gh.add_issue(f"issue {i}", pull_request=(i % 10 == 0))
        issues = client(gh).list_issues()
        assert len(issues) == 207
        pages = [r for r in gh.received if r.method == "GET"]
        assert len(pages) == 3
        assert "page=3" in pages[-1].path


def test_create_comment_and_labels() -> None:
    with serve() as gh:
        t = FakeTime()
        c = client(gh, t)
        issue = c.create("Crash: SIGSEGV", "body", ["device-matrix", "crash"])
        assert issue.key == "acme/xla#1" and issue.url == "https://github.com/acme/xla/issues/1"
        c.comment(issue, "seen again")
        assert gh.comments[1] == ["seen again"]
        assert [lbl["name"] for lbl in gh.issues[1]["labels"]] == ["device-matrix", "crash"]
        # at least a second between writes
        assert t.sleeps and t.sleeps[0] == pytest.approx(1.0)
        assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in gh.received)
        assert gh.received[0].headers["X-GitHub-Api-Version"] == "2022-11-28"


def test_secondary_rate_limit_obeys_retry_after() -> None:
    with serve() as gh:
        gh.fail_next(
            "POST",
            "issues",
            Scripted(403, {"message": "You have exceeded a secondary rate limit"}, {"Retry-After": "7"}),
        )
        t = FakeTime()
        issue = client(gh, t).create("t", "b", [])
        assert issue.number == 1
        assert 7.0 in t.sleeps


def test_primary_rate_limit_waits_for_reset() -> None:
    with serve() as gh:
        gh.fail_next(
            "GET",
            "issues",
            Scripted(
                403,
                {"message": "API rate limit exceeded"},
                {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "5030"},
            ),
        )
        t = FakeTime()
        assert client(gh, t).list_issues() == []
        assert t.sleeps == [31.0]


def test_rate_limit_longer_than_max_wait_gives_up_cleanly() -> None:
    with serve() as gh:
        gh.fail_next("POST", "issues", Scripted(429, {"message": "slow down"}, {"Retry-After": "3600"}))
        with pytest.raises(TrackerError, match="rate limit") as info:
            client(gh, max_wait=60).create("t", "b", [])
        assert "nothing is filed twice" in (info.value.tip or "")
        assert gh.issues == {}


def test_server_errors_are_retried_with_backoff() -> None:
    with serve() as gh:
        gh.fail_next(
            "GET",
            "issues",
            Scripted(502, {"message": "Bad Gateway"}),
            Scripted(503, {"message": "down"}),
        )
        t = FakeTime()
        gh.add_issue("x")
        assert len(client(gh, t).list_issues()) == 1
        assert t.sleeps == [1.0, 2.0]


@pytest.mark.parametrize(
    ("status", "needle", "tip"),
    [
        (401, "rejected the token (401)", "valid token"),
        (403, "refused", "issues: write"),
        (404, "not found (404)", "tracker.repository"),
        (422, "did not accept", "label"),
    ],
)
def test_client_errors_say_what_to_do(status: int, needle: str, tip: str) -> None:
    with serve() as gh:
        gh.fail_next(
            "POST",
            "issues",
            Scripted(
                status,
                {
                    "message": "nope",
                    "errors": [{"resource": "Label", "field": "name", "code": "invalid"}],
                },
            ),
        )
        with pytest.raises(TrackerError) as info:
            client(gh).create("t", "b", ["bad label"])
        assert needle in info.value.message
        assert tip in (info.value.tip or "")


def test_wrong_token_is_401() -> None:
    with serve() as gh, pytest.raises(TrackerError, match="401"):
        client(gh, token="wrong").list_issues()


def test_safe_bodies() -> None:
    assert neutralize("ping @octocat and #12") == "ping @\u200boctocat and #\u200b12"
    assert neutralize("mail a@b.c") == "mail a@b.c"
    fenced = code_block("x ``` y ```` z")
    assert fenced.startswith("`````\n") and fenced.endswith("\n`````")
    assert len(clip_title("x" * 1000)) == TITLE_LIMIT
    big = clip_body("y" * (BODY_LIMIT * 2) + "\n<!-- device-matrix:fingerprint=abc -->")
    assert len(big) <= BODY_LIMIT and big.endswith("<!-- device-matrix:fingerprint=abc -->")
    tail = "<!-- device-matrix:seen=abc run=0f0f -->\n<!-- device-matrix:fingerprint=abc -->"
    big = clip_body("y" * (BODY_LIMIT * 2) + "\n\n" + tail)
    assert len(big) <= BODY_LIMIT and big.endswith("\n" + tail)


def _records(token: str = "") -> list[dict[str, Any]]:
    leak = [f"export GITHUB_TOKEN={token}", f"Authorization: Bearer {token}"] if token else None
    cpu = R.record(
        "cpu",
        [
            R.test("suites/a/test_a.py::test_crash", "crashed", crash_id="cpu-1"),
            R.test("suites/a/test_a.py::test_skip", "skipped", skip=R.skip_info(None)),
            R.test("suites/a/test_a.py::test_cited", "skipped", skip=R.skip_info("acme/xla#1")),
        ],
        [
            R.crash(
                "cpu",
                "suites/a/test_a.py::test_crash",
                "fp1111",
                last_output=leak,
                python_stack=f'File "t.py", line 1 in f  # {token}' if token else 'File "t.py", line 1 in f',
            )
        ],
        run_url="https://github.com/acme/xla/actions/runs/1",
    )
    tpu = R.record(
        "tpu",
        [R.test("suites/a/test_a.py::test_crash", "crashed", crash_id="tpu-1")],
        [R.crash("tpu", "suites/a/test_a.py::test_crash", "fp1111")],
        run_url="https://github.com/acme/xla/actions/runs/1",
    )
    return [cpu, tpu]


def test_sync_files_once_links_after_and_never_duplicates(tmp_path: Path) -> None:
    with serve() as gh:
        closed = gh.add_issue("old skip", state="closed")
        assert closed == 1
        c = client(gh)
        recs = _records()
        first = sync(recs, c, apply=True, labels=["device-matrix"], results_dir=tmp_path)  # type: ignore[arg-type]
        assert len(first.filed) == 2  # one crash seen on two rows = one issue; one unlinked skip
        crash_issue = next(k for fp, k in first.filed if fp == "crash-fp1111")
        body = gh.issues[int(crash_issue.split("#")[1])]["body"]
        assert "<!-- device-matrix:fingerprint=crash-fp1111 -->" in body
        assert "cpu, tpu" in body
        assert first.reenable == [("suites/a/test_a.py::test_cited", "acme/xla#1")]
        second = sync(recs, c, apply=True, labels=["device-matrix"], results_dir=tmp_path)  # type: ignore[arg-type]
        assert second.filed == []
        assert sorted(k for _, k in second.linked) == sorted(k for _, k in first.filed)
        # the same results again: the body already names this run, so no "seen again"
        assert second.commented == []
        # a new run: one comment for the finding and the run, naming both rows
        again = _records()
        for rec in again:
            rec["run_url"] = "https://github.com/acme/xla/actions/runs/2"
        third = sync(again, c, apply=True, labels=["device-matrix"], results_dir=tmp_path)  # type: ignore[arg-type]
        assert sorted(third.commented) == [(crash_issue, "cpu"), (crash_issue, "tpu")]
        number = int(crash_issue.split("#")[1])
        assert len(gh.comments[number]) == 1 and "cpu, tpu" in gh.comments[number][0]
        fourth = sync(again, c, apply=True, labels=["device-matrix"], results_dir=tmp_path)  # type: ignore[arg-type]
        assert fourth.commented == [] and fourth.filed == []
        assert len(gh.comments[number]) == 1
        assert len(gh.issues) == 3
        state = json.loads((tmp_path / "issues.json").read_text())
        assert state["links"]["crash-fp1111"] == crash_issue


def test_dry_run_files_nothing() -> None:
    with serve() as gh:
        report = sync(_records(), client(gh), apply=False, labels=["device-matrix"])  # type: ignore[arg-type]
        assert len(report.would_file) == 2
        assert gh.writes() == []


def test_planted_token_never_reaches_the_server(tmp_path: Path) -> None:
    planted = "ghp_" + "PlantedSecret0" * 3
    with serve() as gh:
        sync(
            _records(planted),
            client(gh),
            apply=True,
            labels=["device-matrix"],
            results_dir=tmp_path,
        )  # type: ignore[arg-type]
        sent = "\n".join(r.body for r in gh.received)
        assert gh.writes() and planted not in sent
        assert "[redacted]" in sent
        assert planted not in (tmp_path / "issues.json").read_text()


def test_ledger_seed_ids_states_and_new_ids(tmp_path: Path) -> None:
    seed = tmp_path / "seed.toml"
    seed.write_text(
        '[[issue]]\nid = 4\ntitle = "known"\nbody = "b"\nstate = "closed"\n\n'
        '[[issue]]\nid = 2\ntitle = "open one"\nfingerprint = "skip-abc"\n'
    )
    ledger = Ledger(tmp_path / "l.sqlite", seed=seed)
    assert ledger.get("ledger:4").state == "closed"  # type: ignore[union-attr]
    assert ledger.get("ledger:2").fingerprint == "skip-abc"  # type: ignore[union-attr]
    new = ledger.create("new", "body", [])
    assert new.key == "ledger:5"
    ledger.comment(new, "hello")
    assert ledger.comments(new) == ["hello"]
    ledger.close()
    again = Ledger(tmp_path / "l.sqlite", seed=seed)
    assert [i.key for i in again.list_issues()] == ["ledger:2", "ledger:4", "ledger:5"]


def test_ledger_sync_reports_reenable_for_closed_seed(tmp_path: Path) -> None:
    seed = tmp_path / "seed.toml"
    seed.write_text('[[issue]]\nid = 1\ntitle = "fixed upstream"\nstate = "closed"\n')
    rec = R.record("cpu", [R.test("s/t.py::test_x", "xfailed", skip=R.skip_info("ledger:1", mode="xfail"))])
    report = sync([rec], Ledger(tmp_path / "l.sqlite", seed=seed), apply=True, labels=[], results_dir=tmp_path)  # type: ignore[list-item]
    assert report.reenable == [("s/t.py::test_x", "ledger:1")]
    assert any("can be re-enabled" in line for line in report.lines())
