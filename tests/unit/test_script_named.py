"""#39 (3): what a ``--test`` word names of a row's ``scripts`` entries, decided without a
process: each way of writing a file, a folder, a class and a test, and the runs of a file
the row runs more than once."""

from __future__ import annotations

from pathlib import Path

import pytest

from device_matrix import config
from device_matrix.child.script import Recorder
from device_matrix.errors import UsageProblem
from device_matrix.run import selection
from device_matrix.run.targets import Named, names_script

FILE = "test/test_metrics.py"
ROW = f"""[tool.device-matrix.devices.cpu]
suites = []

[[tool.device-matrix.devices.cpu.scripts]]
file = "{FILE}"

[[tool.device-matrix.devices.cpu.scripts]]
file = "{FILE}"
env = {{ XLA_METRICS_FILE = "/tmp/metrics.txt" }}

[[tool.device-matrix.devices.cpu.scripts]]
file = "test/train.py"
kind = "program"
"""


@pytest.fixture
def row(tmp_path: Path) -> config.Row:
    (tmp_path / "test").mkdir()
    for name in ("test_metrics.py", "train.py", "test_other.py"):
        (tmp_path / "test" / name).write_text("")
    (tmp_path / "pyproject.toml").write_text(ROW)
    return config.load(tmp_path).row("cpu")


def _named(word: str, row: config.Row, root: Path) -> list[Named | None]:
    return [names_script(word, s, row.scripts, root) for s in row.scripts]


def test_a_file_however_written_names_every_run_of_it(row: config.Row, tmp_path: Path) -> None:
    whole = Named(None, own=True)
    for word in (FILE, f"./{FILE}", str(tmp_path / FILE), f"test/../{FILE}", f"test//{Path(FILE).name}"):
        assert _named(word, row, tmp_path) == [whole, whole, None], word
    assert _named(f"{FILE}[XLA_METRICS_FILE]", row, tmp_path) == [None, whole, None]
    assert _named("test/train.py", row, tmp_path) == [None, None, whole]


def test_a_folder_names_its_scripts_and_stays_pytest_s(row: config.Row, tmp_path: Path) -> None:
    folder = Named(None, own=False)
    for word in ("test", "./test/", str(tmp_path)):
        assert _named(word, row, tmp_path) == [folder, folder, folder], word
    assert _named("tes", row, tmp_path) == [None, None, None]  # a name that only starts the same
    assert selection.targets(config.load(tmp_path), row, suites=None, tests=["./test/"]) == ["./test/"]


def test_a_class_or_test_names_it_in_each_run_or_in_the_run_it_names(row: config.Row, tmp_path: Path) -> None:
    suffix = "[XLA_METRICS_FILE]"
    assert _named(f"./{FILE}::MetricsTest", row, tmp_path) == [
        Named(f"{FILE}::MetricsTest", own=True),
        Named(f"{FILE}::MetricsTest{suffix}", own=True),
        None,
    ]
    assert _named(f"{FILE}::MetricsTest::test_x{suffix}", row, tmp_path) == [
        None,
        Named(f"{FILE}::MetricsTest::test_x{suffix}", own=True),
        None,
    ]
    assert _named("test/train.py::C", row, tmp_path) == [None, None, None]  # a program has no class


def test_pytest_is_given_no_word_of_a_script_and_a_run_of_none_is_refused(row: config.Row, tmp_path: Path) -> None:
    cfg = config.load(tmp_path)
    words = [FILE, f"{FILE}::MetricsTest", "test/train.py", "test/test_other.py"]
    assert selection.targets(cfg, row, suites=None, tests=words) == ["test/test_other.py"]
    assert selection.script_selection(row.scripts[0], row, tmp_path, [f"./{FILE}::MetricsTest::test_x"]) == [
        f"{FILE}::MetricsTest::test_x"
    ]
    # the file as well as a test of it: the whole file
    assert selection.script_selection(row.scripts[0], row, tmp_path, [f"{FILE}::C::t", f"./{FILE}"]) is None
    with pytest.raises(UsageProblem, match=r"none of its runs") as caught:
        selection.targets(cfg, row, suites=None, tests=[f"{FILE}[OTHER]"])
    assert "[XLA_METRICS_FILE]" in caught.value.tip and "(no [NAME])" in caught.value.tip


def test_the_launcher_runs_a_named_class_in_its_order_and_tests_in_the_order_asked() -> None:
    names = [f"{FILE}::A::test_2[V]", f"{FILE}::A::test_1[V]", f"{FILE}::B::test_1[V]"]
    recorder = Recorder(None, FILE, None, variant="V")
    assert recorder.picked(names, [f"{FILE}::B::test_1", f"{FILE}::A[V]"]) == {
        f"{FILE}::B::test_1[V]": 0,
        f"{FILE}::A::test_2[V]": 1,
        f"{FILE}::A::test_1[V]": 1,
    }
    assert recorder.picked(names, [f"{FILE}::A::test_1[V]"]) == {f"{FILE}::A::test_1[V]": 0}
    assert recorder.picked(names, [f"{FILE}::A::test"]) == {}  # a name that only starts the same
