"""A run is what is fixed once it is opened (``RunSetup``) and what changes as it goes
(``Run``); its executor is made at one known point, the run's check, by the one factory
(#31), never as a side effect of reading the run."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import io
import re
import textwrap
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from device_matrix import config
from device_matrix.config import Config
from device_matrix.errors import EnvironmentProblem
from device_matrix.executors.base import Executor, LaunchSpec
from device_matrix.executors.container import ContainerExecutor, ImagePython
from device_matrix.executors.engine import Engine
from device_matrix.executors.local import LocalExecutor
from device_matrix.output import Output
from device_matrix.records.schema import DisablesRef, RunRecord
from device_matrix.redact import Redactor
from device_matrix.run import runner
from device_matrix.run.context import Execution, Part, Run, RunOptions, RunSetup, Verdict
from device_matrix.run.folder import RowFolder
from device_matrix.run.plan import RowPlan, plan_row
from tests.conftest import REPO, Project
from tests.runs import PLAN_CHANNELS, plan_state, watch_plans

CONTAINER_ROW = 'run_in = "container"\nimage = "registry.example/xla:r2.9@sha256:abc"\n'
PODMAN = Engine("/nowhere/podman", "podman", "4.3.1", rootless=False)


def _container_run(p: Project) -> Run:
    cfg = config.load(p.root)
    row = cfg.row("fixture")
    plan = RowPlan(row, "container", "the row's image", engine=PODMAN)
    return Run(cfg, plan, RunOptions(), Output(io.StringIO()))


def test_what_is_fixed_once_a_run_is_opened_cannot_change(project: Callable[..., Project]) -> None:
    p = project("passing")
    cfg = config.load(p.root)
    run = Run(cfg, plan_row(cfg, cfg.row("fixture")), RunOptions(), Output(io.StringIO()))
    setup = run.setup
    assert isinstance(setup, RunSetup) and setup.row.name == "fixture"
    assert setup.folder.path == p.root / "results" / "fixture"
    for name, value in (("folder", None), ("cfg", cfg), ("started_at", "now")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(setup, name, value)
    # what the steps change is the run's own: the part a driver narrows it to among them (#41:
    # its state, never its options, which are the plan's)
    run.execution.part = Part(select=("t.py::a",))
    assert run.execution.part.select == ("t.py::a",) and run.setup is setup and run.options.select is None


def test_a_runs_plan_cannot_be_changed_once_it_is_made(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    # #41: `options` was swapped mid-run (runner._deselect, finish, door.finish): the plan is
    # frozen, every field of it, and the run's options are the plan's, read-only
    p = project("passing")
    cfg = config.load(p.root)
    run = Run(cfg, plan_row(cfg, cfg.row("fixture")), RunOptions(tests=("t.py",)), Output(io.StringIO()))
    fields = dataclasses.fields(RunSetup)
    assert {"cfg", "plan", "options", "folder", "scripts"} <= {f.name for f in fields}
    for f in fields:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(run.setup, f.name, getattr(run.setup, f.name))
    with pytest.raises(AttributeError):
        run.options = RunOptions()  # type: ignore[misc]
    assert run.options is run.setup.options and run.options.tests == ("t.py",)
    # #41: where the children run and the tracker's disables are decided by the plan's maker
    assert {"executor", "disables"} <= {f.name for f in fields}
    # a whole run's life leaves every field of its plan the very value the maker made
    made = {f.name: getattr(run.setup, f.name) for f in fields}
    born = plan_state(run.setup)
    run.check()
    run.setup.folder.path.mkdir(parents=True)
    runner.prepare(run)
    runner.write_record(run, Verdict("passed"))
    run.close_reader()
    assert {name: value for name, value in made.items() if getattr(run.setup, name) is not value} == {}
    assert run.executor is run.setup.executor
    # nor anything an object of the plan holds, to the bottom: no attribute assigned, no list or
    # dict on it changed, no value worked out on first use and kept (the targets were)
    assert plan_state(run.setup) == born
    # a run as the runner opens it, its folder locked for the block (the lock was the folder's)
    plans = watch_plans(monkeypatch)
    with runner.opened(cfg, plan_row(cfg, cfg.row("fixture")), RunOptions(), Output(io.StringIO())) as held:
        runner.write_record(held, runner.prepare(held))
    [(setup, at_birth)] = plans
    assert setup is held.setup and plan_state(setup) == at_birth
    assert [name for name, v in vars(RunSetup).items() if isinstance(v, functools.cached_property)] == []


def test_a_plans_state_sees_a_change_to_anything_it_holds() -> None:
    # the measure of the tests above, measured: an attribute assigned, a list or a dict changed
    # deep inside, a value kept on first use; the plan's channels are not its values
    class Held:
        def __init__(self) -> None:
            self.items: list[int] = []
            self.by: dict[str, object] = {}

    inner, told = Held(), Held()
    plan = types.SimpleNamespace(listener=told, redactor=Held(), held=(Path("x"), {"k": inner}), flag=False)
    born = plan_state(plan)
    told.items.append(1)
    assert plan_state(plan) == born
    for change in (
        lambda: inner.items.append(1),
        lambda: inner.by.update(k=Held()),
        lambda: setattr(inner.by["k"], "late", "kept"),
        lambda: setattr(plan, "flag", True),
    ):
        change()
        assert plan_state(plan) != born
        born = plan_state(plan)


def _through(node: ast.expr, name: str) -> bool:
    """Whether ``node`` (``a.b[k].c``) reaches through a name or an attribute called ``name``."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and node.attr == name:
            return True
        node = node.value
    return isinstance(node, ast.Name) and node.id == name


