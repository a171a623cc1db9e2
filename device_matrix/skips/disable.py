"""The disable list (``device-matrix-disabled.toml``): tests disabled without touching them::

[[disable]]
test = "suites/mlp/test_ab.py::test_checkpointing"   # a nodeid, or a prefix ending in ::
devices = ["neuron"]
issue = "#45"
reason = "optimisation barrier unsupported"
mode = "skip"            # or "xfail"
expires = 2027-03-01     # optional
"""

from __future__ import annotations

import datetime as dt
import os
import unittest
from collections.abc import Sequence
from pathlib import Path

from device_matrix.errors import ConfigError
from device_matrix.skips.model import DeviceSkip, parse_date
from device_matrix.skips.refs import normalize_issue
from device_matrix.tomlfile import read_array_of_tables

_DISABLE_KEYS = {"test", "devices", "issue", "reason", "mode", "expires", "strict", "since", "source"}


def load_disable_list(path: Path) -> list[DeviceSkip]:
    """Read the central disable list; a missing file is an empty list."""
    entries = read_array_of_tables(path, "disable")
    out = []
    for i, entry in enumerate(entries):
        where = f"{path} [[disable]] #{i + 1}"
        if not isinstance(entry, dict):
            raise ConfigError("each [[disable]] entry must be a table", source=where)
        unknown = set(entry) - _DISABLE_KEYS
        if unknown:
            raise ConfigError(
                f"unknown key(s) {sorted(unknown)}",
                source=where,
                allowed=", ".join(sorted(_DISABLE_KEYS)),
            )
        test = entry.get("test")
        devices = entry.get("devices")
        if not isinstance(test, str) or not test:
            raise ConfigError("needs test = '<nodeid or prefix>'", source=where, key="test")
        if not isinstance(devices, list) or not devices or not all(isinstance(d, str) for d in devices):
            raise ConfigError("needs devices = ['cpu', ...]", source=where, key="devices")
        mode = entry.get("mode", "skip")
        if mode not in ("skip", "xfail"):
            raise ConfigError(f"bad mode {mode!r}", source=where, key="mode", allowed="skip | xfail")
        raw_issue = entry.get("issue")
        issue = normalize_issue(raw_issue) if isinstance(raw_issue, str) else None
        if raw_issue is not None and issue is None:
            raise ConfigError(
                f"issue={raw_issue!r} is not an issue reference",
                source=where,
                key="issue",
                allowed="a URL, #N, owner/name#N or ledger:N",
            )
        # #33: the list the runner writes from the tracker's disable issues says so, and their date
        source = entry.get("source", "disable_list")
        if source not in ("disable_list", "tracker"):
            raise ConfigError(f"bad source {source!r}", source=where, key="source", allowed="tracker")
        since = entry.get("since")
        if since is not None and (source != "tracker" or not isinstance(since, dt.date)):
            raise ConfigError(
                "since is the date of a tracker disable (source = 'tracker', a date: 2026-11-02)",
                source=where,
                key="since",
            )
        out.append(
            DeviceSkip(
                mode=mode,
                devices=tuple(devices),
                issue=issue,
                reason=str(entry.get("reason", "")),
                # a device skip of the disable list, whoever wrote it; its date says it is the tracker's
                source="disable_list",
                since=since,
                expires=parse_date(entry.get("expires"), where),
                strict=bool(entry.get("strict", True)),
                test=test,
                file=str(path),
                line=None,
                form="disable_list",
            )
        )
    return out


def disable_matches(entry: DeviceSkip, nodeid: str) -> bool:
    return entry.test is not None and target_matches(entry.test, nodeid)


def target_matches(target: str, nodeid: str) -> bool:
    """Whether a disable's test (a nodeid or a prefix) names ``nodeid``."""
    if target == nodeid:
        return True
    # a prefix: a file, a class, or a parametrized test's base name
    return nodeid.startswith((target.rstrip(":") + "::", target + "["))


def skip_disabled_tests(
    named: Sequence[tuple[str, unittest.TestCase]], device: str | None, path: str | None
) -> dict[str, DeviceSkip]:
    """#33: the script launcher's tests the row's disable list names are skipped as the
    plugin skips them, with the same text (a disable issue's number and date).

    The list (``path``) and the device are the ones the runner gives every child (its
    variables, which the launcher takes out of the script's environment, #39);
    each disabled test's method is replaced on its instance by unittest's own skip, so
    unittest reports it skipped, with its class and module fixtures run as usual. Returns
    the entry that skips each disabled test, by nodeid: its record says the list skipped it.
    """
    here = device
    hits: dict[str, DeviceSkip] = {}
    if not path or not here:
        return hits
    pjrt = os.environ.get("PJRT_DEVICE")
    entries = [e for e in load_disable_list(Path(path)) if e.mode == "skip" and e.applies_to(here, pjrt)]
    today = dt.date.today()
    for nodeid, test in named:
        hit = next((e for e in entries if disable_matches(e, nodeid) and not e.expired(today)), None)
        if hit is not None:
            name = getattr(test, "_testMethodName", "runTest")
            setattr(test, name, unittest.skip(hit.text(here))(getattr(test, name)))
            hits[nodeid] = hit
    return hits
