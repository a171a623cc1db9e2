"""Verdicts for a pull request (#25): a replayed history with known truth, and the pieces.

tests/fixtures/verdicts holds 30 runs of main over 4 rows and 5 pull requests, written by
its generate.py with the truth built in (truth.json). The main runs are triaged one by one
into a history, as the workflow's pushes do; each pull request is then triaged against it
read-only, and every verdict must be the one the fixture built.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from device_matrix.cli.triage import run_triage
from device_matrix.output import Output
from device_matrix.report import html, markdown
from device_matrix.report.history import Base, LaneRun
from device_matrix.report.model import Triage
from device_matrix.report.verdicts import hidden_rate, interval, judge, judge_test, runs_to_see
from tests import records as R

FIXTURE = Path(__file__).parents[1] / "fixtures" / "verdicts"
TRUTH: dict[str, Any] = json.loads((FIXTURE / "truth.json").read_text())
TRUTH_COMMIT_30 = json.loads((FIXTURE / "runs" / "main-30.json").read_text())["records"][0]["source"]["commit"]


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURE / "runs" / f"{name}.json").read_text())
    return data


def _results(tmp: Path, run: dict[str, Any]) -> Path:
    results = tmp / "results" / run["name"]
    for rec in run["records"]:
        (results / rec["row"]).mkdir(parents=True)
        (results / rec["row"] / "run.json").write_text(json.dumps(rec))
    return results


def _triage(tmp: Path, name: str, history: Path | None, **kw: Any) -> Triage:
    run = _load(name)
    results = _results(tmp, run)
    return run_triage(results, results / "triage", history, run["label"], Output(io.StringIO(), environ={}), **kw)


@pytest.fixture(scope="module")
def main_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The history of main after its 30 pushes, each triaged as the workflow does."""
    tmp = tmp_path_factory.mktemp("main")
    path = tmp / "history.sqlite"
    for i in range(1, 31):
        t = _triage(tmp, f"main-{i:02d}", path)
        assert t["verdicts"] is None  # a push is no pull request: nothing to judge
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("pr", sorted(TRUTH["pull_requests"]))
def test_every_verdict_of_the_replayed_history_is_the_known_truth(pr: str, main_history: Path, tmp_path: Path) -> None:
    before = _digest(main_history)
    t = _triage(tmp_path, pr, main_history, read_only=True)
    assert _digest(main_history) == before  # read-only: the base's history is untouched
    v = t["verdicts"]
    assert v is not None
    got = sorted(
        ({"row": i["row"], "nodeid": i["nodeid"], "verdict": i["verdict"]} for i in v["items"]),
        key=lambda x: (x["row"], x["nodeid"] or ""),
    )
    assert got == TRUTH["pull_requests"][pr]
    for item in v["items"]:
        assert item["evidence"], item


def test_the_line_on_top_counts_the_verdicts(main_history: Path, tmp_path: Path) -> None:
    t = _triage(tmp_path, "pr-101", main_history, read_only=True)
    v = t["verdicts"]
    assert v is not None
    assert v["line"] == ("1 new failure from this change; 4 already failing on main; 1 flaky; 1 on an unstable device")
    assert v["base"] == "main" and v["base_runs"] == 30
    md = markdown.render(t)
    assert "## Verdicts: is this failure mine?" in md and f"**{v['line']}**" in md
    page = html.render(t)
    assert "id='verdicts'" in page and v["line"] in page


def test_the_evidence_of_each_verdict(main_history: Path, tmp_path: Path) -> None:
    t = _triage(tmp_path, "pr-103", main_history, read_only=True)
    v = t["verdicts"]
    assert v is not None
    by = {(i["row"], i["nodeid"]): i for i in v["items"]}
    broken = by[("cpu", "suites/mlp/test_mlp.py::test_loss_is_finite")]
    assert (
        broken["verdict"] == "broken-on-base" and broken["since"] is not None and broken["since"].startswith("main 20")
    )
    assert "same message" in broken["evidence"] and "last 11 run(s)" in broken["evidence"]
    flaky = by[("tpu", "suites/collectives/test_collectives.py::test_allreduce_flaky")]
    assert flaky["rate"] is not None and 0.1 <= flaky["rate"] <= 0.45
    assert flaky["low"] is not None and flaky["high"] is not None and flaky["low"] < flaky["rate"] < flaky["high"]
    assert flaky["runs_needed"] is not None and "90% interval" in flaky["evidence"]
    differently = by[("tpu", "suites/mlp/test_mlp.py::test_loss_is_finite")]
    assert differently["verdict"] == "new" and "differently" in differently["evidence"]
    added = by[("neuron", "suites/mlp/test_new_optimizer.py::test_adamw_step")]
    assert added["verdict"] == "new" and "did not run on main" in added["evidence"]
    t101 = _triage(tmp_path / "101", "pr-101", main_history, read_only=True)
    assert t101["verdicts"] is not None
    new = next(i for i in t101["verdicts"]["items"] if i["verdict"] == "new")
    assert "its last 30 run(s) of cpu passed" in new["evidence"] and "under 7.4%" in new["evidence"]
    assert new["high"] == pytest.approx(1 - 0.1 ** (1 / 30))


