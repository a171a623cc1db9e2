"""The matrix configuration: packaged defaults, then the project's pyproject.toml.

Precedence, lowest to highest (one order, everywhere):

1. ``device_matrix/defaults.toml`` (packaged)
2. the project's ``pyproject.toml``, table ``[tool.device-matrix]``
3. environment variables ``DEVICE_MATRIX_RESULTS_DIR`` and ``DEVICE_MATRIX_CONTAINER_ENGINE``
4. command-line flags (``--results``, ``--engine``, ``--reruns``, ``--max-restarts``,
   ``--test-timeout`` and ``--run-timeout`` for every row; ``--local``/``--container``)

A row in the project file overrides the packaged row of the same name key by key;
``env`` and ``settings`` merge variable by variable. A new row name adds a row; it must
give ``pjrt_device``. Unknown keys, unknown devices and wrong types raise
:class:`~device_matrix.errors.ConfigError` naming the file, the key and what is allowed.

This module imports only the standard library: ``noxfile.py`` imports it from a bare
interpreter to generate one session per row.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TypeAlias, get_args
from urllib.parse import urlsplit

from device_matrix import tomlfile
from device_matrix.errors import ConfigError, EnvironmentProblem
from device_matrix.names import ROW_NAME_RE  # a row name is a folder name under results/

PjrtDevice: TypeAlias = Literal["CPU", "TPU", "CUDA", "NEURON"]
RunIn: TypeAlias = Literal["host", "container", "auto"]
EngineChoice: TypeAlias = Literal["auto", "docker", "podman"]
TrackerKind: TypeAlias = Literal["ledger", "github"]
# when the row's CI job runs: every event, the nightly schedule (and manual runs) only, or
# never (the nox session stays). A row whose runners do not exist must not stall CI.
CiSwitch: TypeAlias = Literal["always", "schedule", "off"]
# how many pytest processes a row's tests share: one for the row, one per test file (as
# upstream's run_tests.sh runs them), or one per test class
Isolation: TypeAlias = Literal["row", "file", "class"]
# how a test file is imported and collected: as `python FILE` runs it (its folder first on
# sys.path, a unittest file collected as unittest collects it), as pytest does, or "auto":
# as a script with isolation "file" or "class", as pytest with "row" (#24)
Collect: TypeAlias = Literal["auto", "as-script", "pytest"]
# what a scripts entry is: a unittest file (its tests are the row's tests), or a program (a
# training script with flags: one test, whose outcome is the process's exit)
ScriptKind: TypeAlias = Literal["unittest", "program"]
OnRecurrence: TypeAlias = Literal["reopen", "new"]
Scalar: TypeAlias = str | int | float | bool

PJRT_DEVICES: tuple[str, ...] = get_args(PjrtDevice)
RUN_IN_CHOICES: tuple[str, ...] = get_args(RunIn)
ENGINE_CHOICES: tuple[str, ...] = get_args(EngineChoice)
TRACKER_KINDS: tuple[str, ...] = get_args(TrackerKind)
CI_SWITCHES: tuple[str, ...] = get_args(CiSwitch)
ISOLATIONS: tuple[str, ...] = get_args(Isolation)
COLLECTS: tuple[str, ...] = get_args(Collect)
SCRIPT_KINDS: tuple[str, ...] = get_args(ScriptKind)
ON_RECURRENCE: tuple[str, ...] = get_args(OnRecurrence)
PRESENCE_KINDS = ("env", "glob", "command", "always", "never")
TABLE = "tool.device-matrix"
# the project's own state, whatever --results says: the run history, the issue ledger (#42),
# the tracker's cached disables; this machine's, never committed, never in an output folder
STATE_DIR = ".device-matrix"
# #31: the tables of defaults.toml that hold the defaults of a row's, a script's and a
# gang's keys (each row, entry and gang starts from them), not a layer of the configuration
KEY_TABLES = ("row", "script", "gang")
# keys whose value is a number of seconds or of CPUs: a float, as TOML's 900 is an int
_FLOAT_KEYS = frozenset(
    {"test_timeout", "run_timeout", "ray_num_cpus", "phase_timeout_min", "write_interval", "select_map_max_age_days"}
    | {"select_max_miss_rate"}
)


def _read_packaged() -> dict[str, Any]:
    return tomlfile.loads(resources.files("device_matrix").joinpath("defaults.toml").read_text("utf-8"))


_PACKAGED: list[Mapping[str, Any]] = []  # defaults.toml, read once: a field's default is read from it


def _packaged() -> Mapping[str, Any]:
    if not _PACKAGED:
        _PACKAGED.append(_read_packaged())
    return _PACKAGED[0]


def _frozen(key: str, value: Any) -> Any:
    """A TOML value as the dataclasses hold it: lists as tuples, tables read-only, seconds as floats."""
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return MappingProxyType(dict(value))
    return float(value) if key in _FLOAT_KEYS else value


def packaged_default(table: str, key: str) -> Any:
    """defaults.toml's ``[table] key``: a key without one there is a KeyError, never a
    default written somewhere else (#31)."""
    return _frozen(key, _packaged()[table][key])


def _packaged_factory(table: str, key: str) -> Callable[[], Any]:
    """The default factory of a dataclass field: defaults.toml's ``[table] key`` (the one source)."""
    return lambda: packaged_default(table, key)


@dataclass(frozen=True, kw_only=True)
class Row:
    """One device row of the matrix; each key's default is defaults.toml's ``[row]`` (#31)."""

    name: str
    pjrt_device: PjrtDevice
    image: str = field(default_factory=_packaged_factory("row", "image"))
    container_options: tuple[str, ...] = field(default_factory=_packaged_factory("row", "container_options"))
    # the image's interpreter (a name on its PATH or a path); "": the first of python,
    # python3 there that can run the row (#21)
    container_python: str = field(default_factory=_packaged_factory("row", "container_python"))
    run_in: RunIn = field(default_factory=_packaged_factory("row", "run_in"))
    runner_labels: tuple[str, ...] = field(default_factory=_packaged_factory("row", "runner_labels"))
    suites: tuple[str, ...] = field(default_factory=_packaged_factory("row", "suites"))
    install: tuple[str, ...] = field(default_factory=_packaged_factory("row", "install"))
    install_args: tuple[str, ...] = field(default_factory=_packaged_factory("row", "install_args"))
    env: Mapping[str, str] = field(default_factory=_packaged_factory("row", "env"))
    settings: Mapping[str, Scalar] = field(default_factory=_packaged_factory("row", "settings"))
    pytest_args: tuple[str, ...] = field(default_factory=_packaged_factory("row", "pytest_args"))
    test_timeout: float = field(default_factory=_packaged_factory("row", "test_timeout"))
    run_timeout: float = field(default_factory=_packaged_factory("row", "run_timeout"))
    presence: tuple[str, ...] = field(default_factory=_packaged_factory("row", "presence"))
    enabled: bool = field(default_factory=_packaged_factory("row", "enabled"))
    # its failures read "device-unstable" in a pull request's verdicts (#25)
    unstable: bool = field(default_factory=_packaged_factory("row", "unstable"))
    ci: CiSwitch = field(default_factory=_packaged_factory("row", "ci"))
    isolation: Isolation = field(default_factory=_packaged_factory("row", "isolation"))
    collect: Collect = field(default_factory=_packaged_factory("row", "collect"))
    # files run as scripts, each in a process of its own
    scripts: tuple[Script, ...] = field(default_factory=_packaged_factory("row", "scripts"))
    # spreading a row (device_matrix.spread.driver, device_matrix.spread.ray): shards per Actions
    # row, device slots on one host and the variables that give a shard its slot, and what
    # one shard asks of a Ray node
    shards: int = field(default_factory=_packaged_factory("row", "shards"))
    slots: int = field(default_factory=_packaged_factory("row", "slots"))
    slot_env: Mapping[str, str] = field(default_factory=_packaged_factory("row", "slot_env"))
    ray_resources: Mapping[str, float] = field(default_factory=_packaged_factory("row", "ray_resources"))
    ray_num_cpus: float = field(default_factory=_packaged_factory("row", "ray_num_cpus"))
    ray_labels: Mapping[str, str] = field(default_factory=_packaged_factory("row", "ray_labels"))
    # workers started together, N ranks, in every full run (device_matrix.spread.gang)
    gangs: tuple[Gang, ...] = field(default_factory=_packaged_factory("row", "gangs"))

    @property
    def as_script(self) -> bool:
        """Whether the row's test files are imported and collected as ``python FILE`` runs them."""
        return self.collect == "as-script" or (self.collect == "auto" and self.isolation != "row")


@dataclass(frozen=True, kw_only=True)
class Gang:
    """``world_size`` ranks of ``python -m MODULE ARGS`` started together, recorded as one test."""

    name: str
    module: str
    world_size: int
    args: tuple[str, ...] = field(default_factory=_packaged_factory("gang", "args"))
    env: Mapping[str, str] = field(default_factory=_packaged_factory("gang", "env"))
    # xfail_device's arguments (devices, issue, reason, strict, raises): the expected failure
    xfail: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class Script:
    """A test file run as upstream runs it: ``python FILE ARGS``, its own process."""

    file: str  # relative to the project root (or absolute)
    args: tuple[str, ...] = field(default_factory=_packaged_factory("script", "args"))
    env: Mapping[str, str] = field(default_factory=_packaged_factory("script", "env"))
    # which run of the file this is, after each of its nodeids (``FILE::C::test[VARIANT]``)
    # when the row runs the file more than once: its `name`, or its variables' names and
    # its arguments; "" for a file run once, and for its run without either (#24)
    variant: str = ""
    # "unittest": its unittest tests are the row's tests; "program": it is one test, its
    # nodeid FILE (and the suffix), its outcome the process's exit status
    kind: ScriptKind = field(default_factory=_packaged_factory("script", "kind"))

    @property
    def suffix(self) -> str:
        """What the nodeids of this run of its file end with: ``[VARIANT]``, or nothing."""
        return f"[{self.variant}]" if self.variant else ""


@dataclass(frozen=True, kw_only=True)
class TrackerConfig:
    """``[tracker]``: every key given, from defaults.toml and the project's layers (#31)."""

    kind: TrackerKind
    repository: str
    token_env: str  # the variable's name, never a token
    labels: tuple[str, ...]
    api_url: str
    write_interval: float
    writes_per_hour: int  # GitHub allows about 500 content-creating requests an hour
    on_recurrence: OnRecurrence  # a closed issue's crash is back: reopen it, or file "new"
    ledger_seed: str
    # `run` files new issues into the ledger itself (else it links what exists and says how
    # many `issues sync` would file: nothing is filed unasked, #24)
    file_on_run: bool
    # #32: `issues sync` files an issue for a failure group of a run that is no pull
    # request's (else it only links the issue a group already has)
    file_failures: bool
    max_failure_issues: int  # #32: the most failure groups one sync files, the largest first


@dataclass(frozen=True, kw_only=True)
class Config:
    """The whole configuration, every key given (its default from defaults.toml, #31)."""

    project_root: Path
    sources: tuple[str, ...]
    results_dir: Path
    suites_dir: Path
    container_engine: EngineChoice
    crash_reruns: int
    max_restarts: int
    reenable_times: int  # #33: the re-enable check's runs of each disabled test
    # starting pytest, importing one module, exiting: never less than this (a busy host)
    phase_timeout_min: float
    disable_list: Path
    # #34: test selection (device_matrix/selection.py): the map's age bound, the files whose
    # change runs everything or nothing, and the workflow's pull requests
    select_map_max_age_days: float
    # #40: above this share of pull requests whose selection missed a failing test (the
    # backstop: full runs of the base branch), a row's selection runs every test
    select_max_miss_rate: float
    select_full: tuple[str, ...]
    select_ignore: tuple[str, ...]
    select_pull_requests: bool
    select_full_label: str
    env_allowlist: tuple[str, ...]
    # the pip commands (their arguments) that install the project itself where its rows run
    # (nox venv, CI job), in turn
    project_install: tuple[tuple[str, ...], ...]
    # #34: every run records which project files each test ran (results/<row>/test-map.json)
    record_map: bool
    tracker: TrackerConfig
    rows: Mapping[str, Row]

    @property
    def state_dir(self) -> Path:
        """The project's own state (:data:`STATE_DIR`): one place per project (#42)."""
        return self.project_root / STATE_DIR

    @property
    def own_folders(self) -> tuple[Path, ...]:
        """The folders device-matrix writes into a project: its results and its state (the
        ledger, the history, the disables read, the re-enable check's runs). Not the
        project's code: the digest of a run's code leaves them out (run/worktree.py, #41)."""
        return (self.results_dir, self.state_dir)

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

    def row_tests(self, row: Row) -> tuple[str, ...]:
        """What a run of the row gives pytest, as paths relative to the project root.

        Its suites; nothing when it names no suites but scripts (it runs its scripts only);
        otherwise what plain ``pytest`` runs in the project: its ``testpaths``, else the
        root (``.``). The run itself leaves the last case to pytest (#20).
        """
        if row.suites:
            root = self.project_root
            paths = (self.suite_path(s) for s in row.suites)
            return tuple(str(p.relative_to(root)) if p.is_relative_to(root) else str(p) for p in paths)
        if row.scripts:
            return ()
        return pytest_testpaths(self.project_root) or (".",)

    def row_places(self, row: Row) -> tuple[str, ...]:
        """Every place a run of the row reads tests from, relative to the project root: what it
        gives pytest (:meth:`row_tests`) and the files its ``scripts`` entries run (#41)."""
        files = dict.fromkeys(os.path.normpath(s.file) for s in row.scripts)
        return (*self.row_tests(row), *files)

    def suite_folders(self) -> list[Path]:
        """Where the rows' tests are, for the skip scan and the issue sync: suites_dir and every
        place any row runs (:meth:`row_places`: its suites or the project's own tests, its
        testpaths, else the folders of the root pytest would enter; its scripts, #41)."""
        folders = [self.suites_dir]
        for row in self.rows.values():
            for test in self.row_places(row):
                path = self.project_root / test
                if test == ".":
                    candidates = _root_test_folders(self.project_root, self.results_dir)
                elif any(c in test for c in "*?["):
                    candidates = sorted(self.project_root.glob(test))
                else:
                    candidates = [path]
                for candidate in candidates:
                    inside = any(candidate.resolve().is_relative_to(f.resolve()) for f in folders if f.exists())
                    if candidate.exists() and not inside and candidate not in folders:
                        folders.append(candidate)
        return [f for f in folders if f.exists()]


# pytest's default norecursedirs, and the folders of tools that hold other projects' code
_NOT_TESTS = frozenset({"build", "dist", "node_modules", "venv", "CVS", "_darcs", "{arch}", "site-packages"})


def _root_test_folders(root: Path, results_dir: Path) -> list[Path]:
    """The root's folders and files a bare ``pytest`` would collect from (no venvs, no dot folders)."""
    out = []
    for child in sorted(root.iterdir()):
        if child.name.startswith(".") or child.name in _NOT_TESTS or child.name.endswith(".egg"):
            continue
        if child.resolve() == results_dir.resolve() or (child / "pyvenv.cfg").exists():
            continue
        if child.is_dir() or child.suffix == ".py":
            out.append(child)
    return out


def pytest_testpaths(root: Path) -> tuple[str, ...]:
    """The ``testpaths`` of the pytest configuration in ``root``, () when none is set."""
    setting = pytest_setting(root, "testpaths")
    if setting is None:
        return ()
    value = setting[1]
    return tuple(value.split() if isinstance(value, str) else value)


def pytest_setting(root: Path, key: str) -> tuple[Path, str | list[str]] | None:
    """``key`` of the pytest configuration in ``root`` and the file that sets it; None when
    there is no configuration or it does not set ``key``. A TOML list is kept a list.

    pytest's own order: the first of pytest.ini, .pytest.ini, pyproject.toml (with a
    [tool.pytest.ini_options] or [tool.pytest] table), tox.ini (with [pytest]) and
    setup.cfg (with [tool:pytest]) is the configuration, whether it sets ``key`` or not.
    """
    import configparser

    for name, section in (
        ("pytest.ini", "pytest"),
        (".pytest.ini", "pytest"),
        ("pyproject.toml", None),
        ("tox.ini", "pytest"),
        ("setup.cfg", "tool:pytest"),
    ):
        path = root / name
        if not path.is_file():
            continue
        if section is None:
            tool = tomlfile.read(path).get("tool", {})
            table = tool.get("pytest") if isinstance(tool, dict) else None
            if not isinstance(table, dict):
                continue
            options = table.get("ini_options", table)
            value = options.get(key) if isinstance(options, dict) else None
            if value is None:
                return None
            return path, value if isinstance(value, str) else [str(v) for v in value]
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot be read as an ini file: {exc}", source=str(path)) from None
        if parser.has_section(section):
            found = parser.get(section, key, fallback=None)
            return None if found is None else (path, found)
        if name.endswith("pytest.ini"):
            return None  # a pytest.ini is the configuration even without a [pytest] section
    return None


# --- validation ---------------------------------------------------------------------

Check: TypeAlias = Callable[[Any], bool]


VAR_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REPOSITORY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/(?!\.\.?$)[A-Za-z0-9_.-]{1,100}")  # GitHub's rules


def _is_str(v: Any) -> bool:
    # NUL is never valid: not in a path, an argument or an environment value
    return isinstance(v, str) and "\0" not in v


def _is_path(v: Any) -> bool:
    return _is_str(v) and bool(v.strip())


def _is_interpreter(v: Any) -> bool:
    """ "" (look for one), or a program: not an option, not blank around it."""
    return _is_str(v) and (v == "" or (v.strip() == v and not v.startswith("-")))


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list) and all(_is_str(x) for x in v)


