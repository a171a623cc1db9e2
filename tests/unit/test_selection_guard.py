"""#40: what a module runs under ``if __name__ == "__main__":`` never runs when it is
imported (pytest imports every test module, and the project's modules, by their names): a
change there is a change to a body, run by the tests that ran its lines (a program run with
``runpy`` in a test), never a write of the process's state at import nor a read of a name
by every test of its module."""

from __future__ import annotations

from device_matrix.changes import namereads
from device_matrix.records.testmap import TestMap
from device_matrix.selection import bodies_only, changed_functions

TOOL = (
    "import os\n"  # 1
    "\n"  # 2
    "\n"  # 3
    "def run():\n"  # 4
    "    return 1\n"  # 5
    "\n"  # 6
    "\n"  # 7
    "if __name__ == '__main__':\n"  # 8
    "    print(run())\n"  # 9
)
WRITES = TOOL.replace("    print(run())\n", "    os.environ.setdefault('X', '1')\n    print(run() + 1)\n")


def test_a_change_under_the_main_guard_is_a_change_to_a_body() -> None:
    assert bodies_only(TOOL, WRITES, frozenset({9}), frozenset())
    assert changed_functions(TOOL, WRITES, frozenset({9})) == ((9, 9),)


def test_the_guard_s_else_and_a_guard_that_ran_at_import_run_at_import() -> None:
    old = TOOL + "else:\n    LEVEL = 1\n"
    assert not bodies_only(old, old.replace("LEVEL = 1", "LEVEL = 2"), frozenset({11}), frozenset())
    reversed_test = TOOL.replace("__name__ == '__main__'", "'__main__' == __name__")
    assert bodies_only(reversed_test, reversed_test.replace("run())", "run() + 1)"), frozenset({9}), frozenset())
    # a module the map saw run as the program outside every test: its guard's lines ran then
    assert not bodies_only(TOOL, WRITES, frozenset({9}), frozenset({9}))


def test_a_guard_that_is_no_main_guard_runs_at_import() -> None:
    other = TOOL.replace("__name__ == '__main__'", "__name__ == 'tool'")
    assert not bodies_only(other, other.replace("run())", "run() + 1)"), frozenset({9}), frozenset())


def test_a_call_under_the_main_guard_is_no_write_of_the_process_s_state_at_import() -> None:
    internal = lambda name: name == "tool"  # noqa: E731
    assert namereads.process_write(TOOL, WRITES, internal) is None
    assert namereads.foreign_write(TOOL, TOOL.replace("print(run())", "os.environ['X'] = '1'"), internal) is None
    # the same call outside the guard still is one
    assert namereads.process_write(TOOL, WRITES + "os.environ.setdefault('Y', '1')\n", internal) is not None


TEST_UNIT = (
    "import unittest\n"  # 1
    "from pkg.consts import RATE\n"  # 2
    "from pkg.other import main\n"  # 3
    "\n"  # 4
    "\n"  # 5
    "class T(unittest.TestCase):\n"  # 6
    "    def test_rate(self):\n"  # 7
    "        self.assertEqual(RATE, 3)\n"  # 8
    "\n"  # 9
    "    def test_plain(self):\n"  # 10
    "        self.assertTrue(True)\n"  # 11
    "\n"  # 12
    "\n"  # 13
    "if __name__ == '__main__':\n"  # 14
    "    main()\n"  # 15
    "    unittest.main()\n"  # 16
)
RUNNER = (
    "import runpy\n"  # 1
    "\n"  # 2
    "\n"  # 3
    "def test_as_program():\n"  # 4
    "    runpy.run_module('pkg.other', run_name='__main__')\n"  # 5
)
OTHER = (
    "from pkg.consts import RATE\n"  # 1
    "\n"  # 2
    "\n"  # 3
    "def main():\n"  # 4
    "    return 0\n"  # 5
    "\n"  # 6
    "\n"  # 7
    "if __name__ == '__main__':\n"  # 8
    "    print(RATE)\n"  # 9
)


def _map(lines: dict[str, dict[str, frozenset[int]]]) -> TestMap:
    tests = {n: frozenset(per) for n, per in lines.items()}
    return TestMap("cpu", "a" * 40, "2026-12-01T00:00:00+00:00", tests, {}, lines)


