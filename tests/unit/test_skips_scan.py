"""The static scan behind `skips list` / `skips check`: every skip form, devices from
conditions, by-design skips, bad input; and an upstream-shaped project end to end."""

from __future__ import annotations

import textwrap
import unittest

import pytest

from device_matrix.errors import ConfigError
from device_matrix.skips import DeviceSkip, check, only_on, scan_source
from tests.conftest import FIXTURES

UPSTREAM = FIXTURES / "upstream"
PACKAGE = FIXTURES / "upstream_package"
NOT_TPU = ("cpu", "cuda", "neuron")


def scan(body: str) -> dict[int, DeviceSkip]:
    found = scan_source(textwrap.dedent(body), "test_x.py")
    return {s.line or 0: s for s in found}


# --- forms -----------------------------------------------------------------------------


def test_every_issue_citing_form_is_found() -> None:
    found = scan(
        """\
        import os, unittest, pytest
        from unittest import skipIf
        import torch_xla.runtime as xr

        URL = "https://github.com/o/r/issues"
        MESSAGE = "broken, https://github.com/o/r/issues/4"

        class T(unittest.TestCase):
            @unittest.skip(f"see {URL}/1")
            def test_fstring(self): pass

            @skipIf(True, "https://github.com/o/r/issues/2")
            def test_bare_skipif(self): pass

            @unittest.skipIf(True, reason="ledger:3")
            def test_reason_keyword(self): pass

            @unittest.skip(MESSAGE)
            def test_constant(self): pass

            def test_skiptest(self):
                self.skipTest("https://github.com/o/r/issues/5")

        @pytest.mark.skipif(True, reason="https://github.com/o/r/issues/6")
        def test_mark_skipif(): pass

        def test_pytest_skip():
            pytest.skip(URL + "/7")

        @unittest.skip("ledger:8 " + "and more")
        class TestWholeClass(unittest.TestCase):
            def test_a(self): pass

        @pytest.mark.xfail(reason="wrong result, ledger:9")
        def test_xfail(): pass

        def test_raise():
            raise unittest.SkipTest("ledger:10")

        @pytest.mark.skip
        def test_bare_mark(): pass
        """
    )
    by_line = {line: (s.form, s.issue, s.mode) for line, s in found.items()}
    assert by_line == {
        9: ("unittest.skip", "o/r#1", "skip"),
        12: ("unittest.skipIf", "o/r#2", "skip"),
        15: ("unittest.skipIf", "ledger:3", "skip"),
        18: ("unittest.skip", "o/r#4", "skip"),
        22: ("self.skipTest", "o/r#5", "skip"),
        24: ("pytest.mark.skipif", "o/r#6", "skip"),
        28: ("pytest.skip", "o/r#7", "skip"),
        30: ("unittest.skip", "ledger:8", "skip"),
        34: ("pytest.mark.xfail", "ledger:9", "xfail"),
        38: ("unittest.SkipTest", "ledger:10", "skip"),
        40: ("pytest.mark.skip", None, "skip"),
    }
    assert found[30].test == "test_x.py::TestWholeClass"
    assert found[22].test == "test_x.py::T::test_skiptest"
    assert all(s.devices == ("*",) for s in found.values())


