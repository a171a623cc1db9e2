"""Shards: the split by recorded durations, one shard's run, device slots, and the merge."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from device_matrix.records.merge import artifact_folder
from tests.builders import committed
from tests.conftest import Project, clean_env, make_project

# --- the split ----------------------------------------------------------------------------


# --- shards of a real row -----------------------------------------------------------------


def _outcomes(record: dict[str, Any]) -> dict[str, str]:
    return {t["nodeid"]: t["outcome"] for t in record["tests"]}


@pytest.mark.slow
def test_shards_on_two_hosts_merge_into_the_whole_row(project: Callable[..., Project], tmp_path: Path) -> None:
    p = project("segv", "passing")
    whole = p.run("run", "--device", "fixture")
    assert whole.returncode == 1, whole.stdout + whole.stderr
    whole_record = p.record()
    # durations recorded by the whole run: two hosts, each its own results folder
    for k in (1, 2):
        proc = p.run(
            "run", "--device", "fixture", "--shard", f"{k}/2", "--results", f"host{k}", "--durations", "results"
        )
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    plans = [json.loads((p.root / f"host{k}/fixture/shards/{k}/shard.json").read_text()) for k in (1, 2)]
    assert plans[0]["parts"] == plans[1]["parts"]  # the same split on both hosts
    assert plans[0]["durations_known"] == len(whole_record["tests"])
    shard_tests = [
        {t["nodeid"] for t in json.loads((p.root / f"host{k}/fixture/shards/{k}/run.json").read_text())["tests"]}
        for k in (1, 2)
    ]
    assert shard_tests[0].isdisjoint(shard_tests[1]) and shard_tests[0] and shard_tests[1]
    for k in (1, 2):  # each shard's record names the command that runs that shard again
        shard_record = json.loads((p.root / f"host{k}/fixture/shards/{k}/run.json").read_text())
        assert shard_record["command"] == ["device-matrix", "run", "--device", "fixture", "--shard", f"{k}/2"]
    # the artifacts of both hosts downloaded into one folder
    merged_dir = p.root / "merged" / "fixture" / "shards"
    for k in (1, 2):
        shutil.copytree(p.root / f"host{k}/fixture/shards/{k}", merged_dir / str(k))
    proc = p.run("merge", str(p.root / "merged"))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a test crashed and one failed
    merged = json.loads((p.root / "merged/fixture/run.json").read_text())
    assert _outcomes(merged) == _outcomes(whole_record)
    assert merged["summary"] == whole_record["summary"]
    assert merged["status"] == whole_record["status"] == "crashed"
    (crash,) = merged["crashes"]
    (whole_crash,) = whole_record["crashes"]
    # the segfault is diagnosed in its shard exactly as in the whole row
    for key in ("signal_name", "fingerprint", "hint"):
        assert crash["diagnosis"][key] == whole_crash["diagnosis"][key]
    assert crash["classification"] == whole_crash["classification"] == "deterministic"
    crashed = next(t for t in merged["tests"] if t["outcome"] == "crashed")
    assert crashed["crash"] == crash["id"]
    assert [s["shard"] for s in merged["environment"]["shards"]] == [1, 2]
    assert (p.root / "merged/fixture/junit.xml").is_file()
    report = json.loads((p.root / "merged/fixture/report.json").read_text())
    assert report["summary"]["total"] == len(whole_record["tests"])
    assert all("call" in t or t["outcome"] == "error" for t in report["tests"])


def _two_shards(p: Project) -> Path:
    proc = p.run("run", "--device", "fixture", "--shards", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return p.results / "fixture"


@pytest.mark.slow
def test_a_test_in_two_shards_or_in_none_is_reported(project: Callable[..., Project]) -> None:
    p = project("passing")
    folder = _two_shards(p)
    record = p.record()
    assert record["status"] == "passed" and record["summary"]["total"] == 40
    one, two = (json.loads((folder / f"shards/{k}/run.json").read_text()) for k in (1, 2))
    moved = two["tests"].pop()  # a test shard 2 lost ...
    one["tests"].append(dict(two["tests"][0]))  # ... and one that ran in both
    (folder / "shards/1/run.json").write_text(json.dumps(one))
    (folder / "shards/2/run.json").write_text(json.dumps(two))
    proc = p.run("merge")
    assert proc.returncode == 1
    assert f"{two['tests'][0]['nodeid']}: ran in shards 1, 2" in proc.stdout
    assert f"{moved['nodeid']}: in no shard's results (assigned to shard 2/2)" in proc.stdout
    merged = p.record()
    assert merged["status"] == "failed"
    assert _outcomes(merged)[moved["nodeid"]] == "not_run"
    assert "shards disagree" in merged["reason"]


@pytest.mark.slow
def test_a_missing_shard_leaves_its_tests_not_run(project: Callable[..., Project]) -> None:
    p = project("passing")
    folder = _two_shards(p)
    lost = {t["nodeid"] for t in json.loads((folder / "shards/2/run.json").read_text())["tests"]}
    shutil.rmtree(folder / "shards/2")
    (folder / "run.json").unlink()
    proc = p.run("merge")
    assert proc.returncode == 1
    assert "shard 2/2: no results" in proc.stdout
    merged = p.record()
    assert {n for n, o in _outcomes(merged).items() if o == "not_run"} == lost
    assert merged["summary"]["total"] == 40


@pytest.mark.slow
def test_a_whole_run_replaces_the_shards_and_shards_replace_a_whole_run(project: Callable[..., Project]) -> None:
    p = project("passing")
    folder = _two_shards(p)
    assert p.run("run", "--device", "fixture").returncode == 0
    assert not (folder / "shards").exists()
    assert "shards" not in p.record()["environment"]
    _two_shards(p)
    assert not (folder / "attempts").exists()  # the whole run's, not the shards'
    assert [s["shard"] for s in p.record()["environment"]["shards"]] == [1, 2]


@pytest.mark.slow
def test_a_whole_run_beside_shards_is_refused(project: Callable[..., Project]) -> None:
    p = project("passing")
    folder = _two_shards(p)
    shards = folder / "shards"
    shutil.move(shards, p.root / "kept")
    assert p.run("run", "--device", "fixture").returncode == 0
    shutil.move(p.root / "kept", shards)  # e.g. shard artifacts downloaded beside a whole run
    proc = p.run("merge")
    assert proc.returncode == 7
    assert "holds a whole run of the row and shards of another" in proc.stderr


@pytest.mark.slow
def test_a_module_that_dies_on_import_is_one_crash_in_the_merged_row(project: Callable[..., Project]) -> None:
    p = project("collect_crash", "passing")
    proc = p.run("run", "--device", "fixture", "--shards", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    (crash,) = record["crashes"]
    assert crash["phase"] == "collection"
    assert crash["nodeid"] == "suites/collect_crash/test_collect_crash.py"
    outcomes = _outcomes(record)
    assert outcomes.pop("suites/collect_crash/test_collect_crash.py") == "crashed"
    assert set(outcomes.values()) == {"passed"} and len(outcomes) == 41
    assert "shards disagree" not in (record["reason"] or "")
    for k in (1, 2):  # each shard handled it as a whole row does
        shard = json.loads((p.results / f"fixture/shards/{k}/run.json").read_text())
        assert [c["phase"] for c in shard["crashes"]] == ["collection"]


# --- device slots -------------------------------------------------------------------------

SLOT_ROW = """slots = 2
slot_env = { FIXTURE_SLOT = "{slot}", CUDA_VISIBLE_DEVICES = "{slot}", FIXTURE_PORT = "{port}" }"""


@pytest.mark.slow
def test_parallel_shards_each_get_their_own_slot(project: Callable[..., Project]) -> None:
    p = project("slots", row=SLOT_ROW)
    proc = p.run("run", "--device", "fixture", "--shards", "4", "--parallel")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.record()["summary"]["passed"] == 8
    lines = [json.loads(line) for line in (p.root / "slots.jsonl").read_text().splitlines()]
    assert len(lines) == 8
    by_pid: dict[int, set[tuple[str, str, str]]] = {}
    for line in lines:
        by_pid.setdefault(line["pid"], set()).add((line["slot"], line["cuda"], line["port"]))
    assert len(by_pid) == 4  # one pytest process per shard
    for seen in by_pid.values():
        ((slot, cuda, port),) = seen  # one slot per shard, its variables agreeing
        assert slot in ("0", "1") and cuda == slot and port == str(8476 + int(slot))
    # two shards on one slot never overlap: a slot is one device
    for a in lines:
        for b in lines:
            if a["pid"] != b["pid"] and a["slot"] == b["slot"]:
                assert a["end"] <= b["start"] or b["end"] <= a["start"]
    assert {line["slot"] for line in lines} == {"0", "1"}
    slot_of = {f"suites/slots/test_slots.py::test_slot[{line['i']}]": line["slot"] for line in lines}
    for k in range(1, 5):  # the shard's own command, on the slot it had
        shard_record = json.loads((p.results / f"fixture/shards/{k}/run.json").read_text())
        (slot,) = {slot_of[t["nodeid"]] for t in shard_record["tests"]}
        command = ["device-matrix", "run", "--device", "fixture", "--shard", f"{k}/4", "--slot", slot]
        assert shard_record["command"] == command


def test_parallel_shards_of_a_device_row_without_slots_are_refused(project: Callable[..., Project]) -> None:
    p = project("passing", row='pjrt_device = "CUDA"')
    proc = p.run("run", "--device", "fixture", "--shards", "2", "--parallel")
    assert proc.returncode == 2
    assert "has no device slots" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shard", "1/2", "--slot", "0"], "has no slot_env"),
        (["--shard", "5/4"], "expected K/N"),
        (["--parallel"], "--parallel needs --shards N"),
        (["--shard", "1/2", "--shards", "2"], "--shard and --shards together"),
        (["--shard", "1/2", "--executor", "ray", "--address", "auto"], "--shard with --executor ray"),
        (["--executor", "ray"], "--executor ray needs --address"),
        (["--address", "auto"], "--address is for --executor ray"),
    ],
)
def test_wrong_spreading_options_are_usage_errors(
    project: Callable[..., Project], args: list[str], message: str
) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr


@pytest.mark.parametrize(
    ("row", "key"),
    [
        ("shards = 0", "shards"),
        ('slot_env = { X = "{chip}" }', "slot_env"),
        ("slots = -1", "slots"),
        ('ray_resources = { GPU = "one" }', "ray_resources"),
        ("ray_num_cpus = 0", "ray_num_cpus"),
        ('gangs = [{ name = "g", module = "w" }]', "gangs"),  # no world_size
        ('gangs = [{ name = "g", module = "w", world_size = 0 }]', "gangs"),
        ('gangs = [{ name = "g", module = "not a module", world_size = 2 }]', "gangs"),
        ('gangs = [{ name = "a/b", module = "w", world_size = 2 }]', "gangs"),
        ('gangs = [{ name = "g", module = "w", world_size = 2, ranks = 2 }]', "gangs"),
        (
            'gangs = [{ name = "g", module = "w", world_size = 2 }, { name = "g", module = "v", world_size = 2 }]',
            "gangs",
        ),
        ('gangs = [{ name = "g", module = "w", world_size = 2, xfail = { devices = ["cpu"] } }]', "gangs"),
        (
            'gangs = [{ name = "g", module = "w", world_size = 2, xfail = { devices = ["cpu"], issue = "soon" } }]',
            "gangs",
        ),
        (
            'gangs = [{ name = "g", module = "w", world_size = 2, xfail = { devices = ["cpu"], issue = "ledger:4", '
            'raises = ["not a name"] } }]',
            "gangs",
        ),
    ],
)
def test_bad_spreading_keys_are_config_errors(project: Callable[..., Project], row: str, key: str) -> None:
    p = project("passing", row=row)
    proc = p.run("list")
    assert proc.returncode == 3
    assert f"devices.fixture.{key}" in proc.stderr


# --- Actions ------------------------------------------------------------------------------


def test_a_row_with_shards_is_one_matrix_entry_per_shard(project: Callable[..., Project], tmp_path: Path) -> None:
    p = project("passing", row="shards = 3")
    proc = p.run("matrix", "--device", "fixture")
    assert proc.returncode == 0, proc.stderr
    entries = json.loads(proc.stdout)["include"]
    assert [e["shard"] for e in entries] == ["1/3", "2/3", "3/3"]
    assert [e["run_args"] for e in entries] == ["--shard 1/3", "--shard 2/3", "--shard 3/3"]
    assert [e["results_path"] for e in entries] == [f"results/fixture/shards/{k}" for k in (1, 2, 3)]
    assert len({e["artifact"] for e in entries}) == 3  # artifact names must differ
    for e in entries:  # each artifact is laid out again where merge looks for it
        assert artifact_folder(tmp_path, e["artifact"]) == tmp_path / e["results_path"].removeprefix("results/")
    (tmp_path / "single").mkdir()
    single_project = make_project(tmp_path / "single", ["passing"])
    single = json.loads(single_project.run("matrix", "--device", "fixture").stdout)["include"]
    assert [(e["shard"], e["run_args"], e["results_path"]) for e in single] == [("", "", "results/fixture")]
    assert artifact_folder(tmp_path, single[0]["artifact"]) == tmp_path / "fixture"
    assert artifact_folder(tmp_path, "triage-report") is None


def test_ray_is_imported_only_when_used() -> None:
    code = (
        "import sys, device_matrix.cli, device_matrix.cli.shards, device_matrix.spread.split;"
        "device_matrix.cli.build_parser();"
        "assert 'ray' not in sys.modules, 'ray imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), check=False)
    assert proc.returncode == 0, proc.stderr


def _interrupted_at_the_gate(p: Project, *args: str) -> None:
    """`run --shards 2 ARGS` stopped (SIGTERM) while shard 2 waits in test_b_gate."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--device", "fixture", *args],
        cwd=p.root,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    end = time.monotonic() + 120
    while not (p.root / "b_started").exists():
        assert proc.poll() is None and time.monotonic() < end, proc.communicate()[0]
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143, out


