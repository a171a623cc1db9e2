"""The distribution as the ecosystem expects it: license, metadata, one version (#20)."""

from __future__ import annotations

import email
import re
import tarfile
import zipfile

import device_matrix
from device_matrix.tomlfile import read as read_toml
from tests.built import build
from tests.conftest import REPO


def metadata() -> email.message.Message:
    with zipfile.ZipFile(build().wheel) as whl:
        (name,) = [n for n in whl.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(whl.read(name))


def test_the_license_is_apache_2_in_full_in_the_sdist_and_the_wheel() -> None:
    text = (REPO / "LICENSE").read_text()
    for phrase in (
        "Apache License",
        "Version 2.0, January 2004",
        "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION",
        "9. Accepting Warranty or Additional Liability.",
        "END OF TERMS AND CONDITIONS",
        "APPENDIX: How to apply the Apache License to your work.",
    ):
        assert phrase in text
    with zipfile.ZipFile(build().wheel) as whl:
        (name,) = [n for n in whl.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert whl.read(name).decode() == text
    with tarfile.open(build().sdist) as sdist:
        (member,) = [m for m in sdist.getmembers() if m.name.endswith("/LICENSE") and m.name.count("/") == 1]
        handle = sdist.extractfile(member)
        assert handle is not None and handle.read().decode() == text
    assert metadata()["License-Expression"] == "Apache-2.0"


def test_classifiers_urls_and_extras() -> None:
    meta = metadata()
    classifiers = meta.get_all("Classifier") or []
    assert {"Framework :: Pytest", "Typing :: Typed", "Programming Language :: Python :: 3.11"} <= set(classifiers)
    requires = read_toml(REPO / "pyproject.toml")["project"]["requires-python"]
    floor = requires.removeprefix(">=")
    assert f"Programming Language :: Python :: {floor}" in classifiers
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Documentation", "Changelog", "Issues"} <= set(urls)
    assert "nox" in (meta.get_all("Provides-Extra") or [])
    # nox is no dependency of users who do not use it
    assert not [r for r in meta.get_all("Requires-Dist") or [] if r.startswith("nox") and "extra ==" not in r]


def test_the_version_is_written_once() -> None:
    project = read_toml(REPO / "pyproject.toml")["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert metadata()["Version"] == device_matrix.__version__
    assert build().wheel.name.startswith(f"device_matrix-{device_matrix.__version__}-")
    # the changelog's newest release and the README's install lines are this version; the
    # changes made since, if any, come first under "## Unreleased"
    changelog = (REPO / "CHANGELOG.md").read_text()
    first = re.search(r"^## (?!Unreleased$)(\S+)", changelog, re.M)
    assert first and first.group(1) == device_matrix.__version__
    assert "## Unreleased" not in changelog[first.start() :]
    readme = (REPO / "README.md").read_text()
    assert f"@v{device_matrix.__version__}" in readme and f"device_matrix-{device_matrix.__version__}-" in readme


def test_the_wheel_holds_what_runs() -> None:
    with zipfile.ZipFile(build().wheel) as whl:
        names = set(whl.namelist())
        entry_points = next(whl.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    for needed in (
        "device_matrix/py.typed",
        "device_matrix/defaults.toml",
        "device_matrix/nox.py",
        "device_matrix/child/plugin.py",
    ):
        assert needed in names
    assert any(n.startswith("device_matrix/report/") and n.endswith(".css") for n in names)
    assert "device-matrix = device_matrix.cli:main" in entry_points
    assert "[pytest11]" in entry_points
    assert not [n for n in names if n.startswith(("tests/", "suites/"))]
