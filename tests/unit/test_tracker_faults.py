"""The GitHub tracker under faults, against tests/github_server.py: no duplicate, ever.

Each test is one fault from the field: an ambiguous create (502 after creating, a reset
connection, the client's timeout, a 201 without a number), a replaced label, marker text
quoted in a skip reason or crash output, concurrent syncs, rate limits, pagination loops,
links to other hosts, recurring crashes on closed issues, cited issues elsewhere.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from device_matrix.errors import EXIT_TRACKER, TrackerError
from device_matrix.findings import skip_key
from device_matrix.issues.base import FINGERPRINT_MARKER
from device_matrix.issues.client import RATE_LIMIT_FLOOR
from device_matrix.issues.sync import SyncReport, sync
from tests import records as R
from tests.builders import TOKEN, FakeTime, client
from tests.github_server import FakeGitHub, Scripted, serve

RUN1 = "https://github.com/acme/xla/actions/runs/1"
RUN2 = "https://github.com/acme/xla/actions/runs/2"


def records(run_url: str = RUN1, *, last_output: list[str] | None = None, reason: str = "known problem") -> Any:
    skip = R.skip_info(None)
    skip["reason"] = reason
    cpu = R.record(
        "cpu",
        [
            R.test("suites/a/test_a.py::test_crash", "crashed", crash_id="cpu-1"),
            R.test("suites/a/test_a.py::test_skip", "skipped", skip=skip),
        ],
        [R.crash("cpu", "suites/a/test_a.py::test_crash", "fp1111", last_output=last_output)],
        run_url=run_url,
    )
    tpu = R.record(
        "tpu",
        [R.test("suites/a/test_a.py::test_crash", "crashed", crash_id="tpu-1")],
        [R.crash("tpu", "suites/a/test_a.py::test_crash", "fp1111")],
        run_url=run_url,
    )
    return [cpu, tpu]


def run_sync(recs: Any, tracker: Any, tmp: Path | None = None, **kw: Any) -> SyncReport:
    return sync(recs, tracker, apply=True, labels=["device-matrix"], results_dir=tmp, **kw)


def per_fingerprint(gh: FakeGitHub, *, open_only: bool = False) -> Counter[str]:
    """How many issues carry each fingerprint's closing marker."""
    from device_matrix.issues.base import FINGERPRINT_END_RE

    counts: Counter[str] = Counter()
    for issue in gh.filed():
        m = FINGERPRINT_END_RE.search(issue["body"] or "")
        if m and (not open_only or issue["state"] == "open"):
            counts[m.group(1)] += 1
    return counts


SKIP_FP = skip_key("suites/a/test_a.py::test_skip", "skip")


@pytest.mark.parametrize(
    "fault",
    [
        Scripted(502, {"message": "Bad Gateway"}, apply=True),
        Scripted(apply=True, reset=True),
        Scripted(201, {"message": "created"}, apply=True, delay=0.6),
        Scripted(201, {"title": "no number"}, apply=True),
    ],
    ids=["502-after-create", "connection-reset", "client-timeout", "201-without-number"],
)
def test_an_ambiguous_create_is_looked_up_not_repeated(fault: Scripted) -> None:
    with serve() as gh:
        gh.fail_next("POST", "issues", fault)
        report = run_sync(records(), client(gh, timeout=0.3))
        assert per_fingerprint(gh) == {"crash-fp1111": 1, SKIP_FP: 1}
        assert len(gh.filed()) == 2
        assert len(report.filed) + len(report.linked) == 2
        # a second sync files nothing either
        again = run_sync(records(), client(gh))
        assert again.filed == [] and len(gh.filed()) == 2


def test_a_create_that_failed_for_real_is_filed_once_after_the_look() -> None:
    with serve() as gh:
        gh.fail_next("POST", "issues", Scripted(502, {"message": "Bad Gateway"}))  # not created
        report = run_sync(records(), client(gh))
        assert len(report.filed) == 2
        assert per_fingerprint(gh) == {"crash-fp1111": 1, SKIP_FP: 1}


