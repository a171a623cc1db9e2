"""#40: work a test did that the map once left out of it, each played in a real run: a git
project, its map recorded by a full run, a change, a selection; the failing test must run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import git, git_project
from tests.conftest import Project
from tests.runs import outcomes_of

MINE = "suites/mine"
OTHER = "def test_other():\n    assert True\n"


def _select(p: Project) -> tuple[str, dict[str, Any]]:
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    return proc.stdout + proc.stderr, p.record()


def _replace(p: Project, rel: str, old: str, new: str) -> None:
    target = p.root / MINE / rel
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new))


# a test that asks a link where it leads (``os.readlink``) reads the link
LINKED = {
    "releases/v1.txt": "1\n",
    "releases/v2.txt": "2\n",
    "lib.py": (
        "import os\n\n\ndef current():\n"
        "    return os.readlink(os.path.join(os.path.dirname(__file__), 'releases', 'current'))\n"
    ),
    "test_rel.py": "from lib import current\n\n\ndef test_current():\n    assert current() == 'v1.txt'\n",
    "test_other.py": OTHER,
}


def test_a_link_a_test_asked_where_it_leads_runs_that_test_when_it_changes(tmp_path: Path) -> None:
    p = git_project(tmp_path, LINKED)
    releases = p.root / MINE / "releases"
    (releases / "current").symlink_to("v1.txt")
    git(p.root, "add", "-A")
    git(p.root, "commit", "-qm", "link")
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    (releases / "current").unlink()
    (releases / "current").symlink_to("v2.txt")
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_current": "failed", "test_other": "deselected"}, out
