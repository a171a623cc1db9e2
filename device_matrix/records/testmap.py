"""The map from each test to the project's source files it ran (#34): ``test-map.json``.

A full run that records it (on the base branch) writes one per row beside its run.json; a
pull request's run reads the newest one of its base to choose the tests its change can
break. Files are POSIX paths relative to the project root, each stored once: a test names
them by index, so a map of 5,000 tests over 300 files stays small. Since version 2 it also
keeps the lines of each file each test ran (``lines``), so that a change to one function's
body runs the tests that ran that function, not every test that ran its file (#34): each
distinct set of lines is stored once, as ranges (``"3-7,9"``), and a test names its file and
its set by index. A map of version 1 (files alone) is read as one without line data.

A map is evidence, never a promise: a test it does not know (a new one, one whose
recording was lost) always runs, and a map older than its bound is not used at all
(device_matrix/selection.py decides).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from device_matrix.errors import ResultsError
from device_matrix.records.atomic import write_json_atomic
from device_matrix.redact import Redactor

SCHEMA = "device-matrix/test-map"
VERSION = 2
READS = (1, VERSION)  # #34: a map of version 1 holds no lines; it selects by files
READ_WORDS = " and ".join(map(str, READS))
FILE_NAME = "test-map.json"  # in results/<row>/, beside run.json

COMMIT_RE = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # a full SHA-1 or SHA-256 object id


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
    # #34: nodeid -> path -> the lines of it the test ran; None: the map holds no line data
    # (version 1, or a part of the run lost it), and a selection goes by files alone
    lines: Mapping[str, Mapping[str, frozenset[int]]] | None = None
    # #40: nodeid -> the project's non-Python files it opened, and folders it listed ("data/");
    # None: the map does not know (a change to any such file runs every test)
    reads: Mapping[str, frozenset[str]] | None = None
    read_at_import: frozenset[str] = frozenset()  # opened or listed by the project outside every test
    # #40: each file of ``reads`` -> the project functions that opened (or listed) it, as
    # "path:first line of its code" ("": code the recording could not name); None: not known
    openers: Mapping[str, frozenset[str]] | None = None
    # #40: with ``reads``, the tests that started a program (a subprocess, a process of
    # multiprocessing's spawn) whose opens no audit hook saw -> why ("": the project's code
    # started one outside every test); and the project functions that started them, as
    # ``openers`` names them ("": code the recording could not name)
    unseen: Mapping[str, str] = field(default_factory=dict)
    starters: frozenset[str] = frozenset()
    # #40: the tests that failed (or errored, crashed, timed out, xpassed) in the run that
    # recorded the map: a selection by it runs them, whatever the history knows
    failed: frozenset[str] = frozenset()

    def files(self) -> frozenset[str]:
        """Every file some test of the map ran."""
        return frozenset().union(*self.tests.values()) if self.tests else frozenset()

    def known(self) -> frozenset[str]:
        """Every file the map saw run: in a test, or at import."""
        return self.files() | frozenset(self.imports)


def ranges(lines: Iterable[int]) -> str:
    """Line numbers as ranges: ``{3, 4, 5, 9}`` -> ``"3-5,9"``."""
    out: list[str] = []
    for n in sorted(set(lines)):
        if out and out[-1].rsplit("-", 1)[-1] == str(n - 1):
            out[-1] = f"{out[-1].split('-', 1)[0]}-{n}"
        else:
            out.append(str(n))
    return ",".join(out)


def from_ranges(text: str) -> frozenset[int]:
    """The line numbers ``text`` (as :func:`ranges` writes it) holds; ValueError for anything else."""
    found: set[int] = set()
    for part in filter(None, text.split(",")):
        first, _, last = part.partition("-")
        start, end = int(first), int(last or first)
        if start < 0 or end < start:
            raise ValueError(part)
        found.update(range(start, end + 1))
    return frozenset(found)


def _lines_json(m: TestMap, index: Mapping[str, int]) -> dict[str, Any]:
    """The map's line data: each distinct set once (``spans``), a test's as [file, set] pairs."""
    if m.lines is None:
        return {}
    spans: dict[str, int] = {}
    tests: dict[str, list[list[int]]] = {}
    for nodeid, per_file in sorted(m.lines.items()):
        pairs = []
        for path, lines in sorted(per_file.items()):
            if path in index:
                text = ranges(lines)
                pairs.append([index[path], spans.setdefault(text, len(spans))])
        tests[nodeid] = pairs
    return {"spans": list(spans), "lines": tests}


def _lines_of(data: Mapping[str, Any], files: Sequence[str], where: str) -> dict[str, dict[str, frozenset[int]]] | None:
    """The line data of a map's JSON object (None: it holds none); ResultsError when damaged."""
    spans, tests = data.get("spans"), data.get("lines")
    if spans is None and tests is None:
        return None
    damaged = ResultsError(f"{where}: a damaged test map (its lines are not sets of line ranges by index)")
    if not isinstance(spans, list) or not isinstance(tests, dict):
        raise damaged
    try:
        sets = [from_ranges(text) for text in spans]
    except (TypeError, ValueError, AttributeError) as exc:
        raise damaged from exc
    out: dict[str, dict[str, frozenset[int]]] = {}
    for nodeid, pairs in tests.items():
        if not isinstance(pairs, list) or not all(_pair(p, len(files), len(sets)) for p in pairs):
            raise damaged
        out[str(nodeid)] = {files[f]: sets[s] for f, s in pairs}
    return out


