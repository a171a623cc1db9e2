"""The offline Actions run's wheelhouse (tests/engine_images.py) installs device-matrix.

The runner image has no index: the row jobs' `pip install` of device-matrix finds its
build backend and its dependencies in the wheelhouse or fails. A dependency added to
pyproject.toml without its wheel there failed every job's install (pystack, #39) and
was seen only minutes into a run of `nox -s actions` (#43).
"""

from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from device_matrix import tomlfile
from tests import engine_images

ROOT = Path(__file__).resolve().parents[2]
# the image's platform: Debian bookworm's python on x86_64
IMAGE = {
    "python_version": engine_images.BASE["python"].removeprefix("python"),
    "python_full_version": engine_images.BASE["python"].removeprefix("python") + ".2",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def _pins() -> dict[str, str]:
    pins = {}
    for pin in engine_images.ACTIONS["wheelhouse"]:
        name, _, version = str(pin).partition("==")
        pins[canonicalize_name(name)] = version
    return pins


def _needed(requirements: list[str]) -> list[Requirement]:
    wanted = [Requirement(r) for r in requirements]
    return [r for r in wanted if r.marker is None or r.marker.evaluate(dict(IMAGE))]


def test_the_wheelhouse_holds_every_dependency_and_the_build_backend() -> None:
    project = tomlfile.read(ROOT / "pyproject.toml")
    pins = _pins()
    needed = _needed(project["project"]["dependencies"] + project["build-system"]["requires"])
    missing = [str(r) for r in needed if canonicalize_name(r.name) not in pins]
    assert not missing, f"add a pin of each to ACTIONS['wheelhouse'] in tests/engine_images.py: {missing}"
    wrong = [
        f"{r} (pinned {pins[canonicalize_name(r.name)]})"
        for r in needed
        if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)
    ]
    assert not wrong, f"the wheelhouse's pins do not satisfy: {wrong}"


def test_a_dependency_without_its_wheel_is_named() -> None:
    pins = _pins()
    needed = _needed(["pystack>=1.4; sys_platform == 'linux'", "somethingnew>=1", "tomli>=2; python_version < '3.11'"])
    assert [r.name for r in needed if canonicalize_name(r.name) not in pins] == ["somethingnew"]
