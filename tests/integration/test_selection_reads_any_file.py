"""#40: every file of the repository a test reads is its own, whatever it is and however it
is reached: a Python file read as text (a hygiene test, a linter's fixture), a file in a
hidden folder (``.ci/``), a file reached through a symbolic link, a path a test only asked
about (``is_file()``, ``exists()``: a search path), a file of the repository outside the
project's own folder. A change to one runs the tests that read it, and no other."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.builders import SUITE_ON_PATH, committed, git, git_project, recorded_git_project
from tests.conftest import Project, make_project
from tests.runs import outcomes_of, write_suite

MINE = "suites/mine"
SUITE = {
    "calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "test_calc.py": "import calc\n\n\ndef test_add():\n    assert calc.add(1, 2) == 3\n",
    # a hygiene test: it reads the library's source as text, and runs none of it
    "test_hygiene.py": (
        "import pathlib\n\nHERE = pathlib.Path(__file__).parent\n\n\n"
        "def test_no_debug_prints():\n    assert 'print(' not in (HERE / 'calc.py').read_text()\n"
    ),
    # a linter's input, kept out of collection: a test file by its name, and no test's
    "inputs/test_sample.py": "x = 1\n",
    "test_lint.py": (
        "import pathlib\n\nHERE = pathlib.Path(__file__).parent\n\n\n"
        "def test_sample_is_one_line():\n"
        "    assert len((HERE / 'inputs' / 'test_sample.py').read_text().splitlines()) == 1\n"
    ),
    ".ci/matrix.txt": "3.11\n3.12\n",
    "test_ci.py": (
        "import pathlib\n\nHERE = pathlib.Path(__file__).parent\n\n\n"
        "def test_matrix():\n    assert (HERE / '.ci' / 'matrix.txt').read_text().split() == ['3.11', '3.12']\n"
    ),
    "schemas/v1.json": '{"a": 1}\n',
    "schemas/v2.json": '{"b": 2}\n',
    "data_v1/x.txt": "1\n",
    "data_v2/x.txt": "2\n",
    "test_links.py": (
        "import pathlib\n\nHERE = pathlib.Path(__file__).parent\n\n\n"
        "def test_current_schema():\n    assert 'a' in (HERE / 'schemas' / 'current.json').read_text()\n\n\n"
        "def test_current_data():\n    assert (HERE / 'data' / 'x.txt').read_text() == '1\\n'\n"
    ),
    "templates/default/greeting.txt": "hello\n",
    "templates/post.html": "<p>post</p>\n",
    # a search path: the first folder that has the file wins; the test opens the default
    "test_templates.py": (
        "import pathlib\n\nHERE = pathlib.Path(__file__).parent / 'templates'\n\n\n"
        "def find(name):\n"
        "    for folder in ('custom', 'default'):\n"
        "        if (HERE / folder / name).exists():\n"
        "            return HERE / folder / name\n"
        "    raise LookupError(name)\n\n\n"
        "def test_greeting():\n    assert find('greeting.txt').read_text() == 'hello\\n'\n\n\n"
        "def test_post_template_exists():\n    assert (HERE / 'post.html').is_file()\n"
    ),
    # a template names a constant of the code that formats it: no Python reads it by name
    "config.py": "TIMEOUT = 30\n",
    "help.txt": "Requests time out after {cfg.TIMEOUT}s.\n",
    "helptext.py": (
        "import pathlib\n\nimport config\n\n\n"
        "def help_text():\n    return (pathlib.Path(__file__).parent / 'help.txt').read_text().format(cfg=config)\n"
    ),
    "test_help.py": (
        "import helptext\n\n\ndef test_help():\n    assert helptext.help_text() == 'Requests time out after 30s.\\n'\n"
    ),
    # a folder listed through a descriptor (os.fwalk opens it, then lists by its number)
    "walked/a.txt": "a\n",
    "test_walked.py": (
        "import os\nimport pathlib\n\nHERE = pathlib.Path(__file__).parent\n\n\n"
        "def test_one_file_walked():\n    assert sum(len(files) for _, _, files, _ in os.fwalk(HERE / 'walked')) == 1\n"
    ),
    # entries of a folder listed (os.scandir): each one's size changes with its contents
    "assets/logo.svg": "<svg/>\n",
    "test_assets.py": (
        "import os\nimport pathlib\n\nHERE = pathlib.Path(__file__).parent\n\n\n"
        "def test_assets_are_small():\n"
        "    assert all(entry.stat().st_size < 100 for entry in os.scandir(HERE / 'assets'))\n"
    ),
    "test_plain.py": "def test_plain():\n    assert True\n",
}
# the linter's input stays out of collection, as the project's own configuration keeps it
CONFTEST = SUITE_ON_PATH + "collect_ignore = ['inputs']\n"
TESTS = (
    "test_add",
    "test_no_debug_prints",
    "test_sample_is_one_line",
    "test_matrix",
    "test_current_schema",
    "test_current_data",
    "test_greeting",
    "test_post_template_exists",
    "test_help",
    "test_one_file_walked",
    "test_assets_are_small",
    "test_plain",
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One project with its map recorded, copied for each test (a full run takes seconds)."""
    root = tmp_path_factory.mktemp("reads") / "p"
    p = _linked(root)
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    return p.root


