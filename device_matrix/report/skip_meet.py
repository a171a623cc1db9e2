"""Where the two views of a skip meet (#32): a skip recorded at run time and the declaration
the source scan found for it (device_matrix/skips/scan.py).

A ``pytest.skip("This test only works on TPU")`` inside a test names no device when it
runs: the record has it as a plain skip (``devices: []``, no file). The scan reads the same
call with its file, line, devices and whether it is by design. A recorded skip that no
device marker made is given what its declaration says when the declaration is the test's
(the same test, its class or its module) and says the same reason; triage then counts it
as the device skip it is, by design or needing an issue.
"""

from __future__ import annotations

from collections.abc import Sequence

from device_matrix.findings import is_device_skip
from device_matrix.records.schema import RunRecord
from device_matrix.report.model import SkipView
from device_matrix.skips import DeviceSkip, attention


def _declares(d: DeviceSkip, nodeid: str, reason: str) -> bool:
    if d.test is None or d.mode not in ("skip", "xfail"):
        return False
    test = nodeid.split("[", 1)[0]  # a parametrized test's cases are the test's
    mine = test == d.test or test.startswith(d.test + "::")
    return mine and (not d.reason or d.reason in reason)


def meet(records: Sequence[RunRecord], declared: Sequence[DeviceSkip]) -> int:
    """Each recorded skip with no devices given its declaration's file, line, devices,
    issue and kind (by design or not), in place; returns how many met one."""
    met = 0
    by_file: dict[str, list[DeviceSkip]] = {}
    for d in declared:
        if d.test is not None and d.devices:
            by_file.setdefault(d.test.split("::", 1)[0], []).append(d)
    if not by_file:
        return 0
    for rec in records:
        for t in rec["tests"]:
            skip = t["skip"]
            if skip is None or skip["devices"] or is_device_skip(skip):
                continue
            found = [
                d
                for d in by_file.get(t["nodeid"].split("::", 1)[0], [])
                if d.mode == skip["mode"] and _declares(d, t["nodeid"], skip["reason"] or "")
            ]
            if not found:
                continue
            d = min(found, key=lambda x: -len(x.test or ""))  # the nearest: the test's own, then its class's
            skip["file"], skip["line"], skip["devices"] = d.file, d.line, list(d.devices)
            skip["by_design"] = d.by_design
            if d.issue and not skip["issue"]:
                skip["issue"] = d.issue
            met += 1
    return met


def why_attention(s: SkipView) -> str | None:
    """Why the skip needs attention, by the rule ``skips check`` applies (#41), None if it does not."""
    return attention(s["issue"], s["issue_state"], by_design=s["by_design"])


def needs_attention(s: SkipView) -> bool:
    return why_attention(s) is not None


def counted(skips: Sequence[SkipView]) -> str:
    """ "5 by design, 0 need attention" (#32); without any by design, as before."""
    by_design = sum(1 for s in skips if s["by_design"] and not s["issue"])
    attention = sum(1 for s in skips if needs_attention(s))
    return (f"{by_design} by design, " if by_design else "") + f"{attention} need attention"
