"""Nodeids that are not plain text (a file name not in UTF-8, raw parametrize ids) keep their identity in a resume."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Project, clean_env
from tests.runs import write_suite

pytestmark = pytest.mark.slow


ABORT_THEN_PASS = "import os\n\n\ndef test_abort():\n    os.abort()\n\n\ndef test_after():\n    pass\n"


def test_a_test_file_named_in_no_utf8_is_recorded_and_resumed(project: Callable[..., Project]) -> None:
    p = project("passing")
    write_suite(p, "latin", {"test_plain.py": "def test_plain():\n    pass\n"})
    # a legacy file name in Latin-1: pytest's nodeid holds a lone surrogate for the byte
    folder = os.fsencode(p.root / "suites" / "latin")
    Path(os.fsdecode(os.path.join(folder, b"test_caf\xe9.py"))).write_text(ABORT_THEN_PASS)
    proc = subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--device", "fixture", "--reruns=0"],
        cwd=p.root,
        # a terminal that takes UTF-8 only, as under an ordinary UTF-8 locale
        env={**clean_env(), "PYTHONIOENCODING": "utf-8:strict"},
        capture_output=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert b"Traceback" not in proc.stderr
    record = p.record()
    outcomes = {t["nodeid"].rsplit("::", 1)[-1]: t["outcome"] for t in record["tests"]}
    # the test after the abort ran in the resumed process, selected by its own nodeid
    assert outcomes == {"test_abort": "crashed", "test_after": "passed", "test_plain": "passed"}
    assert record["status"] == "crashed"
    cases = ET.parse(p.results / "fixture" / "junit.xml").getroot().iter("testcase")
    assert sorted(c.get("name") for c in cases) == ["test_abort", "test_after", "test_plain"]


RAW_IDS = r"""
import os
import pytest

IDS = ["line\nbreak", "para\u2029sep", "line\u2028sep", "nel\x85x", "tab\tx", "uni\u00e9"]


def test_a_abort():
    os.abort()


@pytest.mark.parametrize("v", range(len(IDS)), ids=IDS)
def test_b_raw(v):
    pass
"""


def test_raw_parametrize_ids_survive_a_resume(project: Callable[..., Project]) -> None:
    p = project("passing")
    write_suite(p, "raw", {"test_raw.py": RAW_IDS})
    (p.root / "pytest.ini").write_text(
        "[pytest]\ndisable_test_id_escaping_and_forfeit_all_rights_to_community_support = true\n"
    )
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = p.record()
    outcomes = {t["nodeid"].split("::", 1)[1]: t["outcome"] for t in record["tests"]}
    raw = {k: v for k, v in outcomes.items() if k.startswith("test_b_raw")}
    assert len(raw) == 6 and set(raw.values()) == {"passed"}, outcomes
    assert outcomes["test_a_abort"] == "crashed"
