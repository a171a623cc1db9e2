"""#40: a module's own import of a name, the module's own TYPE_CHECKING flag and the
standard library's plain values at import, each told by the change's names alone (humanize's
filesize.py, which imports i18n's ``_gettext as _`` as every sibling module does)."""

from __future__ import annotations

from collections.abc import Callable

from device_matrix.changes import namereads
from device_matrix.records.testmap import TestMap
from tests.unit.test_selection_reads import _names, _readers

# the changed file binds LABEL; words.py binds another LABEL; every file may import every
# other (a package whose __init__ imports all its modules: the import graph tells nothing)
CONSTS = "LABEL = 'a'\n"
WORDS = "LABEL = 'w'\n"
SHOW = "def show():\n    return LABEL\n"
RAN = {"tests/test_o.py::t": {"pkg/other.py": ("show",)}}


def _other(other: str) -> set[str] | None:
    sources = {"pkg/consts.py": CONSTS, "pkg/words.py": WORDS, "pkg/other.py": other}
    return _readers(sources, RAN, CONSTS.replace("'a'", "'b'"))


def test_a_name_a_module_imports_from_elsewhere_is_not_the_changed_file_s() -> None:
    assert _other("from pkg.words import LABEL\n\n\n" + SHOW) == set()


def test_a_module_s_own_import_still_reads_what_it_takes_from_the_changed_file() -> None:
    assert _other("from pkg.consts import LABEL\n\n\n" + SHOW) == {"tests/test_o.py::t"}
    # mod.NAME of the changed module, beside its own NAME
    through = "from pkg import consts\nfrom pkg.words import LABEL\n\n\ndef show():\n    return consts.LABEL + LABEL\n"
    assert _other(through) == {"tests/test_o.py::t"}
    # an import in a ``try`` or an ``if``: a statement read whole, which may take it from the
    # changed file in another branch (a fallback of a module of speedups)
    fallback = "try:\n    from pkg.fast import LABEL\nexcept ImportError:\n    from pkg.consts import LABEL\n"
    assert _other(fallback + "\n\n" + SHOW) == {"tests/test_o.py::t"}
    either = "import sys\n\nif sys.platform == 'win32':\n    from pkg.words import LABEL\n"
    either += "else:\n    from pkg.consts import LABEL\n"
    assert _other(either + "\n\n" + SHOW) == {"tests/test_o.py::t"}
    # a function's own import of the changed file's name
    local = "from pkg.words import LABEL\n\n\ndef show():\n    from pkg.consts import LABEL\n    return LABEL\n"
    assert _other(local) == {"tests/test_o.py::t"}


def test_a_name_taken_from_a_module_that_holds_the_changed_one_is_read() -> None:
    def through(words: str) -> set[str] | None:
        other = "from pkg.words import LABEL\n\n\n" + SHOW
        sources = {"pkg/consts.py": CONSTS, "pkg/words.py": words, "pkg/other.py": other}
        return _readers(sources, RAN, CONSTS.replace("'a'", "'b'"))

    assert through("from pkg.consts import LABEL\n") == {"tests/test_o.py::t"}  # taken from it in turn
    assert through("from pkg import consts\n\nLABEL = consts.LABEL\n") == {"tests/test_o.py::t"}
    assert through("from pkg.consts import  *\n") == {"tests/test_o.py::t"}  # a star import may hold it
    lazy = "def __getattr__(name):\n    from pkg import consts\n    return getattr(consts, name)\n"
    assert through(lazy) == {"tests/test_o.py::t"}  # so may a module's __getattr__
    assert through("LABEL = 'w'\n") == set()  # its own, which only binds the name


def test_a_name_the_module_may_bind_otherwise_is_read_as_before() -> None:
    imported = "from pkg.words import LABEL\n"
    for rebinds in (
        "LABEL = LABEL.upper()\n",  # an assignment of its own
        "def LABEL():\n    return 1\n",  # a def of that name
        "def set_label():\n    global LABEL\n    LABEL = 'x'\n",  # a function rebinding it
        "from pkg.consts import *\n",  # a star import may bind it
        "globals()['LABEL'] = 2\n",  # by a computed name
        "for LABEL in 'ab':\n    pass\n",  # a loop's target
    ):
        assert _other(imported + rebinds + "\n\n" + SHOW) == {"tests/test_o.py::t"}, rebinds