def _is_install(v: Any) -> bool:
    """One pip command's arguments, or several commands' (#30: a step pip cannot resolve here
    stays a step of its own)."""
    return _is_str_list(v) or (isinstance(v, list) and all(_is_str_list(x) and x for x in v))


def install_steps(value: Sequence[Any]) -> tuple[tuple[str, ...], ...]:
    """``project_install`` as the pip commands it is: one, several, or none."""
    if value and all(isinstance(x, str) for x in value):
        return (tuple(value),)
    return tuple(tuple(x) for x in value)


def _is_var_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) and VAR_NAME_RE.fullmatch(x) for x in v)


def _is_label_list(v: Any) -> bool:
    return _is_str_list(v) and all(x.strip() for x in v)


def _is_seconds(v: Any) -> bool:
    """A finite number of seconds above zero: nan or inf would disable the timeout."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _is_interval(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 3600


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 10_000


def _is_positive_int(v: Any) -> bool:
    return _is_count(v) and v > 0


def _is_repository(v: Any) -> bool:
    return isinstance(v, str) and (v == "" or bool(REPOSITORY_RE.fullmatch(v)))


def _is_api_url(v: Any) -> bool:
    if not _is_str(v):
        return False
    parts = urlsplit(v)
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not parts.username


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _is_str_map(v: Any) -> bool:
    return isinstance(v, dict) and all(VAR_NAME_RE.fullmatch(k) and _is_str(x) for k, x in v.items())


def _is_scalar_map(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str | int | float | bool) for x in v.values())


# a script entry's name: not only digits (unittest's own `[2]` names a test loaded twice)
SCRIPT_NAME_RE = re.compile(r"(?![0-9]+$)[A-Za-z0-9_.+=,-]+")


def _entry(table: str, entry: Mapping[str, Any], key: str) -> Any:
    """A script's or a gang's ``key``, as given or else defaults.toml's (TOML, unfrozen)."""
    return entry[key] if key in entry else _packaged()[table][key]


