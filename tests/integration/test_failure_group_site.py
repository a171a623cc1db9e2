"""The tests of this concept that start a process; the rest are in tests/unit/test_failure_group_site.py (#41)."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.conftest import Project
from tests.runs import write_suite
from tests.unit.test_failure_group_site import HELPER, HUB, OTHER


def test_one_cause_raised_in_the_standard_library_from_each_tests_own_line_is_one_group(
    project: Callable[..., Project],
) -> None:
    p = project("passing")
    write_suite(p, "hub", {"test_hub.py": HUB})
    assert p.run("run", "--device", "fixture").returncode == 1
    proc = p.run("triage", "results")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    groups = json.loads((p.results / "triage" / "triage.json").read_text())["groups"]
    counts = sorted(g["count"] for g in groups)
    assert counts == [1, 1, 4], [(g["count"], g["signature"]) for g in groups]
    (hub,) = [g for g in groups if g["count"] == 4]
    assert hub["signature"].startswith("FileNotFoundError: [Errno 2] No such file or directory: '<tmp>' @ shutil.py")
    # where it shows the group: the first test's own frame, in the project
    assert hub["frame"] is not None and hub["frame"].startswith("suites/hub/test_hub.py:")


def test_the_same_exception_from_the_same_test_helper_is_one_group_whichever_file_calls_it(
    project: Callable[..., Project],
) -> None:
    p = project("passing")
    write_suite(p, "hub", {"test_helper.py": HELPER, "test_other.py": OTHER})
    assert p.run("run", "--device", "fixture").returncode == 1
    proc = p.run("triage", "results")
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    groups = json.loads((p.results / "triage" / "triage.json").read_text())["groups"]
    assert [g["count"] for g in groups] == [3], [(g["count"], g["signature"]) for g in groups]
    assert groups[0]["signature"].endswith("@ shutil.py")
