"""Colour on the terminal: NO_COLOR and FORCE_COLOR as the conventions define them."""

from __future__ import annotations

import io

import pytest

from device_matrix.output import Output


@pytest.mark.parametrize(
    ("env", "tty", "color"),
    [
        ({}, True, True),
        ({}, False, False),
        ({"NO_COLOR": "1"}, True, False),
        ({"NO_COLOR": ""}, True, True),  # empty means unset
        ({"FORCE_COLOR": "1"}, False, True),
        ({"FORCE_COLOR": "0"}, False, True),  # any non-empty value, "0" included
        ({"FORCE_COLOR": ""}, False, False),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, True, False),
    ],
)
def test_colour_detection(env: dict[str, str], tty: bool, color: bool) -> None:
    out = Output(io.StringIO(), environ=env, tty=tty)
    assert out.color is color
    painted = out.paint("failed", "x")
    assert ("\x1b[" in painted) is color