def test_what_a_module_s_imports_alone_bind_is_told() -> None:
    def own(text: str) -> frozenset[str]:
        return namereads._own_imports(namereads.ast.parse(text), text)

    assert own("import os.path\nfrom a import b as c, d\n") == {"os", "c", "d"}
    assert own("from a import b\nb = 1\n") == frozenset()
    assert own("from a import b\n\n\ndef f():\n    from x import b\n    return b\n") == frozenset()
    assert own("from a import b\n\n\nclass C:\n    from x import b\n") == frozenset()
    assert own("from a import b\ntry:\n    pass\nexcept Exception as b:\n    pass\n") == frozenset()
    assert own("try:\n    from a import b\nexcept ImportError:\n    b = None\n") == frozenset()
    assert own("from a import b\nif X:\n    from c import b\n") == frozenset()  # bound by another import too
    assert own("from a import b\nsetattr(sys.modules[__name__], 'b', 1)\n") == frozenset()


def test_a_module_s_own_type_checking_flag_never_runs_its_block() -> None:
    # humanize's i18n.py: ``TYPE_CHECKING = False`` spares it typing's import
    own = "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import json\n\nK = 1\n"
    assert _names(own, own.replace("json", "pickle").replace("K = 1", "K = 2")) == {"K"}
    for other in (
        own.replace("= False", "= True"),
        own.replace("= False", "= bool(0)"),
        own + "TYPE_CHECKING = True\n",  # bound again
        own + "\n\ndef on():\n    global TYPE_CHECKING\n    TYPE_CHECKING = True\n",
        own + "from x import TYPE_CHECKING\n",
    ):
        assert _names(other, other.replace("json", "pickle").replace("K = 1", "K = 2")) is None, other


def test_an_added_import_of_a_module_that_makes_standard_values_only_binds() -> None:
    # humanize's filesize.py now imports i18n, whose import makes a thread's storage and
    # gettext's translations of none: values, nothing else run
    i18n = (
        "import gettext as gettext_module\nfrom threading import local\n\n"
        "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import pathlib\n\n"
        "_TRANSLATIONS = {None: gettext_module.NullTranslations()}\n_CURRENT = local()\n"
    )
    sources = {"pkg/consts.py": CONSTS, "pkg/i18n.py": i18n}
    assert _readers(sources, {}, "from pkg.i18n import _CURRENT\n" + CONSTS) == set()
    loud = i18n.replace("local()", "local(); gettext_module.install('x')")
    assert _readers({**sources, "pkg/i18n.py": loud}, {}, "from pkg.i18n import _CURRENT\n" + CONSTS) is None


def test_a_value_by_its_name_is_one_only_where_the_name_is_not_the_project_s() -> None:
    # a project's own Lock, whose constructor registers the instance, is no threading.Lock
    base = "from pkg.locks import Lock\n\n\ndef memo(d, k):\n    return d.get(k)\n"
    assert _names(base, base + "\n\n_LOCK = Lock('cache')\n") is None
    stdlib = base.replace("from pkg.locks import Lock", "from threading import Lock")
    assert _names(stdlib, stdlib + "\n\n_LOCK = Lock()\n") == {"_LOCK"}
    for own in (
        "from . import helpers\n\n\nclass Lock:\n    pass\n",  # a class of the module
        "from attrs import Factory as Lock\n",  # an installed package's, under that name
        "from pkg.sub import *\n",  # a star import of the project's may bind it
    ):
        head = own if "Lock" in own else own + "from threading import Lock\n"
        source = head + "\n\nK = 1\n"
        assert _names(source, source + "_LOCK = Lock()\n") is None, own
    # the same for a decorator: a project's own ``cache`` may register what it decorates
    f = "def f():\n    return 1\n"
    assert _names("from functools import cache\n\n\n" + f, "from functools import cache\n\n\n@cache\n" + f) == {"f"}
    assert _names("from pkg.deco import cache\n\n\n" + f, "from pkg.deco import cache\n\n\n@cache\n" + f) is None


def test_an_added_import_of_a_module_whose_import_calls_the_project_s_code_is_not_told() -> None:
    sources = {"pkg/consts.py": CONSTS, "pkg/locks.py": "_ALL = {}\n\n\nclass Lock:\n    pass\n"}
    quiet = {**sources, "pkg/store.py": "from threading import Lock\n\n_LOCK = Lock()\n"}
    assert _readers(quiet, {}, "from pkg import store\n" + CONSTS) == set()
    loud = {**sources, "pkg/store.py": "from pkg.locks import Lock\n\n_LOCK = Lock()\n"}
    assert _readers(loud, {}, "from pkg import store\n" + CONSTS) is None


