"""The triage model as GitHub Actions annotations: one per crash and failure, each at the
file and line it happened (#20). The triage job and every row job write the same ones.

Every text here comes from a run (nodeids, causes, headlines): it reaches the log only
through :meth:`~device_matrix.output.Output.annotate`, which encodes it as the data of one
annotation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from device_matrix.links import load_links
from device_matrix.output import Output
from device_matrix.records.schema import RunRecord
from device_matrix.report.markdown import render_rows
from device_matrix.report.model import Triage, build

TITLE_LIMIT = 200


def row_job(records: Sequence[RunRecord], out: Output, results: Path, project_root: Path) -> None:
    """What a row job shows of its own rows: a step summary and the annotations, without
    waiting for the triage job (#20), with the issues linked so far. Nothing outside
    GitHub Actions."""
    if not out.github or not records:
        return
    t = build(records, [], load_links(results))
    annotate(t, out, base=workspace_path(project_root))
    out.step_summary(render_rows(t))


def workspace_path(project_root: Path, environ: Mapping[str, str] | None = None) -> str:
    """The project's folder inside the checkout (``$GITHUB_WORKSPACE``), "" at its root.

    A record's files are relative to the project root; GitHub places an annotation by a
    path relative to the checkout, which differs when the project is a subfolder of it.
    """
    workspace = (os.environ if environ is None else environ).get("GITHUB_WORKSPACE")
    if not workspace:
        return ""
    try:
        inside = project_root.resolve().relative_to(Path(workspace).resolve())
    except (ValueError, OSError):
        return ""
    return "" if inside == Path() else inside.as_posix()


def annotate(t: Triage, out: Output, *, base: str = "") -> None:
    """``base``: the project's folder inside the checkout (:func:`workspace_path`)."""

    def at(file: str | None) -> str | None:
        return f"{base}/{file}" if base and file and not file.startswith("/") else file

    for c in t["crashes"]:
        tests = ", ".join(c["nodeids"][:3])
        repro = c["repro"].splitlines()[0] if c["repro"] else ""
        out.annotate(
            "error",
            f"{c['headline']} on {', '.join(c['rows'])}; tests {tests}; fingerprint {c['fingerprint']}; repro: {repro}",
            title=f"{', '.join(c['rows'])}: crash {c['label']}"[:TITLE_LIMIT],
            file=at(c["file"]),
            line=c["line"],
        )
    for f in t["failures"]:
        out.annotate(
            "error",
            f["cause"] or f["message"] or f"{f['outcome']} on {f['row']}",
            title=_title(f"{f['row']}: {f['outcome']} ", f["nodeid"]),
            # a record written before places were recorded: the test's file, at no line
            file=at(f["file"] or f["nodeid"].split("::", 1)[0]),
            line=f["line"],
        )
    for p in t["problems"]:
        out.annotate("warning", p["problem"], title=f"row {p['row']}")


def _title(head: str, nodeid: str) -> str:
    """``head`` and as much of the end of ``nodeid`` as fits: the test's name is at its end."""
    room = max(TITLE_LIMIT - len(head), 20)
    return head + (nodeid if len(nodeid) <= room else "…" + nodeid[-(room - 1) :])
