"""#40: more changes that `run --select changed` recorded deselected although a test failed by
them, each played in a real run (a git project, its map recorded by a full run, a change, a
selection): a module imported by a name handed to a function other than ``import_module``, a
module's import that reads its own names by a computed one, an import added of a module whose
import writes what every test shares, and a module list that a function of the standard
library fills."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import recorded_git_project
from tests.integration.test_selection_lies import MINE, OTHER, _select
from tests.runs import outcomes_of


def _recorded_then_changed(
    tmp_path: Path, suite: dict[str, str], path: str, replace: tuple[str, str]
) -> tuple[str, dict[str, Any]]:
    """``suite``'s map recorded, then ``path`` changed by ``replace`` (old, new) and selected by."""
    p = recorded_git_project(tmp_path, suite)
    target = p.root / MINE / path
    target.write_text(target.read_text().replace(*replace))
    return _select(p)


# a module imported by a name its caller computes, through the standard library
ALPHA = "def _rate():\n    return 2\n\n\nRATE = _rate()\n"


@pytest.mark.parametrize(
    "lookup",
    [
        "import pkgutil\n\n\ndef rate(name):\n    return pkgutil.resolve_name(f'{name}:RATE')\n",
        "import pydoc\n\n\ndef rate(name):\n    return pydoc.locate(f'{name}.RATE')\n",
    ],
    ids=["resolve_name", "locate"],
)
def test_a_module_named_by_a_computed_string_runs_the_tests_of_who_names_it(tmp_path: Path, lookup: str) -> None:
    suite = {
        "alpha.py": ALPHA,
        "loader.py": lookup,
        "test_alpha.py": "import alpha\n\n\ndef test_alpha():\n    assert alpha.RATE > 0\n",
        "test_loader.py": "from loader import rate\n\n\ndef test_rate():\n    assert rate('alpha') == 2\n",
        "test_other.py": OTHER,
    }
    out, rec = _recorded_then_changed(tmp_path, suite, "alpha.py", ("return 2", "return 3"))
    assert outcomes_of(rec) == {"test_alpha": "passed", "test_rate": "failed", "test_other": "deselected"}, out


def test_a_module_deleted_that_a_computed_find_spec_asked_for_runs_who_asked(tmp_path: Path) -> None:
    suite = {
        "formats.py": (
            "import importlib.util\n\n\ndef available():\n"
            "    return [f for f in ('csv', 'xlsx') if importlib.util.find_spec(f'out_{f}') is not None]\n"
        ),
        "out_csv.py": "X = 1\n",
        "out_xlsx.py": "X = 1\n",
        "test_formats.py": (
            "from formats import available\n\n\ndef test_available():\n    assert available() == ['csv', 'xlsx']\n"
        ),
        # the module's own test: it imports the module by name, and skips once it is gone
        "test_xlsx.py": "import pytest\n\n\ndef test_xlsx():\n    assert pytest.importorskip('out_xlsx').X == 1\n",
        "test_other.py": OTHER,
    }
    p = recorded_git_project(tmp_path, suite)
    (p.root / MINE / "out_xlsx.py").unlink()
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_available": "failed", "test_xlsx": "skipped", "test_other": "deselected"}, out


# a module's import reads its own names by a computed one: a name added changes what it made
@pytest.mark.parametrize(
    ("module", "test", "new"),
    [
        (
            "def handle_csv(t):\n    return t\n\n\n"
            "HANDLERS = {n[7:]: f for n, f in globals().items() if n.startswith('handle_')}\n",
            "import handlers\n\n\ndef test_h():\n    assert sorted(handlers.HANDLERS) == ['csv']\n",
            "def handle_tsv(t):\n    return t\n\n\n",
        ),
        (
            "def load(p):\n    return p\n\n\n__all__ = [n for n in dir() if not n.startswith('_')]\n",
            "import handlers\n\n\ndef test_h():\n    assert handlers.__all__ == ['load']\n",
            "def save(p):\n    return p\n\n\n",
        ),
    ],
    ids=["globals", "dir"],
)
def test_a_name_added_to_a_module_whose_import_reads_every_name_runs_its_readers(
    tmp_path: Path, module: str, test: str, new: str
) -> None:
    p = recorded_git_project(tmp_path, {"handlers.py": module, "test_h.py": test, "test_other.py": OTHER})
    (p.root / MINE / "handlers.py").write_text(new + module)
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_h": "failed", "test_other": "deselected"}, out


