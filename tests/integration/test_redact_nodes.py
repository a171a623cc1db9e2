"""A Ray node's own secrets never leave it: its shards and gang ranks redact before they return (#22).

The session's Ray cluster (tests/ray_cluster.py) with a node of its own added for these
tests, started with secrets in its environment that the driver never sees (#31: not a
second cluster). The rows ask for a resource only that node has, so every collection,
shard and gang rank runs there.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable

import pytest

from tests.conftest import Project
from tests.integration.test_redact_canary import leaks, planted, with_github
from tests.ray_cluster import FOO_TOKEN, NODE_CANARIES

# the group of the session's one cluster: its tests run on one worker, the cluster's
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

SECRET_ROW = "ray_resources = { secret_node = 1 }"


def _ray(p: Project, address: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return p.run("run", "--device", "fixture", "--executor", "ray", "--address", address, *args, env=env)


def test_a_nodes_token_reaches_no_file_of_the_driver(project: Callable[..., Project], secret_node: str) -> None:
    address = secret_node
    # Seen 4: a gang rank printed the node's token and segfaulted; a parametrize id named it
    gang = '{ name = "leak", module = "suites.node_secrets.worker", world_size = 1 }'
    p = project("node_secrets", row=f"{SECRET_ROW}\ngangs = [{gang}]")
    (p.root / "suites" / "__init__.py").touch()  # `-m suites.node_secrets.worker` finds this one
    proc = _ray(p, address, "--shards", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    (named,) = [n for n in outcomes if "test_named_after_the_nodes_token" in n]
    assert "[[redacted:" in named and outcomes[named] == "passed"  # collected and run on the node
    assert outcomes["gang::leak"] == "crashed"
    (crash,) = [c for c in record["crashes"] if c["nodeid"] == "gang::leak"]
    assert any("[redacted]" in line for line in crash["diagnosis"]["last_output"])
    plan = json.loads((p.results / "fixture" / "shards" / "plan.json").read_text())
    assert named in plan["tests"]
    sync = p.run("issues", "sync", "--apply")
    assert sync.returncode == 0, sync.stdout + sync.stderr
    texts = {"run": proc.stdout + proc.stderr, "sync": sync.stdout + sync.stderr}
    assert leaks(p.root, [FOO_TOKEN], texts) == []
    # the gang's record and rank logs are kept by the shard the split gave it (#23)
    for name in ("shards/1/gangs/leak/rank0.log", "shards/1/gangs/leak/run.json", "run.json", "shards/plan.json"):
        assert (p.results / "fixture" / name).is_file(), name


def test_a_second_nodes_own_canaries_reach_no_file_and_no_request(
    project: Callable[..., Project], secret_node: str
) -> None:
    address = secret_node
    from tests.github_server import serve

    p = project("canary", row=SECRET_ROW)
    with serve() as gh:
        with_github(p, gh.url, gh.repo)
        env = {"GITHUB_TOKEN": gh.token}
        run = _ray(p, address, "--shards", "2", "--reruns", "1", env=env)
        assert run.returncode == 1, run.stdout + run.stderr
        record = p.record()
        assert {t["outcome"] for t in record["tests"]} >= {"passed", "failed", "skipped", "xfailed", "crashed"}
        (param,) = [t for t in record["tests"] if "test_parametrize_id_carries_a_token" in t["nodeid"]]
        assert "[id-[redacted:" in param["nodeid"] and param["outcome"] == "passed"
        sync = p.run("issues", "sync", "--apply", env=env)
        assert sync.returncode == 0, sync.stdout + sync.stderr
        tri = p.run("triage", env=env)
        assert tri.returncode in (0, 1), tri.stdout + tri.stderr
        sent = [f"{r.method} {r.path} {r.headers} {r.body}" for r in gh.received]
    assert gh.received
    outputs = {"run": run.stdout + run.stderr, "sync": sync.stdout + sync.stderr, "triage": tri.stdout + tri.stderr}
    assert leaks(p.root, planted(NODE_CANARIES), outputs, sent) == []
