"""bench/selection.py's fault injector and figures, on a tiny case whose truth is known (#34)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import selection as bench  # bench/selection.py

from device_matrix.records.testmap import TestMap
from device_matrix.selection import Rules

RULES = Rules(max_age=bench.datetime.max - bench.datetime.min, full=("conftest.py", "pyproject.toml"), ignore=())

SOURCE = """\
def limit(x):
    if x > 3:
        return x - 1
    return 0


def log(values, x):
    values.append(x)
    return values


ENABLED = True
"""


def test_each_operator_fits_only_the_lines_it_is_given():
    faults = bench.fault_sites("pkg/core.py", SOURCE, [2, 3, 8, 12])
    by_line = {(f.line, f.operator) for f in faults}
    assert by_line == {
        (2, "comparison flipped"),
        (2, "constant off by one"),
        (3, "constant off by one"),
        (3, "return None"),
        (8, "call removed"),
        (12, "boolean negated"),
    }
    flipped = next(f for f in faults if f.operator == "comparison flipped")
    assert flipped.source.splitlines()[1] == "    if (x <= 3):"
    # every other line is the original, so a line-level tool sees one changed line
    assert [a for a, b in zip(flipped.source.splitlines(), SOURCE.splitlines(), strict=True) if a != b] == [
        "    if (x <= 3):"
    ]
    assert {f.operator for f in bench.fault_sites("pkg/core.py", SOURCE, [4])} == {"constant off by one", "return None"}
    assert bench.fault_sites("pkg/core.py", SOURCE, [1, 5, 6]) == []  # a def, blank lines: nothing to mutate


def test_the_same_seed_picks_the_same_faults():
    sites = bench.fault_sites("pkg/core.py", SOURCE, range(1, 13))
    assert len(sites) >= 6
    first = bench.pick_faults(sites, 3, 34, "abc")
    assert first == bench.pick_faults(sites, 3, 34, "abc")
    assert len(first) == 3
    assert len(bench.pick_faults(sites, 99, 34, "abc")) == len(sites)


def test_changed_lines_are_the_new_side_of_each_hunk():
    diff = (
        "diff --git a/pkg/core.py b/pkg/core.py\n--- a/pkg/core.py\n+++ b/pkg/core.py\n"
        "@@ -2 +2 @@ def limit(x):\n-    if x > 2:\n+    if x > 3:\n"
        "@@ -9,0 +10,2 @@\n+a\n+b\n"
        "diff --git a/gone.py b/gone.py\n--- a/gone.py\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-x\n"
    )
    assert bench.changed_lines(diff) == {"pkg/core.py": {2, 10, 11}}


def _git(root: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    return subprocess.run(["git", *ident, *args], cwd=root, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[bench.Replay, str]:
    """A project: pkg/core.py read only by tests/test_core.py, pkg/util.py only by tests/test_util.py."""
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "tests").mkdir()
    (src / "pkg" / "__init__.py").write_text("")
    (src / "pkg" / "core.py").write_text(SOURCE)
    (src / "pkg" / "util.py").write_text("def double(x):\n    return 2 * x\n")
    (src / "tests" / "test_core.py").write_text(
        "from pkg.core import limit\n\n\ndef test_limit():\n    assert limit(5) == 4\n\n\n"
        "def test_small():\n    assert limit(1) == 0\n"
    )
    (src / "tests" / "test_util.py").write_text(
        "from pkg.util import double\n\n\ndef test_double():\n    assert double(2) == 4\n"
    )
    (src / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    _git(src, "init", "-q")
    _git(src, "add", "-A")
    _git(src, "commit", "-q", "-m", "tiny")
    rp = bench.Replay(src, tmp_path / "work", python=sys.executable, tests=[], timeout=120, autoload=False)
    head = _git(src, "rev-parse", "HEAD").strip()
    rp.checkout(head)
    return rp, head


def test_a_conftest_change_makes_device_matrix_run_everything():
    m = TestMap(
        row="replay", commit="c", created="2026-01-01T00:00:00+00:00", tests={"tests/test_a.py::t": frozenset({"a.py"})}
    )
    chosen, full = bench.device_matrix_selection(
        m, ["conftest.py"], ["tests/test_a.py::t", "tests/test_b.py::u"], RULES
    )
    assert chosen == {"tests/test_a.py::t", "tests/test_b.py::u"}
    assert full is not None
    assert "conftest.py" in full


def test_a_module_that_no_longer_imports_fails_each_of_its_tests():
    base = bench.Run(
        {"tests/test_a.py::t": "passed", "tests/test_a.py::u": "passed", "tests/test_b.py::v": "passed"}, {}, {}
    )
    now = bench.Run({"tests/test_a.py": "error", "tests/test_b.py::v": "passed"}, {}, {})
    assert now.failed_against(base) == {"tests/test_a.py::t", "tests/test_a.py::u"}


def test_a_fault_lands_on_its_line_past_a_form_feed_and_wide_characters():
    source = "x = 1\n\x0c\ndef f(a):\n    return a > 2  # é\n"
    flipped = next(f for f in bench.fault_sites("m.py", source, [4]) if f.operator == "comparison flipped")
    assert flipped.source == "x = 1\n\x0c\ndef f(a):\n    return (a <= 2)  # é\n"


def test_a_testmon_database_is_copied_with_what_its_write_ahead_log_holds(tmp_path: Path) -> None:
    # a replay stopped on "database disk image is malformed": the copy of the map commit's
    # testmon database took the main file alone, while committed pages were in its WAL
    import sqlite3

    db = tmp_path / "testmondata"
    writer = sqlite3.connect(db)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("CREATE TABLE t (x)")
    writer.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    writer.commit()  # in the WAL, not yet in the main file: the writer is still open
    copy = tmp_path / "scratch"
    copy.write_bytes(b"an older scratch copy")
    bench.copy_database(db, copy)
    writer.close()
    with sqlite3.connect(copy) as reader:
        assert reader.execute("SELECT COUNT(*), SUM(x) FROM t").fetchone() == (100, 4950)
