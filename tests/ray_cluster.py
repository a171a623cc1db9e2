"""The one local Ray cluster of the test session (#31), a plugin of tests/conftest.py.

A head and a second node, started and stopped here: the suite's own (its own port and
temp dir, each node a ``ray start --block`` process that takes its node down with it), so
other Ray users on the machine are untouched. The tests of a node's own secrets
(tests/integration/test_redact_nodes.py) add a third node to it, started with secrets in its
environment the driver never sees (:func:`secret_node`), not a second cluster.

Registered once, in conftest.py, so each fixture is one per session (per xdist worker):
the tests that use it share the xdist group ``ray``, one worker.
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
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from tests.builders import started, wait_for
from tests.conftest import clean_env

RAY_MISSING = "Ray is not installed: pip install 'device-matrix[ray]' to run these tests"
# the secrets of the node test_redact_nodes.py adds: the driver never has them
FOO_TOKEN = "node-only-foo-value-4242"
NODE_CANARIES = {
    "CANARY_HF": "hf_" + "NodeOnlyHuggingFaceTok" * 2,
    "CANARY_AWS": "AKIA" + "NODEONLYKEY01234",
    "CANARY_URL": "https://node-user:node-pass-5x3@example.invalid/x",
    "CANARY_OPAQUE_TOKEN": "opaque-node-value-27182",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self, address: str, marker: Path, node_tmp: Path, tmp: Path) -> None:
        self.address = address
        self.marker = marker  # its existence: the second node was killed
        self.node_tmp = node_tmp  # TMPDIR of the head and the second node: where their tasks' temp folders go
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def start_node(self, args: list[str], log: Path, env: Mapping[str, str]) -> None:
        """One more ``ray start --block`` node, waited for; ended with the cluster."""
        ray_cli = Path(sys.executable).parent / "ray"
        proc = started([str(ray_cli), "start", "--block", "--disable-usage-stats", *args], log, env=env, session=True)
        self.procs.append(proc)
        wait_for(proc, log, line="Ray runtime started", timeout=90, poll=0.2)

    def leftovers(self) -> list[str]:
        return sorted(p.name for p in self.node_tmp.glob("device-matrix-*"))

    def wait_clean(self, timeout: float = 120) -> None:
        """Every task's temp folder gone (a dead worker's waits on its node for the driver first)."""
        end = time.monotonic() + timeout
        while self.leftovers():
            assert time.monotonic() < end, f"temp folders left on the nodes: {self.leftovers()}"
            time.sleep(0.5)

    def stop(self) -> None:
        # each node's `ray start --block` leads its own process group: ours, and only ours
        for proc in reversed(self.procs):
            _end_group(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            _end_group(proc.pid, signal.SIGKILL)  # whatever of the node is still there
        shutil.rmtree(self.tmp, ignore_errors=True)


def _end_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


# session scope: one cluster per xdist worker, kept while that worker runs other modules'
# tests between these (a module-scoped one was stopped and started again each time). The
# xdist_group keeps them on one worker (the test extra keeps pytest under 9.2, where
# loadgroup does not hold: pytest-xdist#1386).
@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    pytest.importorskip("ray", reason=RAY_MISSING)
    # Ray's socket paths must stay short: a temp dir of its own directly under /tmp
    tmp = Path(tempfile.mkdtemp(prefix="dmray", dir="/tmp"))
    port = free_port()
    env = clean_env()
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    node_tmp = tmp / "t"
    node_tmp.mkdir()
    env["TMPDIR"] = str(node_tmp)
    address = f"127.0.0.1:{port}"
    made = Cluster(address, tmp / "killed", node_tmp, tmp)
    try:
        made.start_node(
            [
                "--head",
                f"--port={port}",
                "--num-cpus=2",
                "--resources",
                json.dumps({"neuron_cores": 2}),
                f"--temp-dir={tmp}",
                "--include-dashboard=false",
            ],
            tmp / "head.log",
            env,
        )
        # the second node kills itself once, from inside a test (suites/ray_kill)
        made.start_node(
            [f"--address={address}", "--num-cpus=2", "--resources", json.dumps({"neuron_cores": 2})],
            tmp / "node2.log",
            {**env, "FIXTURE_KILL_MARKER": str(made.marker)},
        )
        yield made
    finally:
        made.stop()


@pytest.fixture(scope="session")
def secret_node(cluster: Cluster) -> str:
    """The cluster's address, once it has a node with secrets in its environment and the one
    ``secret_node`` resource: a row that asks for it runs every collection, shard and rank there."""
    env = {**clean_env(), "RAY_USAGE_STATS_ENABLED": "0", "FOO_TOKEN": FOO_TOKEN, **NODE_CANARIES}
    args = [f"--address={cluster.address}", "--num-cpus=2", "--resources", json.dumps({"secret_node": 2})]
    cluster.start_node(args, cluster.tmp / "secret-node.log", env)
    return cluster.address
