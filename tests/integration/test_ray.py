"""Shards on a real local Ray cluster: a head and a second node, started and stopped by the
suite (tests/ray_cluster.py: one per test session, shared with tests/integration/test_redact_nodes.py).
Skipped with the reason where Ray is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.builders import run_started, wait_for
from tests.conftest import Project, clean_env, make_project
from tests.ray_cluster import RAY_MISSING, Cluster
from tests.ray_cluster import free_port as _free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

NEURON_ROW = "ray_resources = { neuron_cores = 2 }"
LOCAL_RUN = ("run", "--device", "fixture", "--results", "local")


def _ray_run(p: Project, cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return p.run("run", "--device", "fixture", "--executor", "ray", "--address", cluster.address, *args)


def test_concurrency_is_bounded_by_the_nodes_resources(project: Callable[..., Project], cluster: Cluster) -> None:
    p = project("slots", row=NEURON_ROW)
    proc = _ray_run(p, cluster, "--shards", "3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "passed" and record["summary"]["passed"] == 8
    shards = record["environment"]["shards"]
    assert [s["shard"] for s in shards] == [1, 2, 3]
    assert len({s["node"] for s in shards}) == 2  # both nodes worked
    lines = [json.loads(line) for line in (p.root / "slots.jsonl").read_text().splitlines()]
    spans: dict[int, tuple[float, float]] = {}
    for line in lines:
        start, end = spans.get(line["pid"], (line["start"], line["end"]))
        spans[line["pid"]] = (min(start, line["start"]), max(end, line["end"]))
        assert line["neuron"] == "0,1"  # Ray gave each shard both cores of its node
    assert len(spans) == 3
    # 4 neuron_cores in the cluster, 2 per shard: never more than 2 shards at once
    for t, _ in spans.values():
        assert sum(1 for s, e in spans.values() if s <= t < e) <= 2
    # the results came back through the object store into the driver's folder
    for k in (1, 2, 3):
        assert (p.results / f"fixture/shards/{k}/run.json").is_file()
        assert (p.results / f"fixture/shards/{k}/output.log").is_file()


def test_a_segfault_in_a_ray_shard_is_diagnosed_as_locally(
    project: Callable[..., Project], cluster: Cluster, tmp_path: Path
) -> None:
    p = project("segv", row=NEURON_ROW)
    # the local run beside the Ray run: two results folders, one project
    local_log = tmp_path / "local.log"
    local_run = run_started(p, local_log, *LOCAL_RUN)
    proc = _ray_run(p, cluster, "--shards", "2")
    local_run.wait(240)
    local_out = local_log.read_text(errors="replace")
    assert local_run.returncode == 1, local_out
    assert proc.returncode == 1, proc.stdout + proc.stderr
    remote = p.record()
    here: dict[str, Any] = json.loads((p.root / "local/fixture/run.json").read_text())
    assert {t["nodeid"]: t["outcome"] for t in remote["tests"]} == {t["nodeid"]: t["outcome"] for t in here["tests"]}
    (crash,) = remote["crashes"]
    (local_crash,) = here["crashes"]
    for key in ("signal_name", "fingerprint", "hint"):
        assert crash["diagnosis"][key] == local_crash["diagnosis"][key]
    assert crash["nodeid"] == local_crash["nodeid"] and crash["classification"] == "deterministic"
    assert "test_c_dies" in (crash["diagnosis"]["python_stack"] or "")


def test_a_request_no_node_can_satisfy_is_refused_up_front(project: Callable[..., Project], cluster: Cluster) -> None:
    p = project("passing", row="ray_resources = { neuron_cores = 8 }")
    proc = _ray_run(p, cluster, "--shards", "2")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "no node of the Ray cluster" in proc.stderr and "neuron_cores=8" in proc.stderr
    assert "neuron_cores=2" in proc.stderr  # what the nodes have
    assert not (p.results / "fixture" / "shards").exists()


def test_a_task_that_fails_on_its_node_names_the_node(project: Callable[..., Project], cluster: Cluster) -> None:
    p = project("passing", row=NEURON_ROW)
    proc = _ray_run(p, cluster, "--shards", "2", "--python", "/nonexistent/python")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "collecting the row's tests failed on Ray node" in proc.stderr
    assert "/nonexistent/python: no such interpreter" in proc.stderr


# --- without a cluster --------------------------------------------------------------------


def test_nothing_listening_at_the_address_is_an_environment_error(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason=RAY_MISSING)
    p = make_project(tmp_path, ["passing"])
    proc = p.run("run", "--device", "fixture", "--executor", "ray", "--address", f"127.0.0.1:{_free_port()}")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "no Ray cluster answers there" in proc.stderr


def test_without_ray_installed_the_tip_says_how_to_get_it(tmp_path: Path) -> None:
    fake = tmp_path / "no_ray" / "ray"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ray')\n")
    (tmp_path / "project").mkdir()
    p = make_project(tmp_path / "project", ["passing"])
    env = {"PYTHONPATH": f"{tmp_path / 'no_ray'}{os.pathsep}{clean_env()['PYTHONPATH']}"}
    proc = p.run("run", "--device", "fixture", "--executor", "ray", "--address", "auto", env=env)
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "Ray is not installed here" in proc.stderr and "device-matrix[ray]" in proc.stderr


# --- gangs: N ranks started together, one test ---------------------------------------------


def _gang_row(*gangs: str) -> str:
    return "ray_resources = { neuron_cores = 1 }\ngangs = [" + ", ".join(gangs) + "]"


def _gang(name: str, world: int, *args: str, xfail: str = "") -> str:
    listed = ", ".join(f'"{a}"' for a in args)
    extra = f", xfail = {xfail}" if xfail else ""
    return f'{{ name = "{name}", module = "suites.gang.worker", world_size = {world}, args = [{listed}]{extra} }}'


def _gang_project(root: Path, *gangs: str) -> Project:
    p = make_project(root, ["gang"], row=_gang_row(*gangs))
    # a package, so `-m suites.gang.worker` finds it before any other `suites` package on the path
    (p.root / "suites" / "__init__.py").touch()
    return p


def _test(record: dict[str, Any], nodeid: str) -> dict[str, Any]:
    (test,) = [t for t in record["tests"] if t["nodeid"] == nodeid]
    return test


class GangRun:
    def __init__(self, p: Project, proc: subprocess.CompletedProcess[str], seen: Path) -> None:
        self.p, self.proc, self.seen = p, proc, seen
        self.record = p.record()

    def gang(self, name: str) -> dict[str, Any]:
        (gang,) = [g for g in self.record["environment"]["gangs"] if g["name"] == name]
        return gang


XFAIL = '{ devices = ["cpu"], issue = "ledger:4", reason = "one world per process", raises = ["WrongWorld"] }'


@pytest.fixture(scope="session")
def gangs(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> GangRun:
    """One row, five gangs, one run: each test below reads what it asserts from it."""
    seen = tmp_path_factory.mktemp("seen")
    p = _gang_project(
        tmp_path_factory.mktemp("gangs"),
        _gang("sum", 3, "--iterations", "1000", "--out", str(seen)),
        _gang("seg", 2, "--segv-rank", "1"),
        _gang("expected", 2, "--iterations", "5", "--raise", "WrongWorld", xfail=XFAIL),
        _gang("other", 2, "--iterations", "5", "--raise", "OtherError", xfail=XFAIL),
        _gang("fixed", 2, "--iterations", "5", xfail=XFAIL),
        _gang("daemon", 2, "--iterations", "5", "--daemon", str(seen / "daemon.pid")),
    )
    return GangRun(p, _ray_run(p, cluster, "--shards", "2"), seen)


def test_a_gang_starts_together_with_the_launcher_variables_and_is_one_test(gangs: GangRun) -> None:
    record, seen = gangs.record, gangs.seen
    assert gangs.proc.returncode == 1, gangs.proc.stdout + gangs.proc.stderr  # the failing gangs below
    assert record["summary"]["total"] == 2 + 6  # the row's 2 tests, one test per gang
    assert record["summary"]["passed"] == 4 and _test(record, "gang::sum")["outcome"] == "passed"
    gang = gangs.gang("sum")
    ranks = {r["rank"]: r for r in gang["ranks"]}
    assert sorted(ranks) == [0, 1, 2] and all(r["returncode"] == 0 for r in ranks.values())
    # 1 neuron core per rank, 2 per node: the placement group put them on both nodes
    assert len({r["node"] for r in ranks.values()}) == 2
    env = {r: json.loads((seen / f"rank{r}.json").read_text()) for r in range(3)}
    assert {e["RANK"] for e in env.values()} == {"0", "1", "2"}
    assert {e["WORLD_SIZE"] for e in env.values()} == {"3"}
    assert len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in env.values()}) == 1
    assert env[0]["MASTER_ADDR"] == ranks[0]["ip"] and gang["master"] == f"{ranks[0]['ip']}:{env[0]['MASTER_PORT']}"
    for r, e in env.items():  # LOCAL_RANK counts the ranks on the same node
        same = sorted(k for k in ranks if ranks[k]["node"] == ranks[r]["node"])
        assert (e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) == (str(same.index(r)), str(len(same)))
    for r in range(3):  # each rank's output is kept; its own check saw 1000 sums of 3
        log = (gangs.p.results / f"fixture/shards/1/gangs/sum/rank{r}.log").read_text()
        assert json.loads(log.splitlines()[-1]) == {"rank": r, "iterations": 1000, "sums": [3]}
    logs = [a["log"] for a in record["attempts"] if "gangs/sum/" in a["log"]]
    assert logs == [f"shards/1/gangs/sum/rank{r}.log" for r in range(3)]  # one attempt per rank


def test_a_rank_that_segfaults_is_diagnosed_as_a_local_crash(gangs: GangRun) -> None:
    from device_matrix.diagnostics import diagnose
    from device_matrix.redact import Redactor

    record = gangs.record
    test = _test(record, "gang::seg")
    assert test["outcome"] == "crashed"
    crash = next(c for c in record["crashes"] if c["id"] == test["crash"])
    assert crash["nodeid"] == "gang::seg" and crash["diagnosis"]["signal_name"] == "SIGSEGV"
    assert "in main" in (crash["diagnosis"]["python_stack"] or "")
    assert "RANK=1" in crash["repro"] and "-m suites.gang.worker --segv-rank 1" in crash["repro"]
    # the same rank run here, without Ray, gets the same diagnosis
    port = str(_free_port())
    local = {}
    procs = {}
    for r in (0, 1):
        env = {**clean_env(), "RANK": str(r), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
        procs[r] = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", "-m", "suites.gang.worker", "--segv-rank", "1"],
            cwd=gangs.p.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    for r, child in procs.items():
        out, _ = child.communicate(timeout=60)
        local[r] = diagnose(returncode=child.returncode, fault_text="", output_text=out, redactor=Redactor())
    for key in ("signal_name", "fingerprint", "hint"):
        assert crash["diagnosis"][key] == local[1][key]
    assert "rank 1" in test["message"] and "SIGSEGV" in test["message"]


def test_a_gangs_xfail_admits_only_the_failure_it_names(gangs: GangRun) -> None:
    record = gangs.record
    expected, other, fixed = (_test(record, f"gang::{n}") for n in ("expected", "other", "fixed"))
    assert expected["outcome"] == "xfailed" and expected["skip"]["issue"] == "ledger:4"
    assert "one world per process" in expected["message"] and "WrongWorld" in expected["message"]
    assert other["outcome"] == "failed" and "OtherError" in other["message"]  # not the failure it names
    assert fixed["outcome"] == "failed" and fixed["message"].startswith("[XPASS(strict)]")
    assert record["status"] == "crashed"  # the segfaulting gang's crash outranks the failures


def test_a_ranks_daemon_that_keeps_stdout_open_is_ended_with_its_rank(gangs: GangRun, cluster: Cluster) -> None:
    """Seen 9: the rank was "cancelled" after test_timeout + 60 s, its log empty, the daemon left."""
    test = _test(gangs.record, "gang::daemon")
    assert test["outcome"] == "passed", test
    log = (gangs.p.results / "fixture/shards/1/gangs/daemon/rank0.log").read_text()  # kept by shard 1
    assert '"rank": 0' in log
    daemon = int((gangs.seen / "daemon.pid").read_text())
    assert not _alive(daemon), "the rank's daemon outlived its gang"
    cluster.wait_clean()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_gang_no_set_of_nodes_can_hold_is_refused_up_front(tmp_path: Path, cluster: Cluster) -> None:
    p = _gang_project(tmp_path, _gang("big", 5))
    proc = _ray_run(p, cluster, "--shards", "1")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "gang 'big' of row 'fixture' needs 5 ranks at once" in proc.stderr and "holds 4 at most" in proc.stderr
    assert not (p.results / "fixture" / "shards").exists()


def test_resume_on_ray_runs_only_what_the_interrupted_run_left(
    project: Callable[..., Project], cluster: Cluster, tmp_path: Path
) -> None:
    p = project("resume_gate", row=NEURON_ROW)
    log = tmp_path / "driver.log"
    driver = _driver(p, cluster, log, "--shards", "2")
    # shard 1 (test_a, test_c) came back; shard 2 waits in test_b_gate
    wait_for(driver, log, line="shard 1/2 done", path=p.root / "b_started", poll=0.1)
    driver.send_signal(signal.SIGTERM)
    # #41: within seconds while a node's task runs (measured 1 to 2 s), not a minute
    assert driver.wait(INTERRUPTED_EXIT) == 143, log.read_text()
    interrupted = p.record()  # the driver recorded what it cut off
    assert interrupted["status"] == "interrupted"
    assert [s["status"] for s in interrupted["environment"]["shards"]] == ["passed", "interrupted"]
    assert {t["nodeid"].rsplit("::", 1)[1]: t["outcome"] for t in interrupted["tests"]} == {
        "test_a": "passed",
        "test_b_gate": "not_run",
        "test_c": "passed",
        "test_d": "not_run",
    }
    # Seen 6: `run --resume` alone ran the row whole over the spread, and a re-merge undid it
    proc = p.run("run", "--device", "fixture", "--resume")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert p.record() == interrupted
    (p.root / "gate").write_text("")
    proc = p.run(*_tip(log.read_text()))  # the command the interrupted driver printed
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted((p.root / "runs.txt").read_text().split()) == ["a", "b", "c", "d"]  # each once
    record = p.record()
    assert record["status"] == "passed" and record["summary"]["passed"] == 4
    cluster.wait_clean()


def _tip(output: str) -> list[str]:
    found = re.findall(r"`device-matrix (run [^`]*)`", output)
    assert found, output
    return shlex.split(found[-1])


INTERRUPTED_EXIT = 20  # seconds an interrupted driver may take to write its record and exit


def _driver(p: Project, cluster: Cluster, log: Path, *args: str) -> subprocess.Popen[bytes]:
    return run_started(p, log, "run", "--device", "fixture", "--executor", "ray", "--address", cluster.address, *args)


def _when(path: Path, driver: subprocess.Popen[bytes], log: Path) -> None:
    wait_for(driver, log, path=path, poll=0.1)
    time.sleep(0.3)


def test_an_interrupt_while_the_row_is_collected_on_a_node_leaves_no_green_record(
    project: Callable[..., Project], cluster: Cluster, tmp_path: Path
) -> None:
    """Seen 2 on Ray: the collection ran before the old shards were cleared."""
    p = project("slow_import", row=NEURON_ROW)
    assert _ray_run(p, cluster, "--shards", "2").returncode == 0
    (p.root / "slow").write_text("")
    log = tmp_path / "driver.log"
    driver = _driver(p, cluster, log, "--shards", "2")
    _when(p.root / "importing", driver, log)
    driver.send_signal(signal.SIGTERM)
    # #31: taken at once, not when Ray's wait for the node's task runs out (it took 60 s)
    assert driver.wait(INTERRUPTED_EXIT) == 143, log.read_text()
    assert p.record()["status"] == "interrupted"
    (p.root / "slow").unlink()
    proc = p.run(*_tip(log.read_text()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.record()["status"] == "passed" and p.record()["summary"]["passed"] == 6
    cluster.wait_clean()


def test_a_sigkilled_ray_driver_leaves_a_running_record(
    project: Callable[..., Project], cluster: Cluster, tmp_path: Path
) -> None:
    """Seen 7 and 11: no record at all, and the shards' temp folders left on the nodes."""
    p = project("resume_gate", row=NEURON_ROW)
    log = tmp_path / "driver.log"
    driver = _driver(p, cluster, log, "--shards", "2")
    _when(p.root / "b_started", driver, log)
    driver.kill()
    driver.wait(30)
    record = p.record()
    assert record["status"] == "running" and record["spread"]["of"] == 2
    cluster.wait_clean()  # the tasks went with their driver; their folders with them


