"""Worker processes of the suites write no core files.

The runner raises RLIMIT_CORE for the pytest process so a crash of a *test* leaves a core
for gdb; processes a test starts inherit that limit. A worker that crashes on purpose
(an xfail'd launch mode) would drop a core, gigabytes for a torch_xla process, wherever
it runs. Its diagnosis comes from its output instead.
"""

from __future__ import annotations

import resource


def no_core_dumps() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
