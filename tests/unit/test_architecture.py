"""docs/architecture.md is true (#31): each claim it makes is checked here, read from the
sources (every ``import``, in functions too), or by the test of the behaviour it names
(``BEHAVIOUR``, at the end)."""

from __future__ import annotations

import argparse
import ast
import functools
import re
import types
import typing
from pathlib import Path

import pytest

from device_matrix.cli import build_parser
from tests.unit import test_layout

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "device_matrix"
DOC = ROOT / "docs" / "architecture.md"


# the package's modules by dotted name, and their sources parsed once, as the layout test reads them
_modules = functools.cache(test_layout._modules)


def _tree(name: str) -> ast.Module:
    return test_layout._trees()[_modules()[name]]


@functools.cache
def _imports(name: str) -> frozenset[str]:
    """The package's modules ``name`` imports directly (and the packages above them)."""
    path = _modules()[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(_tree(name)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            parts = target.split(".")
            for n in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b too
                if ".".join(parts[:n]) in _modules():
                    found.add(".".join(parts[:n]))
    found.discard(name)
    return frozenset(found)


def _loads(roots: list[str]) -> set[str]:
    """Every module of the package that importing ``roots`` can load."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_imports(name))
    return seen


def _under(prefix: str) -> list[str]:
    return [m for m in _modules() if m == prefix or m.startswith(prefix + ".")]


def _doc() -> str:
    return DOC.read_text()


def _listing() -> dict[str, str]:
    """The package section's block: each room it names -> its text (continuation lines too)."""
    block = _doc().split("## The package", 1)[1].split("    device_matrix/\n", 1)[1]
    rooms: dict[str, str] = {}
    current = ""
    for line in block.splitlines():
        if not line.startswith("      "):
            break
        if line[6] != " ":
            current = line.split()[0].rstrip("/")
            rooms[current] = line
        else:
            rooms[current] += " " + line.strip()
    return rooms


# --- the package section --------------------------------------------------------------


def test_the_package_section_names_every_room_and_no_other() -> None:
    # "One line per module folder, as the code has it"
    rooms = {p.name if p.is_dir() else p.stem for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    rooms = {r for r in rooms if (PACKAGE / r).is_dir() or (PACKAGE / f"{r}.py").is_file()}
    rooms -= {"__init__", "__main__"}
    listed = {name.removesuffix(".py") for name in _listing()}
    assert listed == rooms


def test_the_cli_line_names_every_command() -> None:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    commands = set(sub.choices)
    line = _listing()["cli"]
    named = set(re.findall(r"\b([a-z]+)\b", line.split(":", 1)[1]))
    assert commands <= named, f"commands the cli line does not name: {commands - named}"


def test_defaults_toml_is_where_the_line_says() -> None:
    assert "defaults.toml" in _listing()["config.py"]
    assert (PACKAGE / "defaults.toml").is_file()


def test_the_child_line_names_its_parts() -> None:
    assert (PACKAGE / "child" / "script.py").is_file() and (PACKAGE / "child" / "boot").is_dir()
    assert {"plugin", "journal"} <= {p.stem for p in (PACKAGE / "child").glob("*.py")}


def test_the_diagnostics_records_issues_and_report_lines_name_modules_that_are_there() -> None:
    expected = {
        "diagnostics": {"parse", "fingerprint", "core", "environment", "repro"},
        "records": {"schema", "summary", "merge", "cause", "source", "junit", "jsonreport", "atomic"},
        "issues": {"base", "ledger", "github", "sync", "pr_comment"},
        "report": {"model", "markdown", "html", "history", "verdicts", "placement", "actions", "escape"},
    }
    for room, modules in expected.items():
        here = {p.stem for p in (PACKAGE / room).glob("*.py")}
        assert modules <= here, f"{room}/ lacks {modules - here}"
        for word in ("schema", "summary", "merge", "junit", "jsonreport") if room == "records" else ():
            assert word in _listing()[room]


def test_tomlfile_is_the_one_reader_of_toml() -> None:
    # "TOML files read one way"
    readers = [m for m in _modules() if {"tomllib", "tomli"} & _external_imports(m)]
    assert readers == ["device_matrix.tomlfile"]


def _external_imports(name: str) -> set[str]:
    found = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_wire_is_the_one_place_of_the_dm_options_and_the_events() -> None:
    # "the parent-child contract: --dm-* options ... events"
    option = re.compile(r"^--dm-[a-z]")
    elsewhere = [
        f"{m}:{node.lineno}"
        for m in _modules()
        if m != "device_matrix.wire"
        for node in ast.walk(_tree(m))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and option.match(node.value)
    ]
    assert not elsewhere, f"--dm-* options spelled outside wire.py: {elsewhere}"
    from device_matrix import wire

    assert {"start", "report", "finish"} <= set(wire.EVENTS)
    # the plugin writes them, the runner's fold reads them: both by the contract
    assert "device_matrix.wire" in _imports("device_matrix.child.plugin")
    assert "device_matrix.wire" in _imports("device_matrix.run.journal")


def test_errors_is_one_family_each_with_its_exit_code_and_a_tip() -> None:
    from device_matrix import errors

    family = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, Exception)]
    assert errors.DeviceMatrixError in family and len(family) > 3
    for cls in family:
        assert issubclass(cls, errors.DeviceMatrixError), cls
        assert isinstance(cls.exit_code, int), cls
    assert "tip" in typing.get_type_hints(errors.DeviceMatrixError.__init__)


# --- the data flow --------------------------------------------------------------------


def test_a_row_is_a_frozen_row() -> None:
    import dataclasses

    from device_matrix.config import Row

    assert dataclasses.is_dataclass(Row) and Row.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_the_packaged_defaults_are_the_only_source_of_defaults() -> None:
    # "the packaged defaults the only source of defaults": config.py reads a key without a
    # fallback of its own, and its dataclasses' fields have no default values
    # (another tool's table, pytest's testpaths, is read with its own fallback: not a key of ours)
    from device_matrix.config import declared_keys

    keys = {name for _, name in declared_keys().values() if name}
    tree = _tree("device_matrix.config")
    fallbacks = [
        f"config.py:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and len(node.args) == 2
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in keys
        and not (isinstance(node.args[1], ast.Constant) and node.args[1].value is None)
    ]
    assert not fallbacks, f"keys read with a default of their own: {fallbacks}"
    # a key's field takes its default from defaults.toml (_packaged_factory), or is None where
    # the key means "none" when not given; a field that is no key (a script's variant) is not asked
    defaulted = [
        f"config.py:{cls.name}.{stmt.target.id}"
        for cls in tree.body
        if isinstance(cls, ast.ClassDef) and any("dataclass" in ast.unparse(d) for d in cls.decorator_list)
        for stmt in cls.body
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and stmt.target.id in keys
        and stmt.value is not None
        and not (isinstance(stmt.value, ast.Constant) and stmt.value.value is None)
        and "_packaged_factory(" not in ast.unparse(stmt.value)
    ]
    assert not defaulted, f"configuration fields with a default beside defaults.toml: {defaulted}"


def test_run_whole_run_shard_and_spread_are_the_spread_drivers_the_cli_calls() -> None:
    # "A whole run goes to run_whole, --shard K/N to run_shard, --shards N to spread"
    defined = {
        node.name: m
        for m in _under("device_matrix.spread")
        for node in _tree(m).body
        if isinstance(node, ast.FunctionDef)
    }
    assert {"run_whole", "run_shard", "spread"} <= set(defined), sorted(defined)
    shards = _tree("device_matrix.cli.shards")
    called = {
        node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        for node in ast.walk(shards)
        if isinstance(node, ast.Call)
    }
    # by name, as an attribute of the driver's module, or imported from it under another name
    imported = {
        alias.name
        for node in ast.walk(shards)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("device_matrix.spread")
        for alias in node.names
    }
    assert {"run_whole", "run_shard", "spread"} <= called | imported
    assert any(m.startswith("device_matrix.spread") for m in _imports("device_matrix.cli.shards"))


def test_a_whole_run_without_gangs_goes_to_the_runner_and_one_with_gangs_to_the_driver() -> None:
    # "A whole run of a row without gangs goes from the command line to the runner
    # (run/whole.py:run_whole ...), never through spread/; a row with gangs to run goes to
    # spread/driver.py:run_whole" (#41)
    doc = " ".join(_doc().split())
    assert "A whole run of a row without gangs goes from the command line to the runner" in doc
    assert not [m for m in _loads(["device_matrix.run.whole"]) if m.startswith("device_matrix.spread")]
    shards = ast.unparse(_tree("device_matrix.cli.shards"))
    assert "whole.has_gangs(" in shards and "whole.run_whole(" in shards and "driver.run_whole(" in shards
    # the driver clears an earlier spread as the plain path does: one function, in run/whole.py
    assert "clear_spread(" in ast.unparse(_tree("device_matrix.spread.driver"))


def test_a_runs_plan_is_made_by_one_function_and_frozen() -> None:
    # "The run's plan, its RunSetup, is made once, by RunSetup.open, ... and is frozen"
    from device_matrix.run.context import RunSetup

    doc = " ".join(_doc().split())
    assert "The run's plan, its `RunSetup`, is made once, by `RunSetup.open`" in doc
    assert RunSetup.__dataclass_params__.frozen  # type: ignore[attr-defined]
    calls = [
        ast.unparse(node.func)
        for m in _under("device_matrix")
        for node in ast.walk(_tree(m))
        if isinstance(node, ast.Call)
    ]
    assert "RunSetup" not in calls and calls.count("RunSetup.open") == 1  # in Run's own making
    # #41: "(where the row runs and its executor, ..., the tracker's disables, ...)": fields of
    # the plan, and the executor's one factory is called by the plan's maker
    assert "where the row runs and its executor" in doc and "the tracker's disables" in doc
    assert {"plan", "executor", "disables", "options", "folder", "scripts"} <= set(RunSetup.__dataclass_fields__)
    # "the targets) and is frozen, to the bottom": a field the maker resolves; that nothing an
    # object of the plan holds changes: tests/unit/test_run_setup.py and a real run's plan,
    # tests/integration/test_results_folder.py
    assert "the targets) and is frozen, to the bottom" in doc and "resolved" in RunSetup.__dataclass_fields__
    assert "(the folder's lock, the evidence a test deleted and a container's checked executor are the state's)" in doc
    assert "built by one factory (`run/executor.py:build`) when the run's plan is made" in doc
    assert "factory.build(" in ast.unparse(
        next(
            n
            for n in ast.walk(_tree("device_matrix.run.context"))
            if isinstance(n, ast.FunctionDef) and n.name == "open"
        )
    )


def test_a_run_is_its_plan_and_one_state_and_its_record_a_function_of_both() -> None:
    # "(`run/context.py:Run`: its plan and its `Execution`, the one state the steps change)"
    # "The record is a pure function of the plan and the state (`runner.record_of`)"
    from device_matrix.run import runner
    from device_matrix.run.context import Execution, Run, RunSetup

    doc = " ".join(_doc().split())
    assert "its plan and its `Execution`, the one state the steps change" in doc
    assert "The record is a pure function of the plan and the state (`runner.record_of`)" in doc
    assert sorted(Run.__slots__) == ["execution", "setup"]
    hints = typing.get_type_hints(runner.record_of)
    assert [hints["setup"], hints["execution"]] == [RunSetup, Execution]
    # the behaviour: tests/unit/test_run_setup.py builds one from a hand-made plan and state
    record_of = next(
        n
        for n in ast.walk(_tree("device_matrix.run.runner"))
        if isinstance(n, ast.FunctionDef) and n.name == "record_of"
    )
    called = {ast.unparse(n.func) for n in ast.walk(record_of) if isinstance(n, ast.Call)}
    assert not {c for c in called if "write" in c or c.startswith("os.") or c in ("now_iso", "setup.elapsed")}, called


def _calls(module: str, function: str) -> list[str]:
    """The calls in ``function`` of ``module`` (a method as Class.name), in the order they are written."""
    tree: ast.AST = _tree(module)
    for part in function.split("."):
        tree = next(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    return [ast.unparse(n.func) for n in sorted(calls, key=lambda n: (n.lineno, n.col_offset))]


def test_the_path_of_a_run_is_as_the_doc_says() -> None:
    # "The path of a run": each numbered line, read from the functions it names
    path = " ".join(_doc().split("## The path of a run", 1)[1].split("## The package", 1)[0].split())
    assert "`cli.cmd_run` checks the arguments and makes the `RunOptions`" in path
    assert "RunOptions" in _calls("device_matrix.cli", "cmd_run") and "run_whole" in _calls(
        "device_matrix.cli", "cmd_run"
    )
    assert "whole.run_whole" in _calls("device_matrix.cli.shards", "run_whole")
    assert _calls("device_matrix.run.whole", "run_whole") == ["clear_spread", "run_row"]
    # 2: the plan, then the state; the check before the lock
    assert "its plan by `RunSetup.open` (frozen) and its state by `Execution.start`" in path
    made = _calls("device_matrix.run.context", "Run.__init__")
    assert made.index("RunSetup.open") < made.index("Execution.start")
    opened = _calls("device_matrix.run.runner", "opened")
    assert opened[0] == "Run" and opened.index("run.check") < opened.index("row_lock")
    assert "factory.refuse" in _calls("device_matrix.run.context", "Run.make_executor")
    # #41: every value of the plan by its maker (the targets too), the checked executor and the
    # folder's lock the state's (that nothing changes the plan: tests/unit/test_run_setup.py)
    assert "Every value of the plan is worked out by `RunSetup.open`, pytest's targets too" in path
    assert "resolve_targets" in _calls("device_matrix.run.context", "RunSetup.open")
    assert "the executor that runs with what it found is a new one, the state's (`Execution.executor`)" in path
    assert "executor.checked" in _calls("device_matrix.run.context", "Run.make_executor")
    assert "are the state's too (`Execution.folder_state`)" in path
    locked = [
        ast.unparse(t)
        for n in ast.walk(_function("device_matrix.run.runner", "opened"))
        if isinstance(n, ast.Assign)
        for t in n.targets
    ]
    assert "run.execution.folder_state.lock" in locked
    assert "opened" in _calls("device_matrix.run.runner", "run_row")
    # 3: the steps (what they may change: tests/unit/test_run_setup.py)
    assert "finish(run, prepare(run))" in ast.unparse(_tree("device_matrix.run.runner"))  # prepare, then finish
    assert "run_steps" in _calls("device_matrix.run.runner", "finish")
    assert "each step changes the `Execution`, never the plan" in path  # its tests: BEHAVIOUR
    assert "never the plan, nor anything the plan holds, to the bottom" in path
    assert "listener and redactor are channels, not values" in path  # tests/runs.py:PLAN_CHANNELS
    # 4: the record made, then written
    written = _calls("device_matrix.run.runner", "write_record")
    assert "`write_record` writes `record_of(plan, state)`" in path
    assert written.index("record_of") < written.index("setup.folder.write")


def test_a_test_process_has_one_spec_its_attempt_holds() -> None:
    # "A test process's spec is one `LaunchSpec`, made by the plan (`RunSetup.launch_spec`),
    # which its attempt (`AttemptSpec`) holds and completes with its journal and token."
    from device_matrix.executors.base import LaunchSpec
    from device_matrix.run.attempt import AttemptSpec

    doc = " ".join(_doc().split())
    assert "A test process's spec is one `LaunchSpec`, made by the plan (`RunSetup.launch_spec`)" in doc
    assert typing.get_type_hints(AttemptSpec)["child"] is LaunchSpec
    assert "LaunchSpec" in _calls("device_matrix.run.context", "RunSetup.launch_spec")
    for made in ("device_matrix.run.attempts", "device_matrix.run.runner"):
        assert "LaunchSpec" not in {ast.unparse(n.func) for n in ast.walk(_tree(made)) if isinstance(n, ast.Call)}
    assert "replace" in _calls("device_matrix.run.attempt", "_launch_spec")  # the child's spec, completed


def test_the_runner_is_a_tuple_of_steps_each_given_the_verdict_and_returning_the_next() -> None:
    from device_matrix.run import runner
    from device_matrix.run.context import Run, Verdict

    assert isinstance(runner.STEPS, tuple) and len(runner.STEPS) > 2
    for step in runner.STEPS:
        hints = typing.get_type_hints(step)
        assert hints["return"] is Verdict and list(hints.values())[:2] == [Run, Verdict], step


def test_every_child_process_starts_in_base_spawn() -> None:
    # "every child is started the same way (base.spawn: its own session, stdin closed, ...)"
    starts = [f"{m}:{node.lineno}" for m in _modules() for node in ast.walk(_tree(m)) if _is_popen(node)]
    # and a tool asked on the host (its answer read from pipes): devices.ask_tool
    asked = [n.lineno for n in ast.walk(_function("device_matrix.devices", "ask_tool")) if _is_popen(n)]
    assert len(asked) == 1, asked
    assert starts == [f"device_matrix.devices:{asked[0]}", f"device_matrix.executors.base:{_spawn_popen_line()}"], (
        starts
    )
    tool = ast.unparse(_function("device_matrix.devices", "ask_tool"))
    assert "start_new_session=True" in tool and "stdin=subprocess.DEVNULL" in tool and "killpg" in tool
    spawn = ast.unparse(_spawn())
    assert "start_new_session=True" in spawn and "stdin=subprocess.DEVNULL" in spawn
    assert "PopenChild(" in spawn  # its ending: SIGTERM, the bound, SIGKILL, the sweep


def _function(module: str, name: str) -> ast.FunctionDef:
    (found,) = [n for n in _tree(module).body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found


def _spawn() -> ast.FunctionDef:
    (spawn,) = [
        n for n in _tree("device_matrix.executors.base").body if isinstance(n, ast.FunctionDef) and n.name == "spawn"
    ]
    return spawn


def _is_popen(node: ast.AST) -> bool:
    """A call that starts a process (``subprocess.Popen(...)``), not the type in an annotation."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Popen"


def _spawn_popen_line() -> int:
    (line,) = [n.lineno for n in ast.walk(_spawn()) if _is_popen(n)]
    return line


def test_the_record_has_one_fold_one_status_rule_and_one_vocabulary() -> None:
    from device_matrix.records import summary
    from device_matrix.records.schema import SCHEMA_VERSION, RunRecord

    assert callable(summary.fold) and callable(summary.row_status)
    assert isinstance(SCHEMA_VERSION, int) and "version" in typing.get_type_hints(RunRecord)
    # records/outcomes.py: the order of the statuses is written there and nowhere else
    assert "device_matrix.records.outcomes" in _modules()
    where = [
        m
        for m in _modules()
        for node in ast.walk(_tree(m))
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(isinstance(t, ast.Name) and t.id == "STATUS_ORDER" for t in _targets(node))
    ]
    assert where == ["device_matrix.records.outcomes"], where


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


RECORD_CONSTRUCTOR = "device_matrix.run.crashes"
BUILT_ONCE = frozenset({"AttemptRecord", "CrashRecord"})


def _record_literals(name: str) -> list[str]:
    """Where module ``name`` builds an AttemptRecord or a CrashRecord field by field: a call
    naming its fields, or a dict literal typed as one. A copy of a record already built, its
    numbers moved (the merge's ``CrashRecord(**{**c, "id": ...})``), is not a new record."""

    def called(node: ast.Call) -> str:
        return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")

    def copy(node: ast.Call) -> bool:
        if node.args or len(node.keywords) != 1 or node.keywords[0].arg is not None:
            return False
        spread = node.keywords[0].value
        return isinstance(spread, ast.Dict) and bool(spread.keys) and spread.keys[0] is None

    def typed_dict(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.value, ast.Dict)
            and ast.unparse(node.annotation).strip("'\"") in BUILT_ONCE
        )

    return [
        f"{name}:{node.lineno}"
        for node in ast.walk(_tree(name))
        if (isinstance(node, ast.Call) and called(node) in BUILT_ONCE and not copy(node)) or typed_dict(node)
    ]


def test_crash_and_attempt_records_have_one_constructor() -> None:
    # "crashes.py (crash evidence, the one constructor of crash and attempt records)": a run's,
    # a gang's and a dead runner's records are built by crash_record and attempt_record (#31)
    elsewhere = [where for m in _modules() if m != RECORD_CONSTRUCTOR for where in _record_literals(m)]
    assert not elsewhere, f"records built outside run/crashes.py's constructors: {elsewhere}"
    here = _record_literals(RECORD_CONSTRUCTOR)
    assert len(here) == 2, here  # the check reads what it looks for: the two constructors' own calls
    constructors = {n.name for n in _tree(RECORD_CONSTRUCTOR).body if isinstance(n, ast.FunctionDef)}
    assert {"crash_record", "attempt_record"} <= constructors
    for builder in ("device_matrix.spread.gang", "device_matrix.spread.postmortem", "device_matrix.run.attempts"):
        assert RECORD_CONSTRUCTOR in _imports(builder), builder
    # "what a crash leaves in the run's state, given only the values it needs": not the Run
    assert "device_matrix.run.context" not in _loads([RECORD_CONSTRUCTOR])


IO_CALLS = frozenset(
    {"open", "read_text", "write_text", "read_bytes", "write_bytes", "mkdir", "unlink", "iterdir", "glob", "rglob"}
)


def test_the_merge_is_pure_records_in_record_out() -> None:
    tree = _tree("device_matrix.records.merge")
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    reached, todo = set(), ["merge"]
    while todo:
        name = todo.pop()
        if name in reached or name not in functions:
            continue
        reached.add(name)
        for node in ast.walk(functions[name]):
            if isinstance(node, ast.Call):
                called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
                assert called not in IO_CALLS, f"merge reaches {called}() in {name}"
                assert not called.startswith(("write_", "load_", "read_")), f"merge reaches {called}() in {name}"
                todo.append(called)
    assert len(reached) > 3  # the merge's own helpers were followed


def test_no_command_loads_another_commands_module() -> None:
    # #41: a command's module (its parser and its handler) is imported when that command
    # runs, never by another: on no path, function-level imports counted
    from device_matrix.cli import COMMANDS

    entry = "device_matrix.cli"  # main, the table and the core commands: every command's start
    modules = {module for module, _ in COMMANDS.values()}
    assert entry in modules and len(modules) > 6
    for module in sorted(modules):
        others = {m for m in _loads([module]) & modules if m not in (module, entry)}
        assert not others, f"{module} loads {sorted(others)}"


def test_a_commands_parser_imports_that_commands_module_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from device_matrix.cli import COMMANDS, command_of

    real = importlib.import_module
    asked: list[str] = []

    def recorded(name: str, package: str | None = None) -> types.ModuleType:
        asked.append(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", recorded)
    for command, (module, _) in COMMANDS.items():
        asked.clear()
        parser = build_parser(command)
        assert asked == [module], command
        assert command in _subcommands(parser)
    asked.clear()
    assert set(_subcommands(build_parser())) == set(COMMANDS)  # --help: the whole list, from the table
    assert sorted(set(asked)) == sorted({module for module, _ in COMMANDS.values()})
    # the command is the first word after device-matrix's own options
    assert command_of(["--project", "run", "triage", "x"]) == "triage"
    assert command_of(["--project=p", "run", "--device", "cpu"]) == "run"
    assert command_of(["--help"]) is None and command_of(["nothing"]) is None and command_of([]) is None


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return list(sub.choices)


def test_nothing_below_the_command_line_imports_it() -> None:
    below = [
        m
        for m in _modules()
        if not (m == "device_matrix.cli" or m.startswith("device_matrix.cli.") or m.endswith("__main__"))
    ]
    up = {m: sorted(i for i in _imports(m) if i.startswith("device_matrix.cli")) for m in below}
    assert not {m: i for m, i in up.items() if i}


# --- what tests of behaviour check ----------------------------------------------------

# the doc's claims of behaviour -> the test that holds each (file::test)
BEHAVIOUR = {
    "each step changes the `Execution`, never the plan": "tests/unit/test_run_setup.py",
    "a fingerprint is the same for the same crash from every shape of log": "tests/unit/test_fingerprint.py",
    "the runner folds the journal live and after a death": "tests/unit/test_journal.py",
    "merge runs alone on a spread row's parts": "tests/unit/test_merge.py",
    "triage runs alone on a results folder": "tests/unit/test_triage.py",
    "secrets never leave the process": "tests/integration/test_redact_records.py",
    "a step whose verdict says stop ends the steps there, the record still written": "tests/unit/test_step_stop.py",
    "nothing else starts a process": "tests/unit/test_child_starts.py",
    "a container is known before its image is asked what it has": "tests/unit/test_run_setup.py",
    "a run's plan is made once and no step replaces a run's options": "tests/unit/test_run_setup.py",
    "a whole run of a row without gangs never goes through spread/": "tests/integration/test_architecture.py",
    "a run loads the selection engine only with --select": "tests/integration/test_architecture.py",
}


def test_each_claim_of_behaviour_has_its_tests() -> None:
    for claim, file in BEHAVIOUR.items():
        tests = re.findall(r"^def (test_\w+)", (ROOT / file).read_text(), re.M)
        assert len(tests) >= 3, f"{claim}: {file} has {len(tests)} test(s)"
