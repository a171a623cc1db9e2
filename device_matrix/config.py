"""The matrix configuration: packaged defaults, then the project's pyproject.toml.

Precedence, lowest to highest (one order, everywhere):

1. ``device_matrix/defaults.toml`` (packaged)
2. the project's ``pyproject.toml``, table ``[tool.device-matrix]``
3. environment variables ``DEVICE_MATRIX_RESULTS_DIR`` and ``DEVICE_MATRIX_CONTAINER_ENGINE``
4. command-line flags (``--results``, ``--engine``, ``--local``/``--container``)

A row in the project file overrides the packaged row of the same name key by key;
``env`` and ``settings`` merge variable by variable. A new row name adds a row; it must
give ``pjrt_device``. Unknown keys, unknown devices and wrong types raise
:class:`~device_matrix.errors.ConfigError` naming the file, the key and what is allowed.

This module imports only the standard library: ``noxfile.py`` imports it from a bare
interpreter to generate one session per row.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, cast, get_args

from device_matrix.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

PjrtDevice: TypeAlias = Literal["CPU", "TPU", "CUDA", "NEURON"]
RunIn: TypeAlias = Literal["host", "container", "auto"]
EngineChoice: TypeAlias = Literal["auto", "docker", "podman"]
TrackerKind: TypeAlias = Literal["ledger", "github"]
Scalar: TypeAlias = str | int | float | bool

PJRT_DEVICES: tuple[str, ...] = get_args(PjrtDevice)
RUN_IN_CHOICES: tuple[str, ...] = get_args(RunIn)
ENGINE_CHOICES: tuple[str, ...] = get_args(EngineChoice)
TRACKER_KINDS: tuple[str, ...] = get_args(TrackerKind)
PRESENCE_KINDS = ("env", "glob", "command", "always", "never")
TABLE = "tool.device-matrix"


@dataclass(frozen=True, kw_only=True)
class Row:
    """One device row of the matrix."""

    name: str
    pjrt_device: PjrtDevice
    image: str = ""
    container_options: tuple[str, ...] = ()
    run_in: RunIn = "auto"
    runner_labels: tuple[str, ...] = ("ubuntu-latest",)
    suites: tuple[str, ...] = ()
    install: tuple[str, ...] = ()
    install_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    settings: Mapping[str, Scalar] = field(default_factory=lambda: MappingProxyType({}))
    pytest_args: tuple[str, ...] = ()
    test_timeout: float = 900.0
    run_timeout: float = 3600.0
    presence: tuple[str, ...] = ()
    enabled: bool = True
    # spreading a row (device_matrix.run.shards, device_matrix.run.ray): shards per Actions
    # row, device slots on one host and the variables that give a shard its slot, and what
    # one shard asks of a Ray node
    shards: int = 1
    slots: int = 0
    slot_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    ray_resources: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    ray_num_cpus: float = 1.0
    ray_labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, kw_only=True)
class TrackerConfig:
    kind: TrackerKind = "ledger"
    repository: str = ""
    token_env: str = "GITHUB_TOKEN"  # noqa: S105 - the variable's name, never a token
    labels: tuple[str, ...] = ("device-matrix",)
    api_url: str = "https://api.github.com"
    write_interval: float = 1.0
    ledger_seed: str = "device-matrix-issues.toml"


@dataclass(frozen=True, kw_only=True)
class Config:
    project_root: Path
    sources: tuple[str, ...]
    results_dir: Path
    suites_dir: Path
    container_engine: EngineChoice = "auto"
    crash_reruns: int = 2
    max_restarts: int = 20
    disable_list: Path
    env_allowlist: tuple[str, ...] = ()
    tracker: TrackerConfig = field(default_factory=TrackerConfig)
    rows: Mapping[str, Row] = field(default_factory=lambda: MappingProxyType({}))

    def row(self, name: str) -> Row:
        try:
            return self.rows[name]
        except KeyError:
            raise ConfigError(
                f"unknown device row {name!r}",
                allowed=", ".join(self.rows) or "(no rows configured)",
                tip="Add it under [tool.device-matrix.devices.<name>] in pyproject.toml, "
                "or pick one of the rows listed by `device-matrix list`.",
            ) from None

    def suite_path(self, suite: str) -> Path:
        return self.suites_dir / suite


# --- validation ---------------------------------------------------------------------

Check: TypeAlias = Callable[[Any], bool]


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_str_map(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())


def _is_scalar_map(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str | int | float | bool) for x in v.values())


def _is_positive_int(v: Any) -> bool:
    return _is_int(v) and v >= 1


def _is_count(v: Any) -> bool:
    return _is_int(v) and v >= 0


def _is_slot_env(v: Any) -> bool:
    """Variables whose values may use ``{slot}`` (0, 1, ...) and ``{port}`` (8476 + slot)."""
    if not _is_str_map(v):
        return False
    try:
        for value in v.values():
            value.format(slot=0, port=8476)
    except (KeyError, IndexError, ValueError):
        return False
    return True


def _is_resource_map(v: Any) -> bool:
    return isinstance(v, dict) and all(_is_number(x) and x >= 0 for x in v.values())


def _one_of(choices: tuple[str, ...]) -> Check:
    return lambda v: isinstance(v, str) and v in choices


# key -> (check, description of what is allowed)
_ROW_KEYS: dict[str, tuple[Check, str]] = {
    "pjrt_device": (_one_of(PJRT_DEVICES), " | ".join(PJRT_DEVICES)),
    "image": (_is_str, "a container image reference (string)"),
    "container_options": (_is_str_list, "a list of strings"),
    "run_in": (_one_of(RUN_IN_CHOICES), " | ".join(RUN_IN_CHOICES)),
    "runner_labels": (_is_str_list, "a list of strings"),
    "suites": (_is_str_list, "a list of suite names (folders under suites_dir)"),
    "install": (_is_str_list, "a list of pip requirement strings"),
    "install_args": (_is_str_list, "a list of extra pip arguments"),
    "env": (_is_str_map, "a table of string values"),
    "settings": (_is_scalar_map, "a table of strings, numbers or booleans"),
    "pytest_args": (_is_str_list, "a list of strings"),
    "test_timeout": (_is_number, "a number of seconds"),
    "run_timeout": (_is_number, "a number of seconds"),
    "presence": (_is_str_list, "a list like ['env:VAR', 'glob:/dev/x*', 'command:tool', 'always']"),
    "enabled": (_is_bool, "true or false"),
    "shards": (_is_positive_int, "a whole number >= 1 (Actions jobs per row)"),
    "slots": (_is_count, "a whole number >= 0 (device slots on one host; 0: no slots)"),
    "slot_env": (_is_slot_env, "a table of strings that may use {slot} and {port}"),
    "ray_resources": (_is_resource_map, "a table of Ray resource amounts (numbers >= 0), e.g. {GPU = 1}"),
    "ray_num_cpus": (lambda v: _is_number(v) and v > 0, "a number of CPUs > 0"),
    "ray_labels": (_is_str_map, "a table of Ray node labels (strings)"),
}

# row keys that are tables: a project's table merges into the packaged one key by key
_TABLE_ROW_KEYS = ("env", "settings", "slot_env", "ray_resources", "ray_labels")

_TOP_KEYS: dict[str, tuple[Check, str]] = {
    "results_dir": (_is_str, "a path (string)"),
    "suites_dir": (_is_str, "a path (string)"),
    "container_engine": (_one_of(ENGINE_CHOICES), " | ".join(ENGINE_CHOICES)),
    "crash_reruns": (_is_int, "a whole number >= 0"),
    "max_restarts": (_is_int, "a whole number >= 0"),
    "disable_list": (_is_str, "a path (string)"),
    "env_allowlist": (_is_str_list, "a list of variable names"),
    "tracker": (lambda v: isinstance(v, dict), "a table"),
    "devices": (lambda v: isinstance(v, dict), "a table of device rows"),
}

_TRACKER_KEYS: dict[str, tuple[Check, str]] = {
    "kind": (_one_of(TRACKER_KINDS), " | ".join(TRACKER_KINDS)),
    "repository": (_is_str, "owner/name"),
    "token_env": (_is_str, "the name of an environment variable"),
    "labels": (_is_str_list, "a list of label names"),
    "api_url": (_is_str, "a URL"),
    "write_interval": (_is_number, "a number of seconds"),
    "ledger_seed": (_is_str, "a path to the ledger's seed file (TOML)"),
}


def _validate(table: Mapping[str, Any], spec: Mapping[str, tuple[Check, str]], source: str, prefix: str) -> None:
    for key, value in table.items():
        if key not in spec:
            raise ConfigError(
                "unknown key",
                source=source,
                key=f"{prefix}{key}",
                allowed=", ".join(sorted(spec)),
                tip="Check the spelling; README.md, 'Configuration', lists every key.",
            )
        check, allowed = spec[key]
        if not check(value):
            raise ConfigError(
                f"wrong type or value {value!r}",
                source=source,
                key=f"{prefix}{key}",
                allowed=allowed,
            )


def _validate_presence(checks: list[str], source: str, key: str) -> None:
    for item in checks:
        kind = item.split(":", 1)[0]
        if kind not in PRESENCE_KINDS or (kind in ("env", "glob", "command") and ":" not in item):
            raise ConfigError(
                f"bad presence check {item!r}",
                source=source,
                key=key,
                allowed="env:VAR, glob:PATTERN, command:ARGV, always, never",
            )


def _merge(base: dict[str, Any], overlay: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Overlay one validated layer onto the merged configuration so far."""
    out = dict(base)
    for key, value in overlay.items():
        if key == "devices":
            rows: dict[str, Any] = dict(out.get("devices", {}))
            for name, row in value.items():
                if not isinstance(row, dict):
                    raise ConfigError(
                        "a device row must be a table",
                        source=source,
                        key=f"{TABLE}.devices.{name}",
                    )
                _validate(row, _ROW_KEYS, source, f"{TABLE}.devices.{name}.")
                if "presence" in row:
                    _validate_presence(row["presence"], source, f"{TABLE}.devices.{name}.presence")
                merged_row = dict(rows.get(name, {}))
                for rkey, rvalue in row.items():
                    if rkey in _TABLE_ROW_KEYS:
                        merged_row[rkey] = {**merged_row.get(rkey, {}), **rvalue}
                    else:
                        merged_row[rkey] = rvalue
                if "pjrt_device" not in merged_row:
                    raise ConfigError(
                        "a new device row must set pjrt_device",
                        source=source,
                        key=f"{TABLE}.devices.{name}.pjrt_device",
                        allowed=" | ".join(PJRT_DEVICES),
                    )
                rows[name] = merged_row
            out["devices"] = rows
        elif key == "tracker":
            _validate(value, _TRACKER_KEYS, source, f"{TABLE}.tracker.")
            out["tracker"] = {**out.get("tracker", {}), **value}
        else:
            out[key] = value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", source=str(path), tip="Fix the syntax error shown.") from exc


