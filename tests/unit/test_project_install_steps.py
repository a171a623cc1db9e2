"""``project_install`` as several pip commands, and ``doctor`` asking pip whether each
resolves here (#30 item 24): a project with one dependency that cannot be had on the runner
(a ``git+https`` one offline) installs the rest in a step of its own, and doctor says which
step does not resolve instead of "installed"."""

from __future__ import annotations

from pathlib import Path

import pytest

import device_matrix.nox as dm_nox
from device_matrix import config
from device_matrix.cli import main, pip_cause
from device_matrix.errors import ConfigError
from tests.unit.test_nox_api import FakeSession, venv
from tests.unit.test_nox_api import user_project as nox_project
from tests.userproject import user_project

NOT_THERE = "device-matrix-no-such-package-here==0.0.1"


def write(tmp_path: Path, install: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.device-matrix]\nproject_install = {install}\n")
    return tmp_path


def test_project_install_is_one_pip_command_or_several(tmp_path: Path) -> None:
    assert config.load(write(tmp_path, '["-e", "."]')).project_install == (("-e", "."),)
    steps = config.load(write(tmp_path, '[["--no-deps", "-e", "."], ["-r", "requirements.txt"]]'))
    assert steps.project_install == (("--no-deps", "-e", "."), ("-r", "requirements.txt"))
    assert config.load(write(tmp_path, "[]")).project_install == ()


@pytest.mark.parametrize("bad", ['["-e", ["."]]', "[[]]", '[["-e", 1]]'])
def test_a_mixed_or_empty_step_is_a_config_error(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        config.load(write(tmp_path, bad))
    assert info.value.exit_code == 3 and "project_install" in str(info.value)


def test_nox_installs_device_matrix_with_the_first_step_and_each_other_step_alone(tmp_path: Path) -> None:
    root = nox_project(
        tmp_path / "p", '[tool.device-matrix]\nproject_install = [["--no-deps", "-e", "."], ["-r", "req.txt"]]\n'
    )
    fake = FakeSession(venv(tmp_path / "venv"))
    (tmp_path / "venv").mkdir()
    dm_nox.run_row(fake, config.load(root), "cpu")  # type: ignore[arg-type]
    own = dm_nox.device_matrix_requirement()
    assert fake.installs == [
        ("torch==2.9.0", "torch_xla==2.9.0"),
        tuple(own),  # #42: the first step's --no-deps is the project's, not device-matrix's
        ("--no-deps", "-e", "."),
        ("-r", "req.txt"),
    ]


def _installs(tmp_path: Path, install: str) -> list[tuple[str, ...]]:
    root = nox_project(tmp_path / "p", f"[tool.device-matrix]\nproject_install = {install}\n")
    fake = FakeSession(venv(tmp_path / "venv"))
    (tmp_path / "venv").mkdir()
    dm_nox.run_row(fake, config.load(root), "cpu")  # type: ignore[arg-type]
    return list(fake.installs[1:])


@pytest.mark.parametrize(
    "step",
    [
        ("--no-deps", "-e", "."),
        ("-e", ".", "--no-deps"),
        ("--index-url", "https://mirror.example/simple", "-e", "."),
        ("--pre", "."),
    ],
)
def test_a_first_step_with_an_option_for_the_whole_command_installs_device_matrix_alone(
    tmp_path: Path, step: tuple[str, ...]
) -> None:
    # #42 Seen 16: `pip install <device-matrix> --no-deps -e .` left out device-matrix's own
    # dependencies, which were there only because the project's requirements brought them
    own = tuple(dm_nox.device_matrix_requirement())
    install = "[" + ", ".join(f'"{x}"' for x in step) + "]"
    assert _installs(tmp_path, install) == [own, step]


def test_a_first_step_of_requirements_alone_is_one_resolution_with_device_matrix(tmp_path: Path) -> None:
    own = tuple(dm_nox.device_matrix_requirement())
    assert _installs(tmp_path, '["-e", ".[dev]", "-r", "req.txt", "-c", "pins.txt"]') == [
        (*own, "-e", ".[dev]", "-r", "req.txt", "-c", "pins.txt")
    ]


def doctor(tmp_path: Path, capsys: pytest.CaptureFixture[str], install: str) -> tuple[int, list[str]]:
    p = user_project(tmp_path, {"tests/test_a.py": "def test_a(): pass\n"}, top=f"project_install = {install}")
    code = main(["--project", str(p.root), "doctor", "--device", "cpu"])
    return code, [x for x in capsys.readouterr().out.splitlines() if x.startswith("project install")]


CLONE = "git clone --filter=blob:none --quiet https://h.invalid/t.git /tmp/pip-install-1/t"


TIMES = "\u00d7"  # pip's mark of the command that failed


def test_the_cause_of_a_failed_pip_command_is_read_from_its_error() -> None:
    said = "\n".join(
        [
            "  error: subprocess-exited-with-error",
            "  ",
            f"  {TIMES} {CLONE} did not run successfully.",
            "  \u2502 exit code: 128",
            "  \u2570\u2500> [2 lines of output]",
            "      Cloning into '/tmp/pip-install-1/t'...",
            "      fatal: unable to access 'https://h.invalid/t.git/': Could not resolve host: h.invalid",
            "      [end of output]",
            "  ",
            "  note: This error originates from a subprocess, and is likely not a problem with pip.",
            "error: subprocess-exited-with-error",
            "",
            f"{TIMES} {CLONE} did not run successfully.",
            "\u2502 exit code: 128",
            "\u2570\u2500> See above for output.",
            "",
            "note: This error originates from a subprocess, and is likely not a problem with pip.",
        ]
    )
    assert pip_cause(said) == (
        f"{CLONE} (exit code: 128): "
        "fatal: unable to access 'https://h.invalid/t.git/': Could not resolve host: h.invalid"
    )
    resolution = (
        "ERROR: Could not find a version that satisfies x==1 (from versions: none)\n"
        "ERROR: No matching distribution found for x==1"
    )
    assert pip_cause(resolution) == "ERROR: No matching distribution found for x==1"
    assert pip_cause("ERROR: x\n\nhint: see above\nnote: more") == "ERROR: x"
    assert pip_cause("") == ""
