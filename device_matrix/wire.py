"""The contract between the runner and the pytest child, in one place.

The runner starts ``python -m pytest`` with ``--dm-*`` options and ``DEVICE_MATRIX_*``
variables; the plugin in the child writes journal events into a FIFO the runner reads,
and start markers into its own stdout. Both sides import their names from here, and
the child's command line and variables are built here (:class:`ChildCommand`,
:func:`attempt_args`), in one place.

Journal events are JSON objects, one a line, each with ``e`` (the kind) and ``n`` (1, 2,
3... in the order written). The runner validates every event against :data:`EVENTS`;
the first that does not fit marks the journal as broken, which the runner treats as
evidence that the process misbehaved, never as a reason to believe later lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

# --- variables the runner sets in the child's environment ---------------------------
ENV_DEVICE: Final = "DEVICE_MATRIX_DEVICE"
ENV_SETTINGS: Final = "DEVICE_MATRIX_SETTINGS"
ENV_DISABLE_LIST: Final = "DEVICE_MATRIX_DISABLE_LIST"
ENV_MARKERS: Final = "DEVICE_MATRIX_OUTPUT_MARKERS"  # "1": write start markers to stdout
# a token every process of one attempt inherits: what the runner ends after the attempt
ENV_ATTEMPT: Final = "DEVICE_MATRIX_ATTEMPT"
# #39: what the script launcher reads and takes out of the script's environment before its
# __main__ runs (python FILE has none of them); the token stays, for the sweep
LAUNCHER_TAKES: Final = (ENV_DEVICE, ENV_SETTINGS, ENV_DISABLE_LIST, ENV_MARKERS)
# #39: the name the plugin gives the core a test's forked copy left (``core`` would be the
# next copy's too); the runner reads it with that test's crash, not the process's own
FORKED_CORE_PREFIX: Final = "core.forked."

# --- options of the child's pytest ----------------------------------------------------
OPT_JOURNAL: Final = "--dm-journal"
OPT_SELECT: Final = "--dm-select"
OPT_FAULTHANDLER: Final = "--dm-faulthandler"
OPT_ENV: Final = "--dm-env"
OPT_DEVICE: Final = "--dm-device"
OPT_DISABLE_LIST: Final = "--dm-disable-list"
# #34: a file of the tests a change cannot break ({nodeid: why}): the child leaves them out
OPT_DESELECT: Final = "--dm-deselect"
PLUGIN: Final = "device_matrix.child.plugin"  # the plugin's module, and its pytest11 entry point's name
SCRIPT_MODULE: Final = "device_matrix.child.script"  # runs a test file as a script, journaled
# which entry of a file run more than once: the script launcher puts it after each nodeid
OPT_VARIANT: Final = "--dm-variant"
# the file is a program, not a unittest file: one test, from its start to its process's exit
OPT_PROGRAM: Final = "--dm-program"
# each test file imported as `python FILE` imports it: its folder first on sys.path, and a
# unittest file collected as unittest collects it (issue #24)
OPT_AS_SCRIPT: Final = "--dm-as-script"
# the pytest options that go with it: pytest itself leaves sys.path alone
AS_SCRIPT_PYTEST_ARGS: Final = ("--import-mode=importlib",)
# #34: record the test map: a folder where each pytest process leaves the files each test ran
OPT_MAP: Final = "--dm-map"
# #34: in the map's folder, each process's own folder (cov-PID) ends with this file: each
# test it finished (raw nodeid) and the project files it ran
MAP_PART: Final = "part.json"
# beside it: the lines each file ran outside every test (its import, conftest.py, collection)
MAP_IMPORTS: Final = "imports.json"
# #34: and the lines of each file each test it finished ran (nodeid -> path -> line numbers)
MAP_LINES: Final = "lines.json"
# #40: the non-Python project files each test opened (or listed), and those opened outside every test
MAP_READS: Final = "reads.json"
# #40: each such file -> the project functions that opened it ("path:first line"; "": none named)
MAP_OPENERS: Final = "openers.json"
# #40: the tests ("": outside every test) that started a program whose opens the recording
# cannot see -> [why, the project functions that started it...]
MAP_UNSEEN: Final = "unseen.json"
# #34: the test running now, while one runs: the context of a subprocess's coverage
ENV_MAP_CONTEXT: Final = "DEVICE_MATRIX_MAP_CONTEXT"


def write_select(path: Path, nodeids: Sequence[str]) -> None:
    """The file behind ``--dm-select``: one JSON list, ASCII only.

    Not one nodeid a line: a nodeid may hold a line break or a lone surrogate (a raw
    parametrize id, a file name that is not UTF-8), which lines of UTF-8 cannot carry.
    """
    path.write_text(json.dumps(list(nodeids)), "ascii")


def read_select(path: Path) -> list[str]:
    """The nodeids :func:`write_select` wrote."""
    return [str(n) for n in json.loads(path.read_text("ascii"))]


def write_deselect(path: Path, reasons: Mapping[str, str]) -> None:
    """The file behind ``--dm-deselect``: one JSON object, nodeid -> why it is left out, ASCII only."""
    path.write_text(json.dumps(dict(reasons)), "ascii")


def read_deselect(path: Path) -> dict[str, str]:
    """The tests :func:`write_deselect` wrote, with their reasons."""
    return {str(k): str(v) for k, v in json.loads(path.read_text("ascii")).items()}


def option(name: str, value: str) -> str:
    """``--dm-x=value`` as one word.

    Two words would let pytest's early argument pass, which does not know our options
    yet, take the value for a test path and search for configuration files beside it.
    """
    return f"{name}={value}"


# --- the child's command line and variables --------------------------------------------


def attempt_args(*, journal: Path, faulthandler: Path, select: Path | None) -> list[str]:
    """The options of one attempt's own files, first on its command line.

    First: a script's launcher takes its own options before the file and its arguments.
    """
    args = [option(OPT_JOURNAL, str(journal)), option(OPT_FAULTHANDLER, str(faulthandler))]
    if select is not None:
        args.append(option(OPT_SELECT, str(select)))
    return args


@dataclass(frozen=True, kw_only=True)
class ChildCommand:
    """What every child process of one row is given: its pytest arguments and its variables.

    A row's test processes (``python -m pytest``) and its scripts (``python -m
    device_matrix.child.script FILE``) get the same device, disable list and variables;
    :func:`attempt_args` adds each attempt's journal, faulthandler file and selection.
    """

    device: str  # the row's name
    pjrt_device: str
    rootdir: str  # the project root
    disable_list: str
    settings: Mapping[str, object]
    env: Mapping[str, str]  # the row's variables
    slot_env: Mapping[str, str]  # a device slot's variables, over the row's
    pytest_args: Sequence[str]  # the row's, then the command line's
    own_env: bool  # the child is another interpreter: it snapshots its own environment (--dm-env)
    script_files: Sequence[str] = ()  # the files the row's scripts run
    as_script: bool = False  # each test file imported and collected as `python FILE` runs it (#24)
    deselect: str = ""  # #34: the file of the tests selection leaves out ("": none)
    map_dir: str | None = None  # #34: where each pytest process leaves its part of the test map

    def environment(self, extra: Mapping[str, str] | None = None, *, script: bool = False) -> dict[str, str]:
        """The child's variables over the host's: the row's, ours, a slot's, then ``extra`` (a script's).

        ``script``: the child is a script, whose process has the variables ``python FILE``
        has (#39): no colour settings of pytest's; the launcher takes ours out at its start
        (:data:`LAUNCHER_TAKES`)."""
        env = dict(self.env)
        env.setdefault("PJRT_DEVICE", self.pjrt_device)
        env[ENV_DEVICE] = self.device
        env[ENV_SETTINGS] = json.dumps(dict(self.settings), sort_keys=True)
        env[ENV_DISABLE_LIST] = self.disable_list
        env[ENV_MARKERS] = "1"
        env.update(self.slot_env)
        env["PYTHONUNBUFFERED"] = "1"
        if not script:
            # no colour codes in logs, records, junit or issue bodies (a script writes into a
            # file: what colours it would write there, it writes there under python FILE too)
            env["PY_COLORS"] = "0"
            env["NO_COLOR"] = "1"
        env.update(extra or {})
        return env

    def pytest(self, targets: Sequence[str], *, left_out: Sequence[str] = (), collect_only: bool = False) -> list[str]:
        """pytest's arguments: ``targets``, our options, the row's and the command line's, then what is left out."""
        return [
            *targets,
            "--rootdir",
            self.rootdir,
            # by name, not only through its entry point: a project that turns plugin
            # autoloading off (PYTEST_DISABLE_PLUGIN_AUTOLOAD) still gets the journal
            "-p",
            PLUGIN,
            "-p",
            "no:cacheprovider",
            "-p",
            "no:faulthandler",
            # the runner watches one process; xdist workers it cannot (see run.selection.refuse_xdist)
            "-p",
            "no:xdist",
            # Native code writes to fd 2: fd-level output must reach the run log, where a
            # crash's native stack and fatal lines can be read after the process died.
            # tee-sys also passes print() output through while keeping it for reports.
            "--capture=tee-sys",
            # a module that fails to import is recorded as an error; the others still run
            "--continue-on-collection-errors",
            "-o",
            "console_output_style=classic",
            option(OPT_DEVICE, self.device),
            option(OPT_DISABLE_LIST, self.disable_list),
            *([option(OPT_DESELECT, self.deselect)] if self.deselect else []),
            *([OPT_ENV] if self.own_env else []),
            *([OPT_AS_SCRIPT, *AS_SCRIPT_PYTEST_ARGS] if self.as_script else []),
            *([option(OPT_MAP, self.map_dir)] if self.map_dir and not collect_only else []),
            *self.pytest_args,
            # a module whose import kills or hangs the process (collected again without it)
            *(f"--ignore={path}" for path in left_out),
            # a file a script runs is not collected by a suite too: it runs once, as its script (#20)
            *(f"--ignore={file}" for file in self.script_files),
            *(["--collect-only"] if collect_only else []),
        ]

    def script(self, file: str, args: Sequence[str], variant: str = "", *, program: bool = False) -> list[str]:
        """The script launcher's arguments: ours, then ``python FILE ARGS`` as upstream runs it;
        ``variant`` names this run of a file the row runs more than once (#24); ``program``:
        the file is one test, not a unittest file."""
        ours = [option(OPT_DEVICE, self.device), *([OPT_ENV] if self.own_env else [])]
        ours += [*([option(OPT_VARIANT, variant)] if variant else []), *([OPT_PROGRAM] if program else [])]
        return [*ours, file, *args]


# --- the start marker in the child's output -------------------------------------------
MARKER_START: Final = b"\x1edm:"
MARKER_RE: Final = re.compile(rb"\x1edm:(\d+)\x1f")


def marker(seq: int) -> bytes:
    """Written to fd 1 right before test number ``seq`` starts; the runner strips it."""
    return b"\x1edm:%d\x1f" % seq


# --- journal events -------------------------------------------------------------------
# kind -> {field: allowed types}; a field of type NoneType may be absent or null
_NONE = type(None)
_NUM = (int, float)
EVENTS: Final[Mapping[str, Mapping[str, tuple[type, ...]]]] = {
    # secrets: a child in its own environment (--dm-env) names its secret values (#22)
    "session": {"pid": (int,), "device": (str, _NONE), "t": _NUM, "env": (dict, _NONE), "secrets": (list, _NONE)},
    "collecting": {"nodeid": (str,), "path": (str,)},
    "collect_done": {"nodeid": (str,)},
    "collect_error": {"nodeid": (str,), "longrepr": (str, _NONE)},
    # a module skipped as a whole (pytest.importorskip, pytest.skip(allow_module_level=True))
    "collect_skip": {"nodeid": (str,), "longrepr": (str, _NONE)},
    "collected": {"nodeids": (list,), "t": _NUM},
    # #34: collected tests --dm-deselect left out, before "collected" (which lists the others)
    "deselected": {"nodeids": (list,)},
    "start": {"nodeid": (str,), "t": _NUM, "meta": (dict,), "seq": (int,), "loc": (list,)},
    "report": {
        "nodeid": (str,),
        "when": (str,),
        "outcome": (str,),
        "duration": _NUM,
        "longrepr": (str, _NONE),
        "wasxfail": (str, _NONE),
        "skip": (dict, _NONE),
        # a failed subtest of the running test (pytest's subtests, unittest's subTest): which one
        "sub": (str, _NONE),
        # of a failure: its exception line(s), and [file, line] relative to the root (#20)
        "cause": (str, _NONE),
        "where": (list, _NONE),
        # #29: the test's own crash, as a plugin that runs it in a forked copy reports it
        # (pytest-forked): {"signal": N or None, "fault": its Python stack, "output": its output,
        # "core": the core file it left, renamed, or None (#39)}
        "crash": (dict, _NONE),
    },
    # a phase of the running test that passed with nothing to report (no text, no xfail)
    "pass": {"when": (str,), "duration": _NUM},
    # #29: the script launcher's running test entered this phase (its reports come at its
    # end): a crash in the method is the call's
    "phase": {"nodeid": (str,), "when": (str,)},
    "finish": {"nodeid": (str,), "t": _NUM},
    "cwd": {"path": (str,)},
    "end": {"exitstatus": (int,), "t": _NUM},
}
PHASES: Final = frozenset({"setup", "call", "teardown"})
# "rerun": a failed phase of an execution a plugin runs again (pytest-rerunfailures), between
# that execution's own start and finish; the next execution starts the same test again
# "error": a call that raised what unittest calls an error, not a failure (an exception other
# than the test's failureException): the record keeps unittest's distinction (#24)
REPORT_OUTCOMES: Final = frozenset({"passed", "failed", "skipped", "rerun", "error"})


def check_event(event: Any, expected_n: int) -> str | None:
    """Why ``event`` is not a well-formed event number ``expected_n``; None when it is."""
    if not isinstance(event, dict):
        return "not a JSON object"
    kind = event.get("e")
    if not isinstance(kind, str) or kind not in EVENTS:
        return f"unknown event kind {kind!r}"
    n = event.get("n")
    if type(n) is not int or n != expected_n:
        return f"event {kind!r} numbered {n!r}, expected {expected_n}"
    for name, types in EVENTS[kind].items():
        value = event.get(name)
        if value is None and _NONE in types:
            continue
        if type(value) is bool or not isinstance(value, types):
            return f"event {kind!r}: field {name!r} is {type(value).__name__}"
    if kind == "report" and (event["when"] not in PHASES or event["outcome"] not in REPORT_OUTCOMES):
        return f"event 'report': phase {event['when']!r} / outcome {event['outcome']!r}"
    where = event.get("where") if kind == "report" else None
    if where is not None and not (
        len(where) == 2 and isinstance(where[0], str) and type(where[1]) is int and where[1] > 0
    ):
        return "event 'report': field 'where' is not [file, line]"
    if kind in ("pass", "phase") and event["when"] not in PHASES:
        return f"event {kind!r}: phase {event['when']!r}"
    if kind in ("collected", "deselected") and not all(isinstance(x, str) for x in event["nodeids"]):
        return f"event {kind!r}: a nodeid is not a string"
    return None