@pytest.mark.slow
@pytest.mark.parametrize("parallel", [[], ["--parallel"]])
def test_resume_continues_every_interrupted_shard_and_runs_nothing_twice(
    project: Callable[..., Project], parallel: list[str]
) -> None:
    # the files the suite and the test write (its gate) are ignored by git, as a user's would
    # be: a resume after a change of the project's files runs the row whole (#41), and with
    # --parallel the first shard may still be running when the driver is interrupted
    p = committed(project("resume_gate"), ignored=("runs.txt", "b_started", "gate"))
    _interrupted_at_the_gate(p, "--shards", "2", *parallel)
    folder = p.results / "fixture" / "shards"
    shard2 = json.loads((folder / "2/run.json").read_text())
    assert shard2["status"] == "interrupted"
    (p.root / "gate").write_text("")
    proc = p.run("run", "--device", "fixture", "--shards", "2", "--resume", *parallel)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted((p.root / "runs.txt").read_text().split()) == ["a", "b", "c", "d"]  # each once
    record = p.record()
    assert record["status"] == "passed" and record["summary"]["passed"] == 4
    assert [s["status"] for s in record["environment"]["shards"]] == ["passed", "passed"]


def test_resume_of_shards_that_never_ran_is_a_results_error(project: Callable[..., Project]) -> None:
    p = project("passing")
    proc = p.run("run", "--device", "fixture", "--shards", "2", "--resume")
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert "nothing to resume" in proc.stderr


def test_the_merge_line_counts_as_every_report_does(tmp_path: Path) -> None:
    # `merge` printed "1 passed, 1 failed, 0 crashed" for a row whose fold has an xpass too:
    # the triage counted 3 failed (an error and an xpass fold into failed), the line 2
    from device_matrix.records.summary import fold
    from tests.userproject import user_project

    tests = """\
        import pytest

        @pytest.fixture
        def broken():
            raise RuntimeError("setup broke")

        def test_pass():
            pass

        def test_fail():
            assert 0, "no"

        @pytest.mark.xfail(reason="known", strict=False)
        def test_xpass():
            pass

        def test_error(broken):
            pass
        """
    p = user_project(tmp_path / "proj", {"tests/test_mix.py": tests})
    spread = p.run("run", "--device", "cpu", "--shards", "2")
    assert spread.returncode == 1, spread.stdout + spread.stderr
    proc = p.run("merge")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record("cpu")
    counts = fold(record).counts  # type: ignore[arg-type]
    assert counts.bucket("failed") == 3
    line = next(x for x in proc.stdout.splitlines() if x.startswith("cpu: "))
    assert f"4 tests from 2 shard(s): {counts.phrase()} -> " in line, line
    assert "3 failed (1 error, 1 xpassed)" in line
