"""Tests that do not apply on some devices: "not applicable here", as opposed to "broken".

A skip that disables a broken test must cite the issue that tracks it (``skip_device``,
``xfail_device``, an issue URL in a unittest message); ``skips check`` flags those that
do not. A test of a feature that exists on one device only is not broken anywhere: say
so with :func:`only_on` and it is listed as by design, never flagged::

    from device_matrix.skips import only_on

    @only_on("tpu", reason="Pallas kernels exist on TPU only")
    def test_flash_attention(): ...

    @only_on("tpu", "cuda", reason="needs a real accelerator")
    class TestDynamo(unittest.TestCase): ...

In files that cannot import device_matrix (an upstream project's unittest files), a
comment on the skip's line or the line above it says the same, as does a message held
in a module constant whose name starts with ``BY_DESIGN``::

    @unittest.skipIf(xr.device_type() != "TPU", "TPU-only API")  # device-matrix: by-design
    BY_DESIGN_TPU_ONLY = "TPU-only API"
"""

from __future__ import annotations

import os
import unittest
from collections.abc import Callable
from typing import TypeVar

from device_matrix.errors import ConfigError
from device_matrix.skips.model import BY_DESIGN_MARK, device_names

BY_DESIGN_COMMENT = "device-matrix: by-design"
BY_DESIGN_CONSTANT_PREFIX = "BY_DESIGN"
BY_DESIGN_PREFIX = "by design:"  # how only_on's skip message starts, for the run-time record
ONLY_ON_MARKER_HELP = (
    f"{BY_DESIGN_MARK}(*devices, reason): the test exists for these devices only and is "
    "skipped elsewhere by design (not a defect; cites no issue)"
)

_Decorated = TypeVar("_Decorated", bound=Callable[..., object] | type)


def current_devices() -> frozenset[str]:
    """The device this process runs on: the row's name and its PJRT device, lower case."""
    return device_names(os.environ.get("DEVICE_MATRIX_DEVICE"), os.environ.get("PJRT_DEVICE"))


def is_by_design_text(text: str | None) -> bool:
    """Whether a recorded skip message is one that :func:`only_on` wrote."""
    return bool(text) and BY_DESIGN_PREFIX in (text or "")


def only_on(*devices: str, reason: str) -> Callable[[_Decorated], _Decorated]:
    """Run the decorated test (function or class) only on ``devices``; skip it elsewhere.

    Works under plain unittest and ``python FILE.py`` (the skip is unittest's, decided at
    import from ``DEVICE_MATRIX_DEVICE``/``PJRT_DEVICE``) and under pytest, where the
    ``only_on`` mark also tells device-matrix that the skip is by design.
    """
    if not devices or not all(isinstance(d, str) and d for d in devices):
        raise ConfigError(
            f"only_on() needs device names, got {devices!r}",
            source="only_on()",
            tip='Write e.g. @only_on("tpu", reason="Pallas kernels exist on TPU only").',
        )
    if not reason.strip():
        raise ConfigError(
            "only_on() needs a reason: why the test does not apply elsewhere",
            source="only_on()",
        )
    wanted = tuple(d.lower() for d in devices)

    def decorate(obj: _Decorated) -> _Decorated:
        here = current_devices()
        if not here & set(wanted):
            where = "/".join(sorted(here)) if here else "an unknown device (PJRT_DEVICE is not set)"
            obj = unittest.skip(f"{BY_DESIGN_PREFIX} only on {', '.join(wanted)}, this is {where}: {reason}")(obj)
        import pytest

        mark: _Decorated = getattr(pytest.mark, BY_DESIGN_MARK)(*wanted, reason=reason)(obj)
        return mark

    return decorate
