"""A record names an image only where its tests ran in it.

A cpu row with an image, run on a developer's host (``--local``), recorded the row's image
as the place it ran: the crash placement's ``image`` facet then blamed an image nobody used.
"""

from __future__ import annotations

from pathlib import Path

from device_matrix.config import load
from device_matrix.run.plan import image_ran_in, in_rows_image, plan_row
from tests.userproject import user_project

IMAGE = "localhost/xla:r2.9.0_3.11"
ROW = f'image = "{IMAGE}"\nrun_in = "auto"'


def test_the_plan_says_which_image_a_row_runs_in(tmp_path: Path) -> None:
    user_project(tmp_path, {"tests/test_ok.py": "def test_ok():\n    pass\n"}, row=ROW)
    cfg = load(tmp_path)
    row = cfg.row("cpu")
    assert plan_row(cfg, row, force="local", environ={}).image is None
    assert plan_row(cfg, row, environ={"DEVICE_MATRIX_IN_IMAGE": "cpu"}).image == IMAGE
    assert plan_row(cfg, row, environ={"DEVICE_MATRIX_IN_IMAGE": IMAGE}).image == IMAGE
    assert plan_row(cfg, row, environ={"DEVICE_MATRIX_IN_IMAGE": "tpu"}, force="local").image is None
    # a gang's record reads the same rule
    assert image_ran_in(row, "container", in_image=in_rows_image(row, {})) == IMAGE
    assert image_ran_in(row, "local", in_image=in_rows_image(row, {})) is None
    assert image_ran_in(row, "local", in_image=in_rows_image(row, {"DEVICE_MATRIX_IN_IMAGE": "cpu"})) == IMAGE
