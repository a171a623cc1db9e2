"""#39 (4): the process of a script run through the row is the one ``python FILE`` gives
it, as far as a test can see, but for what the record needs (docs/upstream.md): the same
variables, interpreter options (those its multiprocessing children get too), argv,
sys.path and folder. A difference of this class makes a test's outcome depend on how it
was run: compare runs the file both ways and the test compares what each run saw."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tests.integration.test_compare import _compare, _project

pytestmark = pytest.mark.slow

# what the record needs and python FILE has not: the attempt's token (every process of the
# attempt carries it, for the sweep), and unbuffered output (a crash keeps what was printed)
OURS = {"DEVICE_MATRIX_ATTEMPT", "PYTHONUNBUFFERED"}


def test_a_script_sees_the_process_python_file_gives_it(tmp_path: Path) -> None:
    probe = tmp_path / "probe.jsonl"
    scripts = (
        '[[tool.device-matrix.devices.fixture.scripts]]\nfile = "test/test_process_state.py"\n'
        f'env = {{ PROBE_OUT = "{probe}" }}\n'
    )
    root = _project(tmp_path, scripts)
    shutil.copy(FIXTURES / "scripts" / "test_process_state.py", root / "test")
    proc = _compare(root)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    plain, row = (json.loads(line) for line in probe.read_text().splitlines())
    for seen in (plain, row):
        for name in OURS:
            seen["env"].pop(name, None)
    assert row["env"] == plain["env"]
    assert {k: v for k, v in row.items() if k != "env"} == {k: v for k, v in plain.items() if k != "env"}
