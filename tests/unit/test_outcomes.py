"""The one vocabulary of outcomes and statuses (#31): one definition, and no second list."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_matrix.cli import combine_exit_codes
from device_matrix.errors import (
    EXIT_CONFIG,
    EXIT_ENVIRONMENT,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_RESULTS,
    EXIT_TESTS_FAILED,
    EXIT_TRACKER,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
)
from device_matrix.records import outcomes

PACKAGE = Path(__file__).resolve().parents[2] / "device_matrix"
WORDS = frozenset(outcomes.OUTCOMES) | frozenset(outcomes.STATUS_ORDER) | frozenset(outcomes.BUCKETS)
# pytest's own TestReport.outcome ("passed", "failed", "skipped", and plugins' "rerun" and
# "error") is another vocabulary, read where the child and the journal take pytest's reports
PYTEST_VOCABULARY = {"wire.py", "run/journal.py", "child/plugin.py"}


@pytest.mark.parametrize(
    ("codes", "combined"),
    [
        ([EXIT_TESTS_FAILED, EXIT_CONFIG], EXIT_CONFIG),
        ([EXIT_TRACKER, EXIT_TESTS_FAILED], EXIT_TRACKER),
        ([EXIT_UNAVAILABLE, EXIT_RESULTS], EXIT_RESULTS),
        ([EXIT_OK, EXIT_TRACKER, EXIT_UNAVAILABLE], EXIT_TRACKER),
        ([EXIT_RESULTS, EXIT_ENVIRONMENT], EXIT_ENVIRONMENT),
        ([EXIT_CONFIG, EXIT_USAGE], EXIT_USAGE),
        ([EXIT_CONFIG, EXIT_INTERNAL], EXIT_INTERNAL),
        ([EXIT_CONFIG, 143, 130], 143),
    ],
)
def test_every_exit_code_has_its_place_in_the_order(codes: list[int], combined: int) -> None:
    # #31: 3, 6 and 7 were left out of the order, so a failed test hid a configuration,
    # tracker or results error
    assert combine_exit_codes(codes) == combined


def test_the_exit_order_names_every_code_of_the_tool_once() -> None:
    import device_matrix.errors as errors

    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_") and k != "EXIT_INTERRUPTED"}
    assert sorted(outcomes.EXIT_SEVERITY) == sorted(codes)
    assert set(outcomes.STATUS_EXIT) == set(outcomes.STATUS_ORDER)


def test_every_outcome_has_a_bucket_and_a_letter() -> None:
    assert set(outcomes.BUCKET_OF) == set(outcomes.OUTCOMES) == set(outcomes.CODE)
    assert len(set(outcomes.CODE.values())) == len(outcomes.CODE)
    assert outcomes.ABSENT not in outcomes.OUTCOME_OF
    assert {"P", "x"} == outcomes.PASS_CODES and set("FEXCT") == outcomes.FAIL_CODES
    assert outcomes.NAMED_IN_FAILED == ("error", "xpassed")
    assert {"passed", "skipped", "xfailed"} == outcomes.QUIET_OUTCOMES


def _lists(tree: ast.AST) -> Iterator[tuple[int, list[str]]]:
    """Literal collections (and dict keys) of two or more names of the vocabulary."""
    for node in ast.walk(tree):
        items: list[ast.expr | None]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = list(node.elts)
        elif isinstance(node, ast.Dict):
            items = list(node.keys)
        elif isinstance(node, ast.MatchOr):
            items = [p.value if isinstance(p, ast.MatchValue) else None for p in node.patterns]
        else:
            continue
        names = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
        if len(names) >= 2 and len(names) == len(items) and set(names) <= WORDS:
            yield node.lineno, names


def _second_lists() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name in PYTEST_VOCABULARY or name == "records/outcomes.py":
            continue
        for line, names in _lists(ast.parse(path.read_text(), str(path))):
            found.append(f"device_matrix/{name}:{line}: {names}")
    return found


def test_no_second_list_of_outcomes_or_statuses() -> None:
    found = _second_lists()
    assert not found, "a list of outcomes or statuses outside records/outcomes.py; name its group there:\n" + "\n".join(
        found
    )


def test_the_scan_finds_a_second_list(tmp_path: Path) -> None:
    # the check above can fail: each shape of a second list is found
    source = """
A = ("crashed", "timeout")
B = {"passed": 0, "failed": 1}
C = x in {"running", "interrupted"}
match y:
    case "skipped" | "xfailed":
        pass
D = ("crashed", "other")
"""
    assert [line for line, _ in _lists(ast.parse(source))] == [2, 3, 4, 6]
