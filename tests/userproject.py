"""A maintainer's own small project, outside this repository: ``tests/``, no ``suites/``.

The project's pyproject names its ``tests`` folder as the cpu row's suite; everything else
is the packaged configuration, as a new user has it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import Project, clean_env

PYPROJECT = """\
[project]
name = "userproj"
version = "0.1"

[tool.device-matrix]
suites_dir = "."
crash_reruns = 1
{top}

[tool.device-matrix.devices.cpu]
suites = {suites}
{row}
"""


def user_project(
    root: Path, files: dict[str, str], *, top: str = "", row: str = "", suites: str = '["tests"]'
) -> Project:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "pyproject.toml").write_text(PYPROJECT.format(top=top, row=row, suites=suites))
    return Project(root)


def plain_pytest(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m pytest ARGS`` in the project, as its maintainer runs it without device-matrix."""
    full = clean_env()
    full.pop("PJRT_DEVICE", None)
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rsxX", *args],
        cwd=root,
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