def test_the_crash_is_placed_on_the_t4_hosts(main_history: Path, tmp_path: Path) -> None:
    truth = TRUTH["crash"]
    t = _triage(tmp_path, "pr-101", main_history, read_only=True)
    (crash,) = [c for c in t["crashes"] if c["fingerprint"] == truth["fingerprint"]]
    placement = crash["placement"]
    assert placement is not None
    crashes = truth["t4_runs"] + 1  # the pull request's own run is on a T4 host too
    assert placement["crashes"] == crashes and placement["passes"] == truth["a100_runs"]
    named = {s["facet"]: s["values"] for s in placement["separating"]}
    assert named == {k: [v] for k, v in truth["separating"].items()}
    assert placement["text"].startswith(f"{crashes} of {crashes} crashes on Tesla T4 / driver 535.104.05 / CUDA")
    assert f"0 of {truth['a100_runs']} runs elsewhere crashed ({truth['a100_runs']} on NVIDIA A100" in placement["text"]
    assert "host" in placement["also"]  # three T4 hosts also separate it, less simply
    assert placement["clean_rows"] == [["cpu", 31], ["neuron", 31], ["tpu", 31]]
    item = next(i for i in t["verdicts"]["items"] if i["fingerprint"] == truth["fingerprint"])  # type: ignore[index]
    assert item["verdict"] == "device-unstable" and "Tesla T4" in item["evidence"]
    assert "placed by environment: " in markdown.render(t)


def test_a_pull_request_without_any_history_is_unknown(tmp_path: Path) -> None:
    t = _triage(tmp_path, "pr-101", None)
    v = t["verdicts"]
    assert v is not None
    assert {i["verdict"] for i in v["items"]} == {"unknown"}
    assert all("no history of main" in i["evidence"] for i in v["items"])
    assert v["line"].endswith("unknown (no history of main to compare with)")


# --- the pieces ----------------------------------------------------------------------------


def test_the_statistics_the_verdicts_state() -> None:
    # a flake failing a quarter of the time shows within 9 runs 9 times out of 10
    assert [runs_to_see(p) for p in (0.25, 0.10, 0.05, 0.01)] == [9, 22, 45, 230]
    assert runs_to_see(0.0) is None and runs_to_see(1.0) == 1
    assert hidden_rate(30) == pytest.approx(0.0739, abs=1e-4) and hidden_rate(0) == 1.0
    low, high = interval(7, 28)
    assert low < 0.25 < high
    # Clopper-Pearson: each bound is where the binomial tail beyond the count is 5%
    tail_low = sum(math.comb(28, k) * low**k * (1 - low) ** (28 - k) for k in range(7, 29))
    tail_high = sum(math.comb(28, k) * high**k * (1 - high) ** (28 - k) for k in range(8))
    assert tail_low == pytest.approx(0.05, abs=1e-6) and tail_high == pytest.approx(0.05, abs=1e-6)
    assert interval(0, 10)[0] == 0.0 and interval(10, 10)[1] == 1.0


def _base(
    series: dict[tuple[str, str], tuple[str, str | None]],
    *,
    runs: int,
    rows: dict[str, int] | None = None,
    crashes: dict[str, dict[str, list[int]]] | None = None,
) -> Base:
    lane_runs = [LaneRun(i + 1, f"main {i + 1}", "t", "branch:main", None) for i in range(runs)]
    status: dict[str, list[str | None]] = {row: ["passed"] * runs for row in (rows or {"cpu": runs})}
    return Base("branch:main", lane_runs, status, series, crashes or {})


