"""A Ray node's own secrets never leave it: its shards and gang ranks redact before they return (#22).

A cluster of these tests' own: a head without secrets, and a second node started with
secrets in its environment that the driver never sees. The rows ask for a resource only
that node has, so every collection, shard and gang rank runs there.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Project, clean_env
from tests.test_redact_canary import leaks, planted, with_github

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray-secrets")]

FOO_TOKEN = "node-only-foo-value-4242"
NODE_CANARIES = {
    "CANARY_HF": "hf_" + "NodeOnlyHuggingFaceTok" * 2,
    "CANARY_AWS": "AKIA" + "NODEONLYKEY01234",
    "CANARY_URL": "https://node-user:node-pass-5x3@example.invalid/x",
    "CANARY_OPAQUE_TOKEN": "opaque-node-value-27182",
}
SECRET_ROW = "ray_resources = { secret_node = 1 }"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], log: Path, env: dict[str, str], procs: list[subprocess.Popen[bytes]]) -> None:
    ray_cli = Path(sys.executable).parent / "ray"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [str(ray_cli), "start", "--block", "--disable-usage-stats", *args],
            stdout=fh,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    procs.append(proc)
    end = time.monotonic() + 90
    while time.monotonic() < end and proc.poll() is None:
        if "Ray runtime started" in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    pytest.fail(f"ray start did not come up: {log.read_text(errors='replace')[-2000:]}")


@pytest.fixture(scope="module")
def address() -> Iterator[str]:
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'device-matrix[ray]' to run these tests")
    tmp = Path(tempfile.mkdtemp(prefix="dmsec", dir="/tmp"))  # Ray's socket paths must stay short
    port = _free_port()
    env = {**clean_env(), "RAY_USAGE_STATS_ENABLED": "0"}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        head = ["--head", f"--port={port}", "--num-cpus=1", f"--temp-dir={tmp}", "--include-dashboard=false"]
        _start(head, tmp / "head.log", env, procs)
        node = [f"--address=127.0.0.1:{port}", "--num-cpus=2", "--resources", json.dumps({"secret_node": 2})]
        _start(node, tmp / "node.log", {**env, "FOO_TOKEN": FOO_TOKEN, **NODE_CANARIES}, procs)
        yield f"127.0.0.1:{port}"
    finally:
        for proc in reversed(procs):  # each `ray start --block` leads its own process group
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def _ray(p: Project, address: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return p.run("run", "--device", "fixture", "--executor", "ray", "--address", address, *args, env=env)


def test_a_nodes_token_reaches_no_file_of_the_driver(project: Callable[..., Project], address: str) -> None:
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
    project: Callable[..., Project], address: str
) -> None:
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
