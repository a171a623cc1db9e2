"""#33: disables filed as issues, read: titles and bodies, who may disable, the cache."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from device_matrix.issues.disables import ANSWER_MARKER, CACHE_FILE, read_disables
from device_matrix.issues.ledger import Ledger
from device_matrix.skips import disable_matches, load_disable_list
from device_matrix.skips.tracker import Disable, Unreadable, body_for, disable_list_toml, disabled_for, parse
from tests.builders import client
from tests.github_server import Scripted, serve

DAY = dt.date(2026, 11, 2)
NOW = dt.datetime(2026, 11, 5, 12, 0, tzinfo=dt.timezone.utc)


# --- titles and bodies ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "test", "module"),
    [
        ("DISABLED suites/a/test_a.py::test_x", "suites/a/test_a.py::test_x", None),
        ("DISABLED suites/a/test_a.py::TestA", "suites/a/test_a.py::TestA", None),
        ("DISABLED suites/a/test_a.py", "suites/a/test_a.py", None),
        ("DISABLED suites/a/test_a.py::test_p[cuda-2]", "suites/a/test_a.py::test_p[cuda-2]", None),
        ("DISABLED test_x (__main__.TestY)", "TestY::test_x", "__main__"),
        ("DISABLED test_x (pkg.mod.TestY.test_x)", "TestY::test_x", "pkg.mod"),
    ],
)
def test_a_title_names_a_nodeid_a_prefix_a_parametrized_id_or_unittests_form(
    title: str, test: str, module: str | None
) -> None:
    got = parse("#7", title, "devices: cuda", DAY)
    assert isinstance(got, Disable)
    assert (got.test, got.unittest_module, got.devices) == (test, module, ("cuda",))


def test_the_unittest_form_maps_onto_each_scripts_entry() -> None:
    got = parse("#7", "DISABLED test_x (__main__.TestY)", "", DAY)
    assert isinstance(got, Disable)
    assert got.targets(["test/test_ops.py", "test/test_more.py"]) == [
        "test/test_ops.py::TestY::test_x",
        "test/test_more.py::TestY::test_x",
    ]
    other = parse("#8", "DISABLED test_x (pkg.mod.TestY)", "", DAY)
    assert isinstance(other, Disable) and other.targets(["x.py"]) == ["pkg/mod.py::TestY::test_x"]


def test_devices_come_from_the_body_and_none_means_every_row() -> None:
    two = parse("#1", "DISABLED a.py::t", "Flaky since the bump.\n\nDevices: CUDA, neuron\n", DAY)
    assert isinstance(two, Disable) and two.devices == ("cuda", "neuron")
    upstream = parse("#1", "DISABLED a.py::t", "Platforms: rocm", DAY)
    assert isinstance(upstream, Disable) and upstream.devices == ("rocm",)
    every = parse("#1", "DISABLED a.py::t", "no line naming devices", DAY)
    assert isinstance(every, Disable) and every.devices == ("*",)
    assert parse("#1", "Flaky: a.py::t", "devices: cuda", DAY) is None


@pytest.mark.parametrize(
    ("title", "body", "says"),
    [
        ("DISABLED", "", "names no test"),
        ("DISABLED   ", "", "names no test"),
        ("DISABLED the sum test is flaky", "", "neither a nodeid"),
        ("DISABLED test_sum", "", "neither a nodeid"),
        ("DISABLED a.py::t", "devices: cuda, GPU!", "'gpu!'"),
        ("DISABLED a.py::t", "devices:", "names no device it can read ('')"),
        ("DISABLED a.py::t", "devices: cuda\ndevices: cpu", "more than one"),
    ],
)
def test_a_malformed_title_or_body_is_a_problem_naming_what_could_not_be_read(title: str, body: str, says: str) -> None:
    got = parse("#3", title, body, DAY)
    assert isinstance(got, Unreadable)
    assert says in got.problem


def test_the_list_handed_to_the_child_reads_back_as_tracker_disables(tmp_path: Path) -> None:
    d = parse("#123", "DISABLED suites/a/test_a.py::test_p", "devices: cuda", DAY)
    assert isinstance(d, Disable)
    f = tmp_path / "disabled.toml"
    f.write_text(disable_list_toml([d], []))
    (entry,) = load_disable_list(f)
    assert (entry.source, entry.issue, entry.since, entry.devices) == ("disable_list", "#123", DAY, ("cuda",))
    assert entry.applies_to("cuda", "CPU") and not entry.applies_to("cpu", "CPU")
    assert disable_matches(entry, "suites/a/test_a.py::test_p[2]")
    assert entry.text("cuda") == "[device-matrix] disabled on cuda by #123 since 2026-11-02"


def test_the_disables_reason_reaches_the_skip_and_the_cache(tmp_path: Path) -> None:
    # #42: `issues disable ... --reason R` writes R in the issue's body; the skip it makes says it
    body = body_for(["cuda"], "flaky since the bump\n\nsee CI | run 7 <!-- device-matrix:note -->")
    d = parse("#123", "DISABLED suites/a/test_a.py::test_p", body, DAY)
    assert isinstance(d, Disable) and d.devices == ("cuda",)
    f = tmp_path / "disabled.toml"
    f.write_text(disable_list_toml([d], []))
    (entry,) = load_disable_list(f)
    assert entry.reason == "disabled by #123 since 2026-11-02: flaky since the bump see CI | run 7"
    assert disabled_for(entry.reason, NOW.date()) == "for 3 days (since 2026-11-02)"
    assert Disable.from_json(json.loads(json.dumps(d.as_json()))) == d  # the cache keeps it
    bare = parse("#124", "DISABLED suites/a/test_a.py::test_q", "devices: cuda", DAY)
    assert isinstance(bare, Disable) and bare.reason == ""
    f.write_text(disable_list_toml([bare], []))
    assert load_disable_list(f)[0].reason == "disabled by #124 since 2026-11-02"


# --- the ledger -------------------------------------------------------------------------


def test_the_ledgers_open_disables_are_read_without_making_a_ledger(tmp_path: Path) -> None:
    cache = tmp_path / ".device-matrix"
    none = read_disables(lambda: pytest.fail("no tracker is opened"), cache, ledger=tmp_path / "none.sqlite")
    assert none.disables == [] and none.fresh
    assert not (tmp_path / "none.sqlite").exists()

    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.create("DISABLED a.py::test_x", "devices: cuda", [])
    closed = ledger.create("DISABLED a.py::test_y", "devices: cuda", [])
    ledger.set_state(closed.key, "closed")
    bad = ledger.create("DISABLED whatever is broken", "", [])
    ledger.create("a.py::test_z crashes", "", [])
    got = read_disables(lambda: ledger, cache, ledger=ledger.path)
    assert [(d.issue, d.test, d.devices) for d in got.disables] == [("ledger:1", "a.py::test_x", ("cuda",))]
    assert [u.issue for u in got.unreadable] == [bad.key]
    # the malformed one is answered once, naming what could not be read
    (note,) = ledger.comments(bad)
    assert "could not read" in note and "neither a nodeid" in note
    read_disables(lambda: ledger, cache, ledger=ledger.path)
    assert len(ledger.comments(bad)) == 1


# --- GitHub ---------------------------------------------------------------------------


def test_only_a_writers_disable_applies_and_anyone_elses_is_answered_once(tmp_path: Path) -> None:
    with serve() as gh:
        gh.permissions = {"maintainer": "write", "visitor": "read"}
        ours = gh.add_issue("DISABLED a.py::test_ours", "devices: cuda", labels=())
        by_writer = gh.add_issue("DISABLED a.py::test_x", "devices: cuda", author="maintainer", labels=())
        by_reader = gh.add_issue("DISABLED a.py::test_y", "devices: cpu", author="visitor", labels=())
        by_stranger = gh.add_issue("DISABLED a.py::test_z", "", author="someone", labels=())
        gh.add_issue("DISABLED a.py::test_old", "devices: cuda", state="closed", author="maintainer", labels=())
        tracker = client(gh)
        got = read_disables(lambda: tracker, tmp_path, now=lambda: NOW)
        assert sorted(d.issue for d in got.disables) == [f"#{ours}", f"#{by_writer}"]
        assert {d.issue: d.since for d in got.disables}[f"#{by_writer}"] == DAY
        assert sorted(d.issue for d, _ in got.refused) == [f"#{by_reader}", f"#{by_stranger}"]
        (reader_note,) = gh.comments[by_reader]
        assert "@visitor has read permission" in reader_note and "a.py::test_y" in reader_note
        assert "on cpu" in reader_note and ANSWER_MARKER in reader_note
        assert "@someone has no permission on the repository" in gh.comments[by_stranger][0]
        assert by_writer not in gh.comments
        # the next run: one search, answered 304 from the kept ETag; nobody answered twice
        searches = [r for r in gh.received if r.path.startswith("/search/issues")]
        again = read_disables(lambda: client(gh), tmp_path, now=lambda: NOW)
        assert sorted(d.issue for d in again.disables) == [f"#{ours}", f"#{by_writer}"]
        assert len([r for r in gh.received if r.path.startswith("/search/issues")]) == len(searches) + 1
        assert gh.not_modified >= 1
        assert len(gh.comments[by_reader]) == 1 and len(gh.comments[by_stranger]) == 1
        assert not [r for r in gh.received if "/permission" in r.path and r.path.endswith("visitor/permission")][1:]


def test_a_malformed_disable_on_github_is_answered_with_what_could_not_be_read(tmp_path: Path) -> None:
    with serve() as gh:
        gh.permissions = {"maintainer": "admin"}
        n = gh.add_issue("DISABLED the flaky one", "devices: cuda", author="maintainer", labels=())
        got = read_disables(lambda: client(gh), tmp_path, now=lambda: NOW)
        assert got.disables == [] and [u.issue for u in got.unreadable] == [f"#{n}"]
        (note,) = gh.comments[n]
        assert "could not read" in note and "'the flaky one'" in note
        read_disables(lambda: client(gh), tmp_path, now=lambda: NOW)
        assert len(gh.comments[n]) == 1


@pytest.mark.parametrize(
    "fault",
    [
        Scripted(status=502, body={"message": "bad gateway"}),
        Scripted(status=429, headers={"Retry-After": "100000"}),
        Scripted(delay=1.0),
    ],
    ids=["5xx", "rate-limit", "timeout"],
)
def test_the_tracker_down_gives_the_cached_list_and_says_how_old(tmp_path: Path, fault: Scripted) -> None:
    with serve() as gh:
        gh.permissions = {"maintainer": "write"}
        n = gh.add_issue("DISABLED a.py::test_x", "devices: cuda", author="maintainer", labels=())
        first = read_disables(lambda: client(gh), tmp_path, now=lambda: NOW)
        assert first.fresh and [d.issue for d in first.disables] == [f"#{n}"]
        assert json.loads((tmp_path / CACHE_FILE).read_text())["read_at"] == NOW.isoformat()
        gh.fail_next("GET", "search", *[fault] * 6)
        later = NOW + dt.timedelta(hours=3)
        got = read_disables(lambda: client(gh, timeout=0.3), tmp_path, now=lambda: later)
        assert not got.fresh
        assert [d.issue for d in got.disables] == [f"#{n}"]
        assert got.read_at == NOW
        assert "the tracker could not be read" in got.note and "read 3 h ago" in got.note


def test_no_cache_and_no_tracker_is_an_empty_list_not_a_failure(tmp_path: Path) -> None:
    from device_matrix.errors import TrackerError

    def down() -> Ledger:
        raise TrackerError("no token in $GITHUB_TOKEN")

    got = read_disables(down, tmp_path, now=lambda: NOW)
    assert got.disables == [] and not got.fresh
    assert "no token" in got.note and "no list read before" in got.note


def test_the_reenable_evidence_on_github_closes_the_passing_keeps_the_failing_never_twice() -> None:
    from device_matrix.issues.disables import report_reruns

    with serve() as gh:
        passing = gh.add_issue("DISABLED a.py::test_ok", "devices: cuda", author="maintainer")
        failing = gh.add_issue("DISABLED a.py::test_bad", "devices: cuda", author="maintainer")
        failure = {"nodeid": "a.py::test_bad", "outcome": "crashed", "fingerprint": "sigsegv:abc123", "message": "x"}
        evidence = {
            "rerun": "r1",
            "times": 45,
            "disables": [
                {
                    "issue": f"#{passing}",
                    "test": "a.py::test_ok",
                    "row": "cuda",
                    "runs": 45,
                    "passes": 45,
                    "failures": [],
                },
                {
                    "issue": f"#{failing}",
                    "test": "a.py::test_bad",
                    "row": "cuda",
                    "runs": 45,
                    "passes": 44,
                    "failures": [{"run": 17, "tests": [failure]}],
                },
            ],
        }
        dry = report_reruns(client(gh), evidence, apply=False)
        assert dry == [
            f"  #{passing}: 45 of 45 passed: would close it",
            f"  #{failing}: 44 of 45 passed: would keep it",
        ]
        assert gh.writes() == []
        report_reruns(client(gh), evidence, apply=True)
        assert gh.issues[passing]["state"] == "closed" and gh.issues[failing]["state"] == "open"
        (kept,) = gh.comments[failing]
        assert "44 of 45 passed" in kept and "run 17" in kept and "fingerprint `sigsegv:abc123`" in kept
        assert "45 of 45 passed" in gh.comments[passing][0]
        again = report_reruns(client(gh), evidence, apply=True)
        assert again == [
            f"  #{passing}: closed, not reported",
            f"  #{failing}: this re-enable check is already reported",
        ]
        assert len(gh.comments[failing]) == 1
        # the next check's failure is appended
        report_reruns(client(gh), {**evidence, "rerun": "r2"}, apply=True)
        assert len(gh.comments[failing]) == 2


def test_triage_says_how_long_a_tracker_disable_has_held() -> None:
    from device_matrix.skips.tracker import disabled_for

    reason = "disabled by #123 since 2026-11-02"
    assert disabled_for(reason, dt.date(2026, 11, 5)) == "for 3 days (since 2026-11-02)"
    assert disabled_for(reason, dt.date(2026, 11, 3)) == "for 1 day (since 2026-11-02)"
    assert disabled_for("flaky since 2026-11-02 (#123)", dt.date(2026, 11, 5)) is None


@pytest.mark.parametrize(
    "entry",
    [
        "since = 2026-11-02\n",  # a date without the tracker's source
        "source = 'tracker'\nsince = 'yesterday'\n",
        "source = 'issues'\n",
    ],
)
def test_the_disable_lists_tracker_keys_are_checked(tmp_path: Path, entry: str) -> None:
    from device_matrix.errors import ConfigError

    f = tmp_path / "disabled.toml"
    f.write_text(f"[[disable]]\ntest = 'a.py::t'\ndevices = ['cuda']\nissue = '#1'\n{entry}")
    with pytest.raises(ConfigError):
        load_disable_list(f)


def test_a_tracker_disable_is_a_skip_neither_failing_nor_passing(tmp_path: Path) -> None:
    # the verdicts never count it as failing, the history never as passing (not an xfail,
    # which the history counts as a pass)
    from device_matrix.records.outcomes import FAILING_OUTCOMES, PASSING_OUTCOMES

    d = parse("#5", "DISABLED a.py::t", "", DAY)
    assert isinstance(d, Disable)
    f = tmp_path / "disabled.toml"
    f.write_text(disable_list_toml([d], []))
    (entry,) = load_disable_list(f)
    assert entry.mode == "skip" and entry.devices == ("*",)
    assert "skipped" not in PASSING_OUTCOMES | FAILING_OUTCOMES