def test_a_project_package_named_as_a_standard_module_is_the_project_s() -> None:
    # a package named ``profile``, as the standard library's profiler is: its ``field``
    # registers what it is handed, and is no dataclasses.field
    old = "from profile.registry import field\n\nTIMEOUT = field('timeout', 30)\n"
    new = old.replace("30", "60")

    def names(internal: Callable[[str], bool]) -> frozenset[str] | None:
        change = namereads.changed_names(old, new, internal)
        return None if change is None else change.names

    assert names(lambda name: name.split(".", 1)[0] == "profile") is None
    assert names(lambda name: False) == {"TIMEOUT"}  # the standard library's, where no file is


def test_a_dunder_a_module_imports_is_no_implicit_one() -> None:
    # #40: cli.py takes _usage.py's __doc__, made from a changed constant
    cli = '"""placeholder"""\nfrom pkg._usage import __doc__\n\n\ndef usage():\n    return __doc__\n'
    module = namereads._module("pkg/cli.py", namereads.ast.parse(cli), cli, bool)
    assert module is not None and "__doc__" not in module.implicit and "__name__" in module.implicit
    sources = {
        "pkg/consts.py": CONSTS,
        "pkg/_usage.py": "from pkg.consts import LABEL\n\n__doc__ = 'usage (%s)' % LABEL\n",
        "pkg/cli.py": cli,
    }
    ran = {"tests/test_cli.py::test_usage": {"pkg/cli.py": ("usage",)}}
    assert _readers(sources, ran, CONSTS.replace("'a'", "'b'")) == {"tests/test_cli.py::test_usage"}


def test_a_test_that_runs_doctests_runs_for_an_example_naming_a_changed_name() -> None:
    orders = (
        "from pkg.consts import LABEL\n\n\nclass Order:\n"
        '    """An order.\n\n    >>> Order().label == LABEL\n    True\n    """\n\n    label = "x"\n'
    )
    runner = "import doctest\n\nimport pkg.orders\n\n\ndef test_doctests():\n"
    runner += "    assert not doctest.testmod(pkg.orders).failed\n"
    sources = {"pkg/consts.py": CONSTS, "pkg/orders.py": orders, "tests/test_docs.py": runner}
    ran = {"tests/test_docs.py::test_doctests": {"tests/test_docs.py": ("test_doctests",)}}
    assert _readers(sources, ran, CONSTS.replace("'a'", "'b'")) == {"tests/test_docs.py::test_doctests"}
    # prose naming it runs no test that runs doctests
    prose = orders.replace(">>> Order().label == LABEL\n    True\n", "Labelled as LABEL says.\n")
    assert _readers({**sources, "pkg/orders.py": prose}, ran, CONSTS.replace("'a'", "'b'")) == set()


def _foreign(text: str, project: str = "pkg") -> frozenset[str]:
    return namereads._foreign(namereads.ast.parse(text), lambda name: name.split(".", 1)[0] == project)


def test_the_names_no_call_is_a_value_by_are_the_module_s_own_and_packages() -> None:
    assert namereads._foreign(None, bool) == {namereads.ANY}  # not Python: any
    assert _foreign("import os.path\nimport json as j\nfrom threading import Lock\n") == frozenset()
    assert _foreign("import pkg.sub\nimport attrs as a\nfrom attrs import field\n") == {"pkg", "a", "field"}
    assert _foreign("from . import helpers\nfrom .x import y as z\n") == {"helpers", "z"}
    assert _foreign("from pkg.sub import *\n") == {namereads.ANY}
    assert _foreign("from os.path import *\n") == frozenset()  # the standard library's star
    # what the module binds after its imports, in any statement at module level
    assert _foreign("import os\n\n\ndef f():\n    pass\n\n\nclass C:\n    pass\n\n\nX = 1\n") == {"f", "C", "X"}
    assert _foreign("if X:\n    from attrs import define\n") == {"define"}
    assert _foreign("def f():\n    global G\n    G = 1\n") == {"f", "G"}
    # a project package bearing a standard module's name is the project's
    assert _foreign("from profile import field\n", project="profile") == {"field"}
    nothing = lambda name: False  # noqa: E731
    assert not namereads._unknown("os.path", nothing) and namereads._unknown("os.path", lambda name: True)
    assert namereads._unknown("attrs.validators", nothing) and not namereads._unknown("xml.etree.ElementTree", nothing)


