"""The device skip model: one declared skip or xfail, and the markers that declare one.

Markers (registered by the pytest plugin, usable in any project)::

    @pytest.mark.skip_device("cuda", "neuron", issue="#123", reason="...", expires="2027-01-31")
    @pytest.mark.xfail_device("cpu", issue="https://github.com/o/r/issues/9", reason="...",
                              strict=True, raises=ValueError)

A device name matches the row being run (``cpu``, ``tpu``...) or its PJRT device in
lower case (``GPU``, PJRT's older name, is ``cuda``); under plain pytest, where no row
runs, the PJRT device alone (:func:`device_names`). ``issue`` takes a URL, ``#N``,
``owner/name#N`` or ``ledger:N`` (an issue in the embedded ledger). After ``expires`` the marker no longer applies and
``device-matrix skips check`` fails on it.

The disable list is read by :mod:`device_matrix.skips.disable`; issue references are
parsed by :mod:`device_matrix.skips.refs`; ``skips check`` scans sources with
:mod:`device_matrix.skips.scan`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from device_matrix.errors import ConfigError
from device_matrix.skips.refs import normalize_issue

SkipMode = Literal["skip", "xfail"]
SkipSource = Literal["marker", "disable_list", "tracker", "unittest", "pytest"]
BY_DESIGN_MARK = "only_on"  # the pytest mark (and static form) of a skip that is not a defect
# PJRT device names that a device marker knows by another name: GPU is torch_xla's older name for CUDA
PJRT_ALIASES = {"gpu": "cuda"}


def pjrt_device_name(pjrt_device: str | None) -> str | None:
    """The device name a PJRT device goes by in markers: ``CUDA`` and ``GPU`` are ``cuda``."""
    name = (pjrt_device or "").strip().lower()
    return PJRT_ALIASES.get(name, name) or None


def device_names(row: str | None, pjrt_device: str | None) -> frozenset[str]:
    """The names a device marker matches here, lower case: the row's, and its PJRT device's.

    Under plain pytest there is no row (#20): ``PJRT_DEVICE=CUDA pytest`` (or ``GPU``)
    matches ``"cuda"`` as the cuda row does.
    """
    names = {n.strip().lower() for n in (row, pjrt_device) if n and n.strip()}
    return frozenset(names | {PJRT_ALIASES[n] for n in names if n in PJRT_ALIASES})


@dataclass(frozen=True, kw_only=True)
class DeviceSkip:
    """One declared device skip or xfail, wherever it was declared."""

    mode: SkipMode
    devices: tuple[str, ...]
    issue: str | None
    reason: str
    source: SkipSource
    expires: dt.date | None = None
    strict: bool = True
    test: str | None = None  # nodeid or prefix (disable list), or file::name (static scan)
    file: str | None = None
    line: int | None = None
    # the static scan's view: how it was written, whether the test simply does not apply
    # on these devices (only_on, a by-design comment), and why the declaration is unusable
    form: str | None = None
    by_design: bool = False
    problem: str | None = None
    # #33: when the tracker's disable issue was filed (the runner's list of them says so)
    since: dt.date | None = None

    def text(self, device: str) -> str:
        """What a skipped or xfailed test says on ``device``: a tracker disable cites its issue and its age."""
        if self.since is not None:
            return f"[device-matrix] disabled on {device} by {self.issue} since {self.since}"
        cite = self.issue or "no issue cited"
        return f"[device-matrix] {self.mode} on {device}: {self.reason or 'no reason given'} ({cite})"

    def applies_to(self, row: str | None, pjrt_device: str | None) -> bool:
        names = device_names(row, pjrt_device)
        return bool(names) and any(d.lower() in names or d == "*" for d in self.devices)

    def expired(self, today: dt.date | None = None) -> bool:
        return self.expires is not None and self.expires < (today or dt.date.today())

    def as_meta(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "devices": list(self.devices),
            "issue": self.issue,
            "reason": self.reason,
            "source": self.source,
            "expires": self.expires.isoformat() if self.expires else None,
            "file": self.file,
            "line": self.line,
        }


def parse_date(value: Any, where: str) -> dt.date | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise ConfigError(f"bad expiry date {value!r}", source=where, allowed="YYYY-MM-DD")


def from_marker(mode: SkipMode, args: Sequence[Any], kwargs: Mapping[str, Any], *, where: str) -> DeviceSkip:
    devices: list[str] = []
    for a in args:
        if isinstance(a, str):
            devices.append(a)
        elif isinstance(a, list | tuple):
            devices.extend(str(x) for x in a)
        else:
            raise ConfigError(f"{mode}_device takes device names, got {a!r}", source=where, allowed="strings")
    if "devices" in kwargs:
        devices.extend(kwargs["devices"])
    if not devices:
        raise ConfigError(
            f"{mode}_device needs at least one device name",
            source=where,
            tip='Write e.g. @pytest.mark.skip_device("cuda", issue="#12", reason="...").',
        )
    unknown = set(kwargs) - {"devices", "issue", "reason", "expires", "strict", "raises"}
    if unknown:
        raise ConfigError(
            f"unknown argument(s) {sorted(unknown)} to {mode}_device",
            source=where,
            allowed="issue, reason, expires, strict, raises",
        )
    raw_issue = kwargs.get("issue")
    issue = normalize_issue(raw_issue) if raw_issue else None
    if raw_issue and issue is None:
        raise ConfigError(
            f"issue={raw_issue!r} is not an issue reference",
            source=where,
            allowed="a URL, #N, owner/name#N or ledger:N",
        )
    return DeviceSkip(
        mode=mode,
        devices=tuple(devices),
        issue=issue,
        reason=str(kwargs.get("reason", "")),
        source="marker",
        expires=parse_date(kwargs.get("expires"), where),
        strict=bool(kwargs.get("strict", True)),
    )
