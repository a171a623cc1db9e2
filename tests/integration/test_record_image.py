"""The tests of this concept that start a process; the rest are in tests/unit/test_record_image.py (#41)."""

from __future__ import annotations

from pathlib import Path

from tests.unit.test_record_image import IMAGE, ROW
from tests.userproject import user_project


def test_a_row_run_on_this_host_names_no_image_and_in_its_image_names_it(tmp_path: Path) -> None:
    p = user_project(tmp_path / "proj", {"tests/test_ok.py": "def test_ok():\n    pass\n"}, row=ROW)
    here = p.run("run", "--device", "cpu", "--local")
    assert here.returncode == 0, here.stdout + here.stderr
    record = p.record("cpu")
    assert (record["mode"], record["image"]) == ("local", None)
    assert record["environment"].get("container_image") is None
    # the reusable workflow's job container is the row's image: there the record names it
    inside = p.run("run", "--device", "cpu", env={"DEVICE_MATRIX_IN_IMAGE": "cpu"})
    assert inside.returncode == 0, inside.stdout + inside.stderr
    record = p.record("cpu")
    assert (record["mode"], record["image"]) == ("local", IMAGE)
