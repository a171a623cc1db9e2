"""What a run of a row is given to run: its targets, its scripts, the command line's selection.

A row runs its suites (folders under ``suites_dir``) and its scripts, or what the
command line picks (``--suite``, ``--test``); a row that names neither runs what plain
pytest runs in the project. Each test is reached once, however it is named
(:mod:`device_matrix.run.targets`). pytest's own selecting options (``-k``,
``-m``, ``--deselect``) narrow it further. Options that would move tests into processes
the runner does not watch (pytest-xdist), or that need pytest's cache, are refused up
front. A selection that selects nothing is a wrong command line, said as such.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from device_matrix.config import Config, Row, Script, pytest_setting
from device_matrix.errors import ConfigError, UsageProblem
from device_matrix.records.schema import RunRecord
from device_matrix.redact import PLACEHOLDER_RE
from device_matrix.run.targets import distinct_targets, names_script, of_script_file, unique_scripts

# pytest options that would move tests into processes the runner does not watch
XDIST_OPTIONS = ("-n", "--numprocesses", "--dist", "-d", "--tx", "--looponfail", "-f")
# options of pytest's cache, which the runner disables (-p no:cacheprovider): its own
# record, not a cache folder in the project, says what failed last time
CACHE_OPTIONS = ("--lf", "--last-failed", "--ff", "--failed-first", "--nf", "--new-first", "--sw", "--stepwise")
# #41: options under which pytest runs one nodeid more than once in a session: the record
# holds one outcome per nodeid (a plugin that does it unasked is caught at its second start)
RUNS_TWICE = ("--keep-duplicates",)
# options of the command line that select tests: a selection of nothing is a wrong command line
SELECTING_OPTIONS = ("-k", "-m", "--deselect")
# #30: options under which pytest runs no test body, yet exits 0 or prints and exits: a
# record of such a run would say every test passed, or that collection crashed. Each with
# what to run instead.
RUNS_NOTHING: dict[str, str] = {
    "--setup-plan": "it reports every test passed without running it",
    "--setup-only": "it reports every test passed without running it",
    "--trace": "it stops each test in a debugger, whose stdin the runner closes",
    "--pdb": "it stops a failing test in a debugger, whose stdin the runner closes",
    "--markers": "it prints the markers and runs nothing",
    "-h": "it prints pytest's help and runs nothing",
    "--help": "it prints pytest's help and runs nothing",
    "--version": "it prints pytest's version and runs nothing",
    "-V": "it prints pytest's version and runs nothing",
    "--fixtures": "it prints the fixtures and runs nothing",
    "--funcargs": "it prints the fixtures and runs nothing",
    "--fixtures-per-test": "it prints the fixtures and runs nothing",
    "--co": "it collects and runs nothing",
    "--collect-only": "it collects and runs nothing",
}
# pytest's usage errors for a selection it cannot find: a nodeid in a file ("not found"),
# a path ("file or directory not found"), a --pyargs name ("module or package not found")
NOT_FOUND_RE = re.compile(r"ERROR: (?:file or directory |module or package )?not found: (\S+)")


def selecting_options(args: Sequence[str]) -> list[tuple[str, str]]:
    """pytest's own test selections among ``args``: (the option, as written with its value)."""
    found = []
    for k, arg in enumerate(args):
        name = arg.split("=", 1)[0]
        if name in SELECTING_OPTIONS:
            found.append((name, arg if "=" in arg else shlex.join(args[k : k + 2])))
        elif arg[:2] in SELECTING_OPTIONS and len(arg) > 2 and not arg.startswith("--"):
            found.append((arg[:2], arg))
    return found


