"""bench/selection.py scores device-matrix's selection as run --select changed makes it: by the
map, the function-body changes and the import graph read from the replayed checkout (#34)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import selection as bench  # bench/selection.py

from device_matrix.records.testmap import TestMap
from device_matrix.selection import Rules
from tests.builders import git

RULES = Rules(max_age=bench.datetime.max - bench.datetime.min, full=("conftest.py", "pyproject.toml"), ignore=())
FILES = {
    "pkg/__init__.py": "",
    "pkg/consts.py": "SCALE = 2\n",
    "pkg/other.py": "def triple(x):\n    return 3 * x\n",
    "tests/test_consts.py": "from pkg import consts\n\n\ndef test_consts():\n    assert consts.SCALE == 2\n",
    "tests/test_other.py": "from pkg.other import triple\n\n\ndef test_other():\n    assert triple(2) == 6\n",
}


def test_a_constant_is_scored_by_the_test_modules_that_import_it(tmp_path: Path) -> None:
    for path, text in FILES.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    head = git(tmp_path, "rev-parse", "HEAD")
    m = TestMap(
        row="replay",
        commit=head,
        created="2026-01-01T00:00:00+00:00",
        tests={
            "tests/test_consts.py::test_consts": frozenset({"tests/test_consts.py"}),
            "tests/test_other.py::test_other": frozenset({"tests/test_other.py", "pkg/other.py"}),
        },
        imports={"pkg/consts.py": frozenset({1}), "pkg/other.py": frozenset({1})},
    )
    (tmp_path / "pkg" / "consts.py").write_text("SCALE = 3\n")
    chosen, full = bench.device_matrix_selection(m, ["pkg/consts.py"], sorted(m.tests), RULES, tmp_path)
    assert full is None
    assert chosen == {"tests/test_consts.py::test_consts"}