def _script_variant(entry: Mapping[str, Any]) -> str:
    if entry.get("name"):
        return str(entry["name"])
    words = [*sorted(_entry("script", entry, "env")), *_entry("script", entry, "args")]
    return ",".join(re.sub(r"[^A-Za-z0-9_.+=-]", "_", word) for word in words)


def script_variants(entries: Sequence[Mapping[str, Any]]) -> list[str] | None:
    """What each entry's nodeids end with (``[VARIANT]``, see Script.variant): None when two
    runs of one file cannot be told apart (the same variable names and arguments, no name).

    Two identical entries are one invocation (it runs once, #20): they share a variant.
    """
    by_file: dict[str, dict[tuple[object, ...], list[int]]] = {}
    for k, entry in enumerate(entries):
        invocation = (
            tuple(_entry("script", entry, "args")),
            tuple(sorted((str(n), str(v)) for n, v in _entry("script", entry, "env").items())),
            entry.get("name"),
            _entry("script", entry, "kind"),
        )
        by_file.setdefault(os.path.normpath(str(entry["file"])), {}).setdefault(invocation, []).append(k)
    variants = [""] * len(entries)
    for invocations in by_file.values():
        groups = list(invocations.values())
        if len(groups) == 1 and not entries[groups[0][0]].get("name"):
            continue  # run once: its nodeids are the file's own
        names = [_script_variant(entries[group[0]]) for group in groups]
        if len(set(names)) != len(names):
            return None
        for group, name in zip(groups, names, strict=True):
            for k in group:
                variants[k] = name
    return variants


