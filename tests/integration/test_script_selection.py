"""#29 (7): ``run --test FILE::Class::test`` in a row that runs FILE as a script runs that
test through the script, as ``python FILE Class.test`` would, never through pytest."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow

SCRIPT = """import unittest

from script_helper import TWO  # a helper beside the script, imported by bare name


class TestPicked(unittest.TestCase):
    def test_a(self):
        self.assertEqual(TWO, 2)
        self.assertEqual(__name__, "__main__")

    def test_b(self):
        pass


if __name__ == "__main__":
    unittest.main()
"""


def test_a_test_named_in_a_scripts_only_row_runs_through_its_script(project: Callable[..., Project]) -> None:
    p = project("passing")
    (p.root / "scripts").mkdir()
    (p.root / "scripts" / "test_picked.py").write_text(SCRIPT)
    (p.root / "scripts" / "script_helper.py").write_text("TWO = 2\n")
    text = (p.root / "pyproject.toml").read_text().replace('suites = ["passing"]', "suites = []")
    (p.root / "pyproject.toml").write_text(
        text + '\n[[tool.device-matrix.devices.fixture.scripts]]\nfile = "scripts/test_picked.py"\n'
    )
    proc = p.run("run", "--device", "fixture", "--test", "scripts/test_picked.py::TestPicked::test_a")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    assert {t["nodeid"]: t["outcome"] for t in record["tests"]} == {
        "scripts/test_picked.py::TestPicked::test_a": "passed"
    }


# #39 (3): every way a --test word can name a scripts entry or its tests runs it the way the
# row runs it (its file's own process, python FILE), never through pytest
PLAIN = "def test_plain():\n    pass\n"
CRASH = """import os
import unittest


class TestCrash(unittest.TestCase):
    def test_aborts(self):
        self.assertEqual(__name__, "__main__")
        os.abort()


if __name__ == "__main__":
    unittest.main()
"""
PICKED = "scripts/test_picked.py"


def _scripts_project(project: Callable[..., Project]) -> Project:
    p = project("passing")
    (p.root / "scripts").mkdir()
    (p.root / PICKED).write_text(SCRIPT)
    (p.root / "scripts" / "script_helper.py").write_text("TWO = 2\n")
    (p.root / "scripts" / "test_plain.py").write_text(PLAIN)  # not a script: pytest's
    (p.root / "crash").mkdir()
    (p.root / "crash" / "test_crash.py").write_text(CRASH)
    text = (p.root / "pyproject.toml").read_text().replace('suites = ["passing"]', "suites = []")
    entries = "".join(
        f'\n[[tool.device-matrix.devices.fixture.scripts]]\nfile = "{file}"\n'
        for file in (PICKED, "crash/test_crash.py")
    )
    (p.root / "pyproject.toml").write_text(text + entries)
    return p


def _attempt_lines(p: Project) -> list[str]:
    log = (p.results / "fixture" / "output.log").read_text()
    return [line for line in log.splitlines() if line.startswith("=== device-matrix attempt") and "(" in line]


BOTH = {f"{PICKED}::TestPicked::test_a": "passed", f"{PICKED}::TestPicked::test_b": "passed"}


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        (PICKED, BOTH),
        (f"./{PICKED}", BOTH),
        ("{root}/" + PICKED, BOTH),
        (f"scripts/../{PICKED}", BOTH),
        (f"{PICKED}::TestPicked", BOTH),
        (f"./{PICKED}::TestPicked", BOTH),
        (f"./{PICKED}::TestPicked::test_a", {f"{PICKED}::TestPicked::test_a": "passed"}),
        ("scripts", {**BOTH, "scripts/test_plain.py::test_plain": "passed"}),
        ("./scripts/", {**BOTH, "scripts/test_plain.py::test_plain": "passed"}),
    ],
)
def test_every_way_of_naming_a_script_runs_it_as_its_script(
    project: Callable[..., Project], word: str, expected: dict[str, str]
) -> None:
    p = _scripts_project(project)
    proc = p.run("run", "--device", "fixture", "--test", word.format(root=p.root))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record()
    # test_a asserts __name__ == "__main__": true only as python FILE runs it
    assert {t["nodeid"]: t["outcome"] for t in record["tests"]} == expected
    script_lines = [line for line in _attempt_lines(p) if "device_matrix.child.script" in line]
    assert len(script_lines) == 1, _attempt_lines(p)
    # pytest, given a folder, leaves the script's file to it
    pytest_lines = [line.replace(f"--ignore={PICKED}", "") for line in _attempt_lines(p) if "-m pytest" in line]
    assert not any(PICKED in line for line in pytest_lines), pytest_lines


def test_a_script_named_by_its_file_crashes_with_its_script_as_the_repro(project: Callable[..., Project]) -> None:
    p = _scripts_project(project)
    proc = p.run("run", "--device", "fixture", "--test", "crash/test_crash.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    assert {t["nodeid"]: t["outcome"] for t in record["tests"]} == {
        "crash/test_crash.py::TestCrash::test_aborts": "crashed"
    }
    (crash,) = record["crashes"]
    assert crash["repro"].endswith("crash/test_crash.py TestCrash.test_aborts"), crash["repro"]
    assert "-m pytest" not in crash["repro"]
    assert crash["classification"] == "deterministic"  # its rerun ran as the script too
    assert not [line for line in _attempt_lines(p) if "-m pytest" in line], _attempt_lines(p)


def test_a_test_a_script_does_not_have_is_said_so(project: Callable[..., Project]) -> None:
    p = _scripts_project(project)
    proc = p.run("run", "--device", "fixture", "--test", f"{PICKED}::TestPicked::test_typo")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (test,) = p.record()["tests"]
    assert (test["nodeid"], test["outcome"]) == (PICKED, "error")
    assert f"--test named no test that {PICKED} runs: {PICKED}::TestPicked::test_typo" in test["message"]
    assert "kind = " not in test["message"]
