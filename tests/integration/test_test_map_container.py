"""#34: a container row that records the test map has its image asked for coverage with the
plugin, before the first attempt: an image without it is refused and says so."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.integration import test_container as containers
from tests.integration.test_test_map_record import mapped_project

pytestmark = pytest.mark.slow

engine = containers.engine  # the fake engine's fixture


def test_an_image_without_coverage_is_refused_before_the_first_attempt(
    project: Callable[..., Project], engine: dict[str, str], tmp_path: Path
) -> None:
    # the image's python without coverage: a module of that name that does not import, first on its path
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "coverage.py").write_text("raise ImportError('no coverage in this image')\n")
    p = mapped_project(project, row=containers.ROW + f'env = {{ PYTHONPATH = "{shadow}" }}\n')
    assert p.run("run", "--device", "fixture", env=engine).returncode == 0  # without the map it runs
    proc = p.run("run", "--device", "fixture", "--record-map", env=engine)
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "coverage does not import (ImportError: no coverage in this image)" in proc.stderr
    started = [c for c in containers.calls(engine) if c[0] == "run" and "pytest" in c]
    assert len(started) == 1  # the first run's attempt only
    record = p.record()
    assert record["status"] == "error" and "coverage does not import" in record["reason"]
