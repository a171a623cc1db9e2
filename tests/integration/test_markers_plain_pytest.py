"""Device markers mean the same under plain pytest as under device-matrix (#20).

The device is the row when device-matrix runs the test (``DEVICE_MATRIX_DEVICE``), else
the PJRT device the maintainer exported (``PJRT_DEVICE``; ``GPU`` is cuda).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.userproject import plain_pytest, user_project

BROKEN = """\
import pytest


@pytest.mark.skip_device("cuda", issue="#7", reason="cuda kernel missing")
def test_cuda_kernel():
    assert False, "broken on cuda"


@pytest.mark.xfail_device("cuda", issue="ledger:3", reason="rounding differs")
def test_rounding():
    assert 0.1 + 0.2 == 0.3


def test_listed():
    assert False, "disabled by the list"


def test_everywhere():
    assert True
"""

DISABLED = """\
[[disable]]
test = "tests/test_cuda_broken.py::test_listed"
devices = ["cuda"]
issue = "#8"
reason = "disabled centrally"
"""


def _project(tmp_path: Path) -> Path:
    user_project(tmp_path, {"tests/test_cuda_broken.py": BROKEN, "device-matrix-disabled.toml": DISABLED})
    return tmp_path


@pytest.mark.parametrize("pjrt", ["CUDA", "GPU", "cuda"])
def test_pjrt_device_alone_applies_the_markers(tmp_path: Path, pjrt: str) -> None:
    root = _project(tmp_path)
    proc = plain_pytest(root, "tests/test_cuda_broken.py", env={"PJRT_DEVICE": pjrt})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 passed, 2 skipped, 1 xfailed" in out
    # the report cites the issue, as a row's does
    assert "[device-matrix] skip on cuda: cuda kernel missing (#7)" in out
    assert "[device-matrix] skip on cuda: disabled centrally (#8)" in out
    assert "[device-matrix] xfail on cuda: rounding differs (ledger:3)" in out


def test_another_pjrt_device_runs_them(tmp_path: Path) -> None:
    root = _project(tmp_path)
    proc = plain_pytest(root, "tests/test_cuda_broken.py", env={"PJRT_DEVICE": "CPU"})
    assert proc.returncode == 1
    assert "3 failed, 1 passed" in proc.stdout


def test_no_device_at_all_applies_nothing(tmp_path: Path) -> None:
    root = _project(tmp_path)
    proc = plain_pytest(root, "tests/test_cuda_broken.py")
    assert "3 failed, 1 passed" in proc.stdout, proc.stdout + proc.stderr


def test_the_row_wins_over_pjrt_device(tmp_path: Path) -> None:
    """A row named after nothing PJRT knows still matches by its name, and its PJRT device too."""
    root = _project(tmp_path)
    proc = plain_pytest(root, "tests/test_cuda_broken.py", env={"DEVICE_MATRIX_DEVICE": "cuda", "PJRT_DEVICE": "CPU"})
    assert "1 passed, 2 skipped, 1 xfailed" in proc.stdout, proc.stdout + proc.stderr
    assert "skip on cuda" in proc.stdout


def test_only_on_reads_gpu_as_cuda(tmp_path: Path) -> None:
    user_project(
        tmp_path,
        {
            "tests/test_only.py": """\
            from device_matrix.skips import only_on


            @only_on("cuda", reason="CUDA graphs exist on CUDA only")
            def test_graphs():
                pass
            """
        },
    )
    on_gpu = plain_pytest(tmp_path, "tests/test_only.py", env={"PJRT_DEVICE": "GPU"})
    assert "1 passed" in on_gpu.stdout, on_gpu.stdout + on_gpu.stderr
    on_cpu = plain_pytest(tmp_path, "tests/test_only.py", env={"PJRT_DEVICE": "CPU"})
    assert "1 skipped" in on_cpu.stdout, on_cpu.stdout + on_cpu.stderr
