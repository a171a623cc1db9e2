"""Build device-matrix's sdist and wheel once per test process, offline, from a copy of the tree.

The copy keeps the checkout clean (setuptools writes build/ and egg-info beside the sources)
and lets xdist workers build at the same time.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import REPO

# what a checkout holds that is not a source of the package
_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".nox", ".device-matrix", "results", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache"
)


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path


@functools.cache
def build() -> Built:
    """``python -m build`` (sdist, then the wheel from the sdist) without network access."""
    out = Path(tempfile.mkdtemp(prefix="dm-build-"))
    tree = out / "src"
    shutil.copytree(REPO, tree, ignore=_NOT_SOURCES)
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out / "dist"), str(tree)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (sdist,) = (out / "dist").glob("*.tar.gz")
    (wheel,) = (out / "dist").glob("*.whl")
    return Built(sdist=sdist, wheel=wheel)