def _is_script(v: Any) -> bool:
    return (
        isinstance(v, dict)
        and set(v) <= _SCRIPT_KEYS
        and _entry("script", v, "kind") in SCRIPT_KINDS
        and (("name" not in v) or (isinstance(v["name"], str) and bool(SCRIPT_NAME_RE.fullmatch(v["name"]))))
        and _is_path(v.get("file"))
        and _is_str_list(_entry("script", v, "args"))
        and _is_str_map(_entry("script", v, "env"))
        and all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) for k in _entry("script", v, "env"))
    )


GANG_NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_GANG_KEYS = {"name", "module", "world_size", "args", "env", "xfail"}
_SCRIPT_KEYS = {"file", "args", "env", "name", "kind"}
# #31: the keys that have no default in defaults.toml, and what their absence means; every
# other key of the tables above has its default there and nowhere else
WITHOUT_DEFAULT = {
    "devices.ROW.pjrt_device": "required for a new row",
    "devices.ROW.scripts[].file": "required",
    "devices.ROW.scripts[].name": "none (the variant is made of `env` and `args`)",
    "devices.ROW.gangs[].name": "required",
    "devices.ROW.gangs[].module": "required",
    "devices.ROW.gangs[].world_size": "required",
    "devices.ROW.gangs[].xfail": "none",
}
_GANG_XFAIL_KEYS = {"devices", "issue", "reason", "strict", "raises"}


