"""A process that dies or hangs in its last test: the row's reason says during, not after (#41)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow

LAST_DIES = "import ctypes\n\ndef test_a():\n    pass\n\ndef test_z_dies():\n    ctypes.string_at(0)\n"
LAST_HANGS = "import time\n\ndef test_a():\n    pass\n\ndef test_z_hangs():\n    time.sleep(60)\n"


@pytest.mark.parametrize(
    ("body", "row", "what", "kind"),
    [(LAST_DIES, "", "died", "crash"), (LAST_HANGS, "test_timeout = 2", "hung", "timeout")],
    ids=["crash", "timeout"],
)
def test_a_death_in_the_last_test_is_during_it(
    project: Callable[..., Project], body: str, row: str, what: str, kind: str
) -> None:
    p = project("segv", row=row) if row else project("segv")
    (p.root / "suites" / "segv" / "test_segv.py").write_text(body)
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    [crash] = record["crashes"]
    assert crash["phase"] == "test" and crash["kind"] == kind
    assert record["reason"] == f"the test process {what} during its last test", record["reason"]