def test_three_unclear_answers_end_in_a_tracker_error_and_nothing_twice(tmp_path: Path) -> None:
    with serve() as gh:
        gh.fail_next("POST", "issues", *[Scripted(503, {"message": "down"}) for _ in range(3)])
        with pytest.raises(TrackerError, match="unclear answers") as info:
            run_sync(records(), client(gh), tmp_path)
        assert "found and linked" in (info.value.tip or "")
        assert (tmp_path / "issues.json").is_file()  # what was done is recorded
        run_sync(records(), client(gh), tmp_path)
        assert per_fingerprint(gh) == {"crash-fp1111": 1, SKIP_FP: 1}


def test_a_replaced_label_does_not_cause_a_duplicate() -> None:
    with serve() as gh:
        run_sync(records(), client(gh))
        for issue in gh.issues.values():
            issue["labels"] = [{"name": "triaged"}]  # a maintainer swaps our label
        report = run_sync(records(RUN2), client(gh))
        assert report.filed == []
        assert per_fingerprint(gh) == {"crash-fp1111": 1, SKIP_FP: 1}
        assert any(r.path.startswith("/search/issues") for r in gh.received)


def test_marker_text_in_a_reason_or_in_crash_output_matches_nothing() -> None:
    crash_marker = FINGERPRINT_MARKER.format("crash-fp1111")
    skip_marker = FINGERPRINT_MARKER.format(SKIP_FP)
    with serve() as gh:
        for _ in range(3):
            recs = records(last_output=[skip_marker, "Segmentation fault"], reason=f"see {crash_marker}")
            run_sync(recs, client(gh))
        assert per_fingerprint(gh) == {"crash-fp1111": 1, SKIP_FP: 1}
        assert len(gh.filed()) == 2
        skip_issue = next(i for i in gh.filed() if i["title"].startswith("Disabled"))
        assert crash_marker not in skip_issue["body"]  # quoted as text, not as a hidden marker


def test_a_create_by_another_sync_meanwhile_is_linked_by_the_recheck() -> None:
    with serve() as gh:
        injected: list[int] = []

        def other_sync(method: str, route: str) -> None:
            # another sync files the crash between our search and our create
            if method == "GET" and route == "search" and not injected:
                injected.append(gh.add_issue("Crash (other sync)", "x\n\n" + FINGERPRINT_MARKER.format("crash-fp1111")))

        gh.hooks.append(other_sync)
        report = run_sync(records(), client(gh))
        assert ("crash-fp1111", f"acme/xla#{injected[0]}") in report.linked
        assert per_fingerprint(gh) == {"crash-fp1111": 1, SKIP_FP: 1}


def test_a_race_lost_after_the_recheck_closes_the_later_issue_as_duplicate() -> None:
    with serve() as gh:
        injected: list[int] = []

        def other_sync(method: str, route: str) -> None:
            # the other sync's create lands after our re-check, right before ours
            if method == "POST" and route == "issues" and not injected:
                injected.append(gh.add_issue("Crash (other sync)", "x\n\n" + FINGERPRINT_MARKER.format("crash-fp1111")))

        gh.hooks.append(other_sync)
        report = run_sync(records(), client(gh))
        assert ("crash-fp1111", f"acme/xla#{injected[0]}") in report.linked
        assert per_fingerprint(gh, open_only=True) == {"crash-fp1111": 1, SKIP_FP: 1}
        loser = max(i["number"] for i in gh.filed() if i["title"].startswith("Crash"))
        assert gh.issues[loser]["state"] == "closed" and gh.issues[loser]["state_reason"] == "duplicate"
        assert "<!-- device-matrix" not in gh.issues[loser]["body"]  # never linked or reopened again


