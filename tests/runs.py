"""Helpers for the tests that run a row end to end: its outcomes, a suite of its own, a process's life."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import Project


def outcomes_of(record: dict[str, Any]) -> dict[str, str]:
    """Each test's outcome by its last nodeid part."""
    return {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}


def write_suite(p: Project, name: str, files: dict[str, str]) -> None:
    """A suite of its own, written into the project; the row runs only it."""
    folder = p.root / "suites" / name
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    text = (p.root / "pyproject.toml").read_text()
    (p.root / "pyproject.toml").write_text(text.replace('suites = ["passing"]', f'suites = ["{name}"]'))


def is_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie is dead for our purposes)."""
    try:
        Path(f"/proc/{pid}").stat()
    except OSError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
