"""Every configuration key is declared once and has its default in defaults.toml only (#31):
the dataclasses take theirs from it, the loader reads no default of its own, and
docs/configuration.md's table of keys says what the file says."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from device_matrix import config, tomlfile
from tests.conftest import REPO

CONFIG_PY = Path(config.__file__)
DOC = REPO / "docs" / "configuration.md"
# fields that are no key with a default: a script's variant is made from its entry, a gang's
# xfail is an optional table (None when not given)
NOT_KEYS = ("variant", "xfail")
DOC_ROW = re.compile(r"^\| `([^`]+)` \| (.+) \|$")


def packaged() -> dict[str, object]:
    return tomlfile.loads((CONFIG_PY.parent / "defaults.toml").read_text())


def test_every_declared_key_has_its_default_in_defaults_toml_and_nothing_else_is_there() -> None:
    data = packaged()
    declared = config.declared_keys()
    for key, (table, name) in declared.items():
        if not name:
            continue
        holder = data[table] if table else data
        assert isinstance(holder, dict) and name in holder, f"{key} has no default in defaults.toml"
    # and defaults.toml has no key that is not declared (its packaged rows are rows, not defaults)
    declared_there = {(t, n) for t, n in declared.values() if n}
    for table in ("", "tracker", *config.KEY_TABLES):
        holder = data[table] if table else data
        assert isinstance(holder, dict)
        for name, value in holder.items():
            if table == "" and name in ("tracker", "devices", *config.KEY_TABLES):
                continue
            assert (table, name) in declared_there, f"defaults.toml [{table}] {name} = {value!r} is no declared key"
    # a key without a default is one the loader says must be given, or that means "none"
    assert set(config.WITHOUT_DEFAULT) <= set(declared)


def test_the_dataclasses_take_each_default_from_defaults_toml() -> None:
    data = packaged()
    rows = data["row"]
    assert isinstance(rows, dict)
    row = config.Row(name="x", pjrt_device="CPU")
    for key, value in rows.items():
        expected = tuple(value) if isinstance(value, list) else value
        got = getattr(row, key)
        assert (dict(got) if isinstance(got, dict | config.MappingProxyType) else got) == expected, key
    script = config.Script(file="t.py")
    assert (script.args, dict(script.env), script.kind) == ((), {}, "unittest")
    for cls in (config.Row, config.Script, config.Gang, config.TrackerConfig, config.Config):
        for f in dataclasses.fields(cls):
            # a field of a key has no literal default: defaults.toml's, or none (required)
            if f.name in NOT_KEYS:
                continue
            assert f.default is dataclasses.MISSING, f"{cls.__name__}.{f.name} has a default of its own"


def test_config_py_holds_no_second_list_of_defaults() -> None:
    # grep-level: no `x.get("key", default)` of a configuration key, no literal field default
    names = {name for _, name in config.declared_keys().values() if name} | {
        key.rsplit(".", 1)[-1] for key in config.declared_keys()
    }
    tree = ast.parse(CONFIG_PY.read_text())
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in names
        ):
            found.append(f"line {node.lineno}: .get({node.args[0].value!r}, ...)")
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                literal = isinstance(item, ast.AnnAssign) and isinstance(item.value, ast.Constant | ast.Tuple)
                if literal and ast.unparse(item.target) not in NOT_KEYS:
                    found.append(
                        f"line {item.lineno}: {node.name}.{ast.unparse(item.target)} = {ast.unparse(item.value)}"
                    )
    assert found == []


def test_docs_configuration_lists_every_key_with_the_default_of_defaults_toml() -> None:
    data = packaged()
    documented: dict[str, str] = {}
    for line in DOC.read_text().splitlines():
        m = DOC_ROW.match(line)
        if m:
            assert m.group(1) not in documented, f"{m.group(1)} is listed twice"
            documented[m.group(1)] = m.group(2)
    declared = config.declared_keys()
    assert list(documented) == list(declared)
    for key, (table, name) in declared.items():
        said = documented[key]
        if not name:
            assert said == config.WITHOUT_DEFAULT[key], key
            continue
        assert said.startswith("`") and said.endswith("`"), key
        holder = data[table] if table else data
        assert isinstance(holder, dict)
        assert tomlfile.loads(f"v = {said[1:-1]}")["v"] == holder[name], key


@pytest.mark.parametrize("table", ["row", "script", "gang"])
def test_a_key_table_of_defaults_toml_is_not_a_key_of_the_project(tmp_path: Path, table: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.device-matrix.{table}]\nimage = 'x'\n")
    with pytest.raises(config.ConfigError, match="unknown key"):
        config.load(tmp_path)


# the tracker's request limits a project may set: their default is defaults.toml's alone
TRACKER_LIMITS = ("api_url", "write_interval", "writes_per_hour")


def _package_trees() -> list[tuple[str, ast.Module]]:
    package = CONFIG_PY.parent
    return [(str(p.relative_to(package)), ast.parse(p.read_text(), str(p))) for p in sorted(package.rglob("*.py"))]


def test_no_module_holds_a_second_copy_of_the_trackers_request_limits() -> None:
    # #31: issues/client.py once wrote API_URL, WRITE_INTERVAL and WRITES_PER_HOUR beside
    # defaults.toml's api_url, write_interval and writes_per_hour: a name spelled as one of
    # these keys is never given a literal, nor a parameter of that name a literal default,
    # and the URL is written nowhere else
    tracker = packaged()["tracker"]
    assert isinstance(tracker, dict) and set(TRACKER_LIMITS) <= set(tracker)
    url = tracker["api_url"]
    found = []
    for where, tree in _package_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                named = [t.id for t in targets if isinstance(t, ast.Name) and t.id.lower() in TRACKER_LIMITS]
                if named and isinstance(node.value, ast.Constant):
                    found.append(f"{where}:{node.lineno}: {named[0]} = {ast.unparse(node.value)}")
            elif isinstance(node, ast.arguments):
                params = [*node.posonlyargs, *node.args]
                pairs = [
                    *zip(params[len(params) - len(node.defaults) :], node.defaults, strict=True),
                    *zip(node.kwonlyargs, node.kw_defaults, strict=True),
                ]
                for arg, default in pairs:
                    literal = isinstance(default, ast.Constant) and default.value is not None
                    if arg.arg in TRACKER_LIMITS and literal:
                        found.append(f"{where}:{default.lineno}: {arg.arg}={ast.unparse(default)}")
            elif isinstance(node, ast.Constant) and node.value == url:
                found.append(f"{where}:{node.lineno}: {url!r}")
    assert found == [], "a second copy of defaults.toml's [tracker] request limits"
    # and the client's own are the packaged ones, read from the file
    from device_matrix.issues import client

    expected = tuple(tracker[k] for k in TRACKER_LIMITS)
    own = (client.API_URL, client.WRITE_INTERVAL, client.WRITES_PER_HOUR)
    assert own == expected
    made = client.GitHubClient(None)
    assert (made.api, made.write_interval, made.writes_per_hour) == expected


def test_a_packaged_row_holds_only_what_differs_from_the_row_defaults() -> None:
    # #41: a packaged row that repeats a [row] value keeps it when [row] changes; 21 did
    data = packaged()
    row, devices = data["row"], data["devices"]
    assert isinstance(row, dict) and isinstance(devices, dict) and {"cpu", "tpu"} <= set(devices)
    repeated = {
        f"{name}.{key}"
        for name, table in devices.items()
        for key, value in table.items()
        if key in row and value == row[key]
    }
    assert repeated == set(), "drop these from [devices.*] in defaults.toml: [row] gives them"


def test_the_trend_window_has_one_value() -> None:
    # #41: triage's --history-runs said 30 of its own beside the history's DEFAULT_WINDOW
    from device_matrix.cli import build_parser
    from device_matrix.report.history import DEFAULT_WINDOW

    args = build_parser("triage").parse_args(["triage"])
    assert args.history_runs == DEFAULT_WINDOW
    text = (CONFIG_PY.parent / "cli" / "triage.py").read_text()
    assert not re.search(r"default=\d", text), "a default of triage's written as a number: name its constant"


def test_a_git_command_has_one_time_bound() -> None:
    # #41: records/source.py bounded git by 10 s, select.py by 60 and testmap.py by 30
    import inspect

    from device_matrix.records import source

    assert "timeout" not in inspect.signature(source.git).parameters
    found = [
        where
        for where, tree in _package_trees()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and "GIT_TIMEOUT" in target.id
    ]
    assert found == ["records/source.py"]


def test_the_reenable_checks_runs_are_a_key_of_the_configuration(tmp_path: Path) -> None:
    # #41: DEFAULT_TIMES = 45 lived in cli/disabled.py; the key's default is defaults.toml's,
    # a project may set it, and --times overrides it for one run
    from device_matrix.cli import disabled

    assert not hasattr(disabled, "DEFAULT_TIMES")
    assert packaged()["reenable_times"] == 45
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\nreenable_times = 9\n")
    assert config.load(tmp_path).reenable_times == 9
    assert config.load(tmp_path, reenable_times=3).reenable_times == 3
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\nreenable_times = 0\n")
    with pytest.raises(config.ConfigError, match="reenable_times"):
        config.load(tmp_path)


def test_docs_configuration_names_every_key_of_defaults_toml_and_no_other() -> None:
    # #41: read from the file itself, not from the loader's declarations
    data = packaged()
    keys = {k for k, v in data.items() if not isinstance(v, dict)}
    names = {
        "tracker": "tracker.",
        "row": "devices.ROW.",
        "script": "devices.ROW.scripts[].",
        "gang": "devices.ROW.gangs[].",
    }
    for table, prefix in names.items():
        holder = data[table]
        assert isinstance(holder, dict)
        keys |= {prefix + k for k in holder}
    documented = {m.group(1) for line in DOC.read_text().splitlines() if (m := DOC_ROW.match(line))}
    without = set(config.WITHOUT_DEFAULT)  # documented as required or none: no default to hold
    assert documented - without == keys
