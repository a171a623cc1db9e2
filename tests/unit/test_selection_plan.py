"""Which tests a change can break (#34): device_matrix/selection.py's decisions, pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from device_matrix import config, selection
from device_matrix.records.testmap import TestMap

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
RULES = selection.Rules(
    max_age=timedelta(days=14),
    full=("conftest.py", "pyproject.toml", "requirements*.txt", "*.lock", "ci/*"),
    ignore=("*.md", "docs/*"),
)
MAP = TestMap(
    row="cpu",
    commit="a" * 40,
    created="2026-11-30T12:00:00+00:00",
    tests={
        "tests/test_a.py::test_one": frozenset({"src/pkg/a.py", "tests/test_a.py"}),
        "tests/test_a.py::test_two[x]": frozenset({"src/pkg/a.py", "src/pkg/b.py", "tests/test_a.py"}),
        "tests/test_b.py::test_b": frozenset({"src/pkg/b.py", "tests/test_b.py"}),
        "tests/test_c.py::test_c": frozenset({"src/pkg/c.py", "tests/test_c.py"}),
        "tests/test_lost.py::test_lost": frozenset(),
    },
    imports={"src/pkg/other.py": frozenset({1})},  # imported, never run by a test
)
ALL = [*MAP.tests, "tests/test_a.py::test_three"]


def _plan(changed: list[str], **kw: object) -> selection.Plan:
    # the changes of these tests are in function bodies only, unless a test says otherwise
    kw.setdefault("bodies", changed)
    return selection.plan(MAP, changed, row="cpu", rules=RULES, now=NOW, **kw)  # type: ignore[arg-type]


def test_a_change_runs_the_tests_that_cover_it_and_leaves_out_the_rest_saying_why() -> None:
    p = _plan(["src/pkg/b.py"])
    assert p.full_reason is None
    assert p.decide("tests/test_b.py::test_b") == selection.Decision(True, "covers src/pkg/b.py", "covers")
    assert p.decide("tests/test_a.py::test_two[x]").why == "covers"
    one = p.decide("tests/test_a.py::test_one")
    assert one == selection.Decision(False, "covers none of the 1 changed file", "deselected")
    assert not p.decide("tests/test_c.py::test_c").run
    run, left_out = p.split(ALL)
    assert run == [
        "tests/test_a.py::test_two[x]",
        "tests/test_b.py::test_b",
        "tests/test_lost.py::test_lost",
        "tests/test_a.py::test_three",
    ]
    assert left_out == {
        "tests/test_a.py::test_one": "covers none of the 1 changed file",
        "tests/test_c.py::test_c": "covers none of the 1 changed file",
    }


def test_a_test_runs_when_its_own_file_changed_when_new_or_without_map_data_or_recent() -> None:
    p = _plan(["tests/test_c.py", "src/pkg/other.py"], recent={"tests/test_b.py::test_b": "recently failing"})
    assert p.decide("tests/test_c.py::test_c") == selection.Decision(
        True, "its own file changed (tests/test_c.py)", "own_file"
    )
    new = p.decide("tests/test_a.py::test_three")
    assert (new.run, new.why, new.reason) == (True, "new", f"new: not in the test map of commit {'a' * 12}")
    assert p.decide("tests/test_lost.py::test_lost").why == "no_data"
    assert p.decide("tests/test_b.py::test_b") == selection.Decision(True, "recently failing", "recent")
    assert p.decide("tests/test_a.py::test_one") == selection.Decision(
        False, "covers none of the 2 changed files", "deselected"
    )


def test_the_summary_counts_the_tests_by_why_each_ran() -> None:
    p = _plan(["src/pkg/b.py"], recent={"tests/test_c.py::test_c": "recently failing"})
    assert p.summary(ALL) == {
        "mode": "changed",
        "full_reason": None,
        "map_commit": "a" * 40,
        "changed": ["src/pkg/b.py"],
        "ran": 5,
        "total": 6,
        "by_reason": {"covers": 2, "new": 1, "no_data": 1, "recent": 1, "deselected": 1},
    }


@pytest.mark.parametrize(
    "changed",
    [
        ["conftest.py"],
        ["tests/deep/conftest.py", "src/pkg/a.py"],
        ["pyproject.toml"],
        ["requirements-dev.txt"],
        ["uv.lock"],
        ["ci/run.py"],
        ["tests/data/weights.bin"],  # a data file: which tests read it the map cannot say
        ["tests/fixtures/expected.json"],
        ["src/pkg/_native.so"],
    ],
)
def test_a_change_the_map_cannot_follow_runs_every_test(changed: list[str]) -> None:
    p = _plan(changed)
    assert p.full_reason is not None and "which the test map cannot follow" in p.full_reason
    assert all(p.decide(n).run for n in ALL)
    assert p.decide("tests/test_c.py::test_c").why == "full"
    assert p.summary(ALL)["by_reason"] == {"full": len(ALL)}


def test_the_full_reason_names_the_files_that_cannot_be_mapped() -> None:
    p = _plan(["src/pkg/a.py", "pyproject.toml", "conftest.py", "a.cfg", "b.json", "c.txt"])
    assert p.full_reason == "a.cfg, b.json, c.txt and 2 more change, which the test map cannot follow"
    assert _plan(["pyproject.toml"]).full_reason == "pyproject.toml changes, which the test map cannot follow"


def test_documentation_the_rules_ignore_changes_nothing() -> None:
    p = _plan(["README.md", "docs/guide.txt", "src/pkg/c.py"])
    assert p.full_reason is None
    assert p.changed == ("src/pkg/c.py",)
    assert p.split(ALL)[1].keys() == {
        "tests/test_a.py::test_one",
        "tests/test_a.py::test_two[x]",
        "tests/test_b.py::test_b",
    }
    nothing = _plan(["README.md"])
    assert nothing.decide("tests/test_c.py::test_c") == selection.Decision(
        False, f"nothing changed since commit {'a' * 12}", "deselected"
    )


def test_no_map_runs_every_test_and_says_so() -> None:
    p = selection.plan(None, ["src/pkg/a.py"], row="cpu", rules=RULES, now=NOW)
    assert p.full_reason == "no test map for row 'cpu'"
    assert p.decide("tests/test_c.py::test_c") == selection.Decision(
        True, "every test runs: no test map for row 'cpu'", "full"
    )
    assert p.summary(ALL)["map_commit"] is None


def test_a_map_older_than_the_bound_is_not_used() -> None:
    old = TestMap(row="cpu", commit="b" * 40, created="2026-11-01T00:00:00Z", tests=MAP.tests)
    p = selection.plan(old, ["src/pkg/a.py"], row="cpu", rules=RULES, now=NOW)
    assert p.full_reason == "the test map of row 'cpu' is 30 days old (select_map_max_age_days allows 14)"
    assert all(p.decide(n).run for n in ALL)
    # a day inside the bound is used; a naive date is read as UTC
    young = TestMap(row="cpu", commit=None, created="2026-11-18T12:00:00", tests=MAP.tests)
    p = selection.plan(young, ["src/pkg/a.py"], row="cpu", rules=RULES, now=NOW, bodies=["src/pkg/a.py"])
    assert p.full_reason is None
    assert p.decide("tests/test_a.py::test_three").reason == "new: not in the test map of a checkout outside git"
    bad = TestMap(row="cpu", commit=None, created="yesterday", tests=MAP.tests)
    reason = selection.plan(bad, [], row="cpu", rules=RULES, now=NOW).full_reason
    assert reason == "the test map of row 'cpu' has no readable date ('yesterday')"


def test_forced_runs_every_test_with_the_reason_given() -> None:
    p = _plan(["src/pkg/a.py"], force="--select all", mode="all")
    assert (p.mode, p.full_reason) == ("all", "--select all")
    assert p.summary(ALL)["mode"] == "all"
    assert p.decide("tests/test_c.py::test_c").reason == "every test runs: --select all"


def test_patterns_match_names_anywhere_and_paths_from_the_root() -> None:
    assert selection.matches("a/b/conftest.py", ["conftest.py"])
    assert not selection.matches("a/b/conftest.py.orig", ["conftest.py"])
    assert selection.matches("ci/deep/x.py", ["ci/*"])
    assert not selection.matches("src/ci/x.py", ["ci/*"])
    assert selection.unmappable(["./x.py", "z.md", "y.toml", "pyproject.toml"], RULES) == ["pyproject.toml", "y.toml"]


def test_the_project_rules_come_from_its_configuration(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.device-matrix]\nselect_map_max_age_days = 3\nselect_ignore = ["*.md"]\ndisable_list = "ci/off.toml"\n'
    )
    rules = selection.rules_of(config.load(tmp_path, environ={}))
    assert rules.max_age == timedelta(days=3)
    assert rules.ignore == ("*.md",)
    # the project's own device-matrix files run everything when they change, beside the packaged list
    assert {"conftest.py", "pyproject.toml", "ci/off.toml", "device-matrix-issues.toml"} <= set(rules.full)
    assert selection.unmappable(["ci/off.toml", "README.md"], rules) == ["ci/off.toml"]


def test_what_the_install_commands_name_runs_every_test_when_it_changes(tmp_path: Path) -> None:
    # #40: a requirements file of any name, what it names in turn, a folder installed from
    (tmp_path / "reqs").mkdir()
    (tmp_path / "reqs" / "test.txt").write_text("pytest\n-r ../extra/more.txt  # more\n-e ../vendor/shapes_v1\n")
    (tmp_path / "vendor" / "shapes_v1").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text(
        "[tool.device-matrix]\n"
        'project_install = [["-e", "."], ["--no-build-isolation", "-r", "reqs/test.txt"], ["-cpins.txt"]]\n'
        "[tool.device-matrix.devices.cpu]\n"
        'install_args = ["--constraint=cpu-pins.txt"]\ninstall = ["./wheels/v[1].whl", "numpy>=2"]\n'
    )
    full = selection.rules_of(config.load(tmp_path, environ={})).full
    named = ["reqs/test.txt", "extra/more.txt", "vendor/shapes_v1/shapes.py", "pins.txt", "cpu-pins.txt"]
    assert [f for f in named if selection.matches(f, full)] == named
    assert selection.matches("wheels/v[1].whl", full)
    # the project itself (-e .) is what the map follows; what no command names is not here
    assert not any(selection.matches(f, full) for f in ["pkg/mod.py", "vendor/other/shapes.py", "wheels/v1.whl"])
    # whatever its name, a requirements file runs every test by the packaged list
    requirements = ["test-requirements.txt", "requirements/dev.txt", "requirements.in", "dev-requirements.in"]
    assert all(selection.matches(f, full) for f in requirements)


def test_a_wheel_or_a_folder_of_wheels_the_install_commands_name_runs_every_test(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "dep-1.0-py3-none-any.whl").write_bytes(b"PK\x03\x04 ./x\x00y/z binary")
    (tmp_path / "local").mkdir()
    (tmp_path / "deps.txt").write_text("--find-links local\ndep\n")
    wheel = (tmp_path / "wheels" / "dep-1.0-py3-none-any.whl").as_uri()
    (tmp_path / "pyproject.toml").write_text(
        "[tool.device-matrix]\n"
        'project_install = [["./wheels/dep-1.0-py3-none-any.whl"], ["-f", "links", "--find-links=more", "dep"], '
        f'["-r", "deps.txt"], ["dep @ {wheel}"]]\n'
    )
    full = selection.rules_of(config.load(tmp_path, environ={})).full
    named = ["wheels/dep-1.0-py3-none-any.whl", "links/dep-2.whl", "more/dep-2.whl", "local/dep-2.whl"]
    assert [f for f in named if selection.matches(f, full)] == named


def test_left_out_lists_the_maps_tests_that_do_not_run_with_why() -> None:
    p = _plan(["src/pkg/c.py"], recent={"tests/test_b.py::test_b": "recently failing"})
    assert p.left_out() == {
        "tests/test_a.py::test_one": "covers none of the 1 changed file",
        "tests/test_a.py::test_two[x]": "covers none of the 1 changed file",
    }
    assert _plan(["pyproject.toml"]).left_out() == {}
    assert selection.plan(None, [], row="cpu", rules=RULES).left_out() == {}


def test_a_change_to_what_runs_at_import_or_to_a_file_no_test_ran_runs_every_test() -> None:
    # #34: a module's import ran for whichever test module imported it first: a change there
    # (a constant, a decorator, a class body) can break any test
    imported = _plan(["src/pkg/b.py"], bodies=[])
    assert imported.full_reason == "src/pkg/b.py changes code that runs when it is imported"
    assert all(imported.decide(n).run for n in ALL)
    # a Python file the map never saw run: new, or where the map does not measure (.tools/)
    for path in ("src/pkg/new.py", ".tools/helper.py"):
        unknown = _plan([path])
        assert unknown.full_reason == (
            f"{path} is a Python file no test of the map ran (new, or where the map does not measure)"
        )
    # a test file is followed by its own tests, a new one's tests are new
    tests = _plan(["tests/test_a.py", "tests/test_new.py"], bodies=[])
    assert tests.full_reason is None
    assert tests.decide("tests/test_a.py::test_one").why == "own_file"
    assert tests.decide("tests/test_b.py::test_b").run is False


OLD = """import os