def read_array_of_tables(path: Path, key: str) -> list[Any]:
    """The ``[[key]]`` tables of a TOML file, [] when the file is missing.

    Any other top-level key, or ``key`` not being an array of tables, is a ConfigError.
    """
    if not path.is_file():
        return []
    data = _read_toml(path)
    entries = data.get(key, [])
    extra = set(data) - {key}
    if extra or not isinstance(entries, list):
        raise ConfigError(
            f"unknown top-level key(s) {sorted(extra)}" if extra else f"{key} must be [[{key}]] tables",
            source=str(path),
            allowed=f"[[{key}]] tables",
        )
    return entries


def packaged_defaults() -> dict[str, Any]:
    text = resources.files("device_matrix").joinpath("defaults.toml").read_text("utf-8")
    return tomllib.loads(text)


def find_project_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` that holds a pyproject.toml."""
    here = start.resolve()
    for candidate in (here, *here.parents):
        if (candidate / "pyproject.toml").is_file():
            return candidate
    return here


def _row_from_table(name: str, table: Mapping[str, Any]) -> Row:
    kwargs: dict[str, Any] = {"name": name}
    for key, value in table.items():
        if isinstance(value, list):
            kwargs[key] = tuple(value)
        elif key in _TABLE_ROW_KEYS:
            kwargs[key] = MappingProxyType(dict(value))
        elif key in ("test_timeout", "run_timeout", "ray_num_cpus"):
            kwargs[key] = float(value)
        else:
            kwargs[key] = value
    return Row(**kwargs)


def load(
    project_root: Path | None = None,
    *,
    results_dir: str | None = None,
    container_engine: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load the configuration for the project at ``project_root`` (default: from cwd)."""
    env = os.environ if environ is None else environ
    root = find_project_root(Path.cwd()) if project_root is None else project_root.resolve()
    defaults_source = "device_matrix/defaults.toml"
    merged = _merge({}, _checked_top(packaged_defaults(), defaults_source), defaults_source)
    sources = [defaults_source]
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        data = _read_toml(pyproject)
        table = data.get("tool", {}).get("device-matrix")
        if table is not None:
            if not isinstance(table, dict):
                raise ConfigError("must be a table", source=str(pyproject), key=TABLE)
            merged = _merge(merged, _checked_top(table, str(pyproject)), str(pyproject))
            sources.append(str(pyproject))

    for var, key in (
        ("DEVICE_MATRIX_RESULTS_DIR", "results_dir"),
        ("DEVICE_MATRIX_CONTAINER_ENGINE", "container_engine"),
    ):
        if env.get(var):
            merged = _merge(merged, _checked_top({key: env[var]}, f"${var}"), f"${var}")
            sources.append(f"${var}")
    for value, key in ((results_dir, "results_dir"), (container_engine, "container_engine")):
        if value is not None:
            merged = _merge(merged, _checked_top({key: value}, "command line"), "command line")

    for key in ("crash_reruns", "max_restarts"):
        if merged.get(key, 0) < 0:
            raise ConfigError("must be >= 0", source=sources[-1], key=f"{TABLE}.{key}")

    rows = {name: _row_from_table(name, table) for name, table in merged.get("devices", {}).items()}
    tracker_table = dict(merged.get("tracker", {}))
    tracker = TrackerConfig(
        kind=cast(TrackerKind, tracker_table.get("kind", "ledger")),
        repository=tracker_table.get("repository", ""),
        token_env=tracker_table.get("token_env", "GITHUB_TOKEN"),
        labels=tuple(tracker_table.get("labels", ("device-matrix",))),
        api_url=tracker_table.get("api_url", "https://api.github.com").rstrip("/"),
        write_interval=float(tracker_table.get("write_interval", 1.0)),
        ledger_seed=tracker_table.get("ledger_seed", "device-matrix-issues.toml"),
    )
    if tracker.kind == "github" and "/" not in tracker.repository:
        raise ConfigError(
            "tracker kind 'github' needs a repository",
            source=sources[-1],
            key=f"{TABLE}.tracker.repository",
            allowed="owner/name",
        )
    return Config(
        project_root=root,
        sources=tuple(sources),
        results_dir=(root / merged.get("results_dir", "results")),
        suites_dir=(root / merged.get("suites_dir", "suites")),
        container_engine=cast(EngineChoice, merged.get("container_engine", "auto")),
        crash_reruns=int(merged.get("crash_reruns", 2)),
        max_restarts=int(merged.get("max_restarts", 20)),
        disable_list=root / merged.get("disable_list", "device-matrix-disabled.toml"),
        env_allowlist=tuple(merged.get("env_allowlist", ())),
        tracker=tracker,
        rows=MappingProxyType({n: r for n, r in rows.items() if r.enabled}),
    )


def _checked_top(table: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    _validate(table, _TOP_KEYS, source, f"{TABLE}.")
    return table