def _is_gang_xfail(v: Any) -> bool:
    from device_matrix.skips.refs import normalize_issue

    return (
        isinstance(v, dict)
        and set(v) <= _GANG_XFAIL_KEYS
        and _is_label_list(v.get("devices"))
        and bool(v["devices"])
        and isinstance(v.get("issue"), str)
        and normalize_issue(v["issue"]) is not None
        and ("reason" not in v or _is_str(v["reason"]))
        and ("strict" not in v or _is_bool(v["strict"]))
        and isinstance(v.get("raises"), list | None)
        and all(isinstance(x, str) and MODULE_RE.fullmatch(x) for x in v.get("raises") or ())
    )


def _is_gang(v: Any) -> bool:
    return (
        isinstance(v, dict)
        and set(v) <= _GANG_KEYS
        and isinstance(v.get("name"), str)
        and bool(GANG_NAME_RE.fullmatch(v["name"]))
        and isinstance(v.get("module"), str)
        and bool(MODULE_RE.fullmatch(v["module"]))
        and _is_positive_int(v.get("world_size"))
        and _is_str_list(_entry("gang", v, "args"))
        and _is_str_map(_entry("gang", v, "env"))
        and ("xfail" not in v or _is_gang_xfail(v["xfail"]))
    )


def _is_gangs(v: Any) -> bool:
    names = [x.get("name") for x in v] if isinstance(v, list) and all(isinstance(x, dict) for x in v) else None
    return names is not None and len(set(names)) == len(names) and all(_is_gang(x) for x in v)


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


def _is_finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _is_resource_map(v: Any) -> bool:
    return isinstance(v, dict) and all(_is_finite(x) and x >= 0 for x in v.values())


def _one_of(choices: tuple[str, ...]) -> Check:
    return lambda v: isinstance(v, str) and v in choices


# key -> (check, description of what is allowed)
_ROW_KEYS: dict[str, tuple[Check, str]] = {
    "pjrt_device": (_one_of(PJRT_DEVICES), " | ".join(PJRT_DEVICES)),
    "image": (_is_str, "a container image reference (string)"),
    "container_options": (_is_str_list, "a list of strings"),
    "container_python": (
        _is_interpreter,
        "the image's interpreter: a name on its PATH ('python3') or a path; '' for the first of python, python3",
    ),
    "run_in": (_one_of(RUN_IN_CHOICES), " | ".join(RUN_IN_CHOICES)),
    "runner_labels": (_is_str_list, "a list of strings"),
    "suites": (_is_str_list, "a list of suite names (folders or files under suites_dir)"),
    "install": (_is_str_list, "a list of pip requirement strings"),
    "install_args": (_is_str_list, "a list of extra pip arguments"),
    "env": (_is_str_map, "a table of variable names (letters, digits, _) to strings"),
    "settings": (_is_scalar_map, "a table of strings, numbers or booleans"),
    "pytest_args": (_is_str_list, "a list of strings"),
    "test_timeout": (_is_seconds, "a finite number of seconds > 0"),
    "run_timeout": (_is_seconds, "a finite number of seconds > 0"),
    "presence": (_is_str_list, "a list like ['env:VAR', 'glob:/dev/x*', 'command:tool', 'always']"),
    "enabled": (_is_bool, "true or false"),
    "unstable": (_is_bool, "true or false"),
    "ci": (_one_of(CI_SWITCHES), " | ".join(CI_SWITCHES)),
    "isolation": (_one_of(ISOLATIONS), " | ".join(ISOLATIONS)),
    "collect": (_one_of(COLLECTS), " | ".join(COLLECTS)),
    "scripts": (
        lambda v: isinstance(v, list) and all(_is_script(x) for x in v) and script_variants(v) is not None,
        "[[...scripts]] tables: file = 'test/x.py' (required), args = ['--flag'], env = {VAR = 'value'}, "
        "name = 'variant' (letters, digits, _ . + = , -), kind = 'unittest' | 'program'; two runs of one file "
        "need other variable names, other arguments or a name each (two identical entries are one run)",
    ),
    "shards": (_is_positive_int, "a whole number >= 1 (Actions jobs per row)"),
    "slots": (_is_count, "a whole number >= 0 (device slots on one host; 0: no slots)"),
    "slot_env": (_is_slot_env, "a table of strings that may use {slot} and {port}"),
    "ray_resources": (_is_resource_map, "a table of Ray resource amounts (numbers >= 0), e.g. {GPU = 1}"),
    "ray_num_cpus": (lambda v: _is_finite(v) and v > 0, "a number of CPUs > 0"),
    "ray_labels": (_is_str_map, "a table of Ray node labels (strings)"),
    "gangs": (
        _is_gangs,
        "[[...gangs]] tables, names unique: name = 'all_reduce', module = 'pkg.worker', world_size = 2 (all "
        "required), args = ['--flag'], env = {VAR = 'value'}, xfail = {devices = ['cpu'], issue = 'ledger:N', "
        "reason = '...', strict = true, raises = ['ErrorName']}",
    ),
}

