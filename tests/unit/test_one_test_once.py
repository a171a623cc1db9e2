"""One test runs once however it is named, and the progress counts right (#20).

The part of these tests that starts no process; the rest is in tests/integration/test_one_test_once.py (#41)."""

from __future__ import annotations

from pathlib import Path

from device_matrix.config import Script
from device_matrix.run.targets import distinct_targets, unique_scripts


def test_distinct_targets(tmp_path: Path) -> None:
    (tmp_path / "tests" / "sub").mkdir(parents=True)
    (tmp_path / "tests" / "test_a.py").write_text("")
    (tmp_path / "tests" / "sub" / "test_b.py").write_text("")
    assert distinct_targets(["tests/test_a.py", "tests/test_a.py"], tmp_path) == ["tests/test_a.py"]
    assert distinct_targets(["tests/test_a.py::t", "tests/test_a.py"], tmp_path) == ["tests/test_a.py"]
    assert distinct_targets(["tests/test_a.py::C", "tests/test_a.py::C::t", "tests/test_a.py::C2"], tmp_path) == [
        "tests/test_a.py::C",
        "tests/test_a.py::C2",
    ]
    assert distinct_targets(["tests/test_a.py::t[1]", "tests/test_a.py::t"], tmp_path) == ["tests/test_a.py::t"]
    assert distinct_targets(["tests/sub/test_b.py", "tests/", "x.py"], tmp_path) == ["tests/", "x.py"]
    assert distinct_targets([str(tmp_path / "tests"), "tests/test_a.py"], tmp_path) == [str(tmp_path / "tests")]
    # a file a script runs is left to the script
    script = Script(file="tests/sub/test_b.py")
    assert distinct_targets(["tests/sub/test_b.py::t", "tests/test_a.py"], tmp_path, [script]) == ["tests/test_a.py"]
    assert distinct_targets(["tests"], tmp_path, [script]) == ["tests"]  # pytest is told to --ignore it
    # a sibling whose name starts the same is not inside
    assert distinct_targets(["tests", "tests_more/test_c.py"], tmp_path) == ["tests", "tests_more/test_c.py"]
    # a path that does not exist is compared as written
    assert distinct_targets(["gone/test_x.py", "gone/test_x.py::t", "gone"], tmp_path) == ["gone"]


def test_unique_scripts() -> None:
    a = Script(file="t.py", args=(), env={})
    b = Script(file="t.py", args=("--x",), env={})
    c = Script(file="t.py", args=(), env={"V": "1"})
    assert unique_scripts((a, a, b, c, b)) == (a, b, c)