def _judge_one(base: Base, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "row": "cpu",
        "nodeid": "t::a",
        "outcome": "crashed",
        "sig": "crash fp1",
        "fingerprint": "fp1",
        "key": "t::a",
        "anchor": "verdict-1",
    }
    args.update(kw)
    return judge_test(base, **args)


def test_a_crash_on_several_rows_that_comes_and_goes_is_flaky_not_the_device() -> None:
    text = "PCPPCPPCPP"
    crashes = {"fp1": {"cpu": [1, 4, 7], "tpu": [2]}}
    item = _judge_one(_base({("cpu", "t::a"): (text, "crash fp1")}, runs=10, crashes=crashes))
    assert item["verdict"] == "flaky"
    alone = _judge_one(_base({("cpu", "t::a"): (text, "crash fp1")}, runs=10, crashes={"fp1": {"cpu": [1, 4, 7]}}))
    assert alone["verdict"] == "device-unstable"


def test_a_regression_on_the_base_is_broken_there_and_a_long_streak_after_flakes_too() -> None:
    sig = "failed: AssertionError: N != N"
    regression = _judge_one(
        _base({("cpu", "t::a"): ("PPPPPPFF", sig)}, runs=8), outcome="failed", sig=sig, fingerprint=None
    )
    assert regression["verdict"] == "broken-on-base" and regression["since"] == "main 7"
    streak = _judge_one(
        _base({("cpu", "t::a"): ("PFPPFPFFFF", sig)}, runs=10), outcome="failed", sig=sig, fingerprint=None
    )
    assert streak["verdict"] == "broken-on-base"
    short = _judge_one(
        _base({("cpu", "t::a"): ("PFFPPFPPFF", sig)}, runs=10), outcome="failed", sig=sig, fingerprint=None
    )
    assert short["verdict"] == "flaky"


def test_skipped_and_absent_runs_say_nothing() -> None:
    item = _judge_one(
        _base({("cpu", "t::a"): ("SS--NNSS", None)}, runs=8), outcome="failed", sig="failed: x", fingerprint=None
    )
    assert item["verdict"] == "new" and "did not run on main in its last 8 run(s)" in item["evidence"]
    few = _judge_one(
        _base({("cpu", "t::a"): ("--SSP", None)}, runs=5), outcome="failed", sig="failed: x", fingerprint=None
    )
    assert few["verdict"] == "new" and "under 90% of runs" in few["evidence"]  # one pass proves little


def test_a_declared_unstable_row_and_a_row_that_never_reached_its_tests(tmp_path: Path) -> None:
    from device_matrix.cli import main

    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix.devices.cuda]\nunstable = true\n")
    run = _load("pr-105")
    results = _results(tmp_path, run)
    assert main(["--project", str(tmp_path), "triage", str(results), "--no-history", "--fail-on", "new"]) == 0
    data = json.loads((results / "triage" / "triage.json").read_text())
    by = {(i["row"], i["nodeid"]): i for i in data["verdicts"]["items"]}
    crash = by[("cuda", "suites/collectives/test_collectives.py::test_all_gather")]
    assert crash["verdict"] == "device-unstable" and "declared unstable" in crash["evidence"]
    infra = by[("neuron", None)]
    assert infra["verdict"] == "infrastructure" and "errored before its tests" in infra["evidence"]
    assert "container engine podman not found" in infra["evidence"]


def test_a_crash_outside_any_test_is_judged_by_its_fingerprint() -> None:
    base = _base({}, runs=4, crashes={"fpx": {"cpu": [3]}})
    report = judge(_startup_crash_triage(), base, base_ref="main", base_commit=None, stored=lambda n: n)
    (item,) = report["items"]
    assert item["nodeid"] == "(startup)" and item["verdict"] == "broken-on-base"
    never = judge(_startup_crash_triage(), _base({}, runs=4), base_ref="main", base_commit=None)
    assert never["items"][0]["verdict"] == "new" and "never happened on main" in never["items"][0]["evidence"]


def _startup_crash_triage() -> Triage:
    from device_matrix.report.model import build

    crash = R.crash("cpu", None, "fpx")
    crash["phase"] = "startup"
    return build([R.record("cpu", [], [crash], status="crashed")], [], {})  # type: ignore[list-item]


