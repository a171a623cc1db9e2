"""Each option of ``run``, declared once: how a run other than the one typed gets it (#41).

A spread's shards and a Ray task's runner each start a ``run`` of their own: an option
that changes how a test runs or what the record says is forwarded to them (``how``: a
switch, a value, each value of a repeated option, or pytest's own arguments after
``--``), and so is in the command an interrupted run prints to continue it. An option
that is not forwarded says why. An option that overrides a configuration key for one run
names the key (``config``), and the configuration is loaded from these. An option that
says how the row is spread (``spread``) is repeated by the spread's record and, with the
results folder (``again``), by the command that continues an interrupted run: every command
line a run writes for another is made here. A new option of ``run`` without its
declaration here fails tests/unit/test_run_options.py.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from device_matrix.errors import UsageProblem
from device_matrix.records.schema import SelectMode

How = Literal["switch", "value", "each", "pytest"]


@dataclass(frozen=True)
class RunOption:
    dest: str  # argparse's name of it
    how: How | None  # how a shard's own run gets it; None: it is not forwarded (``why``)
    why: str = ""
    config: str | None = None  # the configuration key it overrides for one run
    # not forwarded, but said again by the command that continues the run (``resume``) and,
    # for an option that says how the row is spread, by the spread's record too (``spread``)
    again: Literal["resume", "spread"] | None = None
    shape: How = "value"  # how ``again`` writes it
    default: str | None = None  # argparse's own default: a value equal to it goes without saying
    # given by a driver to its shards only: never in a command a person is told to type (a
    # resume decides it again)
    driver_only: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")


_SOURCE = "the record's source, as a shard's record must say it too"
_SPREAD = "says how the row is spread: the spread gives each shard its own"

RUN_OPTIONS: tuple[RunOption, ...] = (
    RunOption("local", "switch"),
    RunOption("container", "switch"),
    RunOption("no_gdb", "switch"),
    RunOption("keep_cores", "switch"),
    RunOption("engine", "value", config="container_engine"),
    RunOption("python", "value"),
    RunOption("test_timeout", "value", config="test_timeout"),
    RunOption("run_timeout", "value", config="run_timeout"),
    RunOption("reruns", "value", config="crash_reruns"),
    RunOption("max_restarts", "value", config="max_restarts"),
    RunOption("run_url", "value"),
    RunOption("commit", "value", _SOURCE),
    RunOption("branch", "value", _SOURCE),
    RunOption("pr", "value", _SOURCE),
    RunOption("base", "value", _SOURCE),
    RunOption("base_commit", "value", _SOURCE),
    RunOption("suite", "each"),
    RunOption("test", "each"),
    RunOption("pytest_args", "pytest"),
    RunOption("device", None, "a shard's command names its one row itself"),
    RunOption(
        "results",
        None,
        "the spread gives each shard the results folder (--results)",
        config="results_dir",
        again="resume",
    ),
    RunOption("require_device", None, "the exit code of the run that was typed, for an unavailable row"),
    RunOption("resume", None, "the spread gives --resume to a shard whose part was cut off"),
    RunOption("rerun_disabled", None, "a run of its own (the disabled tests, --times each), never spread"),
    RunOption("times", None, "with --rerun-disabled only", config="reenable_times"),
    RunOption("select", None, "refused with a spread (check_select_args): a spread row runs every test"),
    RunOption("map", None, "with --select only"),
    RunOption(
        "record_map",
        None,
        "not given: a shard records the map where the configuration's record_map says so",
        config="record_map",
    ),
    RunOption("shard", None, _SPREAD, again="spread"),
    RunOption("shards", None, _SPREAD, again="spread"),
    RunOption("parallel", None, _SPREAD, again="spread", shape="switch"),
    RunOption("slot", None, _SPREAD, again="spread"),
    RunOption("durations", None, "the driver splits the row by these; a shard is given its part (--shard-plan)"),
    RunOption("executor", None, _SPREAD, again="spread", default="local"),
    RunOption("address", None, _SPREAD, again="spread"),
    RunOption("shard_plan", None, "the driver's own split, written for its shards"),
    # #41: a shard runs the code its driver's run was started on, and says so in its record
    RunOption("worktree", "value", driver_only=True),
)


def _argv(option: RunOption, how: How, value: Any) -> list[str]:
    """``option`` as a command line writes it (nothing when it was not given)."""
    if how == "switch":
        return [option.flag] if value else []
    if how == "value":
        return [option.flag, str(value)] if value is not None and value != option.default else []
    if how == "each":
        return [part for each in value or () for part in (option.flag, each)]
    return ["--", *value] if value else []


def forwarded_options(args: argparse.Namespace, *, to_shards: bool = True) -> list[str]:
    """The options of this ``run`` that each shard's own ``run`` takes too (pytest's last);
    ``to_shards`` False: those a command for a person repeats (no ``driver_only`` one)."""
    given = [
        (o, o.how, getattr(args, o.dest)) for o in RUN_OPTIONS if o.how is not None and (to_shards or not o.driver_only)
    ]
    argv = [part for o, how, value in given if how != "pytest" for part in _argv(o, how, value)]
    return argv + [part for o, how, value in given if how == "pytest" for part in _argv(o, how, value)]


def row_command(row: str) -> list[str]:
    return ["device-matrix", "run", "--device", row]


def spread_argv(args: argparse.Namespace, *, shards: int | None = None) -> list[str]:
    """How this ``run`` asked for its row to be spread (``shards``: the count it came to)."""
    given = {"shards": shards} if shards is not None else {}
    return [
        part
        for o in RUN_OPTIONS
        if o.again == "spread"
        for part in _argv(o, o.shape, given.get(o.dest, getattr(args, o.dest)))
    ]


def resume_argv(args: argparse.Namespace, row: str) -> list[str]:
    """The command that continues this ``run`` of ``row``, as it was asked for (#23)."""
    again = [part for o in RUN_OPTIONS if o.again == "resume" for part in _argv(o, o.shape, getattr(args, o.dest))]
    forwarded = forwarded_options(args, to_shards=False)  # a resume decides the code again (#41)
    at = forwarded.index("--") if "--" in forwarded else len(forwarded)
    return [*row_command(row), *spread_argv(args), *again, *forwarded[:at], "--resume", *forwarded[at:]]


def config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration keys this command's options override for one run (None: not given)."""
    return {option.config: getattr(args, option.dest, None) for option in RUN_OPTIONS if option.config}


def add_select_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("test selection (docs/selection.md)")
    group.add_argument(
        "--select",
        choices=get_args(SelectMode),
        help="changed: run only the tests the change can break, by the row's test map (the others are recorded "
        "deselected); all: every test (the record says so)",
    )
    group.add_argument(
        "--map",
        type=Path,
        help="the test map to select by, with --select (default: the newest of the history's maps of the row "
        "on the base branch and on this branch, and results/<row>/test-map.json)",
    )


def check_select_args(args: argparse.Namespace, *, spread: bool) -> None:
    """``--map`` goes with ``--select``; a spread row runs every test for now, and the
    re-enable check runs the disabled tests it names."""
    if args.map is not None and args.select is None:
        raise UsageProblem("--map needs --select changed", tip="Add --select changed, or leave --map out.")
    if args.select is not None and (args.rerun_disabled or args.times is not None):
        raise UsageProblem(
            "--select does not go with --rerun-disabled: the re-enable check runs the disabled tests it names",
            tip="Leave --select out of the re-enable check.",
        )
    if args.select == "changed" and getattr(args, "record_map", None):
        raise UsageProblem(
            "--record-map does not go with --select changed: a test map comes from a run of every test",
            tip="Record the map on a full run (a push to the base branch), and select on pull requests.",
        )
    if args.select is not None and spread:
        raise UsageProblem(
            "--select does not spread a row yet (--shard, --shards, --executor ray)",
            tip="Run the row whole with --select changed, or spread it without --select (every test runs).",
        )
