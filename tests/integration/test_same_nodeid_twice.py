"""One nodeid run more than once in a session (pytest's --keep-duplicates, a plugin that
runs an item twice): refused where it is an option, and never recorded passed (#41)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow

# passes its first time, fails its second (a test whose state leaks between executions)
DUP = (
    "RUNS = []\n\n\n"
    "def test_twice():\n    RUNS.append(1)\n    assert len(RUNS) == 1, f'execution {len(RUNS)}'\n\n\n"
    "def test_other():\n    pass\n"
)
FILE = "suites/passing/test_dup.py"
# a plugin that runs an item twice: the same item twice in pytest's list
TWICE = (
    "def pytest_collection_modifyitems(items):\n"
    "    twice = [i for i in items if i.name == 'test_twice']\n"
    "    items[:] = [*items, *twice]\n"
)


def test_keep_duplicates_is_refused(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / FILE).write_text(DUP)
    proc = p.run("run", "--device", "fixture", "--test", FILE, "--", "--keep-duplicates", FILE)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "--keep-duplicates" in out and "more than once" in out
    assert p.record()["tests"] == [] and "refused" in (p.record()["reason"] or "")


def test_a_test_run_twice_by_a_plugin_is_never_passed(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / FILE).write_text(DUP)
    (p.root / "suites" / "passing" / "conftest.py").write_text(TWICE)
    proc = p.run("run", "--device", "fixture", "--test", FILE)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    tests = {t["nodeid"].rsplit("::", 1)[-1]: t for t in p.record()["tests"]}
    assert tests["test_twice"]["outcome"] == "error", tests["test_twice"]
    assert "started again in the same session" in tests["test_twice"]["message"]
    assert tests["test_other"]["outcome"] == "passed"
