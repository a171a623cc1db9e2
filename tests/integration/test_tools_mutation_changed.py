"""`nox -s mutation -- --changed BASE` on a real git history: what a change may have weakened
is mutated, and nothing more (tools/mutation.py's changed_modules)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.unit.test_tools_mutation import SOURCE, tool


def _repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(SOURCE)
    (tmp_path / "pkg" / "other.py").write_text("def f():\n    return 1\n")
    (tmp_path / "test_m.py").write_text("def test_one():\n    assert True\n")
    (tmp_path / "eq.toml").write_text("")
    git("add", ".")
    git("commit", "-qm", "base")
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    return git


def _modules() -> list[object]:
    return [
        tool.Module("pkg/m.py", ["test_m.py"], 90.0),
        tool.Module("pkg/other.py", ["test_m.py"], 90.0),
    ]


def _picked(base: str = "HEAD") -> dict[str, list[str]]:
    picked = tool.changed_modules(_modules(), base, "eq.toml")
    assert all(m.narrowed == bool(m.functions) for m in picked)  # a whole module is no narrowed one
    return {m.path: m.functions for m in picked}


def test_changed_mutates_only_the_functions_a_change_touched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _repo(tmp_path, monkeypatch)
    assert _picked() == {}
    (tmp_path / "pkg" / "m.py").write_text(SOURCE.replace("return not self.big", "return self.big is False"))
    assert _picked() == {"pkg/m.py": ["Kept.small"]}
    # tests only added to kill no fewer mutants: nothing more runs for them
    (tmp_path / "test_m.py").write_text("def test_one():\n    assert True\n\n\ndef test_two():\n    pass\n")
    assert _picked() == {"pkg/m.py": ["Kept.small"]}


def test_changed_mutates_every_function_where_a_test_lost_a_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repo(tmp_path, monkeypatch)
    (tmp_path / "test_m.py").write_text("def test_one():\n    pass\n")
    assert _picked() == {"pkg/m.py": [], "pkg/other.py": []}  # [] is every function


def test_changed_mutates_a_new_module_whole_and_the_functions_of_changed_equivalents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git = _repo(tmp_path, monkeypatch)
    (tmp_path / "eq.toml").write_text(
        '[[mutant]]\nmodule = "pkg/m.py"\nfunction = "top"\nline = "a"\nmutated = "b"\nreason = "same"\n'
    )
    assert _picked() == {"pkg/m.py": ["top"]}
    (tmp_path / "pkg" / "new.py").write_text("def g():\n    return 2\n")
    new = tool.Module("pkg/new.py", ["test_m.py"], 90.0)
    assert [(m.path, m.functions) for m in tool.changed_modules([new], "HEAD", "eq.toml")] == [("pkg/new.py", [])]
    git("add", ".")
    git("commit", "-qm", "more")
    assert _picked("HEAD~1") == {"pkg/m.py": ["top"]}
    with pytest.raises(SystemExit, match="TIP: --changed BASE_REF"):
        _picked("no-such-ref")


def test_ci_mutates_from_a_commit_this_one_descends_from() -> None:
    """.ci/run hands `.ci/mutation-base` to --changed: a full commit id this checkout descends
    from (a typo or a rewritten history would fail CI's gate instead of checking less)."""
    root = Path(__file__).resolve().parents[2]
    base = (root / ".ci" / "mutation-base").read_text().strip()
    assert len(base) == 40 and all(c in "0123456789abcdef" for c in base), base
    if not (root / ".git").exists():
        pytest.skip("not a git checkout: the ancestry is checked by .ci/run itself")
    ancestry = subprocess.run(["git", "merge-base", "--is-ancestor", base, "HEAD"], cwd=root, check=False)
    assert ancestry.returncode == 0, f"{base} is not an ancestor of HEAD: write main's commit into .ci/mutation-base"
