"""Bad input: the documented exit code, an ERROR and a TIP naming the file, key or field.

Exit 70 is for bugs only. Each case below was once a traceback or was accepted silently.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from device_matrix.cli import main
from device_matrix.config import check_results_dir, load
from device_matrix.devices import detect
from device_matrix.errors import (
    EXIT_CONFIG,
    EXIT_ENVIRONMENT,
    EXIT_RESULTS,
    EXIT_USAGE,
    ConfigError,
    EnvironmentProblem,
    ResultsError,
)
from device_matrix.records.schema import load_run
from tests import records as R
from tests.conftest import Project

ROW = "[tool.device-matrix.devices.x]\npjrt_device = 'CPU'\n"


def _config_error(tmp_path: Path, text: str) -> ConfigError:
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load(tmp_path, environ={})
    return info.value


@pytest.mark.parametrize(
    ("row_line", "needle"),
    [
        ('presence = ["command:\\"x"]', "cannot be split"),
        ('presence = ["env:"]', "needs an argument"),
        ('presence = ["env:A B"]', "variable name"),
        ('presence = ["glob:"]', "needs an argument"),
        ('presence = ["always:now"]', "takes no argument"),
        ("test_timeout = nan", "finite number of seconds > 0"),
        ("test_timeout = inf", "finite number of seconds > 0"),
        ("test_timeout = 0", "finite number of seconds > 0"),
        ("test_timeout = -5", "finite number of seconds > 0"),
        ("run_timeout = -inf", "finite number of seconds > 0"),
        ('env = { "A=B" = "x" }', "variable names"),
        ('install = ["torch\\u0000"]', "list of pip requirement strings"),
    ],
)
def test_bad_row_values_name_the_file_and_key(tmp_path: Path, row_line: str, needle: str) -> None:
    err = _config_error(tmp_path, ROW + row_line + "\n")
    key = row_line.split(" =", maxsplit=1)[0]
    assert str(tmp_path / "pyproject.toml") in err.message and f"devices.x.{key}" in err.message
    assert needle in err.message


@pytest.mark.parametrize(
    ("top", "key"),
    [
        ('results_dir = ""', "results_dir"),
        ('results_dir = "  "', "results_dir"),
        ('suites_dir = ""', "suites_dir"),
        ("crash_reruns = -1", "crash_reruns"),
        ("max_restarts = -3", "max_restarts"),
        ("crash_reruns = true", "crash_reruns"),
        ('env_allowlist = ["HF TOKEN"]', "env_allowlist"),
        ("[tool.device-matrix.tracker]\nwrite_interval = nan", "tracker.write_interval"),
        ("[tool.device-matrix.tracker]\nwrites_per_hour = 0", "tracker.writes_per_hour"),
        ('[tool.device-matrix.tracker]\napi_url = "javascript:alert(1)"', "tracker.api_url"),
        ('[tool.device-matrix.tracker]\napi_url = "https://user:pw@api.github.com"', "tracker.api_url"),
        ('[tool.device-matrix.tracker]\nrepository = "../x"', "tracker.repository"),
        ('[tool.device-matrix.tracker]\non_recurrence = "ignore"', "tracker.on_recurrence"),
        ('[tool.device-matrix.tracker]\nlabels = [""]', "tracker.labels"),
    ],
)
def test_bad_top_level_values(tmp_path: Path, top: str, key: str) -> None:
    err = _config_error(tmp_path, "[tool.device-matrix]\n" + top + "\n")
    assert f"tool.device-matrix.{key}" in err.message


@pytest.mark.parametrize("name", ["../evil", "a/b", ".hidden", "x" * 65, "név"])
def test_row_names_are_safe_folder_names(tmp_path: Path, name: str) -> None:
    err = _config_error(tmp_path, f"[tool.device-matrix.devices.{json.dumps(name)}]\npjrt_device = 'CPU'\n")
    assert "bad row name" in err.message and "no '/' or '..'" in (err.tip or "")


@pytest.mark.parametrize(
    "content",
    [b"\xff\xfe[tool]", b"tool = 1\n", b"[tool]\n'device-matrix' = 3\n", b"x = " + b"[" * 5000 + b"]" * 5000],
    ids=["not-utf8", "tool-not-a-table", "table-not-a-table", "deep"],
)
def test_unreadable_pyproject_is_a_config_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "pyproject.toml").write_bytes(content)
    with pytest.raises(ConfigError) as info:
        load(tmp_path, environ={})
    assert str(tmp_path / "pyproject.toml") in info.value.message


def test_a_presence_check_built_in_code_that_cannot_be_split_does_not_decide() -> None:
    from device_matrix.config import Row

    row = Row(name="x", pjrt_device="CPU", presence=('command:"x', "env:", "never"))
    presence = detect(row, environ={})
    assert presence.present is False and presence.reason == "marked never present"


# --- results_dir ----------------------------------------------------------------------


def test_check_results_dir_accepts_a_new_folder_under_a_writable_one(tmp_path: Path) -> None:
    check_results_dir(tmp_path / "results" / "deeper")
    assert not (tmp_path / "results").exists()  # checking creates nothing


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: (p / "results").write_text("x") and p / "results", "is a file"),
        (lambda p: (p / "f").write_text("x") and p / "f" / "results", "which is a file"),
        (lambda p: Path("/proc/results"), "kernel file system"),
        (lambda p: Path("/proc/self/fd"), "kernel file system"),
        (lambda p: Path("/sys"), "kernel file system"),
    ],
    ids=["file", "under-a-file", "proc", "proc-self", "sys"],
)
def test_check_results_dir_refuses(tmp_path: Path, make: Callable[[Path], Path], needle: str) -> None:
    with pytest.raises(EnvironmentProblem, match=needle) as info:
        check_results_dir(make(tmp_path))
    assert "results_dir" in (info.value.tip or "")


def test_check_results_dir_refuses_a_read_only_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # tests may run as root, for whom permission bits do not bind: ask os.access like a user would
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if Path(p) == tmp_path else real_access(p, mode))
    with pytest.raises(EnvironmentProblem, match="read-only"):
        check_results_dir(tmp_path / "results")


@pytest.mark.parametrize("results", ["/proc/device-matrix"])  # #42: a file is a wrong command line, exit 2
def test_run_with_an_unusable_results_dir_exits_5_with_a_tip(
    project: Callable[..., Project], results: str, capsys: pytest.CaptureFixture[str]
) -> None:
    p = project("passing")
    (p.root / "a_file").write_text("x")
    code = main(["--project", str(p.root), "run", "--device", "fixture", "--results", results])
    err = capsys.readouterr().err
    assert code == EXIT_ENVIRONMENT, err
    assert "ERROR" in err and "TIP" in err and "results_dir" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("top", "environ", "source", "key"),
    [
        ('results_dir = "taken"', {}, "pyproject.toml", "results_dir"),
        ('results_dir = "taken/results"', {}, "pyproject.toml", "results_dir"),
        ("", {"DEVICE_MATRIX_RESULTS_DIR": "taken"}, "$DEVICE_MATRIX_RESULTS_DIR", "results_dir"),
        ('suites_dir = "taken"', {}, "pyproject.toml", "suites_dir"),
        ('disable_list = "folder"', {}, "pyproject.toml", "disable_list"),
    ],
    ids=["results-file", "results-under-a-file", "results-env", "suites-file", "disable-list-folder"],
)
def test_a_configured_path_of_the_wrong_kind_is_a_config_error(
    tmp_path: Path, top: str, environ: dict[str, str], source: str, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # a path that names a file where a folder is wanted (or the other way) is the configuration's
    # mistake, exit 3, said with the file (or variable) and the key: not a broken environment (5)
    (tmp_path / "taken").write_text("x")
    (tmp_path / "folder").mkdir()
    (tmp_path / "pyproject.toml").write_text(f"[tool.device-matrix]\n{top}\n" + ROW)
    with pytest.raises(ConfigError) as info:
        load(tmp_path, environ=environ)
    assert source in info.value.message and f"tool.device-matrix.{key}" in info.value.message
    assert info.value.tip and key in info.value.tip
    if not environ:  # through the command line: the documented exit code, an ERROR and a TIP
        assert main(["--project", str(tmp_path), "run", "--device", "x"]) == EXIT_CONFIG
        err = capsys.readouterr().err
        assert "ERROR" in err and "TIP" in err and "Traceback" not in err
        assert not (tmp_path / "results").exists()  # nothing was run or written


@pytest.mark.parametrize(
    "argv",
    [
        ["--reruns", "-1"],
        ["--max-restarts", "-3"],
        ["--reruns", "x"],
        ["--test-timeout", "nan"],
        ["--test-timeout", "0"],
        ["--run-timeout", "inf"],
        ["--run-timeout", "-5"],
    ],
)
def test_bad_numbers_on_the_command_line_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["run", *argv])
    assert info.value.code == EXIT_USAGE
    assert argv[0] in capsys.readouterr().err


# --- run.json ---------------------------------------------------------------------------


def _valid() -> dict[str, Any]:
    return R.record(
        "cpu",
        [
            R.test("s/t.py::test_a", "crashed", crash_id="cpu-1"),
            R.test("s/t.py::test_b", "skipped", skip=R.skip_info(None)),
        ],
        [R.crash("cpu", "s/t.py::test_a", "fp")],
    )


def _mutate(path: list[Any], value: Any) -> dict[str, Any]:
    rec = _valid()
    target: Any = rec
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return rec


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["tests"], {"a": 1}, "run.tests: should be a list"),
        (["tests", 0, "outcome"], "boom", "run.tests[0].outcome"),
        (["tests", 0, "duration"], "1.5", "run.tests[0].duration"),
        (["tests", 0, "nodeid"], None, "run.tests[0].nodeid"),
        (["tests", 1, "skip", "mode"], 3, "run.tests[1].skip.mode"),
        (["tests", 1, "skip", "devices"], "cpu", "run.tests[1].skip.devices"),
        (["crashes", 0, "diagnosis"], KeyError, "run.crashes[0].diagnosis: missing"),
        (["crashes", 0, "diagnosis", "fatal_lines"], [1, 2], "run.crashes[0].diagnosis.fatal_lines[0]"),
        (["crashes", 0, "reruns"], [{"outcome": "passed"}], "run.crashes[0].reruns[0].returncode: missing"),
        (["summary", "passed"], True, "run.summary.passed"),
        (["started_at"], 5, "run.started_at"),
        (["row"], "../evil", "run.row"),
        (["run_url"], KeyError, "run.run_url: missing"),
        (["duration"], KeyError, "run.duration: missing"),
    ],
)
def test_run_json_fields_of_the_wrong_type_or_missing_are_named(
    tmp_path: Path, path: list[Any], value: Any, field: str
) -> None:
    target = tmp_path / "run.json"
    target.write_text(json.dumps(_mutate(path, value)))
    with pytest.raises(ResultsError) as info:
        load_run(target)
    assert str(target) in info.value.message and field in info.value.message
    assert info.value.tip


@pytest.mark.parametrize(
    "content",
    [b"\x00\x01\x02binary\xff", b'{"schema": "device-matrix/run", "row": "caf\xe9"}', b"[" * 100_000, b'{"a": NaN'],
    ids=["binary", "latin-1", "deep", "truncated"],
)
def test_unreadable_run_json_is_a_results_error(tmp_path: Path, content: bytes) -> None:
    target = tmp_path / "run.json"
    target.write_bytes(content)
    with pytest.raises(ResultsError) as info:
        load_run(target)
    assert str(target) in info.value.message


def test_the_valid_record_loads(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps(_valid()))
    assert load_run(tmp_path / "run.json")["row"] == "cpu"


def test_a_record_of_part_of_a_row_with_the_trackers_disables_loads(tmp_path: Path) -> None:
    # #42: `unmatched` is known only once a whole row has collected; a shard's record, a run
    # of --test or one cut short has none, and was refused as malformed (exit 7) before
    record = _valid()
    record["disables"] = {
        "read_at": "2026-11-03T00:00:00+00:00",
        "age_s": 5,
        "fresh": True,
        "applied": 1,
        "note": "read",
    }
    (tmp_path / "run.json").write_text(json.dumps(record))
    assert "unmatched" not in load_run(tmp_path / "run.json")["disables"]


def test_issues_sync_over_only_unreadable_rows_exits_7(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\n")
    (tmp_path / "results" / "cpu").mkdir(parents=True)
    (tmp_path / "results" / "cpu" / "run.json").write_bytes(b"\xff\xfe")
    code = main(["--project", str(tmp_path), "issues", "sync"])
    err = capsys.readouterr().err
    assert code == EXIT_RESULTS and "run.json" in err and "TIP" in err


def test_an_invalid_config_through_the_cli_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pyproject.toml").write_text(ROW + 'presence = ["command:\\"x"]\n')
    assert main(["--project", str(tmp_path), "list"]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "presence" in err and "Traceback" not in err
