"""Redaction never corrupts a record, merges two tests, or loses a test of a shard (issue #22).

Ordinary test names and assertion messages that look like credentials to a pattern
(``token=q``, ``password:x``) run through real rows: every file the tool writes parses,
two tests stay two, and a test named so runs in its shard.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from device_matrix.records.schema import load_run
from tests.conftest import Project

pytestmark = pytest.mark.slow

IDS = "suites/key_value_ids/test_key_value_ids.py"
FAILURES = "suites/key_value_failures/test_key_value_failures.py"


def _every_file_parses(folder: Path) -> list[Path]:
    """Each JSON, JSON-lines and XML file under ``folder`` read back; the files read."""
    read = []
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".json":
            json.loads(path.read_text("utf-8"))
        elif path.suffix == ".jsonl":
            for line in path.read_text("utf-8").splitlines():
                json.loads(line)
        elif path.suffix == ".xml":
            ET.parse(path)
        else:
            continue
        read.append(path)
    return read


def test_a_quoted_parametrize_id_leaves_run_json_readable(project: Callable[..., Project]) -> None:
    # Seen 1: the value rule ate the backslash of \" in the serialized JSON
    p = project("key_value_ids")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = load_run(p.results / "fixture" / "run.json")
    assert {t["nodeid"] for t in record["tests"]} == {
        f'{IDS}::test_quoted_id[say "token=q"]',
        f"{IDS}::test_header[token=abc]",
        f"{IDS}::test_header[password:x]",
    }
    assert {p.name for p in _every_file_parses(p.results)} >= {"run.json", "report.json", "junit.xml", "journal.jsonl"}
    triage = p.run("triage", "--no-history")
    assert triage.returncode == 0, triage.stdout + triage.stderr
    again = p.run("run", "--device", "fixture", "--resume")
    assert again.returncode == 0, again.stdout + again.stderr
    _every_file_parses(p.results)


def test_two_tests_a_pattern_would_merge_stay_two(project: Callable[..., Project]) -> None:
    # Seen 2: both ids became test_parse_header[token=[redacted] and the pass was lost
    p = project("key_value_failures")
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = load_run(p.results / "fixture" / "run.json")
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert outcomes == {
        f"{FAILURES}::test_parse_header[token=good]": "passed",
        f"{FAILURES}::test_parse_header[token=bad]": "failed",
        f"{FAILURES}::test_message": "failed",
    }
    # the assertion message is free text: the value after token= goes, its quotes stay
    message = next(t["message"] for t in record["tests"] if t["nodeid"].endswith("test_message"))
    assert "token=[redacted]" in message and "bad" not in message
    _every_file_parses(p.results)
    triage = p.run("triage", "--no-history")
    assert triage.returncode == 0, triage.stdout + triage.stderr
    data = json.loads((p.results / "triage" / "triage.json").read_text())
    listed = {t["nodeid"]: t["outcomes"]["fixture"] for t in data["tests"]}
    assert listed == outcomes


def test_an_assertion_naming_a_token_keeps_report_json_and_the_merged_phases(project: Callable[..., Project]) -> None:
    # Seen 1, second half: report.json did not parse, and a merge dropped that shard's phases
    p = project("key_value_failures")
    proc = p.run("run", "--device", "fixture", "--shards", "2")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    _every_file_parses(p.results)
    report = json.loads((p.results / "fixture" / "report.json").read_text())
    (entry,) = [t for t in report["tests"] if t["nodeid"] == f"{FAILURES}::test_message"]
    assert entry["call"]["outcome"] == "failed" and "token=[redacted]" in entry["call"]["longrepr"]
    assert len(report["tests"]) == 3


@pytest.mark.parametrize("parallel", [[], ["--parallel"]])
def test_ids_that_look_like_credentials_run_in_their_shards(
    project: Callable[..., Project], parallel: list[str]
) -> None:
    # Seen 3: plan.json went through redaction and the shards selected ...[token=[redacted]
    p = project("key_value_ids")
    proc = p.run("run", "--device", "fixture", "--shards", "2", *parallel)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = load_run(p.results / "fixture" / "run.json")
    assert {t["outcome"] for t in record["tests"]} == {"passed"} and len(record["tests"]) == 3
    # the split as each shard keeps it: the nodeids as they are, none rewritten
    for k in (1, 2):
        plan = json.loads((p.results / "fixture" / "shards" / str(k) / "shard.json").read_text())
        assert f"{IDS}::test_header[token=abc]" in plan["tests"]
    _every_file_parses(p.results)


PATH_SECRET = "s3cretpath42xx"  # the value of a secret variable, and part of a test file's name


@pytest.mark.parametrize("isolation", ["row", "file"])
def test_a_secret_in_a_test_files_name_is_redacted_and_its_tests_resume(
    project: Callable[..., Project], isolation: str
) -> None:
    p = project("passing", row=f'isolation = "{isolation}"')
    folder = p.root / "suites" / "passing"
    (folder / f"test_{PATH_SECRET}.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    env = {"FOO_TOKEN": PATH_SECRET}
    proc = p.run("run", "--device", "fixture", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_json = p.results / "fixture" / "run.json"
    record = json.loads(run_json.read_text())
    named = [t for t in record["tests"] if "[redacted:" in t["nodeid"]]
    assert len(named) == 2 and all(t["outcome"] == "passed" for t in named)
    # a run cut off before these two ran: --resume runs exactly them, found by the record's names
    for t in named:
        t.update(outcome="not_run", message="not run: interrupted")
    record.update(status="interrupted", reason="interrupted by SIGTERM")
    run_json.write_text(json.dumps(record))
    again = p.run("run", "--device", "fixture", "--resume", env=env)
    assert again.returncode == 0, again.stdout + again.stderr
    resumed = json.loads(run_json.read_text())
    assert [t["outcome"] for t in resumed["tests"] if "[redacted:" in t["nodeid"]] == ["passed", "passed"]
    assert len(resumed["tests"]) == len(record["tests"])
    assert not [f for f in p.results.rglob("*") if f.is_file() and PATH_SECRET.encode() in f.read_bytes()]


def test_after_a_crash_a_shard_resumes_the_tests_its_plan_names_redacted(project: Callable[..., Project]) -> None:
    p = project("secret_ids")
    proc = p.run(
        "run", "--device", "fixture", "--shards", "2", "--parallel", "--reruns", "0", env={"FOO_TOKEN": PATH_SECRET}
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    record = load_run(p.results / "fixture" / "run.json")
    outcomes = sorted(t["outcome"] for t in record["tests"])
    assert outcomes == ["crashed", "passed", "passed", "passed"], record["reason"]  # none lost after the crash
    assert all("[redacted:" in t["nodeid"] for t in record["tests"])
    assert not [f for f in p.results.rglob("*") if f.is_file() and PATH_SECRET.encode() in f.read_bytes()]


def test_sequential_shards_find_their_secret_named_tests_in_the_plan(project: Callable[..., Project]) -> None:
    # the plan names a test as a record does ([redacted:hex]); a later --shard K/N holds its
    # own raw collection against it and selects its part by raw nodeid
    p = project("passing")
    named = p.root / "suites" / "passing" / "test_named.py"
    named.write_text(
        "import os\nimport pytest\n\n\n"
        "@pytest.mark.parametrize('i', range(3), ids=[f\"{os.environ['FOO_TOKEN']}-{i}\" for i in range(3)])\n"
        "def test_named(i):\n    pass\n"
    )
    env = {"FOO_TOKEN": PATH_SECRET}
    for k in (1, 2):
        proc = p.run("run", "--device", "fixture", "--shard", f"{k}/2", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    plan = json.loads((p.results / "fixture" / "shards" / "plan.json").read_text())
    assert sum("[redacted:" in n for n in plan["tests"]) == 3 and len(plan["tests"]) == 43
    ran = [t for k in (1, 2) for t in load_run(p.results / "fixture" / "shards" / str(k) / "run.json")["tests"]]
    assert sorted(t["nodeid"] for t in ran) == sorted(plan["tests"])  # each test once, by the plan's names
    assert {t["outcome"] for t in ran} == {"passed"}
    merged = p.run("merge")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert load_run(p.results / "fixture" / "run.json")["summary"]["passed"] == 43
    assert not [f for f in p.results.rglob("*") if f.is_file() and PATH_SECRET.encode() in f.read_bytes()]
