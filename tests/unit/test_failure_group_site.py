"""#32 Seen 1, in a real run: failures of one cause raised in an installed package (or the
standard library) that each test calls from its own line are one group, not one per test.

The group's signature holds the innermost frame of the project's own code; where that frame
is the failing test's own (the test calls the library directly, as torchprime's 14 tests
call the hub), it differs for every test, and 14 failures of one cause read as 14 groups.
The signature then names where the exception was raised instead. A failure raised by the
test's own line (its ``assert``) is still its own.
"""

from __future__ import annotations

from device_matrix.report.signature import cause_site

HUB = """import shutil


def _load(tmp_path, name):
    shutil.copy(str(tmp_path / "missing-model.bin"), str(tmp_path / name))


def test_one(tmp_path):
    shutil.copy(str(tmp_path / "missing-model.bin"), str(tmp_path / "x"))


def test_two(tmp_path):
    x = 1
    shutil.copy(str(tmp_path / "missing-model.bin"), str(tmp_path / ("y" * x)))


class TestModel:
    def test_three(self, tmp_path):
        shutil.copy(str(tmp_path / "missing-model.bin"), str(tmp_path / "z"))

    def test_four(self, tmp_path):
        _load(tmp_path, "w")


def test_own_assert_a():
    assert 1 == 2


def test_own_assert_b():
    assert 3 == 4
"""


TRACEBACK = "\n".join(  # pytest ends a frame's place with ": " and the exception's name at the last
    [
        "    def test_one(tmp_path):",
        ">       shutil.copy(src, dst)",
        "",
        "tests/test_hub.py:9: ",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
        "/usr/lib/python3.11/shutil.py:419: in copy",
        "    copyfile(src, dst, follow_symlinks=follow_symlinks)",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
        "/opt/venv/lib/python3.11/site-packages/hub/file_download.py:256: FileNotFoundError",
    ]
)


def test_the_site_is_the_raise_outside_the_project_only_under_the_tests_own_frame() -> None:
    assert cause_site(TRACEBACK, "tests/test_hub.py") == "hub/file_download.py"
    # a helper of the project's between them: the helper's frame, as before
    helper = TRACEBACK.replace("/usr/lib/python3.11/shutil.py:419", "src/pkg/io.py:12")
    assert cause_site(helper, "tests/test_hub.py") == "src/pkg/io.py:12"
    # another test file's frame (a shared helper module of tests) is the project's own place
    assert cause_site(TRACEBACK, "tests/test_other.py") == "tests/test_hub.py:9"
    # raised by the test's own line: its own line
    own = "    def test_a():\n>       assert 1 == 2\nE       assert 1 == 2\n\ntests/test_hub.py:3: AssertionError\n"
    assert cause_site(own, "tests/test_hub.py") == "tests/test_hub.py:3"
    assert cause_site("boom", "tests/test_hub.py") is None and cause_site(None, None) is None


# #42 Seen 8: one helper of the tests, called by tests of its own file and of another
HELPER = """import shutil


def load(tmp_path, name):
    shutil.copy(str(tmp_path / "missing-model.bin"), str(tmp_path / name))


def test_a(tmp_path):
    load(tmp_path, "a")


def test_b(tmp_path):
    load(tmp_path, "b")
"""
OTHER = """from test_helper import load


def test_c(tmp_path):
    load(tmp_path, "c")
"""


def test_a_frame_in_any_test_file_of_the_run_is_the_tests_own_code() -> None:
    files = frozenset({"tests/test_hub.py", "tests/test_other.py"})
    assert cause_site(TRACEBACK, "tests/test_other.py", files) == "hub/file_download.py"
    assert cause_site(TRACEBACK, "tests/test_hub.py", files) == "hub/file_download.py"
    # a helper module that holds no test is the project's own place, as before
    helper = TRACEBACK.replace("tests/test_hub.py:9", "tests/helpers.py:9")
    assert cause_site(helper, "tests/test_other.py", files) == "tests/helpers.py:9"
