"""#34: the names a change to what runs at import binds, followed in a real run: a fixture of
a wider scope hands what it read to tests that never ran its lines, and they run."""

from __future__ import annotations

from pathlib import Path

from tests.builders import recorded_git_project
from tests.runs import outcomes_of

WIDE = {
    "consts.py": "SCALE = 2\n",
    "sub/conftest.py": (
        "import pytest\nimport consts\n\n\n@pytest.fixture(scope='session')\ndef table():\n"
        "    return [consts.SCALE] * 3\n"
    ),
    "sub/test_a.py": "def test_a(table):\n    assert table[0] == 2\n",
    "sub/test_b.py": "def test_b(table):\n    assert table[1] == 2\n",
    "test_other.py": "import consts\n\n\ndef test_other():\n    assert consts\n",
}


def test_a_wide_fixture_that_reads_a_constant_runs_every_test_that_requests_it(tmp_path: Path) -> None:
    # the session fixture ran in the first test alone; the second got its value without its lines
    p = recorded_git_project(tmp_path, WIDE)
    (p.root / "suites" / "mine" / "consts.py").write_text("SCALE = 40\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    assert outcomes_of(rec) == {"test_a": "failed", "test_b": "failed", "test_other": "deselected"}, proc.stdout
    assert rec["test_selection"]["by_reason"] == {"reads": 2, "deselected": 1}


FOREIGN = {
    "consts.py": "K = 2\n",
    "patch.py": "import consts\n\nX = 1\n",
    "test_patch.py": "import patch\n\n\ndef test_p():\n    assert patch.X == 1\n",
    "test_k.py": "import consts\n\n\ndef test_k():\n    assert consts.K == 2\n",
}


def test_a_module_that_writes_into_another_at_import_runs_every_test(tmp_path: Path) -> None:
    # pytest imports test_patch (and so patch) before test_k runs: consts.K is 5 for it too
    p = recorded_git_project(tmp_path, FOREIGN)
    (p.root / "suites" / "mine" / "patch.py").write_text("import consts\n\nX = 1\nconsts.K = 5\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    rec = p.record()
    assert outcomes_of(rec) == {"test_p": "passed", "test_k": "failed"}, proc.stdout
    assert rec["test_selection"]["full_reason"] == (
        "suites/mine/patch.py writes into another module's state when it is imported (consts.K = 5): "
        "every test module is imported before the first test runs"
    )
