"""Disables filed as issues (#33): an open issue titled ``DISABLED <test>`` whose body names
the devices disables that test on those rows from the next run, without a commit.

Pure: titles and bodies in, :class:`Disable` or :class:`Unreadable` out, and the lines of
the disable list (``device-matrix-disabled.toml``'s format) that hand them to the child.

Titles::

    DISABLED suites/mlp/test_ab.py::test_checkpointing      a nodeid
    DISABLED suites/mlp/test_ab.py::TestAB                  a file or class prefix
    DISABLED suites/mlp/test_ab.py::test_sum[cuda-2]        a parametrized id
    DISABLED test_x (__main__.TestY)                        unittest's form

Bodies name the devices on a line of their own, ``devices: cuda, neuron`` (``platforms:``
as upstream writes it is read too); without one the test is disabled on every row.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from device_matrix.skips.disable import target_matches
from device_matrix.skips.model import device_names

TITLE_PREFIX = "DISABLED"
# a row's files of the disables it applies (``results/<row>/``, a shard's folder): what was
# read and when, and the list its children read (the project's and the tracker's)
CACHE_FILE = "disables.json"
LIST_FILE = "device-matrix-disabled.toml"
# unittest's str() of a test: "test_x (__main__.TestY)", "test_x (pkg.mod.TestY.test_x)" (3.11+)
_UNITTEST_RES = (
    re.compile(r"(?P<method>\w+) \((?P<module>[\w.]+)\.(?P<cls>\w+)\.(?P=method)\)"),
    re.compile(r"(?P<method>\w+) \((?P<module>[\w.]+)\.(?P<cls>\w+)\)"),
)
_DEVICES_RE = re.compile(r"\s*(?:devices|platforms)\s*:(?P<names>.*)", re.IGNORECASE)
# #42: a line meant to name the devices, read or not: a word for them (singular too, or
# rows), in Markdown's decoration or not, then ":" or "=". One that is not the documented
# form is a problem to answer: read as no devices line, it disabled the test on every row.
_DEVICES_MEANT_RE = re.compile(
    r"^[\s>*_`#-]*(?:devices?|platforms?|rows?)\b[\s*_`]*[:=].*$", re.IGNORECASE | re.MULTILINE
)
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
DEVICES_FORM = "write `devices: cuda, neuron` on a line of its own (lower-case row or device names, comma-separated)"
_DEVICE_NAME_RE = re.compile(r"[a-z][a-z0-9_-]*")


@dataclass(frozen=True)
class Disable:
    """One open, readable disable issue: what it disables, where, and since when."""

    issue: str  # "#123", "owner/name#123" or "ledger:3"
    test: str  # a nodeid or a prefix; in unittest's form, "Class::method" (see :attr:`unittest_module`)
    devices: tuple[str, ...]  # ("*",): every row
    since: dt.date
    author: str | None = None
    unittest_module: str | None = None  # "__main__": each scripts entry's file; "a.b": a/b.py
    title: str = ""
    reason: str = ""  # #42: the body's words besides its devices line (`issues disable --reason`)

    @property
    def skip_reason(self) -> str:
        """The reason of the skip it makes: its issue, since when (:func:`disabled_for` reads
        it back) and, where the body gives one, why."""
        said = f"disabled by {self.issue} since {self.since.isoformat()}"
        return f"{said}: {self.reason}" if self.reason else said

    def targets(self, script_files: Sequence[str]) -> list[str]:
        """The nodeids (or prefixes) this disables: a unittest-form title maps onto each
        scripts entry's file (``FILE::TestY::test_x``), as the script launcher names its tests."""
        if self.unittest_module is None:
            return [self.test]
        if self.unittest_module == "__main__":
            return [f"{file}::{self.test}" for file in script_files]
        return [f"{self.unittest_module.replace('.', '/')}.py::{self.test}"]

    def applies(self, row: str, pjrt_device: str | None) -> bool:
        """Whether it disables its test on this row (by the row's name or its device's)."""
        names = device_names(row, pjrt_device)
        return "*" in self.devices or any(x in names for x in self.devices)

    def matches(self, nodeid: str, script_files: Sequence[str]) -> bool:
        """Whether it names the test ``nodeid`` (each of its targets a nodeid or a prefix)."""
        return any(target_matches(t, nodeid) for t in self.targets(script_files))

    def as_json(self) -> dict[str, object]:
        return {
            "issue": self.issue,
            "test": self.test,
            "devices": list(self.devices),
            "since": self.since.isoformat(),
            "author": self.author,
            "unittest_module": self.unittest_module,
            "title": self.title,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Disable:
        devices = data.get("devices")
        module = data.get("unittest_module")
        author = data.get("author")
        return cls(
            issue=str(data["issue"]),
            test=str(data["test"]),
            devices=tuple(str(d) for d in devices) if isinstance(devices, list) else ("*",),
            since=dt.date.fromisoformat(str(data["since"])),
            author=str(author) if isinstance(author, str) else None,
            unittest_module=str(module) if isinstance(module, str) else None,
            title=str(data.get("title", "")),
            reason=str(data.get("reason", "")),
        )


@dataclass(frozen=True)
class Unreadable:
    """A ``DISABLED`` issue that could not be read: what could not be, said to its author."""

    issue: str
    title: str
    problem: str


def is_disable_title(title: str) -> bool:
    return title.split(maxsplit=1)[:1] == [TITLE_PREFIX]


def parse(issue: str, title: str, body: str, since: dt.date, author: str | None = None) -> Disable | Unreadable | None:
    """The disable an issue asks for; None when its title does not start with ``DISABLED``."""
    if not is_disable_title(title):
        return None
    rest = title.strip()[len(TITLE_PREFIX) :].strip()
    if not rest:
        return Unreadable(issue, title, "the title names no test: write `DISABLED path/test_x.py::test_name`")
    module = None
    test = rest
    m = next((hit for r in _UNITTEST_RES if (hit := r.fullmatch(rest))), None)
    if m:
        module, test = m.group("module"), f"{m.group('cls')}::{m.group('method')}"
    elif any(c.isspace() for c in rest) or ("::" not in rest and not rest.endswith(".py")):
        return Unreadable(
            issue,
            title,
            f"the title's test {rest!r} is neither a nodeid (path/test_x.py::test_name, a file or class "
            "prefix, a parametrized id) nor unittest's form `test_x (__main__.TestY)`",
        )
    devices = _devices(body or "")
    if isinstance(devices, str):
        return Unreadable(issue, title, devices)
    return Disable(issue, test, devices, since, author, module, title, _reason(body or ""))


REASON_LIMIT = 300  # characters of the body kept as the skip's reason


def _reason(body: str) -> str:
    """Why, as the body says it: its text without the devices line and hidden markers, on one
    line (a skip reason is one), clipped."""
    text = " ".join(_DEVICES_MEANT_RE.sub(" ", _COMMENT_RE.sub(" ", body)).split())
    return text if len(text) <= REASON_LIMIT else text[: REASON_LIMIT - 1] + "…"


def _devices(body: str) -> tuple[str, ...] | str:
    """The devices the body's devices line names; ("*",) without one; a problem (its text)
    when a line meant to name them cannot be read (#42): never every row for a typo."""
    lines = [m.group(0).strip() for m in _DEVICES_MEANT_RE.finditer(body)]
    if len(lines) > 1:
        return f"the body has more than one devices line ({', '.join(map(repr, lines))}): keep one"
    if not lines:
        return ("*",)
    (line,) = lines
    m = _DEVICES_RE.fullmatch(line)
    if m is None:
        return f"the body's line {line!r} is not a devices line it can read: {DEVICES_FORM}"
    names = [n.strip().lower() for n in m.group("names").split(",")]
    bad = [n for n in names if not _DEVICE_NAME_RE.fullmatch(n)]
    if bad:
        unread = ", ".join(map(repr, bad))
        return f"the body's devices line {line!r} names no device it can read ({unread}): {DEVICES_FORM}"
    return tuple(dict.fromkeys(names))


def title_for(test: str) -> str:
    return f"{TITLE_PREFIX} {test}"


def body_for(devices: Sequence[str], reason: str) -> str:
    lines = [f"devices: {', '.join(devices)}"] if devices else []
    if reason:
        lines += ["", reason]
    return "\n".join(lines)


def disable_list_toml(disables: Iterable[Disable], script_files: Sequence[str]) -> str:
    """The tracker's disables as ``[[disable]]`` tables the child reads (``source = "tracker"``)."""
    out: list[str] = []
    for d in disables:
        for target in d.targets(script_files):
            out += [
                "[[disable]]",
                f"test = {json.dumps(target)}",
                f"devices = {json.dumps(list(d.devices))}",
                f"issue = {json.dumps(d.issue)}",
                f"reason = {json.dumps(d.skip_reason)}",
                f"since = {d.since.isoformat()}",
                'source = "tracker"',
                "",
            ]
    return "\n".join(out)


_SINCE_RE = re.compile(r"\bdisabled by \S+ since (\d{4}-\d{2}-\d{2})\b")


def disabled_for(reason: str, today: dt.date) -> str | None:
    """How long a tracker disable has held, from its skip's reason (``disabled by #123 since
    2026-11-02``): for the triage report, "for 3 days (since 2026-11-02)"; None for another skip."""
    m = _SINCE_RE.search(reason or "")
    if not m:
        return None
    since = dt.date.fromisoformat(m.group(1))
    days = (today - since).days
    return f"for {days} day{'s' if days != 1 else ''} (since {since.isoformat()})"