MUTATORS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "pop",
        "remove",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "popitem",
        "sort",
    }
)


def _changes(tree: ast.AST, name: str) -> list[int]:
    """The lines of ``tree`` that change something reached through ``name``: an attribute or
    an item of it assigned or deleted, a list, dict or set of it changed in place, or
    ``object.__setattr__`` on it."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if (
            isinstance(node, (ast.Attribute, ast.Subscript))
            and isinstance(node.ctx, (ast.Store, ast.Del))
            and _through(node.value, name)
        )
        or (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and (
                (node.func.attr in MUTATORS and _through(node.func.value, name))
                or (ast.unparse(node.func) == "object.__setattr__" and _through(node.args[0], name))
            )
        )
    ]


def _ours(hint: object) -> list[type]:
    """The classes of this package a type hint names (``X | None``, ``tuple[X, ...]``)."""
    own = [hint] if isinstance(hint, type) and hint.__module__.startswith("device_matrix.") else []
    return own + [klass for arg in typing.get_args(hint) for klass in _ours(arg)]


def _checked_names(klass: type) -> dict[str, object]:
    """The names ``klass``'s module imports for its type hints alone (under ``TYPE_CHECKING``:
    a module loaded only where it is used, #41), imported here to read the hints."""
    module = inspect.getmodule(klass)
    names: dict[str, object] = {}
    for node in ast.walk(ast.parse(inspect.getsource(module))) if module is not None else ():
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            exec(compile(ast.Module(body=node.body, type_ignores=[]), "<hints>", "exec"), names)
    return names


def _plan_classes() -> set[type]:
    """Every class of ours a run's plan holds, by the types of its fields, to the bottom; an
    executor as the factory makes it; the plan's channels (tests/runs.py) left out."""
    seen: set[type] = set()
    todo: list[type] = [RunSetup]
    while todo:
        klass = todo.pop()
        if klass in seen or klass is Executor:
            todo += [LocalExecutor, ContainerExecutor] if klass is Executor else []
            seen.add(klass)
            continue
        seen.add(klass)
        hints = typing.get_type_hints(
            klass if dataclasses.is_dataclass(klass) else klass.__init__, localns=_checked_names(klass)
        )
        todo += [
            c for name, hint in hints.items() if not (klass is RunSetup and name in PLAN_CHANNELS) for c in _ours(hint)
        ]
    return seen - {Executor}


