"""The tests of this concept that start a process; the rest are in tests/unit/test_skip_views_meet.py (#41)."""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.conftest import Project
from tests.runs import write_suite
from tests.unit.test_skip_views_meet import TPU_ONLY


def test_a_runtime_tpu_only_skip_is_counted_as_the_by_design_device_skip_the_scan_found(
    project: Callable[..., Project],
) -> None:
    p = project("passing")
    write_suite(p, "tpu", {"test_tpu.py": TPU_ONLY})
    listed = p.run("skips", "list")
    assert "suites/tpu/test_tpu.py:14" in listed.stdout and "by design" in listed.stdout, listed.stdout
    ran = p.run("run", "--device", "fixture", "--results", str(p.results))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    raw = {t["nodeid"]: t["skip"] for t in p.record()["tests"]}
    assert raw["suites/tpu/test_tpu.py::test_on_tpu[0]"]["devices"] == []  # the run alone cannot tell

    triaged = p.run("triage", str(p.results), "--no-history")
    assert triaged.returncode == 0, triaged.stdout + triaged.stderr
    md = (p.results / "triage" / "triage.md").read_text()
    # the skip for a missing package the scan lists as citing no issue: it needs attention
    assert "## Device skips (6: 5 by design, 1 need attention)" in md
    assert "`suites/tpu/test_tpu.py::test_needs_a_package` (skip on fixture): cites no issue" in md
    page = (p.results / "triage" / "triage.html").read_text()
    assert "Device skips (6: 5 by design, 1 need attention)" in page
    skips = json.loads((p.results / "triage" / "triage.json").read_text())["skips"]
    tpu = [s for s in skips if "test_on_tpu" in s["nodeid"]]
    assert sorted(s["nodeid"] for s in tpu) == [f"suites/tpu/test_tpu.py::test_on_tpu[{n}]" for n in range(5)]
    assert all(s["by_design"] and s["where"] == "suites/tpu/test_tpu.py:14" and s["rows"] == ["fixture"] for s in tpu)
