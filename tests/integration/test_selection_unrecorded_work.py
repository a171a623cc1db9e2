"""#40: work a test did that the map once left out of it, each played in a real run: a git
project, its map recorded by a full run, a change, a selection; the failing test must run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import git, git_project, recorded_git_project
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


# a module imported for the first time inside a test: what its import ran (a call at module
# level) is run at import, which a later test reads the result of without running it
LAZY = {
    "heavy.py": "def _detect():\n    return 'numpy'\n\n\nBACKEND = _detect()\n",
    "api.py": "def backend_name():\n    import heavy\n\n    return heavy.BACKEND\n",
    "test_a.py": "from api import backend_name\n\n\ndef test_a():\n    assert isinstance(backend_name(), str)\n",
    "test_b.py": "from api import backend_name\n\n\ndef test_b():\n    assert backend_name() == 'numpy'\n",
    "test_other.py": OTHER,
}


# ... and one whose import reads a file
LAZY_READ = {
    **LAZY,
    "backend.txt": "numpy\n",
    "heavy.py": (
        "import os\n\n\ndef _detect():\n"
        "    with open(os.path.join(os.path.dirname(__file__), 'backend.txt')) as f:\n"
        "        return f.read().strip()\n\n\nBACKEND = _detect()\n"
    ),
}


@pytest.mark.parametrize(
    ("suite", "path", "old", "new", "other"),
    [
        (LAZY, "heavy.py", "return 'numpy'", "return 'torch'", "deselected"),
        # read at import: its readers cannot be told, every test runs
        (LAZY_READ, "backend.txt", "numpy", "torch", "passed"),
    ],
    ids=["a-function-it-calls", "a-file-it-reads"],
)
def test_what_an_import_inside_a_test_ran_or_read_runs_the_tests_that_use_what_it_made(
    tmp_path: Path, suite: dict[str, str], path: str, old: str, new: str, other: str
) -> None:
    p = recorded_git_project(tmp_path, suite)
    _replace(p, path, old, new)
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_a": "passed", "test_b": "failed", "test_other": other}, out


# a fixture of a wider scope is set up in the first test that asks for it: the tests after
# it get its value without running its lines
HELPER_FIXTURE = {
    "helpers.py": (
        "import pytest\n\n\n@pytest.fixture(scope='module')\ndef db():\n"
        "    rows = [1, 2, 3]\n    yield {'rows': rows}\n    rows.clear()\n"
    ),
    "test_db.py": (
        "from helpers import db  # noqa: F401\n\n\ndef test_first(db):\n    assert db['rows']\n\n\n"
        "def test_middle(db):\n    assert sum(db['rows']) == 6\n\n\n"
        "class TestLater:\n    def test_last(self, db):\n        assert len(db['rows']) >= 1\n"
    ),
    "test_other.py": OTHER,
}
PROGRAM_FIXTURE = {
    "cli.py": "import sys\n\n\nif __name__ == '__main__':\n    print('usage: pkg [ARGS]')\n    print('ran')\n",
    "test_cli.py": (
        "import contextlib\nimport io\nimport runpy\n\nimport pytest\n\n\n@pytest.fixture(scope='class')\n"
        "def output():\n    out = io.StringIO()\n    with contextlib.redirect_stdout(out):\n"
        "        runpy.run_module('cli', run_name='__main__')\n    return out.getvalue().splitlines()\n\n\n"
        "class TestCli:\n    def test_ran(self, output):\n        assert output[-1] == 'ran'\n\n"
        "    def test_usage(self, output):\n        assert output[0] == 'usage: pkg [ARGS]'\n"
    ),
    "test_other.py": OTHER,
}


@pytest.mark.parametrize(
    ("suite", "path", "old", "new", "outcomes"),
    [
        (
            HELPER_FIXTURE,
            "helpers.py",
            "[1, 2, 3]",
            "[1, 2, 4]",
            {"test_first": "passed", "test_middle": "failed", "test_last": "passed"},
        ),
        (PROGRAM_FIXTURE, "cli.py", "pkg [ARGS]", "pkg [OPTIONS]", {"test_ran": "passed", "test_usage": "failed"}),
    ],
    ids=["module-fixture-of-a-helper", "class-fixture-runs-a-program"],
)
def test_a_change_to_a_wide_fixture_s_setup_runs_every_test_that_requests_it(
    tmp_path: Path, suite: dict[str, str], path: str, old: str, new: str, outcomes: dict[str, str]
) -> None:
    p = recorded_git_project(tmp_path, suite)
    _replace(p, path, old, new)
    out, rec = _select(p)
    assert outcomes_of(rec) == {**outcomes, "test_other": "deselected"}, out


# a test whose code ran where coverage does not see it: under a line tracer of its own, on a
# thread started without threading
UNTRACED = {
    "lib.py": "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n",
    # a thread of threading's is traced by coverage: what it runs is seen
    "test_other.py": (
        "import threading\n\n\ndef test_other():\n    t = threading.Thread(target=sorted, args=([2, 1],))\n"
        "    t.start()\n    t.join()\n"
    ),
    # after the test that replaced the tracer, a test of the same process is seen again
    "test_z.py": "from lib import perimeter\n\n\ndef test_later():\n    assert perimeter(1, 1) == 4\n",
}
TRACED = (
    "import trace\n\nfrom lib import area\n\n\ndef test_hidden():\n"
    "    assert trace.Trace(count=1, trace=0).runfunc(area, 2, 3) == 6\n"
)
THREADED = (
    "import _thread\nimport time\n\nfrom lib import area\n\n\ndef test_hidden():\n    results = []\n"
    "    _thread.start_new_thread(lambda: results.append(area(2, 3)), ())\n"
    "    for _ in range(100):\n        if results:\n            break\n        time.sleep(0.05)\n"
    "    assert results == [6]\n"
)


@pytest.mark.parametrize("hidden", [TRACED, THREADED], ids=["own-line-tracer", "raw-thread"])
def test_a_test_that_ran_code_coverage_could_not_see_runs_on_a_change(tmp_path: Path, hidden: str) -> None:
    p = recorded_git_project(tmp_path, {**UNTRACED, "test_hidden.py": hidden})
    # each step's file differs in size from the step before: Python's bytecode cache takes a
    # file rewritten within the second of its last compile, at the same size, for the one it compiled
    _replace(p, "lib.py", "w * h", "w + h + 0")
    out, rec = _select(p)
    # test_later ran another function of lib.py: it may run too (area is handed outside the project)
    assert {k: v for k, v in outcomes_of(rec).items() if k != "test_later"} == {
        "test_hidden": "failed",
        "test_other": "deselected",
    }, out
    # the tests after it in its process are seen again: a change to what they ran runs them alone
    _replace(p, "lib.py", "w + h + 0\n", "w * h\n")
    _replace(p, "lib.py", "2 * (w + h)", "3 * (w + h)")
    assert len((p.root / MINE / "lib.py").read_text()) == len(UNTRACED["lib.py"])  # 4 shorter than the step before
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_hidden": "passed", "test_other": "deselected", "test_later": "failed"}, out


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
