"""Redaction as a property (#22): whatever tests are called, say and print, every file parses,
two tests stay two, no known secret value is written or sent, and a shard runs what it selects.

Strings are made of pieces that break naive redaction: quotes, backslashes, ``token=``,
``password:``, brackets, ``::``, line breaks, and the values of two secret variables (one
with a quote and a backslash, which JSON escapes, one shaped like a GitHub token).
"""

from __future__ import annotations

import html
import io
import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from device_matrix.cli.triage import run_triage
from device_matrix.issues.ledger import Ledger
from device_matrix.issues.sync import sync
from device_matrix.output import Output
from device_matrix.records import jsonreport
from device_matrix.records.atomic import write_json_atomic
from device_matrix.records.junit import write_junit
from device_matrix.redact import Redactor
from device_matrix.run.state import RunState
from device_matrix.wanted import selected

SECRET_A = "node-secret-value-77"
SECRET_B = 'pa"ss\\word-cafe-9'  # JSON writes it pa\"ss\\\\word: a search of the bytes alone misses it
SECRET_C = "ghp_" + "Prop3rtyT0kenValue" * 2
SECRETS = {"FOO_TOKEN": SECRET_A, "BAR_PASSWORD": SECRET_B, "GH_TOKEN": SECRET_C}
PIECES = [
    '"',
    "'",
    "\\",
    "token=",
    "password:",
    "]",
    "[",
    "::",
    "\n",
    " ",
    "a",
    "b",
    "/",
    "%",
    "&",
    "<A>",
    "<B>",
    "<C>",
]
FILL = {"<A>": SECRET_A, "<B>": SECRET_B, "<C>": SECRET_C}


def _text(min_size: int = 0) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(PIECES), min_size=min_size, max_size=8)


def _fill(parts: list[str]) -> str:
    return "".join(FILL.get(p, p) for p in parts)


def json_strings(value: Any) -> Iterator[str]:
    """Every string of a JSON value, its keys included, as a reader decodes it."""
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack += [*item.keys(), *item.values()]
        elif isinstance(item, list):
            stack += item


def strings_of(path: Path) -> Iterator[str]:
    """Every string a file holds as its format reads it (JSON values and keys, XML
    attributes and text, HTML unescaped), and its raw text."""
    text = path.read_text("utf-8", "replace")
    yield text
    if path.suffix in (".json", ".jsonl"):
        for line in text.splitlines() if path.suffix == ".jsonl" else [text]:
            yield from json_strings(json.loads(line))
    elif path.suffix == ".xml":
        for element in ET.parse(path).iter():
            yield from element.attrib.values()
            yield element.text or ""
    elif path.suffix == ".html":
        yield html.unescape(text)


def assert_clean(root: Path, texts: dict[str, str] | None = None) -> None:
    """Every file under ``root`` (suites aside) parses and holds no secret value in any form."""
    leaked = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "suites" in path.relative_to(root).parts:
            continue
        data = path.read_bytes()
        leaked += [f"{path}: bytes" for s in SECRETS.values() if s.encode() in data]
        if path.suffix in (".sqlite", ".log", ".txt", ".md", ".html", ".json", ".jsonl", ".xml"):
            for value in strings_of(path):
                leaked += [f"{path}: {value[:60]!r}" for s in SECRETS.values() if s in value]
    for name, text in (texts or {}).items():
        leaked += [f"{name}: {s[:8]}" for s in SECRETS.values() if s in text]
    assert leaked == []


@st.composite
def runs(draw: st.DrawFn) -> list[tuple[str, str, str, str]]:
    """(outcome, test id, message, output) of each test of one row."""
    outcome = st.sampled_from(["passed", "failed", "skipped", "crashed"])
    case = st.tuples(outcome, _text(1).map(_fill), _text().map(_fill), _text().map(_fill))
    return draw(st.lists(case, min_size=1, max_size=6))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