@pytest.mark.parametrize(
    ("condition", "devices"),
    [
        ("xr.device_type() != 'TPU'", NOT_TPU),
        ("xr.device_type() == 'CUDA'", ("cuda",)),
        ("'CUDA' == xr.device_type()", ("cuda",)),
        ("xu.getenv_as('PJRT_DEVICE', str) == 'TPU'", ("tpu",)),
        ("os.environ.get('PJRT_DEVICE') == 'NEURON'", ("neuron",)),
        ("os.environ['PJRT_DEVICE'] != 'CPU'", ("cuda", "neuron", "tpu")),
        ("os.getenv('PJRT_DEVICE', 'CPU').lower() == 'gpu'", ("cuda",)),
        ("xm.xla_device_hw(dev) in ('TPU', 'NEURON')", ("neuron", "tpu")),
        ("xr.device_type() not in ['TPU']", NOT_TPU),
        ("not on_tpu()", NOT_TPU),
        # an attribute of a module that is no sibling file: not understood, "everywhere"
        ("not test_utils_like.ON_TPU", ("*",)),
        ("ON_TPU or xr.device_type() == 'CUDA'", ("cuda", "tpu")),
        ("xr.device_type() == 'TPU' and sys.version_info < (3, 12)", ("tpu",)),
        ("DEVICE == 'CPU'", ("cpu",)),
    ],
)
def test_devices_come_from_the_condition(condition: str, devices: tuple[str, ...]) -> None:
    found = scan(
        f"""\
        import os, sys, unittest
        import torch_xla.runtime as xr
        import torch_xla.utils.utils as xu
        import torch_xla.core.xla_model as xm
        from helpers import test_utils_like

        DEVICE = xr.device_type()
        ON_TPU = DEVICE == "TPU"

        def on_tpu():
            return xr.device_type() == "TPU"

        @unittest.skipIf({condition}, "ledger:1")
        def test_a(): pass
        """
    )
    assert found[13].devices == devices


def test_devices_of_skips_inside_tests_come_from_the_if_around_them() -> None:
    found = scan(
        """\
        import pytest, unittest
        import torch_xla.runtime as xr

        def test_a():
            if xr.device_type() == "TPU":
                pytest.skip("ledger:1")

        class T(unittest.TestCase):
            def test_b(self):
                if xr.device_type() == "CPU":
                    pass
                else:
                    self.skipTest("ledger:2")

            def test_c(self):
                if not xr.device_type() == "CUDA":
                    return
                for _ in range(2):
                    if True:
                        self.skipTest("ledger:3")

        @unittest.skipUnless(xr.device_type() == "TPU", "ledger:4")
        def test_d(): pass
        """
    )
    assert found[6].devices == ("tpu",)
    assert found[13].devices == ("cuda", "neuron", "tpu")
    assert found[20].devices == ("*",)  # the early return is not followed
    assert found[22].devices == NOT_TPU


def test_skips_that_are_not_about_the_device_and_cite_nothing_are_not_listed() -> None:
    found = scan(
        """\
        import sys, unittest, pytest

        @unittest.skipIf(sys.version_info < (3, 8), "old Python")
        def test_a(): pass

        def test_b():
            try:
                import scipy
            except ImportError:
                pytest.skip("no scipy")

        def test_c(settings):
            if settings.get("one_device"):
                pytest.skip("needs 2 devices")
        """
    )
    assert found == {}


# --- check: cited, uncited, by design ------------------------------------------------------


def test_uncited_device_skips_are_flagged_unless_by_design() -> None:
    found = scan(
        """\
        import unittest
        import torch_xla.runtime as xr
        from device_matrix.skips import only_on

        BY_DESIGN_TPU = "TPU-only API"

        @unittest.skipIf(xr.device_type() == 'CUDA', 'wrong result on CUDA')
        def test_uncited(): pass

        @unittest.skipIf(xr.device_type() != 'TPU', 'Pallas exists on TPU only')  # device-matrix: by-design
        def test_comment(): pass

        @unittest.skipIf(xr.device_type() != 'TPU', BY_DESIGN_TPU)
        def test_constant(): pass

        @only_on("tpu", reason="Pallas exists on TPU only")
        def test_only_on(): pass

        @unittest.skip("broken")
        def test_disabled_everywhere(): pass
        """
    )
    problems = {line: f.problem for line, f in ((f.skip.line, f) for f in check(found.values()))}
    assert problems == {7: "cites no issue", 10: None, 13: None, 16: None, 19: "cites no issue"}
    assert found[7].devices == ("cuda",) and not found[7].by_design
    assert found[16].form == "only_on" and found[16].by_design and found[16].devices == NOT_TPU
    assert found[10].by_design and found[13].by_design


