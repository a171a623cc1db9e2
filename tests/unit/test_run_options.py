"""Each option of ``run`` is declared once (device_matrix/cli/run_options.py, #41): whether a
shard's own run and a resume get it, and the configuration key it overrides; what a shard
is given and the configuration a run loads are made from those declarations."""

from __future__ import annotations

import argparse

from device_matrix import config
from device_matrix.cli import build_parser
from device_matrix.cli.run_options import RUN_OPTIONS, config_overrides, forwarded_options


def _run_parser() -> argparse.ArgumentParser:
    (sub,) = [a for a in build_parser("run")._actions if isinstance(a, argparse._SubParsersAction)]
    parser: argparse.ArgumentParser = sub.choices["run"]
    return parser


def test_every_option_of_run_is_declared_once_and_every_declaration_is_an_option() -> None:
    options = {a.dest for a in _run_parser()._actions if not isinstance(a, argparse._HelpAction)}
    declared = [o.dest for o in RUN_OPTIONS]
    assert len(declared) == len(set(declared)), "an option declared twice"
    assert sorted(options - set(declared)) == [], "give each new option of run its declaration in run_options.py"
    assert sorted(set(declared) - options) == [], "a declaration of an option run no longer has"
    for option in RUN_OPTIONS:
        assert option.how is not None or option.why, f"{option.dest}: not forwarded, and no word of why"
        if option.how not in (None, "pytest"):
            assert option.flag in _run_parser()._option_string_actions, option
        if option.again or option.default is not None:  # #41: a command line made from it says it
            action = _run_parser()._option_string_actions[option.flag]
            assert (action.default or None) == option.default, option  # a switch: False


def test_a_declared_configuration_key_is_a_key_of_the_configuration() -> None:
    keys = config.declared_keys()
    for option in RUN_OPTIONS:
        if option.config:
            assert option.config in keys or f"devices.ROW.{option.config}" in keys, option


def test_a_shard_gets_what_changes_how_a_test_runs_in_one_order_pytests_last() -> None:
    argv = [
        "run", "--device", "cpu", "--results", "r", "--local", "--no-gdb", "--keep-cores", "--engine", "podman",
        "--python", "py", "--test-timeout", "5", "--run-timeout", "50", "--reruns", "1", "--max-restarts", "2",
        "--run-url", "u", "--commit", "c", "--branch", "b", "--pr", "3", "--base", "main", "--base-commit", "bc",
        "--suite", "s1", "--suite", "s2", "--test", "t1", "--shards", "2", "--parallel", "--select", "changed",
        "--", "-k", "x",
    ]  # fmt: skip
    args = build_parser("run").parse_args(argv)
    args.pytest_args = args.pytest_args[1:]  # main drops the "--"
    assert forwarded_options(args) == [
        "--local", "--no-gdb", "--keep-cores", "--engine", "podman", "--python", "py", "--test-timeout", "5.0",
        "--run-timeout", "50.0", "--reruns", "1", "--max-restarts", "2", "--run-url", "u", "--commit", "c",
        "--branch", "b", "--pr", "3", "--base", "main", "--base-commit", "bc", "--suite", "s1", "--suite", "s2",
        "--test", "t1", "--", "-k", "x",
    ]  # fmt: skip
    assert forwarded_options(build_parser("run").parse_args(["run"])) == []


def test_the_configuration_a_run_loads_takes_each_override_from_its_declaration() -> None:
    args = build_parser("run").parse_args(["run", "--engine", "docker", "--reruns", "0", "--results", "out"])
    assert config_overrides(args) == {
        "container_engine": "docker",
        "test_timeout": None,
        "run_timeout": None,
        "crash_reruns": 0,
        "max_restarts": None,
        "reenable_times": None,
        "results_dir": "out",
        "record_map": None,
    }
    # another command's namespace: the options it has not are not given
    assert set(config_overrides(argparse.Namespace(results="r")).values()) == {"r", None}


def _tip(*argv: str) -> str:
    from device_matrix.cli.shards import resume_tip

    args = build_parser("run").parse_args(["run", *argv])
    args.pytest_args = args.pytest_args[1:]  # main drops the "--"
    return resume_tip(args, "cpu")


def test_a_resume_tip_repeats_the_spread_and_the_forwarded_options_as_they_were_asked_for() -> None:
    # #41: made from the declarations, as the shards' own options are
    assert _tip() == "device-matrix run --device cpu --resume"
    assert _tip("--shard", "2/3", "--slot", "1", "--results", "r", "--no-gdb") == (
        "device-matrix run --device cpu --shard 2/3 --slot 1 --results r --no-gdb --resume"
    )
    assert _tip("--shards", "2", "--parallel", "--test", "t", "--", "-k", "x") == (
        "device-matrix run --device cpu --shards 2 --parallel --test t --resume -- -k x"
    )
    assert _tip("--executor", "ray", "--address", "auto", "--durations", "d") == (
        "device-matrix run --device cpu --executor ray --address auto --resume"
    )
    assert _tip("--shards", "3", "--executor", "ray", "--address", "h:1") == (
        "device-matrix run --device cpu --shards 3 --executor ray --address h:1 --resume"
    )


def test_the_code_a_driver_runs_goes_to_its_shards_and_never_into_a_resume_tip() -> None:
    # #41: a shard the driver continues compares its code with its own record by the
    # driver's digest (files the tests wrote in between do not make it other code); a person's
    # --resume decides the code again, so the tip never carries the digest
    assert forwarded_options(build_parser("run").parse_args(["run", "--worktree", "d1"])) == ["--worktree", "d1"]
    assert _tip("--worktree", "d1", "--no-gdb") == "device-matrix run --device cpu --no-gdb --resume"


def test_a_spreads_record_says_how_it_was_asked_for() -> None:
    from device_matrix.cli.shards import spread_command

    def command(*argv: str, count: int = 2) -> list[str]:
        return spread_command(build_parser("run").parse_args(["run", *argv]), "cpu", count)

    assert command("--shards", "2", "--results", "r", "--no-gdb") == [
        "device-matrix", "run", "--device", "cpu", "--shards", "2",
    ]  # fmt: skip
    assert command("--shards", "2", "--parallel") == [
        "device-matrix", "run", "--device", "cpu", "--shards", "2", "--parallel",
    ]  # fmt: skip
    assert command("--executor", "ray", "--address", "auto", count=4) == [
        "device-matrix", "run", "--device", "cpu", "--shards", "4", "--executor", "ray", "--address", "auto",
    ]  # fmt: skip
