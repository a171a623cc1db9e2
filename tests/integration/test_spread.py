"""A row spread over shards on this host: one split, records that never go stale, gangs in every full run.

Each test plays what a user (or an interrupt, or a test that misbehaves) does to a spread
row, and checks that ``results/<row>/run.json`` and what ``merge`` and ``triage`` read
from it still tell the truth (#23).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from device_matrix.records.schema import plan_id
from tests.builders import run_started, started, wait_for
from tests.conftest import Project, clean_env, make_project

pytestmark = pytest.mark.slow


def _outcomes(record: dict[str, Any]) -> dict[str, str]:
    return {t["nodeid"]: t["outcome"] for t in record["tests"]}


def _shard_record(p: Project, k: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((p.results / f"fixture/shards/{k}/run.json").read_text())
    return data


def _signalled_when(p: Project, marker: Path, *args: str, sig: int = signal.SIGTERM) -> tuple[int, str]:
    """``device-matrix run ARGS``, sent ``sig`` once ``marker`` exists: its exit status and output."""
    log = p.root.parent / f"{p.root.name}-run.log"  # beside the project, not in it
    proc = run_started(p, log, "run", "--device", "fixture", *args)
    wait_for(proc, log, path=marker)
    time.sleep(0.3)
    proc.send_signal(sig)
    proc.wait(90)
    return proc.returncode, log.read_text(errors="replace")


def _tip(output: str) -> list[str]:
    """The command the interrupted run said continues it, as arguments of ``device-matrix``."""
    found = re.findall(r"`device-matrix (run [^`]*)`", output)
    assert found, output
    return shlex.split(found[-1])


# --- the split is decided once ---------------------------------------------------------------


def test_sequential_shards_on_one_host_run_every_test_once(project: Callable[..., Project]) -> None:
    """Seen 1: shard 1's new durations must not change shard 2's split."""
    p = project("passing")
    for k in (1, 2):
        proc = p.run("run", "--device", "fixture", "--shard", f"{k}/2")
        assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = [t["nodeid"] for k in (1, 2) for t in _shard_record(p, k)["tests"]]
    assert len(ran) == len(set(ran)) == 40  # each test in exactly one shard
    proc = p.run("merge")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "passed" and record["summary"]["passed"] == 40
    plan_ids = {_shard_record(p, k)["spread"]["plan"] for k in (1, 2)}
    assert len(plan_ids) == 1 and record["spread"]["plan"] in plan_ids


HELD_COLLECTION = {
    "tests/conftest.py": """\
        import os, time
        from pathlib import Path

        def pytest_collection_modifyitems(items):
            hold = os.environ.get("HOLD_COLLECTION")
            if hold:  # this shard collects only once the test lets it
                Path(hold + ".waiting").touch()
                end = time.monotonic() + 60
                while not Path(hold).exists() and time.monotonic() < end:
                    time.sleep(0.05)
        """,
    "tests/test_slow.py": """\
        import time, pytest

        @pytest.mark.parametrize("i", range(8))
        def test_slow(i):
            time.sleep(0.05 * (8 - i) * (i % 3))
        """,
}


def test_two_shards_started_at_once_in_one_folder_share_one_split(tmp_path: Path) -> None:
    """Both find no plan; the first to split writes it, and the other runs its part of that split
    (it made its own with the durations the first recorded, and its results were thrown away)."""
    from tests.userproject import user_project

    p = user_project(tmp_path, HELD_COLLECTION)
    hold = tmp_path / "go"
    env = {**clean_env(), "HOLD_COLLECTION": str(hold)}
    argv = [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--no-gdb", "--device", "cpu"]
    log = tmp_path / "second.log"
    second = started([*argv, "--shard", "2/2"], log, env=env, cwd=p.root)
    try:
        wait_for(second, log, path=Path(f"{hold}.waiting"), timeout=60)
        first = p.run("run", "--device", "cpu", "--shard", "1/2")  # splits, runs, records its durations
        assert first.returncode == 0, first.stdout + first.stderr
    finally:
        hold.touch()
        second.wait(120)
        out = log.read_text(errors="replace")
    assert second.returncode == 0, out
    plan = json.loads((p.results / "cpu/shards/plan.json").read_text())["plan"]
    for k in (1, 2):
        record = json.loads((p.results / f"cpu/shards/{k}/run.json").read_text())
        assert record["spread"]["plan"] == plan, (k, out)
        assert json.loads((p.results / f"cpu/shards/{k}/shard.json").read_text())["plan"] == plan
    proc = p.run("merge")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    merged = p.record("cpu")
    assert merged["status"] == "passed" and merged["summary"]["passed"] == 8 and merged["reason"] is None


def test_a_resume_never_continues_a_shards_record_of_another_split(project: Callable[..., Project]) -> None:
    p = project("passing")
    assert p.run("run", "--device", "fixture", "--shard", "1/2").returncode == 0

    def of_another_split(d: dict[str, Any]) -> None:
        d["spread"]["plan"] = "0" * 16
        d["status"] = "interrupted"

    _edit(p.results / "fixture/shards/1/run.json", of_another_split)
    proc = p.run("run", "--device", "fixture", "--shard", "1/2", "--resume")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "the shard's record is of another split (plan 0000000000000000" in proc.stderr


def test_a_shard_whose_collection_differs_from_the_plan_is_refused(project: Callable[..., Project]) -> None:
    p = project("passing")
    assert p.run("run", "--device", "fixture", "--shard", "1/2").returncode == 0
    extra = p.root / "suites/passing/test_new.py"
    extra.write_text("def test_new():\n    pass\n")
    proc = p.run("run", "--device", "fixture", "--shard", "2/2")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "differs from the split" in proc.stderr and "1 test(s) not in it" in proc.stderr
    assert "plan.json" in proc.stderr  # the tip says how to split again
    assert not (p.results / "fixture/shards/2/run.json").exists() or _shard_record(p, 2)["status"] != "passed"


def test_more_shards_than_tests_is_refused_before_anything_is_split(project: Callable[..., Project]) -> None:
    p = project("segv")
    proc = p.run("run", "--device", "fixture", "--shards", "7")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "7 shards but the row has 5 tests" in proc.stderr
    assert not (p.results / "fixture/shards").exists()


HUGE = ("--shard", "1/100000000")


def test_a_huge_shard_count_is_a_usage_error_not_a_memory_error(project: Callable[..., Project]) -> None:
    """Seen 10: ``--shard 1/100000000`` ended in MemoryError (exit 70)."""
    p = project("passing")

    def limit() -> None:  # a split of 10^8 shards must not be what decides
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    proc = subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--device", "fixture", *HUGE],
        cwd=p.root,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=240,
        preexec_fn=limit,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "100000000 shards but the row has 40 tests" in proc.stderr


# --- never stale, never silent ---------------------------------------------------------------


def test_an_interrupt_during_a_shards_collection_leaves_no_green_record(project: Callable[..., Project]) -> None:
    """Seen 2: SIGTERM while a shard collects kept its previous `passed` record."""
    p = project("slow_import")
    for k in (1, 2):
        assert p.run("run", "--device", "fixture", "--shard", f"{k}/2").returncode == 0
    (p.root / "slow").write_text("")
    code, out = _signalled_when(p, p.root / "importing", "--shard", "2/2")
    assert code == 143, out
    assert _shard_record(p, 2)["status"] == "interrupted"
    proc = p.run("merge")
    assert proc.returncode != 0 and p.record()["status"] == "interrupted", proc.stdout
    (p.root / "slow").unlink()
    tip = _tip(out)
    assert "--shard" in tip and "2/2" in tip and "--resume" in tip
    proc = p.run(*tip)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.run("merge").returncode == 0
    assert p.record()["status"] == "passed" and p.record()["summary"]["passed"] == 6


def test_an_interrupt_during_the_drivers_collection_leaves_no_green_record(project: Callable[..., Project]) -> None:
    """Seen 2, `--shards N`: collection ran before the old shards were cleared."""
    p = project("slow_import")
    assert p.run("run", "--device", "fixture", "--shards", "2").returncode == 0
    (p.root / "slow").write_text("")
    code, out = _signalled_when(p, p.root / "importing", "--shards", "2")
    assert code == 143, out
    assert p.record()["status"] == "interrupted"
    (p.root / "slow").unlink()
    tip = _tip(out)
    assert "--shards" in tip and "--resume" in tip
    proc = p.run(*tip)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "passed" and record["summary"]["passed"] == 6


def test_the_printed_tip_after_an_interrupted_spread_continues_it(project: Callable[..., Project]) -> None:
    """Seen 6, on this host: the tip said `run --resume`, which re-merged stale shards over the run."""
    p = project("resume_gate")
    code, out = _signalled_when(p, p.root / "b_started", "--shards", "2")
    assert code == 143, out
    (p.root / "gate").write_text("")
    proc = p.run(*_tip(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "passed" and record["summary"]["passed"] == 4
    assert sorted((p.root / "runs.txt").read_text().split()) == ["a", "b", "c", "d"]  # each once


PROMPT_END = 10.0  # seconds a spread driver may take, after SIGTERM, to write what it knows and exit (#41)


@pytest.mark.parametrize("how", [("--shards", "2"), ("--shards", "2", "--parallel")], ids=["serial", "parallel"])
def test_a_spread_driver_ends_within_seconds_of_sigterm_and_writes_what_it_knows(
    project: Callable[..., Project], how: tuple[str, ...]
) -> None:
    """#41: a user's Ctrl-C (or CI's cancel) while a shard's test runs ends the run at once."""
    p = project("resume_gate")
    log = p.root.parent / f"{p.root.name}-run.log"
    driver = run_started(p, log, "run", "--device", "fixture", *how)
    # the split puts test_a and test_c in shard 1, test_b_gate in shard 2: run at once
    # (--parallel), shard 1 may not have finished test_a when the gate is reached
    wait_for(driver, log, line="shard 1/2 ended", path=p.root / "b_started")
    start = time.monotonic()
    driver.send_signal(signal.SIGTERM)
    assert driver.wait(PROMPT_END * 3) == 143, log.read_text()
    took = time.monotonic() - start
    assert took < PROMPT_END, f"{took:.1f} s from SIGTERM to the driver's end"
    record = p.record()
    assert record["status"] == "interrupted"
    outcomes = {t["nodeid"].rsplit("::", 1)[1]: t["outcome"] for t in record["tests"]}
    assert outcomes["test_a"] == "passed" and outcomes["test_b_gate"] == "not_run", (outcomes, log.read_text())