def test_nothing_assigns_a_field_of_a_runs_plan() -> None:
    # #41: nothing of the package sets an attribute of a plan once made (`setup.x = ...`, or
    # around the frozen dataclass with object.__setattr__), nor of an object it holds
    # (`run.setup.folder.lock = lock`), nor changes a list or a dict of one in place
    found = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted((REPO / "device_matrix").rglob("*.py"))
        for line in _changes(ast.parse(path.read_text()), "setup")
    ]
    assert found == []
    # the classes of what a plan holds change nothing of their own once made (their maker,
    # __init__ or __post_init__, alone sets them), and work out no value on first use
    classes = _plan_classes()
    assert {RunSetup, RowFolder, RowPlan, Config, RunOptions, ContainerExecutor, LocalExecutor} <= classes
    changing = [
        f"{klass.__qualname__}.{method.name}:{line}"
        for klass in sorted(classes, key=lambda k: k.__qualname__)
        for method in ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body  # type: ignore[attr-defined]
        if isinstance(method, ast.FunctionDef) and method.name not in ("__init__", "__post_init__")
        for line in _changes(method, "self")
    ]
    assert changing == []
    lazy = [
        f"{klass.__qualname__}.{name}"
        for klass in classes
        for name, value in vars(klass).items()
        if isinstance(value, functools.cached_property)
    ]
    assert lazy == []


def test_no_step_replaces_a_runs_options() -> None:
    # #41: nothing of the package assigns a run's options once it is made
    found = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in sorted((REPO / "device_matrix").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Attribute) and target.attr == "options" and ast.unparse(target.value) != "self"
    ]
    assert found == []


def test_a_shards_setup_names_its_own_folder(project: Callable[..., Project]) -> None:
    p = project("passing")
    cfg = config.load(p.root)
    run = Run(cfg, plan_row(cfg, cfg.row("fixture")), RunOptions(results_subdir="shards/2"), Output(io.StringIO()))
    assert run.setup.folder.path == p.root / "results" / "fixture" / "shards" / "2"


def test_reading_a_run_makes_no_executor_and_asks_no_image(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Sequence[str]] = []

    def checked(self: ContainerExecutor, spec: LaunchSpec, imports: Sequence[str]) -> ContainerExecutor:
        asked.append(imports)
        return self

    monkeypatch.setattr(ContainerExecutor, "checked", checked)
    run = _container_run(project("passing", row=CONTAINER_ROW))
    # what a record or a repro reads: no factory call, no image asked
    assert run.repro.container is None and run.child.device == "fixture" and run.evidence.row.name == "fixture"
    assert run.execution.container is None and asked == []
    with pytest.raises(AssertionError, match="check makes its executor"):
        run.executor  # noqa: B018 - before the check there is none
    # the check makes it, its image asked once; a later check or call gives the same one
    run.check()
    assert isinstance(run.executor, ContainerExecutor) and run.executor is run.execution.container
    assert asked == [["device_matrix.child.plugin"]]
    run.check()
    assert run.make_executor() is run.executor and len(asked) == 1


def test_an_image_that_is_refused_leaves_the_container_known_and_no_executor(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: ContainerExecutor, spec: LaunchSpec, imports: Sequence[str]) -> ContainerExecutor:
        raise EnvironmentProblem("image registry.example/xla cannot run row 'fixture'", tip="Use another.")

    monkeypatch.setattr(ContainerExecutor, "checked", refuse)
    run = _container_run(project("passing", row=CONTAINER_ROW))
    with pytest.raises(EnvironmentProblem):
        run.check()
    # the refusal's record names the engine; the image is asked again by the next call
    assert run.execution.container is not None and run.execution.container.facts()["container_engine"] == "podman"
    with pytest.raises(AssertionError):
        run.executor  # noqa: B018
    with pytest.raises(EnvironmentProblem):
        run.make_executor()
    record = runner.write_record(run, Verdict("error", "refused"))
    assert record["environment"]["container_engine"] == "podman"


