"""The journal's copy (attempts/NN/journal.jsonl): redacted event by event, every line JSON,
and the secrets a child names in its first event never in it (#22)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

import device_matrix.redact as redact
from device_matrix.redact import Redactor
from device_matrix.run.attempt import _JournalReader
from device_matrix.run.journal import Fold


def _copy_of(tmp_path: Path, lines: list[bytes]) -> tuple[list[object], threading.Event]:
    r, w = os.pipe()
    learned = threading.Event()
    copy = tmp_path / "journal.jsonl"
    reader = _JournalReader(r, Fold(), copy, Redactor({}), learned)
    os.write(w, b"".join(line + b"\n" for line in lines))
    os.close(w)
    reader.join(5)
    os.close(r)
    return [json.loads(line) for line in copy.read_text().splitlines()], learned


def test_the_copy_is_json_and_holds_no_secret_the_child_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_REMEMBERED", set())
    secret = 'image-only "secret" 42'
    session = {"e": "session", "n": 1, "pid": 1, "device": "cpu", "t": 1.0, "env": None, "secrets": [secret]}
    start = {
        "e": "start",
        "n": 2,
        "nodeid": f"t.py::test[{secret}]",
        "t": 1.0,
        "meta": {},
        "seq": 1,
        "loc": ["t.py", 1],
    }
    report = {"e": "report", "n": 3, "nodeid": f"t.py::test[{secret}]", "when": "call", "outcome": "failed"}
    report.update(duration=0.1, longrepr=f'assert "token=abc" == {secret!r}', wasxfail=None, skip=None, sub=None)
    copied, learned = _copy_of(tmp_path, [json.dumps(e).encode() for e in (session, start, report)] + [b"not json"])
    assert learned.is_set()
    assert secret not in json.dumps(copied) and "secrets" not in copied[0]  # type: ignore[operator]
    assert copied[1]["nodeid"] == Redactor({}).ident(start["nodeid"])  # type: ignore[index]
    assert copied[2]["longrepr"] == "assert \"token=[redacted]\" == '[redacted]'"  # type: ignore[index]
    assert copied[3] == "not json"  # kept as a JSON string: the copy stays JSON


def test_a_clean_read_is_copied_as_it_came(tmp_path: Path) -> None:
    lines = [b'{"e":"collected","n":1,"nodeids":["t.py::test_a"],"t":1.0}', b'{"e":"end","n":2,"exitstatus":0,"t":2.0}']
    copied, learned = _copy_of(tmp_path, lines)
    assert (tmp_path / "journal.jsonl").read_bytes() == b"\n".join(lines) + b"\n"
    assert learned.is_set() and len(copied) == 2