# row keys that are tables: a project's table merges into the packaged one key by key
_TABLE_ROW_KEYS = ("env", "settings", "slot_env", "ray_resources", "ray_labels")

_TOP_KEYS: dict[str, tuple[Check, str]] = {
    "results_dir": (_is_path, "a non-empty path (string)"),
    "suites_dir": (_is_path, "a non-empty path (string)"),
    "container_engine": (_one_of(ENGINE_CHOICES), " | ".join(ENGINE_CHOICES)),
    "crash_reruns": (_is_count, "a whole number from 0 to 10000"),
    "max_restarts": (_is_count, "a whole number from 0 to 10000"),
    "reenable_times": (_is_positive_int, "a whole number from 1 to 10000"),
    "phase_timeout_min": (_is_seconds, "a finite number of seconds > 0"),
    "disable_list": (_is_path, "a non-empty path (string)"),
    "select_map_max_age_days": (lambda v: _is_finite(v) and v > 0, "a number of days > 0"),
    "select_max_miss_rate": (lambda v: _is_finite(v) and 0 <= v <= 1, "a share from 0 to 1 (0.1: one in ten)"),
    "select_full": (_is_str_list, "a list of file patterns (conftest.py, requirements*.txt, ci/*)"),
    "select_ignore": (_is_str_list, "a list of file patterns (*.md, docs/*)"),
    "select_pull_requests": (_is_bool, "true or false"),
    "select_full_label": (_is_str, "a label name"),
    "env_allowlist": (_is_var_list, "a list of variable names (letters, digits, _)"),
    "project_install": (
        _is_install,
        'a list of pip arguments (one pip command), e.g. ["-e", ".[test]"], or a list of such lists '
        '(pip commands run in turn), e.g. [["--no-deps", "-e", "."], ["-r", "requirements.txt"]]',
    ),
    "record_map": (_is_bool, "true or false"),
    "tracker": (lambda v: isinstance(v, dict), "a table"),
    "devices": (lambda v: isinstance(v, dict), "a table of device rows"),
}

_TRACKER_KEYS: dict[str, tuple[Check, str]] = {
    "kind": (_one_of(TRACKER_KINDS), " | ".join(TRACKER_KINDS)),
    "repository": (_is_repository, "owner/name"),
    "token_env": (lambda v: isinstance(v, str) and bool(VAR_NAME_RE.fullmatch(v)), "a variable name"),
    "labels": (_is_label_list, "a list of label names"),
    "api_url": (_is_api_url, "an http(s) URL without credentials (https://api.github.com)"),
    "write_interval": (_is_interval, "a finite number of seconds from 0 to 3600"),
    "writes_per_hour": (_is_positive_int, "a whole number from 1 to 10000"),
    "on_recurrence": (_one_of(ON_RECURRENCE), " | ".join(ON_RECURRENCE)),
    "ledger_seed": (_is_path, "a path to the ledger's seed file (TOML)"),
    "file_on_run": (_is_bool, "true or false"),
    "file_failures": (_is_bool, "true or false"),
    "max_failure_issues": (_is_count, "a whole number from 0 to 10000"),
}


def declared_keys() -> dict[str, tuple[str, str]]:
    """Every key of the configuration, dotted (``devices.ROW.scripts[].kind``) -> (the table of
    defaults.toml that holds its default, its name there); ("", "") for one WITHOUT_DEFAULT."""
    keys: dict[str, tuple[str, str]] = {k: ("", k) for k in _TOP_KEYS if k not in ("tracker", "devices")}
    keys |= {f"tracker.{k}": ("tracker", k) for k in _TRACKER_KEYS}
    keys |= {f"devices.ROW.{k}": ("row", k) for k in _ROW_KEYS}
    keys |= {f"devices.ROW.scripts[].{k}": ("script", k) for k in sorted(_SCRIPT_KEYS)}
    keys |= {f"devices.ROW.gangs[].{k}": ("gang", k) for k in sorted(_GANG_KEYS)}
    return {k: ("", "") if k in WITHOUT_DEFAULT else where for k, where in keys.items()}


def _validate(table: Mapping[str, Any], spec: Mapping[str, tuple[Check, str]], source: str, prefix: str) -> None:
    for key, value in table.items():
        if key not in spec:
            raise ConfigError(
                "unknown key",
                source=source,
                key=f"{prefix}{key}",
                allowed=", ".join(sorted(spec)),
                tip="Check the spelling; docs/configuration.md lists every key.",
            )
        check, allowed = spec[key]
        if not check(value):
            raise ConfigError(
                f"wrong type or value {value!r}",
                source=source,
                key=f"{prefix}{key}",
                allowed=allowed,
            )


def presence_problem(item: str) -> str | None:
    """Why a presence check cannot be used, or None when it can."""
    kind, sep, arg = item.partition(":")
    if kind not in PRESENCE_KINDS:
        return "unknown kind"
    if kind in ("always", "never"):
        return "takes no argument" if sep else None
    if not arg.strip():
        return f"{kind}: needs an argument"
    if kind == "env" and not VAR_NAME_RE.fullmatch(arg):
        return "env: needs a variable name (letters, digits, _)"
    if kind == "command":
        try:
            argv = shlex.split(arg)
        except ValueError as exc:
            return f"command: cannot be split like a shell line ({exc})"
        if not argv:
            return "command: needs a program"
    return None