def _pair(pair: Any, files: int, sets: int) -> bool:
    return (
        isinstance(pair, list)
        and len(pair) == 2
        and all(isinstance(i, int) and not isinstance(i, bool) for i in pair)
        and 0 <= pair[0] < files
        and 0 <= pair[1] < sets
    )


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
        **_lines_json(m, index),
        **_reads_to_json(m),
        "failed": sorted(m.failed),
    }


def _reads_to_json(m: TestMap) -> dict[str, Any]:
    """#40: the files read: each path once, a test's by index, those read outside every test."""
    if m.reads is None:
        return {}
    paths = sorted(frozenset().union(m.read_at_import, *m.reads.values()))
    index = {p: i for i, p in enumerate(paths)}
    return {
        "reads": {
            "files": paths,
            "tests": {n: sorted(index[p] for p in rels) for n, rels in sorted(m.reads.items())},
            "import": sorted(index[p] for p in m.read_at_import),
            **({"openers": {p: sorted(by) for p, by in sorted(m.openers.items())}} if m.openers is not None else {}),
            "unseen": dict(sorted(m.unseen.items())),
            "starters": sorted(m.starters),
            "probes": True,  # every kind of read kept (_reads_of)
        }
    }


def _reads_of(data: Mapping[str, Any], where: str) -> tuple[dict[str, frozenset[str]] | None, frozenset[str]]:
    """A map's files read (None: it holds none); ResultsError when damaged."""
    found = data.get("reads")
    if found is None:
        return None, frozenset()
    damaged = ResultsError(f"{where}: a damaged test map (its reads are not files by index)")
    if not isinstance(found, dict):
        raise damaged
    paths, tests, at_import = found.get("files"), found.get("tests"), found.get("import")
    if not (isinstance(paths, list) and all(isinstance(p, str) for p in paths) and isinstance(tests, dict)):
        raise damaged

    def files(indices: Any) -> frozenset[str]:
        if not isinstance(indices, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(paths) for i in indices
        ):
            raise damaged
        return frozenset(paths[i] for i in indices)

    read = {str(n): files(i) for n, i in tests.items()}, files(at_import)
    probes = found.get("probes")
    if probes not in (None, True):
        raise damaged
    # #40: recorded before Python files read as text, hidden folders, links, the paths a
    # test asked about and the repository above the project were kept: a test may have
    # read a file its reads lack, so no test is known to have read nothing
    return read if probes else (None, frozenset())


def _unseen_of(data: Mapping[str, Any], where: str) -> tuple[dict[str, str], frozenset[str]] | None:
    """#40: a map's tests whose opens were unseen, and who started their programs (None: a map
    recorded before programs started were kept); ResultsError when damaged."""
    reads = data.get("reads")
    unseen, starters = (reads.get("unseen"), reads.get("starters")) if isinstance(reads, dict) else (None, None)
    if unseen is None and starters is None:
        return None
    if not (
        isinstance(unseen, dict)
        and all(isinstance(why, str) for why in unseen.values())
        and isinstance(starters, list)
        and all(isinstance(s, str) for s in starters)
    ):
        raise ResultsError(f"{where}: a damaged test map (its unseen opens are not tests with why, and starters)")
    return {str(n): why for n, why in unseen.items()}, frozenset(starters)


def _openers_of(data: Mapping[str, Any], where: str) -> dict[str, frozenset[str]] | None:
    """#40: a map's openers of the files read (None: it holds none); ResultsError when damaged."""
    reads = data.get("reads")
    found = reads.get("openers") if isinstance(reads, dict) else None
    if found is None:
        return None
    if not isinstance(found, dict) or not all(
        isinstance(by, list) and all(isinstance(o, str) for o in by) for by in found.values()
    ):
        raise ResultsError(f"{where}: a damaged test map (its openers are not lists of functions)")
    return {str(p): frozenset(by) for p, by in found.items()}


def from_json(data: Any, where: str) -> TestMap:
    """A map from its JSON object; ResultsError (naming ``where``) for anything else."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ResultsError(f"{where}: not a device-matrix test map (schema {SCHEMA!r})")
    if data.get("version") not in READS:
        raise ResultsError(
            f"{where}: test map version {data.get('version')!r}, this device-matrix reads {READ_WORDS}; "
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
    if commit is not None and not COMMIT_RE.fullmatch(commit):
        # #40: a map's commit is handed to git: a branch name moves, and "--output=F" is an option
        raise ResultsError(
            f"{where}: the test map's commit {commit[:60]!r} is not a full commit id "
            "(40 or 64 hexadecimal digits); record the map again with a full run (--record-map)"
        )
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
    reads, read_at_import = _reads_of(data, where)
    unseen = _unseen_of(data, where)
    if unseen is None:
        # #40: recorded before the programs a test started were kept: what each test opened
        # may be short of what its programs opened, so no test is known to have read nothing
        reads, read_at_import = None, frozenset()
    failed = data.get("failed", [])
    if not isinstance(failed, list) or not all(isinstance(n, str) for n in failed):
        raise ResultsError(f"{where}: a damaged test map (failed is not a list of nodeids)")
    return TestMap(
        row=row,
        commit=commit,
        created=created,
        tests=out,
        imports={str(f): frozenset(lines) for f, lines in imports.items()},
        lines=_lines_of(data, files, where) if data["version"] >= 2 else None,
        reads=reads,
        read_at_import=read_at_import,
        openers=_openers_of(data, where) if reads is not None else None,
        unseen=unseen[0] if unseen is not None else {},
        starters=unseen[1] if unseen is not None else frozenset(),
        failed=frozenset(failed),
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
