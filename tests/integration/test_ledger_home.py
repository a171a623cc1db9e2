"""#42: the embedded ledger is the project's state, like the run history: one place per
project (``.device-matrix/ledger.sqlite``), whatever ``--results`` says.

It lived in the results folder: ``rm -rf results`` deleted every issue filed and every
disable; ``run --results recheck --rerun-disabled`` said "no disabled tests" while a
disable was open in ``results/ledger.sqlite``; ``issues sync recheck`` read another, empty
tracker. A ledger found where it used to be is moved once, and said so; one that cannot
be moved without losing either is refused, both kept.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.integration.test_disable_runs import _project
from tests.unit.test_ledger_home import HOME, TEST


def test_removing_the_results_folder_keeps_every_issue_and_disable(tmp_path: Path) -> None:
    p = _project(tmp_path)
    assert p.run("issues", "disable", TEST, "--device", "cuda").returncode == 0
    assert (p.root / HOME).is_file() and not (p.results / "ledger.sqlite").exists()
    shutil.rmtree(p.results, ignore_errors=True)
    listed = p.run("issues", "list")
    assert f"ledger:1  open    DISABLED {TEST}  [.device-matrix/ledger.sqlite]" in listed.stdout, listed.stdout
    assert p.run("run", "--device", "cuda").returncode == 0
    assert {t["nodeid"]: t["outcome"] for t in p.record("cuda")["tests"]}[TEST] == "skipped"


def test_another_results_folder_reads_the_same_tracker(tmp_path: Path) -> None:
    p = _project(tmp_path)
    assert p.run("issues", "disable", TEST, "--device", "cuda").returncode == 0
    recheck = p.run("run", "--results", "recheck", "--device", "cuda", "--rerun-disabled", "--times", "1")
    assert recheck.returncode == 0, recheck.stdout + recheck.stderr
    assert "no disabled tests" not in recheck.stdout
    assert "ledger:1 (suites/dis/test_dis.py::test_plain) on cuda: 1 of 1 run(s) passed" in recheck.stdout
    assert not (p.root / "recheck" / "ledger.sqlite").exists()
    # the sync of that folder reads the same tracker: the disable is there to report on
    synced = p.run("issues", "sync", "recheck")
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "ledger:1: 1 of 1 passed: closes it" in synced.stdout, synced.stdout
    assert "ledger:1  closed" in p.run("issues", "list", "recheck").stdout


def test_a_disable_in_the_seed_file_applies_on_a_fresh_clone(tmp_path: Path) -> None:
    """The seed file is the ledger every clone has: its open DISABLED issue applies before
    any command has made the project's ledger (a CI job, a fresh clone)."""
    p = _project(tmp_path)
    (p.root / "device-matrix-issues.toml").write_text(
        f'[[issue]]\nid = 1\ntitle = "DISABLED {TEST}"\nbody = "devices: cuda"\n'
        f'\n[[issue]]\nid = 2\ntitle = "DISABLED suites/dis/test_dis.py::test_param"\nstate = "closed"\n'
    )
    assert p.run("run", "--device", "cuda").returncode == 0
    outcomes = {t["nodeid"]: t["outcome"] for t in p.record("cuda")["tests"]}
    assert outcomes[TEST] == "skipped"
    assert outcomes["suites/dis/test_dis.py::test_param[1]"] == "passed"  # closed in the seed


# --- the state folder ignores itself, whatever makes it -----------------------------------


def test_the_reenable_check_makes_a_state_folder_that_ignores_itself(tmp_path: Path) -> None:
    p = _project(tmp_path)
    (p.root / "device-matrix-issues.toml").write_text(f'[[issue]]\nid = 1\ntitle = "DISABLED {TEST}"\n')
    proc = p.run("run", "--device", "cpu", "--rerun-disabled", "--times", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ledger:1 (suites/dis/test_dis.py::test_plain) on cpu: 1 of 1 run(s) passed" in proc.stdout
    assert (p.root / ".device-matrix" / ".gitignore").read_text() == "*\n"
