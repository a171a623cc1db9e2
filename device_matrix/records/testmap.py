"""The map from each test to the project's source files it ran (#34): ``test-map.json``.

A full run that records it (on the base branch) writes one per row beside its run.json; a
pull request's run reads the newest one of its base to choose the tests its change can
break. Files are POSIX paths relative to the project root, each stored once: a test names
them by index, so a map of 5,000 tests over 300 files stays small.

A map is evidence, never a promise: a test it does not know (a new one, one whose
recording was lost) always runs, and a map older than its bound is not used at all
(device_matrix/selection.py decides).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from device_matrix.errors import ResultsError
from device_matrix.records.atomic import write_json_atomic
from device_matrix.redact import Redactor

SCHEMA = "device-matrix/test-map"
VERSION = 1
FILE_NAME = "test-map.json"  # in results/<row>/, beside run.json


@dataclass(frozen=True)
class TestMap:
    """Which project files each test executed, on one row at one commit."""

    __test__ = False  # not a pytest test class, whatever its name

    row: str
    commit: str | None  # the commit the map was recorded on (None: outside git)
    created: str  # when, ISO 8601 UTC
    tests: Mapping[str, frozenset[str]]  # nodeid -> project-relative POSIX paths it ran
    # path -> the lines of it that ran outside every test: its import, conftest.py, collection
    # (what every test may depend on; a test's own files are what ran while it ran)
    imports: Mapping[str, frozenset[int]] = field(default_factory=dict)

    def files(self) -> frozenset[str]:
        """Every file some test of the map ran."""
        return frozenset().union(*self.tests.values()) if self.tests else frozenset()

    def known(self) -> frozenset[str]:
        """Every file the map saw run: in a test, or at import."""
        return self.files() | frozenset(self.imports)


def to_json(m: TestMap) -> dict[str, Any]:
    """The map as the JSON object :func:`from_json` reads: each file once, tests by index."""
    files = sorted(m.files())
    index = {f: i for i, f in enumerate(files)}
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "row": m.row,
        "commit": m.commit,
        "created": m.created,
        "files": files,
        "tests": {t: sorted(index[f] for f in fs) for t, fs in sorted(m.tests.items())},
        "imports": {f: sorted(lines) for f, lines in sorted(m.imports.items())},
    }


def from_json(data: Any, where: str) -> TestMap:
    """A map from its JSON object; ResultsError (naming ``where``) for anything else."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ResultsError(f"{where}: not a device-matrix test map (schema {SCHEMA!r})")
    if data.get("version") != VERSION:
        raise ResultsError(
            f"{where}: test map version {data.get('version')!r}, this device-matrix reads {VERSION}; "
            "record the map again with this version"
        )
    files, tests = data.get("files"), data.get("tests")
    row, commit, created = data.get("row"), data.get("commit"), data.get("created")
    if not (
        isinstance(files, list)
        and all(isinstance(f, str) for f in files)
        and isinstance(tests, dict)
        and isinstance(row, str)
        and (commit is None or isinstance(commit, str))
        and isinstance(created, str)
    ):
        raise ResultsError(f"{where}: a damaged test map (files, tests, row, commit or created is missing or wrong)")
    out: dict[str, frozenset[str]] = {}
    for nodeid, indices in tests.items():
        if not isinstance(indices, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(files) for i in indices
        ):
            raise ResultsError(f"{where}: a damaged test map (the files of {nodeid!r} are not indices into files)")
        out[nodeid] = frozenset(files[i] for i in indices)
    imports = data.get("imports", {})
    if not isinstance(imports, dict) or not all(
        isinstance(lines, list) and all(isinstance(n, int) and not isinstance(n, bool) for n in lines)
        for lines in imports.values()
    ):
        raise ResultsError(f"{where}: a damaged test map (imports are not lists of line numbers)")
    return TestMap(
        row=row,
        commit=commit,
        created=created,
        tests=out,
        imports={str(f): frozenset(lines) for f, lines in imports.items()},
    )


def write(path: Path, m: TestMap, redactor: Redactor | None = None) -> None:
    """Write the map atomically and redacted, as every record (a nodeid may hold a secret)."""
    write_json_atomic(path, to_json(m), redactor)


def read(path: Path) -> TestMap:
    """The map at ``path``; ResultsError when it is missing, not JSON or not a map."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError as exc:
        raise ResultsError(f"{path}: no test map there (a full run with the map on records one)") from exc
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read the test map: {exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ResultsError(f"{path}: the test map is not JSON ({exc}); record it again") from exc
    return from_json(data, str(path))
