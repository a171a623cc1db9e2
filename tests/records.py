"""Run records for tests and benchmarks, shaped exactly as the runner writes them."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from device_matrix.records.schema import SCHEMA, SCHEMA_VERSION, summarize

# each record a run of its own (#41: the history keeps a run once, by its rows' start times)
_STARTS = itertools.count()
_FIRST_START = dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.timezone.utc)


def crash(
    row: str,
    nodeid: str | None,
    fingerprint: str,
    *,
    index: int = 1,
    signal: str = "SIGSEGV",
    python_stack: str = 'Current thread 0x1 (most recent call first):\n  File "t.py", line 3 in test_x',
    last_output: list[str] | None = None,
    kind: str = "crash",
) -> dict[str, Any]:
    return {
        "id": f"{row}-{index}",
        "kind": kind,
        "phase": "test" if nodeid else "exit",
        "nodeid": nodeid,
        "when": "call" if nodeid else None,
        "attempt": 1,
        "diagnosis": {
            "signal": 11,
            "signal_name": signal,
            "hint": "invalid memory access in native code",
            "exit_code": -11,
            "fatal_error": "Segmentation fault",
            "python_stack": python_stack,
            "native_stack": None,
            "native_format": None,
            "fatal_lines": [],
            "terminate": None,
            "gdb_backtrace": None,
            "core_file": None,
            "gdb_frames": [],
            "last_output": last_output or ["collected 3 items"],
            "fingerprint": fingerprint,
            "fingerprint_basis": [signal, "t.py:test_x"],
        },
        "classification": "deterministic",
        "reruns": [],
        "repro": f"cd /p && python -m pytest {nodeid or ''}",
        "issue": None,
    }


def test(
    nodeid: str,
    outcome: str = "passed",
    *,
    skip: dict[str, Any] | None = None,
    crash_id: str | None = None,
    message: str | None = None,
    duration: float = 0.01,
) -> dict[str, Any]:
    return {
        "nodeid": nodeid,
        "outcome": outcome,
        "duration": duration,
        "message": message,
        "skip": skip,
        "crash": crash_id,
        "attempt": 1,
    }


def skip_info(issue: str | None, *, mode: str = "skip", devices: tuple[str, ...] = ("cpu",)) -> dict[str, Any]:
    return {
        "mode": mode,
        "devices": list(devices),
        "issue": issue,
        "reason": "known problem",
        "source": "marker",
        "expires": None,
        "file": "suites/x/test_x.py",
        "line": 10,
    }


def record(
    row: str,
    tests: list[dict[str, Any]],
    crashes: list[dict[str, Any]] | None = None,
    *,
    status: str | None = None,
    reason: str | None = None,
    started: str | None = None,
    run_url: str | None = None,
) -> dict[str, Any]:
    """``started``: when the row's run began; by default a second after the record made before."""
    crashes = crashes or []
    if started is None:
        started = (_FIRST_START + dt.timedelta(seconds=next(_STARTS))).isoformat()
    if status is None:
        outcomes = {t["outcome"] for t in tests}
        status = "crashed" if crashes else ("failed" if outcomes & {"failed", "error", "xpassed"} else "passed")
    return {
        "schema": SCHEMA,
        "version": SCHEMA_VERSION,
        "row": row,
        "pjrt_device": row.upper(),
        "status": status,
        "reason": reason,
        "mode": "local",
        "image": None,
        "suites": ["accumulation"],
        "started_at": started,
        "finished_at": started,
        "duration": 12.5,
        "command": ["device-matrix", "run", "--device", row],
        "repro": f"nox -s {row}",
        "environment": {
            "python": "3.11.7",
            "packages": {"torch": "2.9.0", "torch_xla": "2.9.0"},
            "host": "h",
        },
        "tests": tests,
        "crashes": crashes,
        "attempts": [],
        "summary": summarize(tests),  # type: ignore[arg-type]
        "run_url": run_url,
    }


def source(
    *, pr: int | None, commit: str, ref: str | None = None, run_id: str | None = "1", workflow: str = "ci"
) -> dict[str, Any]:
    """A run's source as Actions gives it: a push to ``ref`` (main), or pull request ``pr``
    (from ``ref``, default feature)."""
    return {
        "commit": commit,
        "head_commit": None,
        "ref": ref or ("feature" if pr else "main"),
        "ref_type": "branch",
        "event": "pull_request" if pr else "push",
        "event_name": "pull_request" if pr else "push",
        "pull_request": pr,
        "base_ref": "main" if pr else None,
        "base_commit": None,
        "repository": "acme/xla",
        "run_id": run_id,
        "run_attempt": 1,
        "workflow": workflow,
        "origin": "actions",
    }