def refuse_xdist(args: Sequence[str]) -> None:
    """pytest-xdist moves tests into workers the runner cannot watch: say so up front.

    Options of pytest's cache are refused too: the runner runs without it; so are options
    under which pytest runs no test (#30), and those that run a test twice (#41).
    """
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in RUNS_NOTHING:
            raise UsageProblem(
                f"pytest argument {arg!r} cannot run under device-matrix run: {RUNS_NOTHING[name]}",
                tip=f"Remove it from the command line and the row's pytest_args; for what it shows, "
                f"run `python -m pytest {name}` in the project.",
            )
        if name in RUNS_TWICE:
            raise UsageProblem(
                f"pytest argument {arg!r} runs a test more than once in one session; "
                "device-matrix run records one outcome per test",
                tip="Remove it from the command line and the row's pytest_args: a test named twice runs once. "
                "To run a test again, run the row again.",
            )
        if name in CACHE_OPTIONS:
            raise UsageProblem(
                f"pytest argument {arg!r} needs pytest's cache, which device-matrix run does not use",
                tip="Remove it; to rerun what failed, pass its nodeids with --test (run.json lists them).",
            )
        if name in XDIST_OPTIONS or (arg.startswith("-n") and arg[2:].isalnum() and not arg.startswith("--")):
            raise UsageProblem(
                f"pytest argument {arg!r}: pytest-xdist cannot run under device-matrix run",
                tip="Remove -n/--dist: the runner isolates crashes itself. To spread a row, run rows in parallel.",
            )


def refuse_ini_addopts(root: Path) -> None:
    """#30: the project's own ``addopts`` (its pytest configuration file) reach every child's
    pytest as if given on its command line: what :func:`refuse_xdist` refuses there is
    refused here too, naming the file it comes from."""
    setting = pytest_setting(root, "addopts")
    if setting is None:
        return
    path, value = setting
    try:
        refuse_xdist(shlex.split(value) if isinstance(value, str) else value)
    except (UsageProblem, ValueError) as exc:
        said = exc.message if isinstance(exc, UsageProblem) else str(exc)
        raise UsageProblem(
            f"{path}: addopts {value!r}: {said}",
            tip=f"Remove it from addopts in {path.name} (pytest reads it on every run) for device-matrix run; "
            "pass it on pytest's own command line where you want what it shows.",
        ) from None


def scripts(row: Row, root: Path, *, suites: Sequence[str] | None, tests: Sequence[str]) -> tuple[Script, ...]:
    """The row's scripts, unless the command line picked suites or tests; each invocation once (#20).

    ``--test`` that names an entry (its file however written, a folder above it, a class or
    test in it, a program's nodeid) runs that entry as the row runs it: never a file for
    pytest to collect (#29, #39).
    """
    if suites:
        return ()
    if tests:
        return tuple(s for s in unique_scripts(row.scripts) if any(_names(t, s, row, root) for t in tests))
    return unique_scripts(row.scripts)


def _names(test: str, script: Script, row: Row, root: Path) -> bool:
    return names_script(test, script, row.scripts, root) is not None


def script_selection(script: Script, row: Row, root: Path, tests: Sequence[str]) -> list[str] | None:
    """The tests of this unittest script ``--test`` names, as its nodeids write them (a class
    names each of its tests); None: all of them."""
    named = [n for t in tests if (n := names_script(t, script, row.scripts, root)) is not None]
    if not named or any(n.tests is None for n in named):
        return None
    return [n.tests for n in named if n.tests is not None]


def _for_pytest(tests: Sequence[str], row: Row, root: Path) -> list[str]:
    """The ``--test`` words pytest is given: those that are no script's own (#39). A word that
    names a script's file but none of its runs (``FILE[NAME]`` of no entry) is a usage error."""
    kept = []
    for test in tests:
        named = [n for s in row.scripts if (n := names_script(test, s, row.scripts, root)) is not None]
        if any(n.own for n in named):
            continue
        if not named and of_script_file(test, row.scripts, root):
            its = [s for s in row.scripts if of_script_file(test, [s], root)]
            runs = sorted({f"[{s.variant}]" if s.variant else "(no [NAME])" for s in its})
            raise UsageProblem(
                f"--test {test}: row {row.name!r} runs its file as a script, and none of its runs is named so",
                tip=f"Name the file, a class or a test in it, with the [NAME] of one of its runs: {', '.join(runs)}.",
            )
        kept.append(test)
    return kept


def project_tests(row: Row, *, suites: Sequence[str] | None, tests: Sequence[str]) -> bool:
    """Whether the run gives pytest nothing, to run what plain pytest runs in the project:
    neither the row nor the command line names suites, scripts or tests (#20)."""
    return not (tests or suites or row.suites or row.scripts)


