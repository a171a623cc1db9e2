"""#34: a recorded map keeps the lines each test ran; a resumed run adds its tests' lines to
the map it continues, and one continuing a map without lines (version 1) writes none: a map
whose line data is partial would leave out tests."""

from __future__ import annotations

import json
from collections.abc import Callable

from device_matrix.records import testmap
from tests.conftest import Project
from tests.integration.test_test_map_record import interrupted, mapped_project, read_map


def test_a_resumed_run_keeps_the_lines_of_the_run_it_continues_and_adds_its_own(
    project: Callable[..., Project],
) -> None:
    p = mapped_project(project)
    assert p.run("run", "--device", "fixture", "--record-map").returncode == 0
    first = read_map(p)
    assert first.lines is not None
    interrupted(p)
    result = p.run("run", "--device", "fixture", "--record-map", "--resume")
    assert result.returncode == 0, result.stdout + result.stderr
    m = read_map(p)
    assert m.lines is not None
    a, b = "suites/mapped/test_m.py::test_a", "suites/mapped/test_m.py::test_b"
    assert m.lines[a] == first.lines[a]  # from the map of the run it continued
    # imported inside the test: its import (line 1) ran in the test too, and g's body
    assert m.lines[b]["mapped_lib/b.py"] == {1, 2}


def test_a_resumed_run_continuing_a_map_without_lines_writes_none(project: Callable[..., Project]) -> None:
    p = mapped_project(project)
    assert p.run("run", "--device", "fixture", "--record-map").returncode == 0
    path = p.results / "fixture" / testmap.FILE_NAME
    data = json.loads(path.read_text())
    old = {k: v for k, v in data.items() if k not in ("spans", "lines")}
    path.write_text(json.dumps({**old, "version": 1}))
    interrupted(p)
    result = p.run("run", "--device", "fixture", "--record-map", "--resume")
    assert result.returncode == 0, result.stdout + result.stderr
    m = read_map(p)
    assert m.lines is None
    assert len(m.tests) == 7
    assert "spans" not in json.loads(path.read_text())