def _linked(root: Path) -> Project:
    made = git_project(root, SUITE, CONFTEST)
    suite = made.root / MINE
    os.symlink("v1.json", suite / "schemas" / "current.json")
    os.symlink("data_v1", suite / "data")
    git(made.root, "add", "-A")
    git(made.root, "commit", "-qm", "links")
    return made


def _copy(recorded: Path, tmp_path: Path) -> Project:
    root = tmp_path / "p"
    shutil.copytree(recorded, root, symlinks=True)
    return Project(root)


def _select(p: Project) -> tuple[str, dict[str, Any]]:
    proc = p.run("run", "--device", "fixture", "--select", "changed")
    return proc.stdout + proc.stderr, p.record()


def _only(failing: str) -> dict[str, str]:
    return {t: "failed" if t == failing else "deselected" for t in TESTS}


@pytest.mark.parametrize(
    ("change", "failing"),
    [
        (
            ("calc.py", "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    print(a)\n    return a - b\n"),
            "test_no_debug_prints",
        ),
        (("inputs/test_sample.py", '"""A docstring."""\nx = 1\n'), "test_sample_is_one_line"),
        ((".ci/matrix.txt", "3.12\n"), "test_matrix"),
        (("config.py", "TIMEOUT = 60\n"), "test_help"),
        (("assets/logo.svg", "<svg>" + "x" * 200 + "</svg>\n"), "test_assets_are_small"),
    ],
    ids=[
        "python-read-as-text",
        "uncollected-test-named-input",
        "hidden-folder",
        "named-by-a-template",
        "an-entry-s-size",
    ],
)
def test_a_file_a_test_read_runs_that_test_whatever_its_kind(
    recorded: Path, tmp_path: Path, change: tuple[str, str], failing: str
) -> None:
    p = _copy(recorded, tmp_path)
    path, text = change
    (p.root / MINE / path).write_text(text)
    out, rec = _select(p)
    outcomes = outcomes_of(rec)
    assert outcomes[failing] == "failed", out
    assert outcomes["test_plain"] == "deselected", out
    if path != "calc.py":  # calc.py's change is test_add's too: it imports it
        assert outcomes == _only(failing), out


@pytest.mark.parametrize(
    ("link", "target", "failing"),
    [("schemas/current.json", "v2.json", "test_current_schema"), ("data", "data_v2", "test_current_data")],
    ids=["file-link", "folder-link"],
)
def test_a_link_pointed_elsewhere_runs_the_tests_that_read_through_it(
    recorded: Path, tmp_path: Path, link: str, target: str, failing: str
) -> None:
    p = _copy(recorded, tmp_path)
    (p.root / MINE / link).unlink()
    os.symlink(target, p.root / MINE / link)
    out, rec = _select(p)
    assert outcomes_of(rec) == _only(failing), out


