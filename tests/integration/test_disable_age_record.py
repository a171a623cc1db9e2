"""#33: a run that applies the tracker's disables says in its record how old the list was,
and whether it was read for the run or came from the cache (the tracker unreachable), so
triage can say "disables from a list 3 h old" from run.json alone."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from tests.integration.test_disable_runs import _project

GITHUB = '[tool.device-matrix.tracker]\nkind = "github"\nrepository = "acme/xla"\n'


def _cache(root: Path, read_at: dt.datetime) -> None:
    folder = root / ".device-matrix"
    folder.mkdir()
    disable = {
        "issue": "#7",
        "test": "suites/dis/test_dis.py::test_plain",
        "devices": ["cuda"],
        "since": "2026-11-02",
        "author": "maintainer",
        "unittest_module": None,
        "title": "DISABLED suites/dis/test_dis.py::test_plain",
    }
    data = {"read_at": read_at.isoformat(), "tracker": "github", "disables": [disable], "answered": []}
    (folder / "disables.json").write_text(json.dumps(data))


def test_the_record_says_how_old_the_cached_disable_list_was(tmp_path: Path) -> None:
    p = _project(tmp_path, GITHUB)
    read_at = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) - dt.timedelta(hours=3)
    _cache(p.root, read_at)
    proc = p.run("run", "--device", "cuda")  # no token: the tracker cannot be read, the cache serves
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = p.record("cuda")
    assert {t["nodeid"]: t["outcome"] for t in record["tests"]}["suites/dis/test_dis.py::test_plain"] == "skipped"
    got = record["disables"]
    assert got["read_at"] == read_at.isoformat() and got["fresh"] is False and got["applied"] == 1
    assert 3 * 3600 <= got["age_s"] < 3 * 3600 + 300
    assert "the tracker could not be read" in got["note"] and "read 3 h ago" in got["note"]
    # the row folder's disables.json says the same
    assert json.loads((p.results / "cuda" / "disables.json").read_text())["age_s"] == got["age_s"]


def test_a_run_that_read_the_ledger_says_its_list_was_read_for_it(tmp_path: Path) -> None:
    p = _project(tmp_path)
    assert p.run("issues", "disable", "suites/dis/test_dis.py::test_plain", "--device", "cuda").returncode == 0
    assert p.run("run", "--device", "cuda").returncode == 0
    got = p.record("cuda")["disables"]
    assert got["fresh"] is True and got["applied"] == 1 and got["age_s"] < 300


def test_a_run_that_applied_no_tracker_disable_records_none(tmp_path: Path) -> None:
    p = _project(tmp_path)
    assert p.run("run", "--device", "cuda").returncode == 0
    assert "disables" not in p.record("cuda")
