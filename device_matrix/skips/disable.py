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

from pathlib import Path

from device_matrix.errors import ConfigError
from device_matrix.skips.model import DeviceSkip, parse_date
from device_matrix.skips.refs import normalize_issue
from device_matrix.tomlfile import read_array_of_tables

_DISABLE_KEYS = {"test", "devices", "issue", "reason", "mode", "expires", "strict"}


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
        out.append(
            DeviceSkip(
                mode=mode,
                devices=tuple(devices),
                issue=issue,
                reason=str(entry.get("reason", "")),
                source="disable_list",
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
    if entry.test is None:
        return False
    if entry.test == nodeid:
        return True
    # a prefix: a file, a class, or a parametrized test's base name
    return nodeid.startswith((entry.test.rstrip(":") + "::", entry.test + "["))