def test_a_file_added_where_a_test_looked_for_it_runs_that_test(recorded: Path, tmp_path: Path) -> None:
    p = _copy(recorded, tmp_path)
    (p.root / MINE / "templates" / "custom").mkdir()
    (p.root / MINE / "templates" / "custom" / "greeting.txt").write_text("hi\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == _only("test_greeting"), out


def test_an_edit_in_a_folder_a_walker_listed_runs_only_the_tests_that_read_the_file(
    recorded: Path, tmp_path: Path
) -> None:
    # os.fwalk lists by os.scandir, but hands its caller names alone: an edit changes none
    p = _copy(recorded, tmp_path)
    (p.root / MINE / "walked" / "a.txt").write_text("a, edited\n")
    out, rec = _select(p)
    assert set(outcomes_of(rec).values()) == {"deselected"}, out


def test_a_file_added_to_a_folder_listed_through_a_descriptor_runs_that_test(recorded: Path, tmp_path: Path) -> None:
    p = _copy(recorded, tmp_path)
    (p.root / MINE / "walked" / "b.txt").write_text("b\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == _only("test_one_file_walked"), out


def test_a_file_a_plugin_reads_outside_every_test_runs_every_test(tmp_path: Path) -> None:
    """A plugin installed outside the project reads the project's .env as pytest starts (as
    pytest-dotenv does): no code of the project is on the stack, and no test opened it."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "envfile.py").write_text(
        "import os\nimport pathlib\n\n\n"
        "def pytest_configure(config):\n"
        "    for line in (pathlib.Path(str(config.rootpath)) / '.env').read_text().splitlines():\n"
        "        key, _, value = line.partition('=')\n"
        "        os.environ[key] = value\n"
    )
    p = make_project(tmp_path / "p", ["passing"], row='pytest_args = ["-p", "envfile"]')
    test = "import os\n\n\ndef test_timeout():\n    assert os.environ['APP_TIMEOUT'] == '30'\n"
    write_suite(p, "mine", {"test_env.py": test, "test_plain.py": "def test_plain():\n    assert True\n"})
    (p.root / ".env").write_text("APP_TIMEOUT=30\n")
    committed(p)
    env = {"PYTHONPATH": str(plugins)}
    full = p.run("run", "--device", "fixture", "--record-map", env=env)
    assert full.returncode == 0, full.stdout + full.stderr
    (p.root / ".env").write_text("APP_TIMEOUT=60\n")
    proc = p.run("run", "--device", "fixture", "--select", "changed", env=env)
    rec = p.record()
    assert outcomes_of(rec) == {"test_timeout": "failed", "test_plain": "passed"}, proc.stdout + proc.stderr
    assert ".env" in (rec["test_selection"]["full_reason"] or ""), rec["test_selection"]


def test_a_submodule_moved_to_another_commit_runs_the_tests_that_ran_or_read_its_files(tmp_path: Path) -> None:
    """git shows a submodule's new commit as one changed path: the files under it changed."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "vlib.py").write_text("def scale():\n    return 2\n")
    (sub / "table.txt").write_text("1\n")
    git(sub, "init", "-q", "-b", "main")
    git(sub, "add", "-A")
    git(sub, "commit", "-qm", "v1")
    p = make_project(tmp_path / "p", ["passing"])
    tests = (
        "import pathlib\nimport sys\n\nVENDOR = pathlib.Path(__file__).parents[2] / 'vendor' / 'vectors'\n"
        "sys.path.insert(0, str(VENDOR))\n\n\n"
        "def test_scale():\n    import vlib\n\n    assert vlib.scale() == 2\n\n\n"
        "def test_table():\n    assert (VENDOR / 'table.txt').read_text() == '1\\n'\n\n\n"
        "def test_plain():\n    assert True\n"
    )
    write_suite(p, "mine", {"test_vendor.py": tests})
    committed(p)
    git(p.root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendor/vectors")
    git(p.root, "commit", "-qm", "vendored")
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    vendored = p.root / "vendor" / "vectors"
    # its data file: the test that read it, no other
    (vendored / "table.txt").write_text("2\n")
    git(vendored, "commit", "-qam", "table changed")
    git(p.root, "commit", "-qam", "bumped")
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_scale": "deselected", "test_table": "failed", "test_plain": "deselected"}, out
    # its code, which git cannot show at the map's commit (a submodule's file): every test
    git(vendored, "revert", "--no-edit", "HEAD")
    (vendored / "vlib.py").write_text("def scale():\n    return 3\n")
    git(vendored, "commit", "-qam", "scale changed")
    git(p.root, "commit", "-qam", "bumped again")
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_scale": "failed", "test_table": "passed", "test_plain": "passed"}, out
    assert "vendor/vectors/vlib.py" in (rec["test_selection"]["full_reason"] or ""), rec["test_selection"]


def test_a_file_renamed_away_from_where_a_test_asked_for_it_runs_that_test(recorded: Path, tmp_path: Path) -> None:
    p = _copy(recorded, tmp_path)
    git(p.root, "mv", f"{MINE}/templates/post.html", f"{MINE}/templates/article.html")
    git(p.root, "commit", "-qm", "renamed")
    out, rec = _select(p)
    assert outcomes_of(rec) == _only("test_post_template_exists"), out


def test_a_file_of_the_repository_outside_the_project_runs_the_tests_that_read_it(tmp_path: Path) -> None:
    """The project is one folder of a repository (py/), its test reads ../shared/limits.json."""
    repo = tmp_path / "repo"
    p = make_project(repo / "py", ["passing"])
    test = (
        "import pathlib\n\nSHARED = pathlib.Path(__file__).parents[3] / 'shared'\n\n\n"
        "def test_limit():\n    assert (SHARED / 'limits.txt').read_text() == '10\\n'\n\n\n"
        "def test_plain():\n    assert True\n"
    )
    write_suite(p, "mine", {"conftest.py": SUITE_ON_PATH, "test_limits.py": test})
    (repo / "shared").mkdir()
    (repo / "shared" / "limits.txt").write_text("10\n")
    (repo / "shared" / "NOTES.txt").write_text("none\n")
    (repo / "shared" / "helper.py").write_text("LIMIT = 10\n")
    (repo / ".gitignore").write_text("results/\n__pycache__/\n.device-matrix/\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr

    (repo / "shared" / "NOTES.txt").write_text("some\n")
    out, rec = _select(p)
    assert set(outcomes_of(rec).values()) == {"deselected"}, out  # no test read it

    (repo / "shared" / "limits.txt").write_text("11\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_limit": "failed", "test_plain": "deselected"}, out
    assert rec["test_selection"]["changed"] == ["../shared/NOTES.txt", "../shared/limits.txt"], out

    # Python outside the project: no map follows it (a sibling package the project may import)
    subprocess.run(["git", "checkout", "-q", "--", "shared/limits.txt"], cwd=repo, check=True)
    (repo / "shared" / "helper.py").write_text("LIMIT = 11\n")
    out, rec = _select(p)
    assert rec["test_selection"]["full_reason"] is not None, out
    assert "shared/helper.py" in rec["test_selection"]["full_reason"], out


def test_source_a_report_shows_is_no_read_of_the_file(tmp_path: Path) -> None:
    # a skip's report reads the source of each frame of the traceback of the error it was
    # raised in (humanize's skip on a missing translation): skips.py is shown, not read, and
    # a change to a function of it runs the tests that ran that function
    suite = {
        "skips.py": (
            "import pytest\n\n\ndef need():\n    try:\n        import not_installed_here  # noqa: F401\n"
            "    except ImportError:\n        pytest.skip('not here')\n\n\n"
            "def double(x):\n    return 2 * x\n"
        ),
        "test_skip.py": "import skips\n\n\ndef test_skipped():\n    skips.need()\n",
        "test_double.py": "import skips\n\n\ndef test_double():\n    assert skips.double(2) == 4\n",
        "test_plain.py": "def test_plain():\n    assert True\n",
    }
    p = recorded_git_project(tmp_path, suite)
    target = p.root / MINE / "skips.py"
    target.write_text(target.read_text().replace("2 * x", "3 * x"))
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_double": "failed", "test_skipped": "deselected", "test_plain": "deselected"}, out