def _validate_script_kinds(entries: list[Any], source: str, key: str) -> None:
    """A script's ``kind`` is one of the closed set: said before the table's other checks."""
    for k, entry in enumerate(entries):
        if isinstance(entry, dict) and "kind" in entry and entry["kind"] not in SCRIPT_KINDS:
            raise ConfigError(
                f"unknown script kind {entry['kind']!r}",
                source=source,
                key=f"{key}[{k}].kind",
                allowed=" | ".join(SCRIPT_KINDS),
                tip='A unittest file is kind = "unittest" (the default); a script that is not one (a training '
                'script with flags) is one test with kind = "program", its outcome its exit status.',
            )


def _validate_presence(checks: list[str], source: str, key: str) -> None:
    for item in checks:
        problem = presence_problem(item)
        if problem:
            raise ConfigError(
                f"bad presence check {item!r}: {problem}",
                source=source,
                key=key,
                allowed="env:VAR, glob:PATTERN, command:ARGV, always, never",
                tip='Write e.g. presence = ["env:DEVICE_MATRIX_TPU_PRESENT", "command:nvidia-smi -L", "never"].',
            )


def _merge(base: dict[str, Any], overlay: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Overlay one validated layer onto the merged configuration so far."""
    out = dict(base)
    for key, value in overlay.items():
        if key == "devices":
            rows: dict[str, Any] = dict(out.get("devices", {}))
            for name, row in value.items():
                if not ROW_NAME_RE.fullmatch(name):
                    raise ConfigError(
                        f"bad row name {name!r}",
                        source=source,
                        key=f"{TABLE}.devices",
                        allowed="letters, digits, '_', '.', '-'; starting with a letter or digit; at most 64",
                        tip="A row's name is its folder under results/ and its nox session: no '/' or '..'.",
                    )
                if not isinstance(row, dict):
                    raise ConfigError(
                        "a device row must be a table",
                        source=source,
                        key=f"{TABLE}.devices.{name}",
                    )
                if isinstance(row.get("scripts"), list):
                    _validate_script_kinds(row["scripts"], source, f"{TABLE}.devices.{name}.scripts")
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


def packaged_defaults() -> dict[str, Any]:
    """The packaged layer of the configuration: defaults.toml without its KEY_TABLES."""
    return {k: v for k, v in _read_packaged().items() if k not in KEY_TABLES}


def find_project_root(start: Path) -> Path:
    """The nearest folder at or above ``start`` that holds a pyproject.toml."""
    here = start.resolve()
    for candidate in (here, *here.parents):
        if (candidate / "pyproject.toml").is_file():
            return candidate
    return here


def _given(table: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """The ``keys`` a table gives, as the dataclasses hold them: the rest take their defaults."""
    return {k: _frozen(k, table[k]) for k in keys if k in table}


def _row_from_table(name: str, table: Mapping[str, Any]) -> Row:
    kwargs: dict[str, Any] = {"name": name}
    for key, value in table.items():
        if key == "scripts":
            variants = script_variants(value) or [""] * len(value)
            kwargs[key] = tuple(
                Script(file=x["file"], variant=variant, **_given(x, ("args", "env", "kind")))
                for x, variant in zip(value, variants, strict=True)
            )
        elif key == "gangs":
            kwargs[key] = tuple(
                Gang(
                    name=x["name"],
                    module=x["module"],
                    world_size=x["world_size"],
                    xfail=MappingProxyType(dict(x["xfail"])) if "xfail" in x else None,
                    **_given(x, ("args", "env")),
                )
                for x in value
            )
        else:
            kwargs[key] = _frozen(key, value)
    return Row(**kwargs)


def _project_layer(root: Path) -> Mapping[str, Any] | None:
    """``[tool.device-matrix]`` of the project's pyproject.toml; None when it has none."""
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return None
    tool = tomlfile.read(pyproject).get("tool", {})
    if not isinstance(tool, dict):
        raise ConfigError("must be a table", source=str(pyproject), key="tool")
    table = tool.get("device-matrix")
    if table is not None and not isinstance(table, dict):
        raise ConfigError("must be a table", source=str(pyproject), key=TABLE)
    return table


def _command_line_layer(merged: Mapping[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
    """The command line's layer: top-level keys, and the timeouts of every row."""
    layer = {k: v for k, v in flags.items() if v is not None and k not in ("test_timeout", "run_timeout")}
    every_row = {k: flags[k] for k in ("test_timeout", "run_timeout") if flags.get(k) is not None}
    if every_row:
        layer["devices"] = {name: dict(every_row) for name in merged["devices"]}
    return layer


def _tracker(table: Mapping[str, Any]) -> TrackerConfig:
    values = {k: _frozen(k, v) for k, v in table.items()}
    values["api_url"] = values["api_url"].rstrip("/")
    return TrackerConfig(**values)


def load(
    project_root: Path | None = None,
    *,
    results_dir: str | None = None,
    container_engine: str | None = None,
    crash_reruns: int | None = None,
    max_restarts: int | None = None,
    reenable_times: int | None = None,
    test_timeout: float | None = None,
    run_timeout: float | None = None,
    record_map: bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """Load the configuration for the project at ``project_root`` (default: from cwd).

    The keyword arguments are the command line's layer, the last: ``test_timeout`` and
    ``run_timeout`` set every row's, the others the top-level key of the same name.
    """
    env = os.environ if environ is None else environ
    root = find_project_root(Path.cwd()) if project_root is None else project_root.resolve()
    defaults_source = "device_matrix/defaults.toml"
    merged = _merge({}, _checked_top(packaged_defaults(), defaults_source), defaults_source)
    sources = [defaults_source]
    layers: list[tuple[Mapping[str, Any] | None, str]] = [(_project_layer(root), str(root / "pyproject.toml"))]
    for var, key in (
        ("DEVICE_MATRIX_RESULTS_DIR", "results_dir"),
        ("DEVICE_MATRIX_CONTAINER_ENGINE", "container_engine"),
    ):
        layers.append(({key: env[var]} if env.get(var) else None, f"${var}"))
    for layer, source in layers:
        if layer is not None:
            merged = _merge(merged, _checked_top(layer, source), source)
            sources.append(source)
    flags = {
        "results_dir": results_dir,
        "container_engine": container_engine,
        "crash_reruns": crash_reruns,
        "max_restarts": max_restarts,
        "reenable_times": reenable_times,
        "test_timeout": test_timeout,
        "run_timeout": run_timeout,
        "record_map": record_map,
    }
    command_line = _command_line_layer(merged, flags)
    if command_line:
        merged = _merge(merged, _checked_top(command_line, "command line"), "command line")
    tracker = _tracker(merged["tracker"])
    if tracker.kind == "github" and "/" not in tracker.repository:
        raise ConfigError(
            "tracker kind 'github' needs a repository",
            source=sources[-1],
            key=f"{TABLE}.tracker.repository",
            allowed="owner/name",
        )
    rows = {name: _row_from_table(name, table) for name, table in merged["devices"].items()}
    paths = {k: root / merged[k] for k in PATH_KINDS}
    _check_path_kinds(paths, [(packaged_defaults(), defaults_source), *layers, (command_line, "command line")])
    top = {k: _frozen(k, v) for k, v in merged.items() if k not in ("tracker", "devices", *paths)}
    top["project_install"] = install_steps(merged["project_install"])
    return Config(
        project_root=root,
        sources=tuple(sources),
        tracker=tracker,
        rows=MappingProxyType({n: r for n, r in rows.items() if r.enabled}),
        **paths,
        **top,
    )


# what each path key names: one that names the other kind is the configuration's mistake
# (exit 3, with the file or variable that set it), never a broken environment (exit 5)
PATH_KINDS: dict[str, Literal["folder", "file"]] = {
    "results_dir": "folder",
    "suites_dir": "folder",
    "disable_list": "file",
}


def _check_path_kinds(paths: Mapping[str, Path], layers: Sequence[tuple[Mapping[str, Any] | None, str]]) -> None:
    """Raise :class:`ConfigError` when a path key names (or lies under) something of the wrong
    kind: a file where a folder is wanted, a folder for a file. What cannot be seen (a folder
    that cannot be read) is left to the check of what is written there."""
    for key, path in paths.items():
        wanted = PATH_KINDS[key]
        existing = path
        try:
            while not existing.exists() and existing != existing.parent:
                existing = existing.parent
            is_dir = existing.is_dir()
        except OSError:
            continue
        if existing != path:
            problem = None if is_dir else f"{path} lies under {existing}, which is a file"
        elif is_dir != (wanted == "folder"):
            problem = f"{path} is a {'folder' if is_dir else 'file'}; it names a {wanted}"
        else:
            problem = None
        if problem is not None:
            source = next(s for layer, s in reversed(layers) if layer is not None and key in layer)
            made = "made when absent" if wanted == "folder" else "none: no disables"
            raise ConfigError(
                problem,
                source=source,
                key=f"{TABLE}.{key}",
                tip=f"Set {key} to the path of a {wanted} ({made}), or move what is there away.",
            )


def make_state_dir(folder: Path) -> None:
    """``folder`` made; one this call makes that is the project's state folder ignores
    itself, as .nox does (#20): a folder that was already there is left as it is."""
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    if made and folder.name == STATE_DIR:
        try:
            (folder / ".gitignore").write_text("*\n")
        except OSError:
            pass  # the folder serves without it; git then lists its files


PSEUDO_FILESYSTEMS = (Path("/proc"), Path("/sys"), Path("/dev"))
# memory-backed file systems under /dev that are places for files (a tmpfs: TMPDIR on some hosts)
FILE_PLACES_UNDER_DEV = (Path("/dev/shm"),)  # noqa: S108 - named to be allowed, never written by us


def check_results_dir(path: Path, *, what: str = "results folder", tip: str | None = None) -> None:
    """Raise :class:`EnvironmentProblem` (exit 5) unless results can be written under ``path``.

    ``path`` need not exist yet: then its nearest existing ancestor must be a writable folder.
    ``what`` names the folder in the message (triage's --out, #30), ``tip`` what to do.
    """
    tip = tip or (
        "Set results_dir in [tool.device-matrix] (or $DEVICE_MATRIX_RESULTS_DIR, or --results) to a writable folder."
    )
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:
        raise EnvironmentProblem(f"{what} {path}: cannot be resolved ({exc})", tip=tip) from None
    under = [p for p in (*PSEUDO_FILESYSTEMS, *FILE_PLACES_UNDER_DEV) if resolved == p or p in resolved.parents]
    if under and not any(p in resolved.parents for p in FILE_PLACES_UNDER_DEV):
        raise EnvironmentProblem(
            f"{what} {path}: under /{resolved.parts[1]}, a kernel file system, not a place for files",
            tip=tip,
        )
    existing = resolved
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        problem = "is a file" if existing == resolved else f"lies under {existing}, which is a file"
        raise EnvironmentProblem(f"{what} {path}: {problem}", tip=tip)
    try:
        read_only_mount = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only_mount = False
    if read_only_mount or not os.access(existing, os.W_OK | os.X_OK):
        raise EnvironmentProblem(
            f"{what} {path}: {existing} is read-only" + (" (a read-only mount)" if read_only_mount else ""),
            tip=tip,
        )


def _checked_top(table: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    _validate(table, _TOP_KEYS, source, f"{TABLE}.")
    return table
