"""Every child of a run starts in one place, ``base.spawn`` (#31): its own session, stdin
closed, output to a file, what it left swept. Grep-level: no other module of the package
starts a process with ``subprocess.Popen``, but the ones named here with why."""

from __future__ import annotations

import re

from tests.conftest import REPO

PACKAGE = REPO / "device_matrix"
# where a process is still started otherwise, and why
ELSEWHERE = {
    # the one place
    "device_matrix/executors/base.py": "base.spawn itself",
    # a tool asked on this host: a presence check, a driver tool (nvidia-smi) the environment
    # snapshot asks in the test process too (the image's own interpreter, where the runner's
    # sweep has no business), pip's dry run for doctor
    "device_matrix/devices.py": "ask_tool: a tool, its own group, ended on timeout",
}
POPEN = re.compile(r"\bPopen\(")


def test_only_base_spawn_starts_a_child() -> None:
    starting = sorted(str(path.relative_to(REPO)) for path in PACKAGE.rglob("*.py") if POPEN.search(path.read_text()))
    others = [p for p in starting if p not in ELSEWHERE]
    assert others == [], others
    # the executors start theirs through it: the local interpreter, the container, the image check
    for name in ("local.py", "container.py"):
        text = (PACKAGE / "executors" / name).read_text()
        assert "spawn(" in text and not POPEN.search(text), name