def test_only_on_skips_elsewhere_and_marks_the_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEVICE_MATRIX_DEVICE", raising=False)
    monkeypatch.setenv("PJRT_DEVICE", "CPU")

    @only_on("tpu", reason="TPU-only kernels")
    def test_here() -> str:
        return "ran"

    with pytest.raises(unittest.SkipTest, match="by design: only on tpu, this is cpu: TPU-only kernels"):
        test_here()
    assert [(m.name, m.args, m.kwargs) for m in test_here.pytestmark] == [  # type: ignore[attr-defined]
        ("only_on", ("tpu",), {"reason": "TPU-only kernels"})
    ]

    monkeypatch.setenv("PJRT_DEVICE", "TPU")

    @only_on("TPU", reason="TPU-only kernels")
    class TestOnTpu(unittest.TestCase):
        def test_a(self) -> None:
            pass

    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(TestOnTpu).run(result)
    assert result.testsRun == 1 and not result.skipped and result.wasSuccessful()


@pytest.mark.parametrize(("devices", "reason"), [((), "r"), (("tpu",), "  ")])
def test_only_on_needs_devices_and_a_reason(devices: tuple[str, ...], reason: str) -> None:
    with pytest.raises(ConfigError, match="only_on"):
        only_on(*devices, reason=reason)


# --- bad input -----------------------------------------------------------------------------


def test_deeply_nested_expressions_are_problems_not_crashes() -> None:
    too_deep_to_parse = "x = " + "-" * 200_000 + "1\n"
    (entry,) = scan_source(too_deep_to_parse, "deep.py")
    assert entry.problem == "cannot scan: an expression is nested too deeply for Python's parser"
    too_deep_to_walk = (
        "import unittest\n"
        f"@unittest.skipIf({'not ' * 900}x, 'ledger:1')\n"
        "def test_a(): pass\n"
        "@unittest.skip('ledger:2')\n"
        "def test_b(): pass\n"
    )
    deep, fine = scan_source(too_deep_to_walk, "deep.py")
    assert (deep.line, deep.form) == (2, "unreadable")
    assert deep.problem is not None and "nested too deeply" in deep.problem
    assert (fine.line, fine.issue) == (4, "ledger:2")  # the rest of the file is still read
    assert [f.problem is not None for f in check([deep, fine])] == [True, False]


# --- an upstream-shaped project ------------------------------------------------------------


# --- upstream's own forms (#24): tests/fixtures/upstream_package -------------------------


def test_a_reason_of_breakage_needs_an_issue_and_where_a_test_applies_does_not() -> None:
    found = scan(
        """\
        import unittest
        import torch_xla.runtime as xr

        @unittest.skipIf(xr.device_type() != 'TPU', 'TODO: fix on the other devices')
        def test_todo(): pass

        @unittest.skipIf(xr.device_type() == 'NEURON', 'bug in the Neuron compiler')
        def test_bug(): pass

        @unittest.skipIf(xr.device_type() == 'NEURON', 'not supported yet on Neuron')
        def test_yet(): pass

        @unittest.skipIf(xr.device_type() == 'NEURON', 'Neuron does not support fp64')  # device-matrix: by-design
        def test_said_so(): pass

        @unittest.skipIf(xr.device_type() in ('CPU', 'CUDA', 'NEURON'), 'Skipping.')
        def test_runs_on_one(): pass

        @unittest.skipIf(xr.device_type() in ('CPU', 'CUDA'), 'Skipping.')
        def test_half(): pass
        """
    )
    problems = {line: f.problem for line, f in ((f.skip.line, f) for f in check(found.values()))}
    assert problems == {
        4: "cites no issue",
        7: "cites no issue",
        10: "cites no issue",
        13: None,
        16: None,
        19: "cites no issue",
    }