def test_the_crash_issue_says_where_the_crash_happens(main_history: Path, tmp_path: Path) -> None:
    from device_matrix.cli import main
    from device_matrix.issues.ledger import Ledger

    (tmp_path / "pyproject.toml").write_text("")
    results = _results(tmp_path, _load("main-30"))
    args = ["--project", str(tmp_path), "issues", "sync", str(results), "--history", str(main_history)]
    assert main(args) == 0
    fp = TRUTH["crash"]["fingerprint"]
    ledger = Ledger(tmp_path / ".device-matrix" / "ledger.sqlite")  # the project's (#42)
    (issue,) = ledger.find([f"crash-{fp}"])[f"crash-{fp}"]
    crashes = TRUTH["crash"]["t4_runs"]  # main 30 is in the history: counted once
    assert "### Where it happens" in issue.body
    assert f"{crashes} of {crashes} crashes on Tesla T4 / driver 535.104.05" in issue.body
    # without the history, this run alone places nothing (another project: another ledger)
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "pyproject.toml").write_text("")
    again = _results(tmp_path / "alone", _load("main-30"))
    assert main(["--project", str(tmp_path / "alone"), "issues", "sync", str(again), "--no-history"]) == 0
    (alone,) = Ledger(tmp_path / "alone" / ".device-matrix" / "ledger.sqlite").find([f"crash-{fp}"])[f"crash-{fp}"]
    assert "too few to place by environment" in alone.body


def test_rows_against_commits_link_failures_to_their_verdicts(main_history: Path, tmp_path: Path) -> None:
    t = _triage(tmp_path, "pr-101", main_history, read_only=True)
    page = html.render(t)
    start = page.index("<table id='commits-table'>")
    table = page[start : page.index("</table>", start)]
    heads = re.findall(r"<th class='o' data-run='(\d+)' title='([^']*)'>([^<]*)</th>", table)
    assert len(heads) == 20 and heads[-1][1] == "pr 101" and heads[-1][2].endswith("PR 101")
    assert heads[0][1] == "main 12" and heads[-2][1] == "main 30"
    assert heads[-2][2] == TRUTH_COMMIT_30[:7]
    v = t["verdicts"]
    assert v is not None
    anchors = {i["anchor"] for i in v["items"]}
    links = set(re.findall(r"<a href='#(verdict-\d+)'>", table))
    assert links and links <= anchors
    for anchor in links:
        assert f"<tr id='{anchor}'" in page
    # the cuda row's crashes on main link to the device-unstable verdict, its clean runs link nothing
    cuda = next(i for i in v["items"] if i["row"] == "cuda" and i["verdict"] == "device-unstable")
    row = re.search(r"<tr data-row='cuda'>(.*?)</tr>", table)
    assert row is not None and f"href='#{cuda['anchor']}'" in row.group(1)
    cells = re.findall(r"<td class='o [^']*' data-status='([^']*)'>(.*?)</td>", row.group(1))
    assert len(cells) == 20 and {status for status, _ in cells} == {"passed", "failed", "crashed"}
    for status, inner in cells:
        assert inner.startswith("<a href='#verdict-") is (status != "passed"), (status, inner)


def test_a_branch_run_shows_its_own_commits_and_no_verdicts(main_history: Path, tmp_path: Path) -> None:
    copy = tmp_path / "h.sqlite"
    shutil.copy(main_history, copy)
    t = _triage(tmp_path, "main-30", copy)
    page = html.render(t)
    assert "id='verdicts'" not in page and "Rows against commits (main)" in page
    assert "<a href='#verdict" not in page


VERDICT_PROBE = """<script>
(function () {
  var out = {rows: [], links: [], broken: [], line: document.querySelector('.verdict-line').textContent};
  document.querySelectorAll('#verdict-table tbody tr').forEach(function (tr) {
    out.rows.push({id: tr.id, verdict: tr.getAttribute('data-verdict'), height: tr.getBoundingClientRect().height});
  });
  document.querySelectorAll('#commits-table a').forEach(function (a) {
    var id = a.getAttribute('href').slice(1);
    out.links.push(id);
    if (!document.getElementById(id)) { out.broken.push(id); }
  });
  out.columns = document.querySelectorAll('#commits-table thead th.o').length;
  var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script></body>"""