# an import added of a module that exists, unchanged, whose import writes what every test shares
WRITERS = {
    "clock.py": "def now():\n    return 100.0\n",
    "fakes.py": "import clock\n\nclock.now = lambda: 0.0\n",
    "devmode.py": "import os\n\nos.environ['DM_TRIAL_MODE'] = 'dev'\n",
    "api.py": "def f():\n    return 1\n",
    "test_api.py": "import api\n\n\ndef test_api():\n    assert api.f() == 1\n",
    "test_clock.py": "import clock\n\n\ndef test_clock():\n    assert clock.now() == 100.0\n",
    "test_mode.py": "import os\n\n\ndef test_mode():\n    assert os.environ.get('DM_TRIAL_MODE') is None\n",
    "sub/conftest.py": "import pytest\n\n\n@pytest.fixture\ndef x():\n    return 1\n",
    "sub/test_sub.py": "def test_sub(x):\n    assert x == 1\n",
}


@pytest.mark.parametrize(
    ("path", "imported", "fails"),
    [
        ("test_api.py", "devmode", "test_mode"),
        ("sub/conftest.py", "fakes", "test_clock"),
        ("api.py", "fakes", "test_clock"),
    ],
    ids=["test-module-imports-an-env-writer", "fixture-conftest-imports-a-patcher", "module-imports-a-patcher"],
)
def test_an_import_added_of_a_module_whose_import_writes_shared_state_runs_every_test(
    tmp_path: Path, path: str, imported: str, fails: str
) -> None:
    p = recorded_git_project(tmp_path, WRITERS)
    target = p.root / MINE / path
    target.write_text(f"import {imported}  # noqa: F401\n" + target.read_text())
    out, rec = _select(p)
    outcomes = outcomes_of(rec)
    assert outcomes[fails] == "failed", out
    assert set(outcomes.values()) <= {"passed", "failed"}, out
    reason = rec["test_selection"]["full_reason"]
    assert isinstance(reason, str) and f"{imported}.py" in reason, reason


def test_an_import_taken_away_of_a_module_whose_import_writes_shared_state_runs_every_test(tmp_path: Path) -> None:
    suite = {
        **WRITERS,
        "test_api.py": "import devmode  # noqa: F401\n" + WRITERS["test_api.py"],
        "test_mode.py": "import os\n\n\ndef test_mode():\n    assert os.environ.get('DM_TRIAL_MODE') == 'dev'\n",
    }
    p = recorded_git_project(tmp_path, suite)
    (p.root / MINE / "test_api.py").write_text(WRITERS["test_api.py"])
    out, rec = _select(p)
    assert outcomes_of(rec)["test_mode"] == "failed", out
    assert "devmode.py" in str(rec["test_selection"]["full_reason"]), out


def test_an_import_added_of_a_module_whose_import_only_binds_stays_narrow(tmp_path: Path) -> None:
    p = recorded_git_project(tmp_path, WRITERS)
    target = p.root / MINE / "test_api.py"
    target.write_text("import clock  # noqa: F401\n" + target.read_text())
    out, rec = _select(p)
    assert outcomes_of(rec)["test_mode"] == "deselected", out
    assert rec["test_selection"]["full_reason"] is None, out


# a module's list filled through a function of the standard library that changes what it is handed
@pytest.mark.parametrize(
    "fill",
    [
        "bisect.insort(_TIERS, (_threshold(name), name))",
        "heapq.heappush(_TIERS, (_threshold(name), name))",
        "operator.iadd(_TIERS, [(_threshold(name), name)])",
    ],
    ids=["bisect.insort", "heapq.heappush", "operator.iadd"],
)
def test_a_list_filled_through_a_standard_function_runs_the_tests_that_read_it(tmp_path: Path, fill: str) -> None:
    tiers = (
        "import bisect\nimport heapq\nimport operator\n\n_TIERS = []\n\n\n"
        "def _threshold(name):\n    return {'gold': 100, 'silver': 50}[name]\n\n\n"
        f"def tiers():\n    if not _TIERS:\n        for name in ('gold', 'silver'):\n            {fill}\n"
        "    return sorted(_TIERS)\n"
    )
    suite = {
        "tiers.py": tiers,
        "test_a.py": "from tiers import tiers\n\n\ndef test_a():\n    assert tiers()\n",
        "test_b.py": "from tiers import tiers\n\n\ndef test_b():\n    assert tiers()[0] == (50, 'silver')\n",
        "test_other.py": OTHER,
    }
    out, rec = _recorded_then_changed(tmp_path, suite, "tiers.py", ("'silver': 50", "'silver': 500"))
    assert outcomes_of(rec) == {"test_a": "passed", "test_b": "failed", "test_other": "deselected"}, out


