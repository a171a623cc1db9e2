"""``device-matrix doctor``: what each row lacks here, as pip would see it."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from device_matrix.cli import main
from device_matrix.errors import EXIT_OK, EXIT_UNAVAILABLE
from tests.userproject import user_project

WHEEL = "https://example.org/wheels/requests-1.0.0-py3-none-any.whl"


def _software(tmp_path: Path, capsys: pytest.CaptureFixture[str], install: list[str]) -> str:
    listed = ", ".join(f'"{r}"' for r in install)
    p = user_project(tmp_path, {"tests/test_a.py": "def test_a(): pass\n"}, row=f"install = [{listed}]")
    main(["--project", str(p.root), "doctor"])
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("cpu:")
    (line,) = [x for x in lines[start:] if x.startswith("  software here: ")][:1]
    return line.removeprefix("  software here: ")


def test_a_row_whose_packages_are_installed_at_its_versions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _software(tmp_path, capsys, [f"requests=={requests.__version__}", "pytest>=8"]) == "installed"


def test_another_version_a_wheel_url_and_an_extra_are_not_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the tpu row said "installed" with torch_xla but no libtpu (torch_xla[tpu]), and the
    # cuda row "missing torch_xla @ https://..." where torch_xla 2.9.0 was installed
    here = requests.__version__
    line = _software(
        tmp_path, capsys, ["requests==1.0.0", f"requests @ {WHEEL}", "requests[socks]", "no-such-package-here>=1"]
    )
    assert line.startswith(
        f"requests {here} installed, the row needs ==1.0.0; "
        f"requests {here} installed, the row needs 1.0.0 ({WHEEL}); "
        "requests[socks] needs PySocks, missing; "
        "no-such-package-here missing; pip install "
    ), line


def test_a_wheel_file_is_judged_by_its_name_and_a_folder_is_said_to_be_unchecked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    here = requests.__version__
    line = _software(tmp_path, capsys, ["./wheels/requests-1.0.0-py3-none-any.whl", "../vendor/torch_xla"])
    assert line.startswith(
        f"requests {here} installed, the row needs ==1.0.0; ../vendor/torch_xla cannot be checked here"
    ), line
    assert _software(tmp_path / "b", capsys, [f"wheels/requests-{here}-py3-none-any.whl"]) == "installed"


def test_a_bare_doctor_passes_where_the_rows_present_are_ready_and_a_named_absent_row_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `doctor` exited 4 on every machine without a TPU, a GPU and a Neuron device, where
    # the same bare `run` exits 0: as `run`, a row named with --device must be here
    p = user_project(tmp_path, {"tests/test_a.py": "def test_a(): pass\n"})
    absent = {"DEVICE_MATRIX_TPU_PRESENT": "0", "DEVICE_MATRIX_CUDA_PRESENT": "0", "DEVICE_MATRIX_NEURON_PRESENT": "0"}
    bare = p.run("doctor", env=absent)
    assert bare.returncode == EXIT_OK, bare.stdout + bare.stderr
    assert "tpu:\n  device: absent" in bare.stdout  # still said, with how to get it
    named = p.run("doctor", "--device", "cpu,tpu", env=absent)
    assert named.returncode == EXIT_UNAVAILABLE, named.stdout + named.stderr
    assert "cuda:" not in named.stdout.splitlines()  # only the rows named
    assert p.run("doctor", "--device", "cpu", env=absent).returncode == EXIT_OK
    del capsys
