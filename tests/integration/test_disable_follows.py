"""#42: every file derived from the tracker's disables follows them.

After ``issues enable`` the next run removed the row's disables.json but left its
``device-matrix-disabled.toml``, so the documented plain-pytest recipe still skipped the
test "disabled by ledger:1", a closed issue.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import Project, clean_env
from tests.integration.test_disable_runs import _project

TEST = "suites/dis/test_dis.py::test_plain"


def _plain_pytest(p: Project, disable_list: Path) -> str:
    """The recipe of docs/skips-and-issues.md: plain pytest given the row's list."""
    env = clean_env() | {"DEVICE_MATRIX_DISABLE_LIST": str(disable_list), "DEVICE_MATRIX_DEVICE": "cuda"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-q", TEST],
        cwd=p.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return proc.stdout + proc.stderr


def test_an_enabled_test_is_skipped_by_no_file_of_the_row(tmp_path: Path) -> None:
    p = _project(tmp_path)
    listed = p.results / "cuda" / "device-matrix-disabled.toml"
    assert p.run("issues", "disable", TEST, "--device", "cuda").returncode == 0
    assert p.run("run", "--device", "cuda").returncode == 0
    assert "disabled on cuda by ledger:1" in _plain_pytest(p, listed)

    assert p.run("issues", "enable", TEST).returncode == 0
    again = p.run("run", "--device", "cuda")
    assert again.returncode == 0, again.stdout + again.stderr
    assert not (p.results / "cuda" / "disables.json").exists()
    assert not listed.exists()
    said = _plain_pytest(p, listed)
    assert "1 passed" in said and "ledger:1" not in said, said


def test_a_row_writes_and_reads_only_its_own_disables(tmp_path: Path) -> None:
    # #42: a disable open for another row only made this row write both files (and list it)
    p = _project(tmp_path)
    assert p.run("issues", "disable", TEST, "--device", "cuda").returncode == 0
    proc = p.run("run", "--device", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (p.results / "cpu" / "disables.json").exists()
    assert not (p.results / "cpu" / "device-matrix-disabled.toml").exists()
    assert p.record("cpu")["disables"]["applied"] == 0  # the list was read; none of it is the row's

    other = "suites/dis/test_dis.py::test_param"
    assert p.run("issues", "disable", other, "--device", "cpu").returncode == 0
    proc = p.run("run", "--device", "cuda", "--device", "cpu")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # both rows' device is CPU: the cpu disable is the cuda row's too, the cuda one is not cpu's
    for row, own in (("cuda", [TEST, other]), ("cpu", [other])):
        listed = (p.results / row / "device-matrix-disabled.toml").read_text()
        assert [t for t in (TEST, other) if f'"{t}"' in listed] == own, listed
        kept = json.loads((p.results / row / "disables.json").read_text())
        assert [d["test"] for d in kept["disables"]] == own and kept["applied"] == len(own)