# a map recorded while an untracked file of the project is what a test reads
TEMPLATE = {
    "tpl.py": (
        "import os\n\nHERE = os.path.dirname(__file__)\n\n\ndef template():\n"
        "    local = os.path.join(HERE, 'local_template.txt')\n"
        "    path = local if os.path.exists(local) else os.path.join(HERE, 'template.txt')\n"
        "    with open(path) as f:\n        return f.read()\n"
    ),
    "template.txt": "Hello {name}\n",
    "test_tpl.py": "from tpl import template\n\n\ndef test_tpl():\n    assert '{name}' in template()\n",
    "test_other.py": OTHER,
}


@pytest.mark.parametrize("untracked", ["local_template.txt", "local_settings.py"])
def test_a_map_recorded_while_a_test_read_an_untracked_file_names_no_commit(tmp_path: Path, untracked: str) -> None:
    from tests.builders import git_project

    suite = {
        **TEMPLATE,
        "test_tpl.py": TEMPLATE["test_tpl.py"] + "\n\ntry:\n    import local_settings\nexcept ImportError:\n    pass\n",
    }
    p = git_project(tmp_path, suite)
    (p.root / MINE / untracked).write_text("Hi {name}\n" if untracked.endswith(".txt") else "X = 1\n")
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    assert "untracked" in full.stdout + full.stderr and untracked in full.stdout + full.stderr
    (p.root / MINE / untracked).unlink()
    template = p.root / MINE / "template.txt"
    template.write_text("Hello\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_tpl": "failed", "test_other": "passed"}, out
    assert "names no commit" in str(rec["test_selection"]["full_reason"]), out


def test_a_map_recorded_while_a_test_listed_an_untracked_file_names_no_commit(tmp_path: Path) -> None:
    from tests.builders import git_project

    suite = {
        "data/a.txt": "a\n",
        "test_v.py": (
            "import os\n\nHERE = os.path.dirname(__file__)\n\n\n"
            "def test_count():\n    assert len(os.listdir(os.path.join(HERE, 'data'))) == 2\n"
        ),
        "test_other.py": OTHER,
    }
    p = git_project(tmp_path, suite)
    (p.root / MINE / "data" / "b.txt").write_text("b\n")  # untracked: the test lists it
    full = p.run("run", "--device", "fixture", "--record-map")
    assert full.returncode == 0, full.stdout + full.stderr
    assert "data/b.txt" in full.stdout + full.stderr
    (p.root / MINE / "data" / "b.txt").unlink()
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_count": "failed", "test_other": "passed"}, out


def test_a_value_kept_on_a_class_of_the_module_runs_the_tests_that_read_it(tmp_path: Path) -> None:
    store = (
        "from lib import compute\n\n\nclass Reg:\n    items = []\n\n\n"
        "def add(x):\n    Reg.items.append(compute(x))\n\n\ndef last():\n    return Reg.items[-1]\n"
    )
    suite = {
        "lib.py": "def compute(x):\n    return x * 2\n",
        "store.py": store,
        "test_1.py": "from store import add\n\n\ndef test_1():\n    add(2)\n",
        "test_2.py": "from store import last\n\n\ndef test_2():\n    assert last() == 4\n",
        "test_other.py": OTHER,
    }
    p = recorded_git_project(tmp_path, suite)
    (p.root / MINE / "lib.py").write_text("def compute(x):\n    return x * 3\n")
    out, rec = _select(p)
    assert outcomes_of(rec) == {"test_1": "passed", "test_2": "failed", "test_other": "deselected"}, out