def test_an_images_check_is_the_runs_state_and_leaves_its_plans_executor_as_made(
    project: Callable[..., Project], monkeypatch: pytest.MonkeyPatch
) -> None:
    # #41: the check kept the image's interpreter on the plan's executor: the executor the run's
    # children use is the state's, the checked one; the plan's stays as its maker made it
    def probe(
        self: ContainerExecutor, spec: LaunchSpec, candidate: str, imports: Sequence[str], *, name: str
    ) -> ImagePython | str:
        if candidate == "python":
            return "not found"
        return ImagePython(name=candidate, version="3.12.1", executable="/usr/bin/python3.12", pytest="8.3.2")

    monkeypatch.setattr(ContainerExecutor, "_probe", probe)
    p = project("passing", row=CONTAINER_ROW)
    run = _container_run(p)
    born = plan_state(run.setup)
    run.check()
    assert plan_state(run.setup) == born
    planned, checked = run.setup.executor, run.executor
    assert isinstance(planned, ContainerExecutor) and (planned.python, planned.found) == ("python", None)
    assert isinstance(checked, ContainerExecutor) and checked is run.execution.container and checked is not planned
    # what the check found is what the children, the repro lines and the record use
    argv = checked.argv(run.setup.launch_spec())
    assert checked.interpreter() == "/usr/bin/python3.12" and argv[argv.index(run.setup.row.image) + 1] == "python3"
    assert run.repro.container is checked and checked.repro_prefix({}, run.setup.launch_spec())[-1] == "python3"
    run.setup.folder.path.mkdir(parents=True)
    record = runner.write_record(run, Verdict("error", "stopped"))
    assert record["environment"]["container_python"] == "python3"
    assert plan_state(run.setup) == born


def test_a_local_run_is_made_its_interpreter_by_the_check(project: Callable[..., Project], tmp_path: Path) -> None:
    p = project("passing")
    cfg = config.load(p.root)
    run = Run(cfg, plan_row(cfg, cfg.row("fixture")), RunOptions(), Output(io.StringIO()))
    run.check()
    assert isinstance(run.executor, LocalExecutor) and run.execution.container is None
    # --python that is no interpreter is refused by the check, before anything runs
    missing = Run(
        cfg, plan_row(cfg, cfg.row("fixture")), RunOptions(python=str(tmp_path / "no-python")), Output(io.StringIO())
    )
    with pytest.raises(EnvironmentProblem, match="no such interpreter"):
        missing.check()


def test_the_factory_is_the_one_maker_of_an_executor_and_the_check_its_one_caller() -> None:
    # grep-level: an executor made anywhere else would be one the run's check never asked
    package = REPO / "device_matrix"
    makers = re.compile(r"\b(ContainerExecutor|LocalExecutor)\(")
    made = sorted(str(p.relative_to(package)) for p in package.rglob("*.py") if makers.search(p.read_text()))
    assert made == ["run/executor.py"], made
    callers = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text()))
        if isinstance(node, ast.ImportFrom)
        and (
            node.module == "device_matrix.run.executor"
            or (node.module == "device_matrix.run" and any(a.name == "executor" for a in node.names))
        )
    )
    assert callers == ["run/context.py"], callers
    # #41: made by the maker of the run's plan, refused or readied by the run's check
    assert inspect.getsource(RunSetup.open).count("factory.build(") == 1
    assert inspect.getsource(Run.make_executor).count("factory.build(") == 0


