"""Why a crash's record has no stack of a kind is said where that stack would be shown: on
the terminal after a run, and in the HTML report (#21: gdb_frames_missing; #39: python_stack_missing)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from device_matrix.cli import print_summary
from device_matrix.config import load
from device_matrix.output import Output
from device_matrix.report import html
from device_matrix.report.model import build
from tests import records as R

MISMATCH = (
    "gdb's stack is not recorded, it would not be the process's: /usr/lib/libx.so.1 is another build "
    "(build-id 3333, the process ran 2222) <libx>"
)
NO_CORE = "no core file: the process was ended by SIGKILL, which writes none"


def _record(**diagnosis: Any) -> dict[str, Any]:
    crash = R.crash("cpu", "t.py::test_x", "f" * 16)
    crash["diagnosis"].update(diagnosis)
    return R.record("cpu", [R.test("t.py::test_x", "crashed", crash_id=crash["id"])], [crash])


def _terminal(tmp_path: Path, record: dict[str, Any]) -> str:
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\n")
    stream = io.StringIO()
    print_summary(Output(stream, environ={}, tty=False), [record], load(tmp_path))  # type: ignore[list-item]
    return stream.getvalue()


def _page(record: dict[str, Any]) -> str:
    return html.render(build([record], [], {}))  # type: ignore[list-item]


def test_the_terminal_says_why_a_crash_has_no_gdb_stack(tmp_path: Path) -> None:
    shown = _terminal(tmp_path, _record(gdb_frames_missing=MISMATCH))
    assert f"      no gdb stack: {MISMATCH}\n" in shown
    # a crash whose frames were recorded, and a record from before the field, say nothing of it
    assert "no gdb stack" not in _terminal(tmp_path, _record(gdb_frames=["f", "g"], gdb_frames_missing=None))
    assert "no gdb stack" not in _terminal(tmp_path, _record())


def test_the_html_report_says_why_a_crash_has_no_gdb_stack_where_its_frames_go() -> None:
    page = _page(_record(gdb_frames_missing=MISMATCH))
    escaped = MISMATCH.replace("'", "&#x27;").replace("<", "&lt;").replace(">", "&gt;")
    assert f"<p><b>gdb (top frames)</b></p><p class='missing'>{escaped}</p>" in page
    assert "<libx>" not in page
    framed = _page(_record(gdb_frames=["dm_fixture::read_shard_header", "main"]))
    assert "<p><b>gdb (top frames)</b></p><pre>dm_fixture::read_shard_header\nmain</pre>" in framed
    assert "class='missing'" not in framed
    assert "gdb (top frames)" not in _page(_record())  # nothing recorded, nothing said: as before


def test_the_html_report_says_why_a_crash_has_no_python_stack() -> None:
    page = _page(_record(python_stack=None, python_stack_missing=NO_CORE))
    assert f"<p><b>Python stack</b></p><p class='missing'>{NO_CORE}</p>" in page
    assert "class='missing'" not in _page(_record())  # the Python stack is there