def test_three_concurrent_syncs_leave_one_open_issue_per_finding() -> None:
    with serve() as gh:
        barrier = threading.Barrier(3)
        errors: list[BaseException] = []

        def one() -> None:
            c = client(gh)
            barrier.wait()
            try:
                run_sync(records(), c)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        assert per_fingerprint(gh, open_only=True) == {"crash-fp1111": 1, SKIP_FP: 1}
        # and the next sync links those, files nothing
        assert run_sync(records(), client(gh)).filed == []


def test_429_without_retry_after_waits_a_minute_then_longer_with_jitter() -> None:
    with serve() as gh:
        gh.fail_next(
            "GET",
            "issues",
            Scripted(429, {"message": "too many"}),
            Scripted(429, {"message": "too many"}),
        )
        t = FakeTime()
        assert client(gh, t).list_issues() == []
        first, second = t.sleeps
        assert first >= RATE_LIMIT_FLOOR and second >= 2 * RATE_LIMIT_FLOOR
        assert first != RATE_LIMIT_FLOOR and second != 2 * RATE_LIMIT_FLOOR  # jittered
        assert first <= 1.25 * RATE_LIMIT_FLOOR and second <= 2.5 * RATE_LIMIT_FLOOR


def test_a_secondary_limit_403_without_headers_waits_at_least_a_minute() -> None:
    with serve() as gh:
        gh.fail_next("POST", "issues", Scripted(403, {"message": "You have exceeded a secondary rate limit."}))
        t = FakeTime()
        issue = client(gh, t).create("t", "b", [])
        assert issue.number == 1 and len(gh.filed()) == 1
        assert max(t.sleeps) >= RATE_LIMIT_FLOOR


def test_the_hourly_write_budget_stops_cleanly_and_the_next_hour_goes_on(tmp_path: Path) -> None:
    recs = records()
    extra = [R.test(f"suites/a/test_b.py::test_{i}", "skipped", skip=R.skip_info(None)) for i in range(4)]
    recs[0]["tests"].extend(extra)
    with serve() as gh:
        t = FakeTime()
        with pytest.raises(TrackerError, match="hourly write budget") as info:
            run_sync(recs, client(gh, t, writes_per_hour=3), tmp_path)
        assert "again in an hour" in (info.value.tip or "")
        assert len(gh.writes()) == 3
        t.now += 3600
        report = run_sync(recs, client(gh, t, writes_per_hour=3), tmp_path)
        assert len(report.filed) == 3 and len(report.linked) == 3
        assert set(per_fingerprint(gh).values()) == {1} and len(gh.filed()) == 6


def test_a_next_link_to_the_same_page_stops() -> None:
    with serve() as gh:
        for i in range(3):
            gh.add_issue(f"issue {i}")
        gh.link_mode = "self"
        assert len(client(gh).list_issues()) == 3
        assert len([r for r in gh.received if r.method == "GET"]) == 2  # the page, and its loop once


def test_the_token_never_goes_to_a_host_named_in_a_link() -> None:
    with serve() as gh, serve() as other:
        gh.add_issue("one")
        gh.link_mode = "foreign"
        gh.foreign_url = other.url
        with pytest.raises(TrackerError, match="another host") as info:
            client(gh).list_issues()
        assert "api_url" in (info.value.tip or "")
        assert other.received == []
        assert all(r.headers.get("Authorization") == f"Bearer {TOKEN}" for r in gh.received)


def test_a_redirect_to_another_host_carries_no_token() -> None:
    with serve() as gh, serve() as other:
        gh.fail_next("GET", "issues", Scripted(302, {}, {"Location": f"{other.url}/repos/acme/xla/issues"}))
        with pytest.raises(TrackerError, match="401"):  # the other host never saw the token
            client(gh).list_issues()
        assert len(other.received) == 1 and "Authorization" not in other.received[0].headers


