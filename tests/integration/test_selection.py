"""The command line's selection: one that selects nothing is a wrong command line, a suite that collects nothing not."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project
from tests.runs import write_suite

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("args", "isolation"),
    [
        (["--", "-k", "nomatch"], "row"),
        (["--test", "suites/passing/test_passing.py::test_nope"], "row"),
        # a path that does not exist is the same wrong command line, not a broken environment
        (["--test", "suites/passing/test_absent.py"], "row"),
        (["--test", "suites/passing/test_absent.py"], "file"),
        # collected first, then a process per file: the collection is what selected nothing
        (["--", "-k", "nomatch"], "file"),
    ],
)
def test_a_selection_of_nothing_is_a_wrong_command_line(
    project: Callable[..., Project], args: list[str], isolation: str
) -> None:
    p = project("passing", row=f'isolation = "{isolation}"')
    proc = p.run("run", "--device", "fixture", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "selected no test" in proc.stderr and "TIP" in proc.stderr
    record = p.record()
    assert record["status"] == "error" and record["tests"] == []
    assert "selected no test" in (record["reason"] or "")


@pytest.mark.parametrize("isolation", ["row", "file"])
def test_a_suite_that_collects_nothing_is_not_a_wrong_command_line(
    project: Callable[..., Project], isolation: str
) -> None:
    p = project("passing", row=f'isolation = "{isolation}"')
    write_suite(p, "empty", {"test_empty.py": "VALUE = 1\n"})
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    assert record["status"] == "failed" and "no tests collected" in (record["reason"] or "")
    assert "selected no test" not in (record["reason"] or "")
