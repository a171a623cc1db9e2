"""The pytest plugin bench/selection.py loads (``-p _replay_plugin``) into the runs it replays.

It writes, to the JSON file $REPLAY_OUT, each test's outcome and seconds (a module that
fails to import counts as an error of its file) and, with $REPLAY_COVER=1, the project
files each test ran: coverage.py with one context per test, only files under the rootdir,
the shape a device-matrix test map holds. It stands alone (pytest and coverage only), so
that a replay of device-matrix's own history never imports two device-matrix packages.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_STATE: dict[str, Any] = {"outcomes": {}, "seconds": {}, "cov": None}


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("REPLAY_COVER") == "1":
        import coverage

        cov = coverage.Coverage(data_file=None, source=[str(config.rootpath)], config_file=False)
        cov.start()
        _STATE["cov"] = cov


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    cov = _STATE["cov"]
    if cov is not None:
        cov.switch_context(item.nodeid)
    yield
    if cov is not None:
        cov.switch_context("")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    outcomes, seconds = _STATE["outcomes"], _STATE["seconds"]
    seconds[report.nodeid] = seconds.get(report.nodeid, 0.0) + report.duration
    if report.failed:
        outcomes[report.nodeid] = "failed"
    elif report.when == "call" or (report.skipped and report.nodeid not in outcomes):
        outcomes.setdefault(report.nodeid, report.outcome)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _STATE["outcomes"][report.nodeid] = "error"


def pytest_unconfigure(config: pytest.Config) -> None:
    out = os.environ.get("REPLAY_OUT")
    if not out:
        return
    tests: dict[str, list[str]] = {}
    cov = _STATE["cov"]
    if cov is not None:
        cov.stop()
        data = cov.get_data()
        root = config.rootpath
        for path in data.measured_files():
            try:
                rel = Path(path).resolve().relative_to(root).as_posix()
            except ValueError:
                continue
            for contexts in data.contexts_by_lineno(path).values():
                for context in contexts:
                    if context:
                        tests.setdefault(context, []).append(rel)
    record = {
        "outcomes": _STATE["outcomes"],
        "seconds": _STATE["seconds"],
        "files": {t: sorted(set(fs)) for t, fs in tests.items()},
    }
    Path(out).write_text(json.dumps(record))
