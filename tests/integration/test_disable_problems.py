"""#42: a disable issue that cannot be read as meant is answered, never applied more widely.

A body line ``device: cuda`` (singular) disabled the test on every row; the answer to an
unreadable disable quoted a Python repr; a test named by nothing the row runs was counted
as applied.
"""

from __future__ import annotations

from pathlib import Path

from device_matrix.issues.ledger import Ledger

# --- a disable that matches no test ------------------------------------------------------


def test_a_disable_that_matches_no_test_of_the_row_is_said_and_answered_once(tmp_path: Path) -> None:
    import json

    from tests.integration.test_disable_runs import _project

    p = _project(tmp_path)
    ledger = Ledger(p.root / ".device-matrix" / "ledger.sqlite")
    ledger.create("DISABLED suites/dis/test_dis.py::test_plain", "devices: cuda", [])
    # "\u043e" is a Cyrillic o, which only looks like the test's own
    typo = ledger.create("DISABLED suites/dis/test_dis.py::test_p\u043eram", "devices: cuda", [])
    for _ in range(2):
        proc = p.run("run", "--device", "cuda", "--device", "cpu")
        assert proc.returncode == 0, proc.stdout + proc.stderr
    got = p.record("cuda")["disables"]
    assert got["applied"] == 1, got
    assert got["unmatched"] == [
        {"issue": typo.key, "test": "suites/dis/test_dis.py::test_p\u043eram", "problem": "matches no test of row cuda"}
    ]
    assert json.loads((p.results / "cuda" / "disables.json").read_text())["unmatched"] == got["unmatched"]
    assert p.record("cpu")["disables"]["applied"] == 0  # neither applies on cpu
    assert p.record("cpu")["disables"]["unmatched"] == []
    (answer,) = ledger.comments(typo)  # once, over two runs
    assert "matches no test of row cuda" in answer and "test_p\u043eram" in answer
    plain = ledger.get("ledger:1")
    assert plain is not None and ledger.comments(plain) == []  # the one that matched is not answered


def test_a_run_of_part_of_a_row_says_nothing_of_what_its_disables_match(tmp_path: Path) -> None:
    from tests.integration.test_disable_runs import _project

    p = _project(tmp_path)
    ledger = Ledger(p.root / ".device-matrix" / "ledger.sqlite")
    ledger.create("DISABLED suites/dis/test_dis.py::test_plain", "devices: cuda", [])
    proc = p.run("run", "--device", "cuda", "--test", "test/test_script.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    got = p.record("cuda")["disables"]
    assert "unmatched" not in got and got["applied"] == 1
    plain = ledger.get("ledger:1")
    assert plain is not None and ledger.comments(plain) == []


def test_in_a_row_job_the_issues_sync_answers_a_disable_that_matches_no_test(tmp_path: Path) -> None:
    from tests.integration.test_disable_runs import _project

    p = _project(tmp_path)
    ledger = Ledger(p.root / ".device-matrix" / "ledger.sqlite")
    gone = ledger.create("DISABLED suites/dis/test_dis.py::test_renamed", "devices: cpu", [])
    proc = p.run("run", "--device", "cpu", env={"GITHUB_ACTIONS": "true"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert p.record("cpu")["disables"]["unmatched"][0]["problem"] == "matches no test of row cpu"
    assert ledger.comments(gone) == []  # a row job's token is read-only: it only reads
    for _ in range(2):
        synced = p.run("issues", "sync")
        assert synced.returncode == 0, synced.stdout + synced.stderr
    (answer,) = ledger.comments(gone)
    assert "`suites/dis/test_dis.py::test_renamed` matches no test of row cpu" in answer


def test_a_disable_on_no_row_nor_device_of_the_project_is_answered_once(tmp_path: Path) -> None:
    from tests.integration.test_disable_runs import _project

    p = _project(tmp_path)
    ledger = Ledger(p.root / ".device-matrix" / "ledger.sqlite")
    typo = ledger.create("DISABLED suites/dis/test_dis.py::test_plain", "devices: cdua", [])
    for _ in range(2):
        assert p.run("run", "--device", "cpu").returncode == 0
    (answer,) = ledger.comments(typo)
    assert "is disabled on cdua: no row of this project nor its device has that name (cpu, cuda, " in answer
    assert p.record("cpu")["disables"]["applied"] == 0
