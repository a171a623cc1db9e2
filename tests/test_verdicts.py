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
from pathlib import Path
from typing import Any

import pytest

from device_matrix.cli.triage import run_triage
from device_matrix.output import Output
from device_matrix.report import html, markdown
from device_matrix.report.model import Triage

FIXTURE = Path(__file__).parent / "fixtures" / "verdicts"
TRUTH: dict[str, Any] = json.loads((FIXTURE / "truth.json").read_text())


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
