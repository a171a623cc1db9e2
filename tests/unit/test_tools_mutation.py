"""The mutation session's own arithmetic (tools/mutation.py): names, diffs, equivalents and the score."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_tool", ROOT / "tools" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutation_tool"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


tool = _tool()


def test_function_names_from_mutant_names() -> None:
    assert tool.function_of("device_matrix.redact.x_secret_values__mutmut_12", "device_matrix.redact") == (
        "secret_values"
    )
    assert tool.function_of("device_matrix.redact.x__lines__mutmut_1", "device_matrix.redact") == "_lines"
    assert tool.function_of("device_matrix.redact.xǁRedactorǁspans__mutmut_3", "device_matrix.redact") == (
        "Redactor.spans"
    )
    assert tool.function_of("a.b.xǁFoldǁ__init____mutmut_4", "a.b") == "Fold.__init__"
    assert tool._key("Fold.__init__") == "xǁFoldǁ__init__" and tool._key("collect") == "x_collect"


def test_a_diff_is_its_removed_and_added_lines_stripped() -> None:
    diff = (
        "--- device_matrix/x.py\n+++ device_matrix/x.py\n@@ -1,3 +1,3 @@\n def f():\n"
        "-    return a + 1\n+    return a - 1\n     pass"
    )
    assert tool.split_diff(diff) == ("return a + 1", "return a - 1")


def test_every_equivalent_needs_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "eq.toml"
    path.write_text('[[mutant]]\nmodule = "m.py"\nfunction = "f"\nline = "a"\nmutated = "b"\nreason = "  "\n')
    with pytest.raises(SystemExit, match="needs module, function, line, mutated and a reason"):
        tool.load_equivalents(path)
    path.write_text('[[mutant]]\nmodule = "m.py"\nfunction = "f"\nline = " a "\nmutated = "b"\nreason = "why"\n')
    (eq,) = tool.load_equivalents(path)
    assert (eq.line, eq.mutated, eq.reason) == ("a", "b", "why")
    assert tool.load_equivalents(tmp_path / "none.toml") == []


def _result(statuses: list[str], equivalent: int = 0, threshold: float = 90) -> object:
    module = tool.Module("device_matrix/m.py", ["tests/test_m.py"], threshold)
    mutants = [tool.Mutant(f"m.x_f__mutmut_{i}", "f", s) for i, s in enumerate(statuses)]
    for m in [m for m in mutants if m.status == "survived"][:equivalent]:
        m.reason = "cannot change behaviour"
    return tool.Result(module, mutants, 1.0, [])


def test_the_score_leaves_equivalents_out_and_counts_no_tests_as_survived() -> None:
    r = _result(["killed"] * 8 + ["timeout", "survived", "no tests"], equivalent=1)
    assert (r.killed, len(r.survived), r.equivalent) == (9, 1, 1)
    assert r.score == 90.0 and r.ok
    low = _result(["killed"] * 8 + ["survived", "no tests"])
    assert low.score == 80.0 and not low.ok
    assert not _result([]).ok  # no mutant at all is a wrong configuration
    touched = tool.Result(tool.Module("m.py", ["t.py"], 90, ["f"], narrowed=True), [], 1.0, [])
    assert touched.ok  # ... unless the functions a change touched have none
    assert not tool.Result(tool.Module("m.py", ["t.py"], 90, ["f"], narrowed=True), [], 1.0, ["boom"]).ok


def test_a_diffs_added_lines_and_where_a_removal_was() -> None:
    diff = "@@ -3 +3 @@\n-a\n+b\n@@ -10,2 +10,3 @@\n-c\n+d\n+e\n+f\n@@ -20,4 +22,0 @@\n-g\n"
    assert tool.added_lines(diff) == {3, 10, 11, 12, 22, 23}
    assert tool.added_lines("") == set()


SOURCE = """\
import x

LIMIT = 3


def top(a):
    def inner():
        return a + 1
    return inner()


class Kept:
    size = 1

    @property
    def big(self):
        return self.size > LIMIT

    def small(self):
        return not self.big
"""


def test_the_functions_mutmut_mutates_that_hold_a_touched_line() -> None:
    assert tool.touched_functions(SOURCE, {8}) == ["top"]  # a nested def is its outer function's
    assert tool.touched_functions(SOURCE, {15}) == ["Kept.big"]  # a decorator's line is the method's
    assert tool.touched_functions(SOURCE, {3, 13}) == []  # module and class level: no function
    assert tool.touched_functions(SOURCE, {6, 20}) == ["top", "Kept.small"]
