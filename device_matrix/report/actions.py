"""The triage model as GitHub Actions annotations: one per crash and failure, each at the
file and line it happened (#20). The triage job and every row job write the same ones.

Every text here comes from a run (nodeids, causes, headlines): it reaches the log only
through :meth:`~device_matrix.output.Output.annotate`, which encodes it as the data of one
annotation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from device_matrix.issues.sync import load_links
from device_matrix.output import Output
from device_matrix.records.schema import RunRecord
from device_matrix.report.markdown import render_rows
from device_matrix.report.model import Triage, build

TITLE_LIMIT = 200


def row_job(records: Sequence[RunRecord], out: Output, results: Path) -> None:
    """What a row job shows of its own rows: a step summary and the annotations, without
    waiting for the triage job (#20), with the issues linked so far. Nothing outside
    GitHub Actions."""
    if not out.github or not records:
        return
    t = build(records, [], load_links(results))
    annotate(t, out)
    out.step_summary(render_rows(t))


def annotate(t: Triage, out: Output) -> None:
    for c in t["crashes"]:
        tests = ", ".join(c["nodeids"][:3])
        repro = c["repro"].splitlines()[0] if c["repro"] else ""
        out.annotate(
            "error",
            f"{c['headline']} on {', '.join(c['rows'])}; tests {tests}; fingerprint {c['fingerprint']}; repro: {repro}",
            title=f"{', '.join(c['rows'])}: crash {c['label']}"[:TITLE_LIMIT],
            file=c["file"],
            line=c["line"],
        )
    for f in t["failures"]:
        out.annotate(
            "error",
            f["cause"] or f["message"] or f"{f['outcome']} on {f['row']}",
            title=_title(f"{f['row']}: {f['outcome']} ", f["nodeid"]),
            # a record written before places were recorded: the test's file, at no line
            file=f["file"] or f["nodeid"].split("::", 1)[0],
            line=f["line"],
        )
    for p in t["problems"]:
        out.annotate("warning", p["problem"], title=f"row {p['row']}")


def _title(head: str, nodeid: str) -> str:
    """``head`` and as much of the end of ``nodeid`` as fits: the test's name is at its end."""
    room = max(TITLE_LIMIT - len(head), 20)
    return head + (nodeid if len(nodeid) <= room else "…" + nodeid[-(room - 1) :])
