"""Fuzz: configuration files, run.json and the ledger never end in exit 70 (a bug).

Hypothesis writes odd but parseable input (wrong types, nan, huge and negative numbers,
control characters, unknown keys, bytes that are not UTF-8) and drives the command line
in-process; every answer must be a documented exit code. Bounded examples keep it fast.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from device_matrix.cli import main
from device_matrix.errors import EXIT_INTERNAL
from tests import records as R

DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 7}
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "..", "../evil", "a/b", "env:", 'command:"x', "glob:", "always", "CPU", "\x00", "ledger"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)

ROW_KEYS = [
    "pjrt_device", "image", "container_options", "run_in", "runner_labels", "suites", "install", "install_args",
    "env", "settings", "pytest_args", "test_timeout", "run_timeout", "presence", "enabled",
]  # fmt: skip
TOP_KEYS = [
    "results_dir",
    "suites_dir",
    "container_engine",
    "crash_reruns",
    "max_restarts",
    "disable_list",
    "env_allowlist",
]
TRACKER_KEYS = [
    "kind",
    "repository",
    "token_env",
    "labels",
    "api_url",
    "write_interval",
    "writes_per_hour",
    "on_recurrence",
]


def toml_value(v: Any) -> str:
    if v is None:
        return '"none"'  # TOML has no null
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"


def run_cli(*argv: str) -> int:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(list(argv))
        except SystemExit as exc:
            code = int(exc.code or 0)
    assert code != EXIT_INTERNAL, err.getvalue()
    assert code in DOCUMENTED, (code, err.getvalue())
    assert "Traceback" not in err.getvalue()
    return code


@contextlib.contextmanager
def no_programs() -> Any:
    """Presence checks may name commands: with an empty PATH none of them can run."""
    old = os.environ.get("PATH")
    os.environ["PATH"] = ""
    try:
        yield
    finally:
        if old is not None:
            os.environ["PATH"] = old


@FUZZ
@given(
    top=st.dictionaries(st.sampled_from([*TOP_KEYS, "unknown"]), values, max_size=3),
    row=st.dictionaries(st.sampled_from([*ROW_KEYS, "bogus"]), values, max_size=4),
    tracker=st.dictionaries(st.sampled_from(TRACKER_KEYS), values, max_size=2),
    name=st.one_of(st.sampled_from(["cpu", "tpu", "x", "../evil", "a/b", ""]), st.text(max_size=6)),
)
def test_config_files_never_end_in_exit_70(
    top: dict[str, Any], row: dict[str, Any], tracker: dict[str, Any], name: str
) -> None:
    lines = ["[tool.device-matrix]", *(f"{k} = {toml_value(v)}" for k, v in top.items())]
    lines.append("[tool.device-matrix.tracker]")
    lines += [f"{k} = {toml_value(v)}" for k, v in tracker.items()]
    lines.append(f"[tool.device-matrix.devices.{json.dumps(name)}]")
    lines += [f"{k} = {toml_value(v)}" for k, v in row.items()]
    with tempfile.TemporaryDirectory() as tmp, no_programs():
        Path(tmp, "pyproject.toml").write_text("\n".join(lines) + "\n", "utf-8", errors="surrogatepass")
        run_cli("--project", tmp, "list", "--json")
        run_cli("--project", tmp, "matrix")


def _record_paths(rec: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(rec, dict):
        for k, v in rec.items():
            out += _record_paths(v, (*prefix, k))
    elif isinstance(rec, list):
        for i, v in enumerate(rec):
            out += _record_paths(v, (*prefix, i))
    return out


def _valid() -> dict[str, Any]:
    tests = [
        R.test("s/t.py::test_a", "crashed", crash_id="cpu-1"),
        R.test("s/t.py::test_b", "skipped", skip=R.skip_info(None)),
        R.test("s/t.py::test_c", "skipped", skip=R.skip_info("ledger:1")),
    ]
    return R.record("cpu", tests, [R.crash("cpu", "s/t.py::test_a", "fp")], run_url="https://ci/runs/1")


PATHS = _record_paths(_valid())


@FUZZ
@given(
    edits=st.lists(st.tuples(st.sampled_from(PATHS), st.one_of(values, st.just(KeyError))), min_size=1, max_size=3),
    garbage=st.one_of(st.none(), st.binary(max_size=64)),
)
# found by this test: an environment snapshot whose packages are not a table
@example(edits=[(("environment", "packages"), True)], garbage=None)
def test_run_json_never_ends_in_exit_70(edits: list[tuple[tuple[Any, ...], Any]], garbage: bytes | None) -> None:
    rec: Any = _valid()
    for path, value in edits:
        target = rec
        try:
            for key in path[:-1]:
                target = target[key]
            if value is KeyError:
                del target[path[-1]]
            else:
                target[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit replaced the container
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "pyproject.toml").write_text("[tool.device-matrix]\n")
        (Path(tmp) / "results" / "cpu").mkdir(parents=True)
        data = garbage if garbage is not None else json.dumps(rec, allow_nan=True).encode()
        Path(tmp, "results", "cpu", "run.json").write_bytes(data)
        run_cli("--project", tmp, "issues", "sync")
        run_cli("--project", tmp, "triage", "--no-history")


@FUZZ
@given(
    ledger=st.one_of(
        st.binary(max_size=512),
        st.binary(max_size=256).map(lambda b: b"SQLite format 3\x00" + b),
    ),
    links=st.one_of(
        st.binary(max_size=64), values.map(lambda v: json.dumps({"version": 1, "links": v, "issues": v}).encode())
    ),
)
def test_a_broken_ledger_or_links_file_never_ends_in_exit_70(ledger: bytes, links: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "pyproject.toml").write_text("[tool.device-matrix]\n")
        results = Path(tmp) / "results"
        (results / "cpu").mkdir(parents=True)
        (results / "cpu" / "run.json").write_text(json.dumps(_valid()))
        (results / "ledger.sqlite").write_bytes(ledger)
        (results / "issues.json").write_bytes(links)
        run_cli("--project", tmp, "issues", "sync")
        run_cli("--project", tmp, "triage", "--no-history")
