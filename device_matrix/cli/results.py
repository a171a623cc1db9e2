"""What more than one command reads from a results folder: its rows' records (``run``
after linking, ``issues sync``, ``triage``) and where each crash of them happened. Here so
that no command loads another command's module (#41)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from device_matrix.errors import ResultsError
from device_matrix.output import Output
from device_matrix.records.merge import has_shards, read_row
from device_matrix.records.schema import RunRecord, load_run


def _own_row(record: RunRecord, row_dir: Path) -> RunRecord:
    """#30: a record copied or moved by hand into another row's folder is not read as either."""
    if record["row"] != row_dir.name:
        raise ResultsError(
            f"{row_dir.name}/run.json is the record of row {record['row']!r}, not of {row_dir.name!r}",
            tip=f"Put it in {record['row']}/ (or rerun the row {row_dir.name}).",
        )
    return record


def load_records(results: Path, out: Output | None = None) -> tuple[list[RunRecord], list[tuple[str, str]]]:
    """Every readable run.json under ``results``; unreadable ones are returned as problems."""
    if not results.is_dir():
        raise ResultsError(
            f"{results}: no such results folder",
            tip="Run a row first (nox -s cpu), or point at the downloaded artifacts.",
        )
    records: list[RunRecord] = []
    problems: list[tuple[str, str]] = []
    try:
        row_dirs = sorted(p for p in results.iterdir() if p.is_dir())
    except OSError as exc:
        raise ResultsError(
            f"{results}: cannot list the results folder ({exc.strerror or exc})",
            tip="Check its permissions, or point at another folder.",
        ) from None
    for row_dir in row_dirs:
        path = row_dir / "run.json"
        sharded = has_shards(row_dir)
        if not path.exists() and not (row_dir / "output.log").exists() and not sharded:
            continue  # not a row folder
        try:
            # a row run as shards (on one host or several) is read as one merged record
            records.append(_own_row(read_row(row_dir), row_dir))
        except ResultsError as exc:
            problems.append((row_dir.name, exc.message))
            if out is not None:
                out.line(f"warning: {exc.message}")
    # artifacts downloaded by actions/download-artifact land one level deeper
    for path in sorted(results.glob("*/*/run.json")):
        found: tuple[str, str] | None  # the row and why its record here is not read
        try:
            rec = load_run(path)
        except ResultsError as exc:
            found = (path.parent.name, exc.message)
        else:
            found = _part_of_a_row(rec, path.relative_to(results))
            if found is None and all(r["row"] != rec["row"] for r in records):
                records.append(rec)
        if found is not None:
            problems.append(found)
            if out is not None:
                out.line(f"warning: {found[1]}")
    return records, problems


def _part_of_a_row(rec: RunRecord, where: Path) -> tuple[str, str] | None:
    """A record found one level deeper (an artifact's) that is a shard's: a part is never its
    row's record (its row and why; None: a whole row's)."""
    part = rec.get("spread")
    if part is None or part["shard"] is None:
        return None
    return rec["row"], (
        f"{where} is the record of shard {part['shard']}/{part['of']} of row {rec['row']!r}, not the row's: "
        "triage the results folder that holds the row's folder, or `device-matrix merge` the shards' folders first"
    )


def crash_placements(records: Sequence[RunRecord], history_path: Path | None, out: Output) -> dict[str, str]:
    """Each crash of these records placed by environment (#25): over the history's runs,
    read-only, and these records."""
    from device_matrix.report.placement import from_records, place

    wanted: dict[str, set[str]] = {}
    for rec in records:
        for c in rec["crashes"]:
            if c["nodeid"]:
                wanted.setdefault(c["diagnosis"]["fingerprint"], set()).add(c["nodeid"])
    if not wanted:
        return {}
    observed = from_records(records, wanted)
    if history_path is not None and history_path.is_file():
        from device_matrix.report.history import History

        def warn(message: str) -> None:
            out.line(f"warning: {message}")

        source = next((src for r in records if (src := r.get("source"))), None)
        history = History.open(history_path, warn, read_only=True)
        try:
            for fp, obs in history.observations(wanted, skip=source).items():
                observed[fp] = [*obs, *observed[fp]]
        finally:
            history.close()
    return {fp: place(fp, obs)["text"] for fp, obs in observed.items()}