def test_a_record_is_made_from_a_plan_and_a_state_alone(project: Callable[..., Project]) -> None:
    # #41: the record is a pure function of the run's plan and its state: a hand-made pair, no
    # run opened, no process, nothing written; the same pair gives the same record
    p = project("passing")
    cfg = config.load(p.root)
    row = cfg.row("fixture")
    options = RunOptions(tests=("t.py",), run_url="https://ci.example/1")
    setup = RunSetup(
        cfg=cfg,
        plan=RowPlan(row, "local", "cpu is here"),
        options=options,
        listener=Output(io.StringIO()),
        folder=RowFolder(p.root / "results" / "fixture", "fixture"),
        redactor=Redactor(),
        scripts=(),
        project_tests=False,
        own_env=False,
        executor=LocalExecutor(),
        disables=None,
        suites=None,
        tests=options.tests,
        resolved=("t.py",),
        started_at="2026-01-02T03:04:05+00:00",
        t0=0.0,
    )
    state = Execution.start(setup)
    state.tests.put("t.py::test_a", "passed", duration=0.5, message=None, attempt=1)
    state.tests.put("t.py::test_b", "failed", duration=0.25, message="assert 1 == 2", attempt=1)
    state.disables = DisablesRef(read_at="2026-01-02T03:00:00+00:00", age_s=245, fresh=True, applied=1, note="read")
    results = dict(state.tests.results)

    def made() -> RunRecord:
        return runner.record_of(
            setup,
            state,
            Verdict("failed", "1 failed"),
            finished_at="2026-01-02T03:05:00+00:00",
            duration=55.0,
            runner_pid=None,
        )

    record = made()
    assert (record["row"], record["status"], record["reason"], record["mode"]) == (
        "fixture",
        "failed",
        "1 failed",
        "local",
    )
    assert [t["nodeid"] for t in record["tests"]] == ["t.py::test_a", "t.py::test_b"]
    assert record["summary"]["passed"] == 1 and record["summary"]["failed"] == 1
    assert record["started_at"] == "2026-01-02T03:04:05+00:00" and record["finished_at"] == "2026-01-02T03:05:00+00:00"
    assert record["duration"] == 55.0 and record["runner_pid"] is None and record["run_url"] == "https://ci.example/1"
    assert record["selection"] == "--test t.py" and record["disables"]["age_s"] == 245
    assert record["command"] == ["device-matrix", "run", "--device", "fixture"]
    assert made() == record and state.tests.results == results and state.record is None
    assert not (p.root / "results").exists()
    # what a test deleted while the run went on is the state's, and the record says it
    state.folder_state.lost.append("deleted while attempt 1 ran: output.log (the output until then)")
    assert made()["reason"] == "1 failed; evidence deleted while attempt 1 ran: output.log (the output until then)"


def test_a_run_is_its_plan_and_its_state_and_nothing_else(project: Callable[..., Project]) -> None:
    # #41: what the steps change is gathered in the run's Execution; a run holds no other value
    p = project("passing")
    cfg = config.load(p.root)
    run = Run(cfg, plan_row(cfg, cfg.row("fixture")), RunOptions(), Output(io.StringIO()))
    assert sorted(Run.__slots__) == ["execution", "setup"] and not hasattr(run, "__dict__")
    with pytest.raises(AttributeError):
        run.deadline = 0.0  # type: ignore[attr-defined]
    assert isinstance(run.execution, Execution) and run.execution.part == Part()


def test_a_child_has_one_spec_that_its_attempt_completes(project: Callable[..., Project], tmp_path: Path) -> None:
    # #41: a child's command went ChildCommand -> AttemptSpec -> LaunchSpec, its fields repacked
    # at each step: an attempt holds the executor's spec of its child, and adds its own to it
    from device_matrix.run.attempt import AttemptSpec, _launch_spec
    from device_matrix.wire import ENV_ATTEMPT

    assert {f.name for f in dataclasses.fields(AttemptSpec)} & {f.name for f in dataclasses.fields(LaunchSpec)} == set()
    p = project("passing")
    cfg = config.load(p.root)
    run = Run(cfg, plan_row(cfg, cfg.row("fixture")), RunOptions(core_limit=1234), Output(io.StringIO()))
    child = run.setup.launch_spec({"A": "1"}, ["t.py", "-q"])
    assert (child.module, list(child.pytest_args), child.core_limit, child.workdir) == (
        "pytest",
        ["t.py", "-q"],
        1234,
        p.root,
    )
    spec = AttemptSpec(index=1, purpose="run", child=child, select=["t.py::test_a"])
    launch = _launch_spec(spec, fifo=tmp_path / "fifo", fault=tmp_path / "fault", select_file=tmp_path / ".select")
    assert list(launch.pytest_args[-2:]) == ["t.py", "-q"] and str(tmp_path / "fifo") in " ".join(launch.pytest_args)
    assert launch.env == {"A": "1", ENV_ATTEMPT: launch.token} and launch.token
    assert (launch.module, launch.core_limit, launch.workdir) == (child.module, child.core_limit, child.workdir)
    assert (tmp_path / ".select").is_file()
    # where a child's spec is made: the run's plan, and a gang's ranks
    package = REPO / "device_matrix"
    made = sorted(str(f.relative_to(package)) for f in package.rglob("*.py") if "LaunchSpec(" in f.read_text())
    assert made == ["run/context.py", "spread/gang.py"], made
