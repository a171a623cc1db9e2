"""#40: what runs at import and what only reads as prose, told apart (toolz: a test's body
handing a function on, a docstring's prose, a class's own ``__doc__``: each, in turn, left a
change there untold, and every test ran)."""

from __future__ import annotations

import ast

from device_matrix.changes import namereads
from device_matrix.records.testmap import TestMap
from tests.unit.test_selection_keep import _lines


def _stmt(text: str) -> ast.stmt:
    return ast.parse(text).body[0]


def test_only_what_runs_at_import_of_a_def_or_class_hands_a_function_on() -> None:
    assert not namereads._hands_on(_stmt("def test_x():\n    register(f)\n"), {"f"})  # its body runs in a test
    assert namereads._hands_on(_stmt("@deco(f)\ndef test_x():\n    pass\n"), {"f"})
    assert namereads._hands_on(_stmt("def test_x(v=register(f)):\n    pass\n"), {"f"})  # a default's call
    assert not namereads._hands_on(_stmt("def test_x(check=f):\n    pass\n"), {"f"})  # no call: read when run
    assert namereads._hands_on(_stmt("class C(base(f)):\n    pass\n"), {"f"})
    assert not namereads._hands_on(_stmt("class C:\n    x = 1\n"), {"f"})  # its members are statements apart
    assert namereads._hands_on(_stmt("X = register(f)\n"), {"f"})


DOCUMENTED = '''\
def helper(x):
    """Return x if func has **kwargs, as RATE does.

    >>> helper(LIMIT)
    3
    >>> helper(
    ...     SIZE)

    Formatted as {0.WIDTH}, %(HEIGHT)s or $DEPTH.
    """
    note = "see ALSO"
    return x
'''


def test_a_docstring_s_prose_names_nothing_its_examples_and_fields_do() -> None:
    (fn,) = [n for n in ast.walk(ast.parse(DOCUMENTED)) if isinstance(n, ast.FunctionDef)]
    said = namereads._mentions(fn.body, ())
    told = {"helper", "LIMIT", "SIZE", "WIDTH", "HEIGHT", "DEPTH"}
    assert told <= said.loose and told <= said.doc  # a doctest runs them, a template fills them
    assert not {"func", "kwargs", "RATE", "Return"} & said.loose  # prose: read by nothing
    assert "ALSO" in said.loose and "ALSO" not in said.doc  # a string the code holds is no docstring
    # as the code runs (a call made, what it made at import) its docstring is not read at all
    assert not told & said.code.loose and "ALSO" in said.code.loose and said.code.bound == said.bound


def test_a_doctest_example_still_reads_a_name_and_prose_does_not() -> None:
    consts = "RATE = 3\n"
    uses = DOCUMENTED.replace("helper(LIMIT)", "helper(RATE)").replace("as RATE does", "as it does")
    ran = {"t/test_u.py::t": {"pkg/uses.py": ("helper",)}}
    sources = {"pkg/consts.py": consts, "pkg/uses.py": uses}
    lines = {n: {f: _lines(sources[f], *fns) for f, fns in per.items()} for n, per in ran.items()}
    m = TestMap("cpu", "a" * 40, "2026-12-01T00:00:00+00:00", {"t/test_u.py::t": frozenset()}, {}, lines)

    def readers(text: str) -> set[str] | None:
        found = namereads.readers(
            "pkg/consts.py",
            consts,
            consts.replace("3", "4"),
            {**sources, "pkg/uses.py": text},
            m,
            is_test=lambda f: "/test_" in f,
            internal=lambda name: name.startswith("pkg"),
        )
        return None if found is None else set(found)

    assert readers(uses) == {"t/test_u.py::t"}  # its doctest example hands RATE on
    assert readers(DOCUMENTED) == set()  # "as RATE does" is prose


def test_a_bare_scope_dunder_is_the_module_s_or_class_s_own() -> None:
    m = namereads._module("pkg/m.py", ast.parse("class C:\n    x = wrap(__doc__)\n"), "", bool)
    assert m is not None and {"__doc__", "__name__", "__module__", "__qualname__"} <= m.implicit
    assigned = namereads._module("pkg/m.py", ast.parse("__doc__ = make()\n"), "", bool)
    assert assigned is not None and "__doc__" not in assigned.implicit  # bound by its own statement