def test_a_test_that_kills_its_ray_worker_is_a_crash_of_that_test(
    project: Callable[..., Project], cluster: Cluster
) -> None:
    """Seen 8: recorded as a node death, the node marked dead, exit 5, tests not_run, no culprit."""
    p = project("worker_kill", row=NEURON_ROW)
    proc = _ray_run(p, cluster, "--shards", "2")
    assert (p.root / "worker_killed").exists(), proc.stdout + proc.stderr  # it did kill its worker
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    killer = "suites/worker_kill/test_worker_kill.py::test_kills_its_worker"
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes.pop(killer) == "crashed"
    assert set(outcomes.values()) == {"passed"} and len(outcomes) == 4
    (crash,) = record["crashes"]
    assert crash["nodeid"] == killer and "Ray worker" in (crash["diagnosis"]["hint"] or "")
    assert crash["classification"] == "flaky"  # alone, it passed
    assert all(s["lost"] == [] for s in record["environment"]["shards"])  # no node died
    assert "no node left" not in proc.stdout
    cluster.wait_clean()


def test_a_driver_sigterm_during_a_gang_on_ray_keeps_the_gang(cluster: Cluster, tmp_path: Path) -> None:
    """Seen 3 on Ray: no gangs/ folder, no merged record, `merge` 0 and triage green."""
    gate = tmp_path / "gate"
    p = _gang_project(tmp_path / "p", _gang("g", 2, "--iterations", "5", "--gate", str(gate)))
    log = tmp_path / "driver.log"
    driver = _driver(p, cluster, log, "--shards", "2")
    _when(Path(f"{gate}.rank1"), driver, log)
    driver.send_signal(signal.SIGTERM)
    # #31: taken at once, not when Ray's wait for the node's task runs out (it took 60 s)
    assert driver.wait(INTERRUPTED_EXIT) == 143, log.read_text()
    record = p.record()
    assert record["status"] == "interrupted"
    assert _test(record, "gang::g")["outcome"] == "not_run"
    proc = p.run("merge")
    assert proc.returncode != 0 and _test(p.record(), "gang::g")["outcome"] == "not_run", proc.stdout
    gate.write_text("")
    proc = p.run(*_tip(log.read_text()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _test(p.record(), "gang::g")["outcome"] == "passed"
    cluster.wait_clean()


# --- last: the second node this kills stays dead for the rest of the session -----------------


def test_a_killed_worker_node_is_recorded_and_its_shard_runs_again(
    project: Callable[..., Project], cluster: Cluster
) -> None:
    p = project("ray_kill", row=NEURON_ROW)
    proc = _ray_run(p, cluster, "--shards", "2")
    assert cluster.marker.exists(), proc.stdout + proc.stderr  # a test did kill its node
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert record["summary"]["passed"] == 4
    (lost_shard,) = [s for s in record["environment"]["shards"] if s["lost"]]
    (dead,) = lost_shard["lost"]
    assert dead != lost_shard["node"]  # ran again elsewhere
    assert f"node {dead} died while it ran; it ran again on node {lost_shard['node']}" in record["reason"]
    assert "died (NodeDiedError)" in proc.stdout or "died (WorkerCrashedError)" in proc.stdout
