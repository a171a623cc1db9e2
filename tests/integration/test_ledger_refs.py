"""Ledger references are checked, and filing names what it filed for (#20).

``skips check`` knows the ledger's issues from the seed file in the repository
(device-matrix-issues.toml, which every clone has) and, where the project has one
already, its ledger (.device-matrix/ledger.sqlite, #42); a ``ledger:N`` in neither is an error.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import Project
from tests.userproject import user_project

SEED = """\
[[issue]]
id = 1
title = "rounding differs on cuda"
"""

TESTS = """\
import unittest

import pytest


@pytest.mark.skip_device("cuda", issue="ledger:1", reason="seeded")
def test_seeded():
    pass


@pytest.mark.skip_device("cuda", issue="ledger:99", reason="nobody filed it")
def test_unknown():
    pass


class TestUnit(unittest.TestCase):
    @unittest.skip("see ledger:97")
    def test_unknown_in_message(self):
        pass
"""

DISABLED = """\
[[disable]]
test = "tests/test_refs.py::test_listed"
devices = ["cuda"]
issue = "ledger:98"
reason = "listed"
"""


def _project(tmp_path: Path, *, seed: bool = True) -> Project:
    files = {"tests/test_refs.py": TESTS, "device-matrix-disabled.toml": DISABLED}
    if seed:
        files["device-matrix-issues.toml"] = SEED
    return user_project(tmp_path, files)


KNOWN = "device-matrix-issues.toml (no ledger in .device-matrix/ yet)"


def test_skips_check_rejects_ledger_ids_nobody_filed(tmp_path: Path) -> None:
    p = _project(tmp_path)
    proc = p.run("skips", "check", "tests")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert f"tests/test_refs.py:11: skip_device(cuda) cites ledger:99, which is not in the ledger: {KNOWN}" in lines
    assert any(
        x.startswith("tests/test_refs.py:17: ") and x.endswith(f"cites ledger:97, which is not in the ledger: {KNOWN}")
        for x in lines
    ), proc.stdout
    assert any(
        "tests/test_refs.py::test_listed" in x and x.endswith(f"cites ledger:98, which is not in the ledger: {KNOWN}")
        for x in lines
    ), proc.stdout
    assert not any(x.startswith("tests/test_refs.py:6:") for x in lines)  # ledger:1 is seeded
    assert "3 problem(s)" in proc.stdout
    assert any(x.startswith("TIP: ") and "device-matrix-issues.toml" in x for x in lines), proc.stdout


def test_without_a_seed_no_ledger_id_exists(tmp_path: Path) -> None:
    p = _project(tmp_path, seed=False)
    proc = p.run("skips", "check", "tests")
    assert proc.returncode == 1
    assert any(
        x.startswith("tests/test_refs.py:6: ") and "ledger:1, which is not" in x for x in proc.stdout.splitlines()
    )


def test_an_issue_the_ledger_filed_counts(tmp_path: Path) -> None:
    """The ledger files an issue for an uncited skip a row met; a test may then cite it."""
    p = _project(tmp_path)
    user_project(
        tmp_path,
        {
            "tests/test_new.py": """\
            import pytest


            @pytest.mark.skip_device("cpu", reason="broken here")
            def test_new():
                pass
            """
        },
    )
    run = p.run("run", "--device", "cpu", "--test", "tests/test_new.py")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 issue(s) to file: run `device-matrix issues sync`" in run.stdout  # filed when asked (#24)
    sync = p.run("issues", "sync")
    # the filing line names the test and the row, beside its fingerprint
    filed = re.search(
        r"filed (ledger:\d+) for tests/test_new.py::test_new \(skip on cpu\) \[skip-[0-9a-f]{16}\]", sync.stdout
    )
    assert filed is not None, sync.stdout + sync.stderr
    (p.root / "device-matrix-disabled.toml").unlink()  # its ledger:98 is checked by every check
    (p.root / "tests" / "test_cites.py").write_text(
        "import pytest\n\n\n"
        f"@pytest.mark.skip_device('cuda', issue='{filed.group(1)}', reason='filed by the run')\n"
        "def test_cites():\n    pass\n"
    )
    proc = p.run("skips", "check", "tests/test_cites.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_crash_filing_names_its_test_and_row(tmp_path: Path) -> None:
    p = user_project(
        tmp_path,
        {
            "tests/test_crash.py": """\
            import ctypes


            def test_segfault():
                ctypes.string_at(0)
            """
        },
    )
    run = p.run("run", "--device", "cpu")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 issue(s) to file: run `device-matrix issues sync`" in run.stdout  # filed when asked (#24)
    sync = p.run("issues", "sync")
    assert re.search(
        r"filed ledger:1 for tests/test_crash.py::test_segfault \(SIGSEGV on cpu\) \[crash-[0-9a-f]{16}\]", sync.stdout
    ), sync.stdout + sync.stderr
    again = p.run("issues", "sync", "--dry-run")
    assert re.search(
        r"linked tests/test_crash.py::test_segfault \(SIGSEGV on cpu\) \[crash-[0-9a-f]{16}\] -> ledger:1", again.stdout
    ), again.stdout + again.stderr
