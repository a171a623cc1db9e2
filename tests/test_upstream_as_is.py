"""Integration: a project shaped as pytorch/xla's test/ folder runs through device-matrix
with the outcomes it has when its files run as scripts (issue #24).

tests/fixtures/upstream_package is that shape: test/ is a package, helpers are imported
by bare name, a unittest file has a module-level function that takes ``self``, a helper
walks its callers' frames, and a file is run twice with other variables and flags.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES, Project, clean_env

pytestmark = pytest.mark.slow

PACKAGE = FIXTURES / "upstream_package"


def _project(tmp_path: Path, row: str, extra: str = "") -> Project:
    root = tmp_path / "upstream_package"
    shutil.copytree(PACKAGE, root)
    (root / "pyproject.toml").write_text(
        (root / "pyproject.toml").read_text()
        + f"""
[tool.device-matrix]
suites_dir = "test"
crash_reruns = 1

[tool.device-matrix.devices.fixture]
pjrt_device = "CPU"
run_in = "host"
presence = ["always"]
test_timeout = 60
{row}

[tool.device-matrix.devices.fixture.env]
CPU_NUM_DEVICES = "1"
{extra}
"""
    )
    return Project(root)


def _outcomes(record: dict[str, Any]) -> dict[str, str]:
    return {t["nodeid"]: t["outcome"] for t in record["tests"]}


def _plain(root: Path, file: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The file run as upstream's run_tests.sh runs it."""
    full = clean_env()
    full.update({"PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": "1", **(env or {})})
    return subprocess.run(
        [sys.executable, file, *args], cwd=root, env=full, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("isolation", ["file", "class"])
def test_bare_name_helpers_import_from_the_files_own_folder(tmp_path: Path, isolation: str) -> None:
    suites = '["test_bare_helper.py", "spmd/test_sharded.py", "test_module_function.py"]'
    p = _project(tmp_path, f'suites = {suites}\nisolation = "{isolation}"')
    for file in ("test/test_bare_helper.py", "test/spmd/test_sharded.py", "test/test_module_function.py"):
        assert _plain(p.root, file).returncode == 0
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outcomes = _outcomes(p.record())
    assert outcomes == {
        "test/test_bare_helper.py::TestBareHelper::test_close": "passed",
        "test/test_bare_helper.py::TestBareHelper::test_helper_is_the_folders_own": "passed",
        "test/spmd/test_sharded.py::TestSharded::test_devices": "passed",
        # unittest's collection: the module-level test_shared_check(self) is not a test
        "test/test_module_function.py::TestUsesTheSharedCheck::test_one": "passed",
        "test/test_module_function.py::TestUsesTheSharedCheck::test_two": "passed",
    }


def test_a_script_that_walks_its_callers_frames_passes_as_it_does_alone(tmp_path: Path) -> None:
    scripts = '\n[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/test_frames.py"\n'
    p = _project(tmp_path, "suites = []", extra=scripts)
    assert _plain(p.root, "test/test_frames.py").returncode == 0
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert set(_outcomes(p.record()).values()) == {"passed"}
    assert len(p.record()["tests"]) == 4
