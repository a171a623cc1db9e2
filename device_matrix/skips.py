"""Device skips and xfails: the markers, the disable list, issue references.

Markers (registered by the pytest plugin, usable in any project)::

    @pytest.mark.skip_device("cuda", "neuron", issue="#123", reason="...", expires="2027-01-31")
    @pytest.mark.xfail_device("cpu", issue="https://github.com/o/r/issues/9", reason="...",
                              strict=True, raises=ValueError)

A device name matches the row being run (``cpu``, ``tpu``...) or its PJRT device in
lower case. ``issue`` takes a URL, ``#N``, ``owner/name#N`` or ``ledger:N`` (an issue in
the embedded ledger). After ``expires`` the marker no longer applies and
``device-matrix skips check`` fails on it.

The disable list (``device-matrix-disabled.toml`` at the project root) disables tests
without touching them::

    [[disable]]
    test = "suites/mlp/test_ab.py::test_checkpointing"   # a nodeid, or a prefix ending in ::
    devices = ["neuron"]
    issue = "#45"
    reason = "optimisation barrier unsupported"
    mode = "skip"            # or "xfail"
    expires = 2027-03-01     # optional
"""

from __future__ import annotations

import ast
import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from device_matrix.config import read_array_of_tables
from device_matrix.errors import ConfigError

SkipMode = Literal["skip", "xfail"]
SkipSource = Literal["marker", "disable_list", "unittest", "pytest"]

ISSUE_URL_RE = re.compile(r"https?://[^\s/]+/([\w.-]+)/([\w.-]+)/(?:issues|pull)/(\d+)")
ISSUE_REF_RE = re.compile(r"^(?:([\w.-]+/[\w.-]+))?#(\d+)$")
LEDGER_REF_RE = re.compile(r"^ledger:(\d+)$")


def normalize_issue(ref: str | None) -> str | None:
    """Return a canonical issue reference, or None when ``ref`` names no issue.

    Canonical forms: ``owner/name#N`` (GitHub, full URL or owner/name#N given), ``#N``
    (GitHub, repository from the tracker config) and ``ledger:N``.
    """
    if not ref:
        return None
    text = ref.strip()
    m = ISSUE_URL_RE.search(text)
    if m:
        return f"{m.group(1)}/{m.group(2)}#{m.group(3)}"
    m = ISSUE_REF_RE.match(text)
    if m:
        return f"{m.group(1)}#{m.group(2)}" if m.group(1) else f"#{m.group(2)}"
    m = LEDGER_REF_RE.match(text)
    if m:
        return f"ledger:{int(m.group(1))}"
    return None


def find_issue_in_text(text: str | None) -> str | None:
    """An issue cited inside free text (a unittest skip message): URL first, then ledger:N."""
    if not text:
        return None
    m = ISSUE_URL_RE.search(text)
    if m:
        return f"{m.group(1)}/{m.group(2)}#{m.group(3)}"
    m = re.search(r"\bledger:(\d+)\b", text)
    if m:
        return f"ledger:{int(m.group(1))}"
    return None


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

    def applies_to(self, row: str, pjrt_device: str | None) -> bool:
        names = {row.lower()}
        if pjrt_device:
            names.add(pjrt_device.lower())
        return any(d.lower() in names or d == "*" for d in self.devices)

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


def _parse_date(value: Any, where: str) -> dt.date | None:
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
        expires=_parse_date(kwargs.get("expires"), where),
        strict=bool(kwargs.get("strict", True)),
    )


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
                expires=_parse_date(entry.get("expires"), where),
                strict=bool(entry.get("strict", True)),
                test=test,
                file=str(path),
                line=None,
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


# --- static scan, for `device-matrix skips check` ---------------------------------------


@dataclass(frozen=True)
class ScanFinding:
    skip: DeviceSkip
    problem: str | None  # None when the declaration is fine


def _literal(node: ast.AST) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _marker_name(node: ast.AST) -> str | None:
    """``pytest.mark.skip_device`` / ``mark.skip_device`` / ``unittest.skip`` -> last two names."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    parts.reverse()
    return ".".join(parts) if parts else None


def scan_file(path: Path, rel: str) -> list[DeviceSkip]:
    """Every device skip/xfail marker and every issue-citing unittest skip in one file."""
    try:
        tree = ast.parse(path.read_text("utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError):
        return []
    # module-level constants (ALL_DEVICES = ("cpu", "tpu")), for markers that use them
    constants: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = _literal(stmt.value)
            if value is not None:
                constants[stmt.targets[0].id] = value

    def evaluate(node: ast.AST) -> list[Any]:
        if isinstance(node, ast.Starred) and isinstance(node.value, ast.Name):
            value = constants.get(node.value.id)
            return list(value) if isinstance(value, list | tuple) else [None]
        if isinstance(node, ast.Name):
            return [constants.get(node.id)]
        return [_literal(node)]

    found: list[DeviceSkip] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _marker_name(node.func) or ""
        last = name.rsplit(".", 1)[-1]
        if last in ("skip_device", "xfail_device") and "mark" in name:
            args = [v for a in node.args for v in evaluate(a)]
            kwargs = {k.arg: evaluate(k.value)[0] for k in node.keywords if k.arg}
            mode: SkipMode = "skip" if last == "skip_device" else "xfail"
            where = f"{rel}:{node.lineno}"
            try:
                skip = from_marker(mode, [a for a in args if a is not None], kwargs, where=where)
            except ConfigError as exc:
                skip = DeviceSkip(
                    mode=mode,
                    devices=tuple(str(a) for a in args if isinstance(a, str)),
                    issue=None,
                    reason=f"invalid marker: {exc.message}",
                    source="marker",
                )
            found.append(
                DeviceSkip(
                    mode=skip.mode,
                    devices=skip.devices,
                    issue=skip.issue,
                    reason=skip.reason,
                    source="marker",
                    expires=skip.expires,
                    strict=skip.strict,
                    file=rel,
                    line=node.lineno,
                )
            )
        elif name in ("unittest.skip", "unittest.skipIf", "unittest.skipUnless", "self.skipTest"):
            texts = [_literal(a) for a in node.args]
            message = next((t for t in reversed(texts) if isinstance(t, str)), None)
            issue = find_issue_in_text(message)
            if issue:
                found.append(
                    DeviceSkip(
                        mode="skip",
                        devices=("*",),
                        issue=issue,
                        reason=message or "",
                        source="unittest",
                        file=rel,
                        line=node.lineno,
                    )
                )
    return found


def check(declared: Iterable[DeviceSkip], today: dt.date | None = None) -> list[ScanFinding]:
    out = []
    for skip in declared:
        problem = None
        if skip.reason.startswith("invalid marker:"):
            problem = skip.reason
        elif skip.issue is None:
            problem = "cites no issue"
        elif skip.expired(today):
            problem = f"expired on {skip.expires}"
        out.append(ScanFinding(skip, problem))
    return out


def scan_tree(root: Path, paths: Iterable[Path]) -> list[DeviceSkip]:
    found: list[DeviceSkip] = []
    for base in paths:
        files = [base] if base.is_file() else sorted(base.rglob("*.py"))
        for f in files:
            if any(part in {".nox", ".venv", "node_modules", ".git"} for part in f.parts):
                continue
            try:
                rel = str(f.resolve().relative_to(root))
            except ValueError:
                rel = str(f)
            found.extend(scan_file(f, rel))
    return found