def test_what_a_module_s_own_imports_bind_is_told_in_every_statement_shape() -> None:
    def own(text: str) -> frozenset[str]:
        return namereads._own_imports(namereads.ast.parse(text), text)

    assert own("from a import b, c\nmatch x:\n    case {**b}:\n        pass\n") == {"c"}
    assert own("from a import b, c\n\n\ndef f():\n    from x import b\n    from y import c\n") == frozenset()
    assert own("from a import *\nfrom b import c\n") == frozenset()


def test_a_module_s_own_type_checking_flag_is_bound_once_and_read_any_number_of_times() -> None:
    flag = "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import json\nif TYPE_CHECKING:\n    import csv\n"
    assert namereads._bound_once(namereads.ast.parse(flag), "TYPE_CHECKING")
    other = flag + "\n\ndef f():\n    global OTHER\n    OTHER = 1\n"
    assert namereads._bound_once(namereads.ast.parse(other), "TYPE_CHECKING")
    assert not namereads._bound_once(namereads.ast.parse(flag + "TYPE_CHECKING = True\n"), "TYPE_CHECKING")


def test_a_relative_import_of_several_names_takes_each_from_where_it_is_bound() -> None:
    relative = "from .consts import OTHER, LABEL\n\n\n" + SHOW
    assert _other(relative) == {"tests/test_o.py::t"}
    elsewhere = "from .words import LABEL\n\n\n" + SHOW
    assert _other(elsewhere) == set()


def test_a_name_only_stored_is_no_read_and_one_added_to_is() -> None:
    def bound(text: str) -> frozenset[str]:
        return namereads._mentions([namereads.ast.parse(text)], ()).bound

    assert "X" not in bound("X = 1\n") and "X" in bound("X += 1\n") and "X" in bound("Y = X\n")
    assert "X" not in bound("for X in Y:\n    pass\n") and "X" not in bound("del X\n")


def test_a_module_that_may_bind_names_by_a_computed_one_is_opaque() -> None:
    for text in (
        "globals()['A'] = 1",
        "__dict__['A'] = 1",
        "setattr(m, 'A', 1)",
        "def __getattr__(n): ...",
        "from a import *",
    ):
        assert namereads._opaque(text), text
    assert not namereads._opaque("from a import b\nX = b\n")


def test_every_name_a_module_binds_in_any_scope() -> None:
    text = "import os.path\nimport a.b as c\nfrom d import e\n\n\ndef f():\n    global g\n\n\nclass H:\n    i = 1\n"
    assert namereads._bound_anywhere(namereads.ast.parse(text)) == {"os", "c", "e", "f", "g", "H", "i"}


def test_the_project_s_module_names_are_its_folders_and_python_files() -> None:
    parsed = namereads.Parsed({"src/pkg/mod.py": "", "tools/run.py": ""})
    assert parsed.internal("pkg.mod") and parsed.internal("mod.sub") and parsed.internal("run")
    assert not parsed.internal("json") and not parsed.internal("py")


def test_the_tests_that_run_doctests_by_their_own_code() -> None:
    sources = {
        "tests/test_docs.py": "import doctest\n",
        "tests/sub/conftest.py": "import doctest\n",
        "tests/test_plain.py": "def test_p():\n    pass\n",
        "pkg/tool.py": "import doctest\n",  # not a test file: it runs no test
    }
    tests = ["tests/test_docs.py::TestDocs::test_d", "tests/sub/test_s.py::test_s", "tests/test_plain.py::test_p"]
    m = TestMap("cpu", "a" * 40, "2026-12-01T00:00:00+00:00", {n: frozenset() for n in tests}, {}, {})
    found = namereads._doctests({"pkg/b.py", "pkg/a.py"}, namereads.Parsed(sources), m, lambda f: "/test_" in f)
    why = "it runs doctests, and an example in pkg/a.py names a name the change binds anew"
    assert found == {"tests/test_docs.py::TestDocs::test_d": why, "tests/sub/test_s.py::test_s": why}
    assert namereads._doctests(set(), namereads.Parsed(sources), m, lambda f: True) == {}
