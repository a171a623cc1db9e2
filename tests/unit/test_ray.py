"""Ray shards: what the driver records when a shard's node is lost twice, read without a cluster.

The part of these tests that starts no process; the rest is in tests/integration/test_ray.py (#41)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import make_project


def test_a_shard_lost_twice_leaves_its_tests_not_run_with_the_nodes_named(tmp_path: Path) -> None:
    from device_matrix import config
    from device_matrix.records.merge import load_spread, merge
    from device_matrix.records.schema import LostNode
    from device_matrix.run.plan import plan_row
    from device_matrix.run.runner import RunOptions
    from device_matrix.spread.door import Silent
    from device_matrix.spread.ray import RayNodes
    from device_matrix.spread.split import Split

    p = make_project(tmp_path, ["passing"])
    cfg = config.load(p.root)
    plan = plan_row(cfg, cfg.row("fixture"), force="local")
    nodes = RayNodes(None, cfg, plan, RunOptions(), Silent(), address="a:1", forwarded=[], nodes=[])
    tests = [f"suites/passing/test_passing.py::test_quick[{i}]" for i in range(4)]
    split = Split.make("fixture", 2, tests, {})
    lost = [
        LostNode(node="a" * 40, name="aaaaaaaaaaaa (host-a, 10.0.0.1)", error="NodeDiedError"),
        LostNode(node="b" * 40, name="bbbbbbbbbbbb (host-b, 10.0.0.2)", error="NodeDiedError"),
    ]
    for k in (1, 2):
        nodes._lost(split, k, lost if k == 2 else [], "it was run twice")
    merged = merge(load_spread(p.results / "fixture"))
    record = merged.record
    assert merged.problems == ()  # every test is accounted for, if only as not_run
    assert record["status"] == "error"
    assert {t["outcome"] for t in record["tests"]} == {"not_run"} and len(record["tests"]) == 4
    lost_tests = [t for t in record["tests"] if "host-a" in (t["message"] or "")]
    assert len(lost_tests) == 2  # shard 2's half
    assert "node bbbbbbbbbbbb (host-b, 10.0.0.2) died while it ran" in lost_tests[0]["message"]
    assert [s["lost"] for s in record["environment"]["shards"]] == [[], [e["name"] for e in lost]]