def test_a_recurring_crash_reopens_its_closed_issue_with_a_comment_naming_the_run() -> None:
    with serve() as gh:
        run_sync(records(), client(gh))
        crash = next(i for i in gh.filed() if i["title"].startswith("Crash"))
        crash["state"] = "closed"
        report = run_sync(records(RUN2), client(gh))
        assert report.reopened == [f"acme/xla#{crash['number']}"]
        assert crash["state"] == "open"
        assert len(gh.comments[crash["number"]]) == 1 and RUN2 in gh.comments[crash["number"]][0]
        assert report.filed == []
        # the same results again: nothing more
        again = run_sync(records(RUN2), client(gh))
        assert again.reopened == [] and again.commented == [] and len(gh.comments[crash["number"]]) == 1
        # closed by a maintainer after seeing that run: the same results do not reopen it
        crash["state"] = "closed"
        assert run_sync(records(RUN2), client(gh)).reopened == [] and crash["state"] == "closed"


def test_on_recurrence_new_files_a_new_issue_linking_the_old_one() -> None:
    with serve() as gh:
        run_sync(records(), client(gh))
        old = next(i for i in gh.filed() if i["title"].startswith("Crash"))
        old["state"] = "closed"
        report = run_sync(records(RUN2), client(gh), on_recurrence="new")
        new_key = next(k for fp, k in report.filed if fp == "crash-fp1111")
        new = gh.issues[int(new_key.split("#")[1])]
        assert f"acme/xla#{old['number']}" in new["body"] and old["state"] == "closed"
        again = run_sync(records(RUN2), client(gh), on_recurrence="new")
        assert again.filed == [] and ("crash-fp1111", new_key) in again.linked


def test_cited_issues_in_any_repository_in_one_graphql_query() -> None:
    with serve() as gh:
        upstream = gh.add_issue("fixed upstream", state="closed", repo="pytorch/pytorch")
        xla = gh.add_issue("open in xla", repo="openxla/xla", locked=True)
        ours = gh.add_issue("ours", state="closed")
        cited = [f"pytorch/pytorch#{upstream}", f"openxla/xla#{xla}", f"#{ours}", "pytorch/pytorch#999"]
        url = f"https://github.com/pytorch/pytorch/issues/{upstream}"
        tests = [R.test(f"s/t.py::test_{i}", "skipped", skip=R.skip_info(ref)) for i, ref in enumerate([*cited, url])]
        report = run_sync([R.record("cpu", tests)], client(gh))
        graphql = [r for r in gh.received if r.path == "/graphql"]
        assert len(graphql) == 1
        assert report.cited == {
            cited[0]: "closed",
            cited[1]: "open",
            cited[2]: "closed",
            cited[3]: "missing",
        }
        assert sorted(report.reenable) == [
            ("s/t.py::test_0", cited[0]),
            ("s/t.py::test_2", cited[2]),
            ("s/t.py::test_4", cited[0]),  # the URL names the same issue
        ]
        assert report.issues[cited[1]]["locked"] is True
        assert any("can be re-enabled: s/t.py::test_0" in line for line in report.lines())


def test_without_graphql_a_deleted_or_missing_cited_issue_is_a_state_not_an_abort() -> None:
    with serve() as gh:
        gone = gh.add_issue("deleted later", repo="pytorch/pytorch")
        del gh.repos["pytorch/pytorch"][gone]
        gh.deleted.add(("pytorch/pytorch", gone))
        gh.fail_next("POST", "graphql", Scripted(404, {"message": "Not Found"}))
        refs = [f"pytorch/pytorch#{gone}", "openxla/xla#5"]
        tests = [R.test(f"s/t.py::test_{i}", "skipped", skip=R.skip_info(ref)) for i, ref in enumerate(refs)]
        report = run_sync([R.record("cpu", tests), *records()], client(gh))
        assert report.cited == {refs[0]: "deleted", refs[1]: "missing"}
        assert len(report.filed) == 2  # the sync went on