LIMIT = 3


@decorate(1)
def f(x, y=2):
    z = x + y
    return z


class C:
    size = 4

    def m(self):
        return self.size
"""


@pytest.mark.parametrize(
    ("new", "body_only"),
    [
        (OLD.replace("z = x + y", "z = x - y"), True),  # a function's body
        (OLD.replace("return self.size", "return self.size + 1"), True),  # a method's body
        (OLD.replace("LIMIT = 3", "LIMIT = 4"), False),  # a constant
        (OLD.replace("@decorate(1)", "@decorate(2)"), False),  # a decorator
        (OLD.replace("y=2", "y=3"), False),  # a default
        (OLD.replace("size = 4", "size = 5"), False),  # a class body
        (OLD + "\n\ndef f(x):\n    return 0\n", False),  # a definition that shadows one
        (OLD.replace("import os", "import sys"), False),  # an import
        (OLD.replace("return z", "return z +"), False),  # not Python any more
        (None, False),  # deleted
    ],
)
def test_bodies_only_tells_a_function_body_from_what_runs_at_import(new: str | None, body_only: bool) -> None:
    assert selection.bodies_only(OLD, new, frozenset({8}), frozenset({1, 3, 6, 7})) is body_only


def test_a_body_that_ran_at_import_is_what_runs_at_import() -> None:
    # a function called at module level ran at import: its body is the import's too
    assert selection.bodies_only(OLD, OLD.replace("z = x + y", "z = x - y"), frozenset({8}), frozenset({8})) is False
    assert selection.bodies_only(None, OLD, frozenset(), frozenset()) is False  # new


def test_the_lines_a_diff_touched_are_read_from_its_hunks() -> None:
    diff = "diff --git a/x.py b/x.py\n@@ -3 +3 @@\n-a\n+b\n@@ -10,2 +10,0 @@\n-c\n-d\n@@ -20,0 +19,2 @@\n+e\n+f\n"
    assert selection.touched_lines(diff) == {3, 10, 11, 20, 21}