def targets(cfg: Config, row: Row, *, suites: Sequence[str] | None, tests: Sequence[str]) -> list[str]:
    """What pytest is given: ``tests`` when the command line names them, else the suites' folders,
    each test reached once (#20); nothing for a row that names no suites (pytest's own choice:
    in the project root it runs its ``testpaths``, else the root).

    A suite the row does not run, or a folder or script that does not exist, is a
    :class:`ConfigError` that says what to fix.
    """
    root = cfg.project_root
    if tests:
        return distinct_targets(_for_pytest(tests, row, root), root)
    chosen = list(suites or row.suites)
    unknown = [s for s in chosen if s not in row.suites] if suites else []
    if unknown:
        raise ConfigError(
            f"suite(s) {', '.join(unknown)} are not in row {row.name!r}",
            allowed=", ".join(row.suites) or "(none: the row runs the project's tests)",
            tip="Pick suites the row runs, add them to its `suites` list, or name tests with --test.",
        )
    found = []
    for suite in chosen:
        path = cfg.suite_path(suite)
        if not path.exists():
            raise ConfigError(
                f"suite {suite!r} of row {row.name!r}: {path} does not exist",
                tip="Create the suite folder, fix suites_dir, or remove the suite from the row "
                "(a row without suites runs the project's tests, as plain pytest does).",
            )
        found.append(str(path.relative_to(root)) if path.is_relative_to(root) else str(path))
    its_scripts = scripts(row, root, suites=suites, tests=tests)
    for script in its_scripts:
        if not (root / script.file).is_file():
            raise ConfigError(
                f"script {script.file!r} of row {row.name!r} does not exist",
                tip="Script files are relative to the project root; fix the path or remove the entry.",
            )
    return distinct_targets(found, root, its_scripts)


def files_of(path: str, targets: Sequence[str]) -> list[str]:
    """What pytest is given for the tests of one file: the file, or the row's own targets
    when a record names it with a placeholder (a secret in its name, #22): the tests are then
    found by their recorded nodeids among all the row collects."""
    return list(targets) if PLACEHOLDER_RE.search(path) else [path]


def isolation_groups(nodeids: Sequence[str], isolation: str) -> list[tuple[str, list[str]]]:
    """The tests of each process, in collection order: (the file to give pytest, nodeids)."""
    groups: dict[str, tuple[str, list[str]]] = {}
    for nodeid in nodeids:
        parts = nodeid.split("::")
        key = "::".join(parts[:2]) if isolation == "class" and len(parts) > 2 else parts[0]
        groups.setdefault(key, (parts[0], []))[1].append(nodeid)
    return list(groups.values())


def nothing_selected(
    *,
    row: str,
    tests: Sequence[str],
    pytest_args: Sequence[str],
    pytest_exit: int | None,
    output: str,
    project_root: Path,
) -> str | None:
    """Why the command line's selection ran nothing, from pytest's exit and ``output``.

    Called only when the run has no test at all; None when the selection is not to
    blame (a suite that collects nothing is the suite's problem, not the command line's).
    """
    picked = [f"--test {t}" for t in tests]
    picked += [written for _, written in selecting_options(pytest_args)]
    chosen = " ".join(picked) or "the command line"
    root = f"{project_root}/"
    found = NOT_FOUND_RE.search(output)
    if pytest_exit == 4 and found is not None:
        # pytest's own words first, as every usage error's reason (the row's record)
        said = found.group(0).replace(root, "")
        return f"pytest exited 4 (usage error): {said}: {chosen} selected no test"
    if pytest_exit == 5 and picked:
        return f"{chosen} selected no test of row {row!r} (pytest exited 5: nothing to run)"
    return None


class NothingSelected(UsageProblem):
    """The command line's selection (``-k``, ``-m``, ``--deselect``, ``--test``, a nodeid)
    selected no test; the row's record, which says so, goes with it."""

    def __init__(self, message: str, record: RunRecord) -> None:
        super().__init__(
            message,
            tip="List the row's tests with `python -m pytest --collect-only -q SUITE` and fix the selection.",
        )
        self.record = record
