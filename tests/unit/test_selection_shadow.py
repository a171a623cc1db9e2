"""#40: a module's own import of a name, the module's own TYPE_CHECKING flag and the
standard library's plain values at import, each told by the change's names alone (humanize's
filesize.py, which imports i18n's ``_gettext as _`` as every sibling module does)."""

from __future__ import annotations

from device_matrix.changes import namereads
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