def test_html_instead_of_json_is_a_tracker_error_naming_api_url() -> None:
    with serve() as gh:
        gh.fail_next("GET", "issues", Scripted(200, raw=b"<html>Sign in</html>", content_type="text/html"))
        with pytest.raises(TrackerError, match="not JSON") as info:
            run_sync(records(), client(gh))
        assert "api_url" in (info.value.tip or "")
        assert gh.writes() == []


@pytest.mark.parametrize("token", ["ghp_abc\n", "ghp_\u00e9t\u00e9", "two words"])
def test_a_malformed_token_is_a_tracker_error_that_does_not_echo_it(tmp_path: Path, token: str) -> None:
    from device_matrix.config import load
    from device_matrix.issues import open_tracker

    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix.tracker]\nkind = 'github'\nrepository = 'acme/xla'\n")
    with pytest.raises(TrackerError) as info:
        open_tracker(load(tmp_path, environ={}), tmp_path, environ={"GITHUB_TOKEN": token})
    assert "GITHUB_TOKEN" in info.value.message and token.strip() not in info.value.message


def _github_project(tmp_path: Path, gh: FakeGitHub) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f"[tool.device-matrix.tracker]\nkind = 'github'\nrepository = '{gh.repo}'\napi_url = '{gh.url}'\n"
        "write_interval = 0\n"
    )
    for rec in records():
        (tmp_path / "results" / rec["row"]).mkdir(parents=True)
        (tmp_path / "results" / rec["row"] / "run.json").write_text(json.dumps(rec))


@pytest.mark.parametrize(
    ("fault", "needle"),
    [
        (Scripted(200, raw=b"<html><body>Sign in</body></html>", content_type="text/html"), "not JSON"),
        (Scripted(200, {"message": "a dict, not a list"}), "not a list"),
    ],
    ids=["html", "wrong-shape"],
)
def test_a_bad_answer_through_the_command_line_is_exit_6_with_a_tip(
    tmp_path: Path,
    fault: Scripted,
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from device_matrix.cli import main

    with serve() as gh:
        _github_project(tmp_path, gh)
        gh.fail_next("GET", "issues", fault)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        code = main(["--project", str(tmp_path), "issues", "sync", "--apply"])
        err = capsys.readouterr().err
        assert code == EXIT_TRACKER, err
        assert needle in err and "TIP" in err and "api_url" in err and "Traceback" not in err
        assert gh.writes() == []


def test_the_command_line_sync_files_once_across_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from device_matrix.cli import main

    with serve() as gh:
        _github_project(tmp_path, gh)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        for _ in range(2):
            assert main(["--project", str(tmp_path), "issues", "sync", "--apply"]) == 0, capsys.readouterr().err
        assert per_fingerprint(gh) == {"crash-fp1111": 1, SKIP_FP: 1} and not any(gh.comments.values())
        assert TOKEN not in (tmp_path / "results" / "issues.json").read_text()


def test_the_workflow_runs_one_sync_at_a_time() -> None:
    """README promises it: the issues job runs on the default branch only, in one concurrency
    group that does not cancel a running sync."""
    import yaml

    workflow = yaml.safe_load((Path(__file__).parents[2] / ".github/workflows/reusable.yml").read_text())
    job = workflow["jobs"]["issues"]
    group = job.get("concurrency", workflow.get("concurrency"))
    assert group, "no concurrency group over the issues job"
    text = group if isinstance(group, str) else group["group"]
    # one group per repository, whatever ref or caller started the run
    assert "github.ref" not in text and ("github.repository" in text or "${{" not in text)
    cancel = "" if isinstance(group, str) else str(group.get("cancel-in-progress", False))
    assert "push" not in cancel and "schedule" not in cancel and cancel.lower() != "true"
    condition = " ".join(str(job["if"]).split())
    assert "default_branch" in condition and "pull_request" not in condition