@example(
    [
        ("passed", f"token={SECRET_A}]", f'"token=x" {SECRET_B}', f"::warning::{SECRET_C}\n"),
        ("failed", f"token={SECRET_B}]", "password: \\", SECRET_A),
        ("crashed", f'say "{SECRET_C}"', "]::", f"{SECRET_B}\\"),
        ("skipped", SECRET_A, f"{SECRET_A}{SECRET_B}", ""),
    ]
)
def test_the_files_of_any_row_parse_keep_every_test_and_hold_no_secret(cases: list[tuple[str, str, str, str]]) -> None:
    import tempfile

    # in memory where there is some: the history and the ledger are SQLite, which syncs each write
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=shm) as tmp, mock.patch.dict(os.environ, SECRETS):
        folder = Path(tmp) / "results" / "cpu"
        redactor = Redactor()
        state = RunState(redactor)
        raw = [f"s/t.py::test_x[{test_id}]" for _, test_id, _, _ in cases]
        distinct = list(dict.fromkeys(raw))
        for (outcome, _, message, output), nodeid in zip(cases, raw, strict=True):
            skip = {"mode": "skip", "reason": message, "source": "marker", "devices": ["cpu"]}
            state.put(
                nodeid,
                outcome,  # type: ignore[arg-type]
                duration=0.1,
                message=message,
                attempt=1,
                skip=skip if outcome == "skipped" else None,
            )
            state.phases[nodeid] = [{"when": "call", "outcome": "failed", "duration": 0.1, "longrepr": output}]
            state.locations[nodeid] = (nodeid.split("::")[0], 3)
        record = state.to_record(
            row="cpu",
            pjrt_device="CPU",
            status="failed",
            reason=f"row reason {cases[0][2]}",
            mode="local",
            image=None,
            suites=["s"],
            started_at="2026-01-01T00:00:00+00:00",
            duration=1.0,
            run_url=None,
            runner_pid=None,
        )
        record["environment"] = {"variables": redactor.env({f"X_{cases[0][1]}": cases[0][3]})}
        # as the runner writes a row: values redacted once, every file built from them
        clean = redactor.data(record)
        locations = redactor.data(state.locations)
        write_junit(folder / "junit.xml", clean, locations, redactor)
        jsonreport.write(
            folder / "report.json", jsonreport.build(clean, redactor.data(state.phases), locations, folder)
        )
        write_json_atomic(folder / "run.json", clean, redactor)
        (folder / "output.log").write_text(redactor.text("\n".join(c[3] for c in cases)))
        run_triage(folder.parent, folder.parent / "triage", Path(tmp) / "h.sqlite", "run 1", Output(io.StringIO()))
        tracker = Ledger(folder.parent / "ledger.sqlite")
        sync([json.loads((folder / "run.json").read_text())], tracker, apply=True, labels=["dm"], redactor=redactor)
        tracker.close()
        assert_clean(Path(tmp))
        # two tests stay two, in every file that lists them
        on_disk = [t["nodeid"] for t in json.loads((folder / "run.json").read_text())["tests"]]
        assert len(on_disk) == len(set(on_disk)) == len(distinct)
        report = json.loads((folder / "report.json").read_text())
        assert len({t["nodeid"] for t in report["tests"]}) == len(distinct)
        cases_xml = [c for c in ET.parse(folder / "junit.xml").findall(".//testcase") if c.get("file")]
        assert len({(c.get("classname"), c.get("name")) for c in cases_xml}) == len(distinct)
        triage = json.loads((folder.parent / "triage" / "triage.json").read_text())
        assert len(triage["tests"]) == len(distinct)
        # a shard given these nodeids (a plan on disk) selects every one of its tests
        assert sorted(selected(distinct, on_disk, redactor).values()) == list(range(len(distinct)))


SUITE = """\
import json
import os
from pathlib import Path

import pytest

FILL = {"<A>": os.environ["FOO_TOKEN"], "<B>": os.environ["BAR_PASSWORD"], "<C>": os.environ["GH_TOKEN"]}
CASES = json.loads((Path(__file__).parent / "cases.json").read_text())


def build(parts):
    return "".join(FILL.get(p, p) for p in parts)


@pytest.mark.parametrize("case", range(len(CASES)), ids=[build(c["id"]) for c in CASES])
def test_case(case):
    c = CASES[case]
    print(build(c["output"]))
    os.write(2, (build(c["output"]) + "\\n").encode())
    assert not c["fail"], build(c["message"])


@pytest.mark.skip_device("fixture", reason=build(CASES[0]["message"]) or "no reason")
def test_skipped_without_an_issue():
    pass
"""


@st.composite
def suites(draw: st.DrawFn) -> list[dict[str, Any]]:
    case = st.fixed_dictionaries({"id": _text(1), "message": _text(), "output": _text(), "fail": st.booleans()})
    return draw(st.lists(case, min_size=2, max_size=6))