def test_a_name_read_under_a_test_module_s_main_guard_is_read_by_none_of_its_tests() -> None:
    sources = {"pkg/consts.py": "RATE = 3\n", "pkg/other.py": OTHER, "tests/test_unit.py": TEST_UNIT}
    sources["tests/test_runner.py"] = RUNNER
    m = _map(
        {
            "tests/test_unit.py::T::test_rate": {"tests/test_unit.py": frozenset({8})},
            "tests/test_unit.py::T::test_plain": {"tests/test_unit.py": frozenset({11})},
            "tests/test_runner.py::test_as_program": {
                "tests/test_runner.py": frozenset({5}),
                "pkg/other.py": frozenset({1, 4, 8, 9}),
            },
        }
    )
    found = namereads.readers(
        "pkg/consts.py",
        "RATE = 3\n",
        "RATE = 4\n",
        sources,
        m,
        is_test=lambda f: f.startswith("tests/"),
        internal=lambda name: name.split(".", 1)[0] == "pkg",
    )
    # test_rate reads RATE; the program run by runpy prints it under its guard; test_plain
    # reads nothing of it (the test module's guard reads RATE through main(), never under pytest)
    assert found is not None
    assert set(found) == {"tests/test_unit.py::T::test_rate", "tests/test_runner.py::test_as_program"}


# what a file's code may mention is told from its text without parsing it (a change's names
# are followed only through files whose words hold one): a string's word hidden from the text
# by an escape or by two literals that meet must still count
HIDDEN = {
    'x = "\\nRATE"\n': "RATE",
    'x = "RA" "TE"\n': "RATE",
    'x = ("RA"\n     f"TE")\n': "RATE",
    'x = "RA\\\nTE"\n': "RATE",
    'x = "\\x41BC"\n': "ABC",
    'x = "\\101BC"\n': "ABC",
    'x = r"ab\\n" "cd"\n': "ncd",
    'x = "\\u2014abc"\n': "abc",
    'x = "\\N{LATIN CAPITAL LETTER A}BC"\n': "ABC",
    "b = a \\\nor 2\n": "a",
    "from m import *\n": "*",
}


def test_every_word_a_file_s_code_mentions_is_a_word_of_its_text() -> None:
    import ast
    from pathlib import Path

    import device_matrix

    package = Path(device_matrix.__file__).parent
    sources = {str(p): p.read_text() for p in sorted(package.rglob("*.py"))}
    sources.update({text: text for text in HIDDEN})
    for name, text in sources.items():
        said = namereads._mentions([ast.parse(text)], ())
        words = namereads._text_words(text)
        if words is None:
            assert not text.isascii(), name  # only a file not in ASCII may mention any word
        else:
            assert (said.bound | said.loose) <= words, name
    for text, word in HIDDEN.items():
        said = namereads._mentions([ast.parse(text)], ())
        assert word in said.bound | said.loose, text  # the case is the one it names
    assert namereads._text_words('NAME = "café"\n') is None  # Python normalizes a name not in ASCII


def test_a_file_that_mentions_no_followed_name_is_never_parsed() -> None:
    parsed = namereads.Parsed({"pkg/a.py": "def f():\n    return RATE\n", "pkg/b.py": "def g():\n    return 1\n"})
    assert parsed.may_mention("pkg/a.py", {"RATE"}) and not parsed.may_mention("pkg/b.py", {"RATE"})
    dynamic = namereads.Parsed({"pkg/c.py": "def h(o, n):\n    return getattr(o, n)\n"})
    assert dynamic.may_mention("pkg/c.py", {"RATE"})  # it reads any name by a computed one


def test_a_string_followed_by_many_comment_lines_is_read_in_one_pass() -> None:
    # where two literals may meet, a gap of comments is crossed one way only: a search that
    # tried every way through `#  # #  #` lines took seconds at four of them, and never ended
    # at forty (a project's file with such lines stopped the planning)
    text = 'x = "a"\n' + "#  # #  #\n" * 40 + 'y = "b"\n'
    words = namereads._text_words(text)
    assert words is not None and {"x", "a", "y", "b"} <= words