def test_a_whole_resume_of_a_spread_record_is_refused_with_the_command_that_resumes_it(
    project: Callable[..., Project],
) -> None:
    p = project("resume_gate")
    code, out = _signalled_when(p, p.root / "b_started", "--shards", "2")
    assert code == 143, out
    before = p.record()
    proc = p.run("run", "--device", "fixture", "--resume")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--shards 2 --resume" in proc.stderr
    assert p.record() == before  # nothing was merged over it


def test_a_sigkilled_driver_leaves_a_running_record_and_no_shard_behind(project: Callable[..., Project]) -> None:
    """Seen 7 (on this host): a killed driver must not leave the row absent or a shard running."""
    p = project("resume_gate")
    code, out = _signalled_when(p, p.root / "b_started", "--shards", "2", "--parallel", sig=signal.SIGKILL)
    assert code == -signal.SIGKILL, out
    record = p.record()
    assert record["status"] == "running"
    assert record["spread"]["of"] == 2
    end = time.monotonic() + 30
    while _processes_under(p.root):  # its shards die with it
        assert time.monotonic() < end, _processes_under(p.root)
        time.sleep(0.2)


def _processes_under(root: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(root) in cmdline:
            found.append(cmdline)
    return found


def test_a_sigkilled_shard_runner_is_a_crash_and_its_shard_goes_on(project: Callable[..., Project]) -> None:
    """Seen 10: a SIGKILLed shard under --parallel gave exit 70 and a merged `running`.

    A runner killed outright read only part of its journal: no test is named that may not
    be the one. The crash is the shard's, its last finished test is said, and the rest runs.
    """
    p = project("runner_kill")
    proc = p.run("run", "--device", "fixture", "--shards", "2", "--parallel")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "crashed"
    assert set(_outcomes(record).values()) == {"passed"} and len(record["tests"]) == 7  # each ran to its end
    (crash,) = record["crashes"]
    assert crash["nodeid"] is None and crash["phase"] == "session"
    assert "killed by SIGKILL" in (crash["diagnosis"]["hint"] or "")
    assert "the last its journal shows finished" in (crash["diagnosis"]["hint"] or "")


# --- merge: every part checked ----------------------------------------------------------------


def _two_shards(p: Project) -> Path:
    proc = p.run("run", "--device", "fixture", "--shards", "2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return p.results / "fixture"


@pytest.fixture(scope="module")
def two_shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """#31: the results folder of one green ``run --shards 2`` of the passing suite, run once
    for the tests below that each damage a copy of it before they merge."""
    return _two_shards(make_project(tmp_path_factory.mktemp("two-shards"), ["passing"]))


def _two_shards_copied(p: Project, two_shards: Path) -> Path:
    """``p``'s results folder as the one ``run --shards 2`` left (a copy of ``two_shards``)."""
    folder = p.results / "fixture"
    shutil.copytree(two_shards, folder, symlinks=True)
    return folder


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_a_shard_of_another_row_is_refused(project: Callable[..., Project], two_shards: Path) -> None:
    """Seen 4: a shard whose run.json and shard.json say row `other` merged silently, naming the row."""
    p = project("passing")
    folder = _two_shards_copied(p, two_shards)
    theirs = {t["nodeid"] for t in _shard_record(p, 1)["tests"]}

    def of_row_other(d: dict[str, Any]) -> None:  # as the split of row `other` would be, its id too
        d.update(row="other", plan=plan_id("other", d["of"], d["tests"], d["parts"], d["gangs"]))

    _edit(folder / "shards/1/shard.json", of_row_other)
    _edit(folder / "shards/1/run.json", lambda d: d.update(row="other"))
    proc = p.run("merge")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    merged = p.record()
    assert merged["row"] == "fixture" and merged["status"] == "failed"
    assert "shard 1: a record of row 'other'" in merged["reason"]
    assert {n for n, o in _outcomes(merged).items() if o == "not_run"} == theirs


def test_a_lost_last_shard_without_its_split_is_not_green(project: Callable[..., Project], two_shards: Path) -> None:
    """Seen 5: no shard.json, no plan and no shard 2: "passed: 1 tests from 1 shard(s)"."""
    p = project("passing")
    folder = _two_shards_copied(p, two_shards)
    (folder / "shards/1/shard.json").unlink()
    (folder / "shards/plan.json").unlink(missing_ok=True)
    shutil.rmtree(folder / "shards/2")
    (folder / "run.json").unlink()
    proc = p.run("merge")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "shard 2/2: no results" in proc.stdout
    assert p.record()["status"] == "failed"


def test_a_part_of_another_split_is_refused(project: Callable[..., Project]) -> None:
    p = project("passing")
    folder = _two_shards(p)
    kept = p.root / "kept"
    shutil.copytree(folder / "shards/2", kept)
    _two_shards(p)  # a new split: its plan is another
    shutil.rmtree(folder / "shards/2")
    shutil.copytree(kept, folder / "shards/2")
    _edit(folder / "shards/2/run.json", lambda d: d["spread"].update(plan="0" * 16))
    proc = p.run("merge")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "shard 2: of another split" in proc.stdout
    assert p.record()["status"] == "failed"


def test_a_part_copied_into_another_shards_folder_is_refused(project: Callable[..., Project], two_shards: Path) -> None:
    p = project("passing")
    folder = _two_shards_copied(p, two_shards)
    shutil.rmtree(folder / "shards/2")
    shutil.copytree(folder / "shards/1", folder / "shards/2")
    proc = p.run("merge")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "shard 2: its record is shard 1/2" in proc.stdout
    theirs = {t["nodeid"] for t in json.loads((folder / "shards/1/run.json").read_text())["tests"]}
    merged = p.record()
    assert merged["status"] == "failed" and merged["summary"]["not_run"] == 40 - len(theirs)


def test_a_shard_folder_that_is_a_symlink_is_refused(
    project: Callable[..., Project], two_shards: Path, tmp_path: Path
) -> None:
    p = project("passing")
    folder = _two_shards_copied(p, two_shards)
    outside = tmp_path / "elsewhere"
    shutil.move(folder / "shards/2", outside)
    (folder / "shards/2").symlink_to(outside)
    proc = p.run("merge")
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert "symbolic link" in proc.stderr


def test_a_plan_edited_between_shards_is_refused(project: Callable[..., Project]) -> None:
    p = project("passing")
    assert p.run("run", "--device", "fixture", "--shard", "1/2").returncode == 0
    plan = p.results / "fixture/shards/plan.json"

    def move_one(d: dict[str, Any]) -> None:
        d["parts"][1].append(d["parts"][0].pop())

    _edit(plan, move_one)
    proc = p.run("run", "--device", "fixture", "--shard", "2/2")
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert "does not match its content" in proc.stderr


def _bad_index(d: dict[str, Any]) -> None:
    d["parts"][0][0] = 99


def _string_index(d: dict[str, Any]) -> None:
    d["parts"][0][0] = "0"


@pytest.mark.parametrize(
    "change",
    [_bad_index, _string_index, lambda d: d.update(tests=5), lambda d: d.update(lost=[{"nope": 1}])],
    ids=["index-99", "string-index", "tests-5", "lost-nope"],
)
def test_a_malformed_shard_json_is_a_results_error(
    project: Callable[..., Project], two_shards: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    """Seen 10: these ended in exit 70."""
    p = project("passing")
    folder = _two_shards_copied(p, two_shards)
    _edit(folder / "shards/1/shard.json", change)
    proc = p.run("merge")
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert "shard.json" in proc.stderr


def test_a_shard_folder_that_is_not_a_number_is_a_results_error(
    project: Callable[..., Project], two_shards: Path
) -> None:
    p = project("passing")
    folder = _two_shards_copied(p, two_shards)
    shutil.copytree(folder / "shards/1", folder / "shards/²")
    proc = p.run("merge")
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert "²" in proc.stderr


GANG_INFO = {"name": "g", "module": "w", "world_size": 2, "master": None, "ranks": []}


@pytest.mark.parametrize(
    ("gang", "problem"),
    [
        ("abc", "environment.gang: should be an object"),  # Seen 10: exit 70
        ({**GANG_INFO, "name": "h"}, "gang 'h' in the folder of gang 'g'"),
        (GANG_INFO, "its tests are not the one test gang::g"),  # it would put a shard's tests in the row
    ],
)
def test_a_malformed_gang_record_is_a_results_error(
    project: Callable[..., Project], two_shards: Path, gang: Any, problem: str
) -> None:
    p = project("passing")
    folder = _two_shards_copied(p, two_shards)
    (folder / "gangs/g").mkdir(parents=True)
    copied = json.loads((folder / "shards/1/run.json").read_text())
    copied["environment"]["gang"] = gang
    (folder / "gangs/g/run.json").write_text(json.dumps(copied))
    proc = p.run("merge")
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert problem in proc.stderr


# --- gangs run in every full run of their row ------------------------------------------------


def _gang_project(root: Path, *args: str, row: str = "") -> Project:
    listed = ", ".join(f'"{a}"' for a in args)
    gang = f'{{ name = "g", module = "suites.gang.worker", world_size = 2, args = [{listed}] }}'
    p = make_project(root, ["gang"], row=f"gangs = [{gang}]\n{row}")
    (p.root / "suites" / "__init__.py").touch()  # `-m suites.gang.worker` finds this package first
    return p


def test_a_whole_run_runs_its_gangs_here_with_the_launcher_variables(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    seen.mkdir()
    p = _gang_project(tmp_path / "p", "--iterations", "50", "--out", str(seen))
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gang(s) g not run" not in proc.stdout
    record = p.record()
    assert _outcomes(record) == {
        "suites/gang/test_gang_row.py::test_ordinary[0]": "passed",
        "suites/gang/test_gang_row.py::test_ordinary[1]": "passed",
        "gang::g": "passed",
    }
    env = {r: json.loads((seen / f"rank{r}.json").read_text()) for r in (0, 1)}
    assert {e["RANK"] for e in env.values()} == {"0", "1"} and {e["WORLD_SIZE"] for e in env.values()} == {"2"}
    assert {(e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) for e in env.values()} == {("0", "2"), ("1", "2")}
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in env.values()} == {
        (env[0]["MASTER_ADDR"], env[0]["MASTER_PORT"])
    }
    for r in (0, 1):
        log = (p.results / f"fixture/gangs/g/rank{r}.log").read_text()
        assert json.loads(log.splitlines()[-1]) == {"rank": r, "iterations": 50, "sums": [2]}
    assert [a["log"] for a in record["attempts"] if a["log"].startswith("gangs/")] == [
        "gangs/g/rank0.log",
        "gangs/g/rank1.log",
    ]


def test_a_gang_ranks_daemon_that_keeps_stdout_open_is_ended_with_the_rank(tmp_path: Path) -> None:
    """Seen 9: the rank was "cancelled" after test_timeout + 60 s, its log empty, the daemon left."""
    pidfile = tmp_path / "daemon.pid"
    p = _gang_project(tmp_path / "p", "--iterations", "5", "--daemon", str(pidfile))
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _outcomes(p.record())["gang::g"] == "passed"
    log = (p.results / "fixture/gangs/g/rank0.log").read_text()
    assert '"rank": 0' in log
    daemon = int(pidfile.read_text())
    end = time.monotonic() + 10
    while Path(f"/proc/{daemon}").exists() and (Path(f"/proc/{daemon}/stat").read_text().split()[2] != "Z"):
        assert time.monotonic() < end, "the rank's daemon outlived its gang"
        time.sleep(0.1)


def test_a_segfaulting_rank_is_diagnosed_in_a_local_gang(tmp_path: Path) -> None:
    p = _gang_project(tmp_path / "p", "--iterations", "5", "--segv-rank", "1")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    test = next(t for t in record["tests"] if t["nodeid"] == "gang::g")
    assert test["outcome"] == "crashed" and "rank 1" in test["message"]
    crash = next(c for c in record["crashes"] if c["id"] == test["crash"])
    assert crash["diagnosis"]["signal_name"] == "SIGSEGV" and "RANK=1" in crash["repro"]


def test_a_driver_sigterm_during_a_gang_keeps_the_gang_in_the_record(tmp_path: Path) -> None:
    """Seen 3: the gang vanished; merge said 0 and triage "passed"."""
    gate = tmp_path / "gate"
    p = _gang_project(tmp_path / "p", "--iterations", "5", "--gate", str(gate))
    code, out = _signalled_when(p, Path(f"{gate}.rank0"), "--shards", "2")
    assert code == 143, out
    record = p.record()
    assert record["status"] == "interrupted"
    gang = next(t for t in record["tests"] if t["nodeid"] == "gang::g")
    assert gang["outcome"] == "not_run" and "interrupted" in gang["message"]
    proc = p.run("merge")
    assert proc.returncode != 0, proc.stdout
    assert "gang::g" in _outcomes(p.record())
    proc = p.run("triage", "--no-history")
    assert "fixture: interrupted" in proc.stdout, proc.stdout
    gate.write_text("")
    proc = p.run(*_tip(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _outcomes(p.record())["gang::g"] == "passed"


def test_a_sigterm_during_a_whole_runs_gang_keeps_the_gang_and_resume_finishes_it(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    p = _gang_project(tmp_path / "p", "--iterations", "5", "--gate", str(gate))
    code, out = _signalled_when(p, Path(f"{gate}.rank1"))
    assert code == 143, out
    record = p.record()
    assert record["status"] == "interrupted" and _outcomes(record)["gang::g"] == "not_run"
    gate.write_text("")
    proc = p.run(*_tip(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "passed"
    assert sorted(_outcomes(record).values()) == ["passed"] * 3


def test_a_gang_this_hosts_slots_cannot_hold_is_refused_before_anything_runs(tmp_path: Path) -> None:
    p = _gang_project(tmp_path / "p", "--iterations", "5", row='pjrt_device = "CUDA"')
    for args in ([], ["--shard", "1/2"], ["--shards", "2"]):
        proc = p.run("run", "--device", "fixture", *args)
        assert proc.returncode == 5, proc.stdout + proc.stderr
        assert "gang 'g' of row 'fixture' needs 2 device slots at once, and the row has 0" in proc.stderr
        assert not (p.results / "fixture").exists()
    # a shard that does not keep the gang runs: shard 1 keeps it
    proc = p.run("run", "--device", "fixture", "--shard", "2/2")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_run_that_selects_tests_says_it_left_the_gangs_out(tmp_path: Path) -> None:
    p = _gang_project(tmp_path / "p", "--iterations", "5")
    proc = p.run("run", "--device", "fixture", "--test", "suites/gang/test_gang_row.py::test_ordinary[0]")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "gang(s) g not run: --test names tests, and a gang belongs to the whole row" in proc.stdout
    assert list(_outcomes(p.record())) == ["suites/gang/test_gang_row.py::test_ordinary[0]"]


# --- the reader's side -----------------------------------------------------------------------


def test_triage_and_issues_import_no_runner_module() -> None:
    code = (
        "import sys, device_matrix.cli.triage, device_matrix.cli.issues;"
        "loaded = sorted(m for m in sys.modules if m.startswith('device_matrix.run'));"
        "assert not loaded, loaded"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), check=False)
    assert proc.returncode == 0, proc.stderr
