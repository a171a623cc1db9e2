"""From an abnormal attempt to a CrashRecord: diagnosis, core file, repro command."""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeAlias

from device_matrix import diagnostics
from device_matrix.child.journal import FORKED_COPY_NOTE
from device_matrix.records.schema import CrashDiagnosis, CrashRecord
from device_matrix.redact import Redactor
from device_matrix.run.attempt import AttemptResult
from device_matrix.run.policy import CrashAt

OUTPUT_TAIL = 2_000_000  # bytes of output a diagnosis reads: the end is where a crash speaks
SCAN_CHUNK = 8 << 20  # bytes of output read at a time when the whole of it is searched
_before, _, _after = FORKED_COPY_NOTE.partition("{nodeid}")
FORKED_COPY_RE = re.compile(re.escape(_before).encode() + rb"(.+?)" + re.escape(_after[:40]).encode())
ET_CORE = 4
# a core -> a folder holding the files it maps at their paths in the image (None: not copied)
ImageFiles: TypeAlias = Callable[[Path], contextlib.AbstractContextManager[Path | None]]


def read_log(log: Path, start: int, end: int | None = None) -> str:
    """The log from ``start`` to ``end`` (its last OUTPUT_TAIL bytes)."""
    try:
        with log.open("rb") as fh:
            fh.seek(start)
            data = fh.read() if end is None else fh.read(max(0, end - start))
    except OSError:
        return ""
    return data[-OUTPUT_TAIL:].decode("utf-8", "replace")


def forked_copies(log: Path, start: int, end: int) -> list[str]:
    """The tests named by a forked copy of the test process as it was ended, in this output."""
    found: dict[str, None] = {}
    overlap = len(FORKED_COPY_NOTE) + 4096  # a note cut by a chunk's end is read whole next time
    try:
        with log.open("rb") as fh:
            pos = start
            while pos < end:
                fh.seek(pos)
                data = fh.read(min(SCAN_CHUNK, end - pos))
                if not data:
                    break
                for match in FORKED_COPY_RE.finditer(data):
                    found[match.group(1).decode("utf-8", "replace")] = None
                if pos + len(data) >= end:
                    break
                pos += max(1, len(data) - overlap)
    except OSError:
        return []
    return list(found)


def output_of(attempt: AttemptResult, log: Path, nodeid: str | None) -> str:
    """The output of ``nodeid`` in this attempt (from its start marker), or all of it."""
    state = attempt.fold.tests.get(nodeid) if nodeid else None
    start = attempt.log_start
    if state is not None and state.seq is not None:
        start = max(start, attempt.offsets.get(state.seq, start))
    return read_log(log, start, attempt.log_end)


def is_core(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(18)
    except OSError:
        return False
    return head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == ET_CORE


def new_cores(folders: Iterable[Path], since: float) -> list[Path]:
    """Core files written in ``folders`` since ``since`` (wall clock), newest first."""
    found: dict[Path, float] = {}
    for folder in folders:
        try:
            entries = list(folder.glob("core*"))
        except OSError:
            continue
        for path in entries:
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            if mtime >= since - 1 and path.is_file() and is_core(path):
                found[path.resolve()] = mtime
    return sorted(found, key=lambda p: found[p], reverse=True)


class CoreReader:
    """gdb reads cores in the background while the run resumes; cores never stay."""

    def __init__(
        self,
        *,
        interpreter: str,
        redactor: Redactor,
        use_gdb: bool,
        keep: bool,
        image_files: ImageFiles | None = None,
    ) -> None:
        self.interpreter = interpreter
        self.redactor = redactor
        self.use_gdb = use_gdb
        self.keep = keep
        # a container's process: its executable and libraries are the image's, not the host's
        self.image_files = image_files
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="device-matrix-gdb")
        self._jobs: list[concurrent.futures.Future[None]] = []

    def attach(self, diagnosis: CrashDiagnosis | None, cores: list[Path]) -> None:
        """The first core goes with ``diagnosis``; any others (descendants') are removed."""
        if not cores:
            return
        first, rest = cores[0], cores[1:]
        if not self.keep:
            for path in rest:
                with contextlib.suppress(OSError):
                    path.unlink()
        if diagnosis is None:
            if not self.keep:
                with contextlib.suppress(OSError):
                    first.unlink()
            return
        self._jobs.append(self._pool.submit(self._read, diagnosis, first))

    def _read(self, diagnosis: CrashDiagnosis, core: Path) -> None:
        if self.image_files is None or not self.use_gdb or shutil.which("gdb") is None:
            # gdb on the host's files under the image's names would print another program's stack
            use_gdb = self.use_gdb and self.image_files is None
            diagnostics.read_core(
                diagnosis, core, executable=self.interpreter, redactor=self.redactor, use_gdb=use_gdb, keep=self.keep
            )
            return
        with self.image_files(core) as sysroot:
            diagnostics.read_core(
                diagnosis,
                core,
                executable=self.interpreter,
                redactor=self.redactor,
                use_gdb=sysroot is not None,
                keep=self.keep,
                sysroot=sysroot,
            )

    def close(self) -> None:
        for job in self._jobs:
            with contextlib.suppress(Exception):
                job.result()
        self._pool.shutdown()


def diagnose(attempt: AttemptResult, at: CrashAt, log: Path, redactor: Redactor) -> CrashDiagnosis:
    try:
        fault_text = attempt.fault.read_text("utf-8", "replace")
    except OSError:
        fault_text = ""
    diagnosis = diagnostics.diagnose(
        returncode=attempt.returncode,
        fault_text=fault_text,
        output_text=output_of(attempt, log, at.nodeid if at.phase == "test" else None),
        redactor=redactor,
        timed_out=at.kind == "timeout",
    )
    if attempt.fold.broken is not None and at.kind == "crash":
        if attempt.ended_by_runner:
            # the signal was the runner's own: no one else stopped it
            diagnosis["hint"] = f"device-matrix ended the process because its journal broke: {attempt.fold.broken}"
        else:
            note = f"the journal broke: {attempt.fold.broken}"
            diagnosis["hint"] = f"{diagnosis['hint']}; {note}" if diagnosis["hint"] else note
    return diagnosis


def crash_record(
    crash_id: str,
    attempt: AttemptResult,
    at: CrashAt,
    diagnosis: CrashDiagnosis,
    repro_text: str,
    *,
    deadline: float | None,
) -> CrashRecord:
    state = attempt.fold.tests.get(at.nodeid) if at.nodeid and at.phase == "test" else None
    when = None
    if state is not None:
        phases = [r.when for r in state.reports if r.sub is None]  # a subtest's report is inside the call
        when = "setup" if not phases else {"setup": "call", "call": "teardown"}.get(phases[-1], "teardown")
    return CrashRecord(
        id=crash_id,
        kind=at.kind,
        phase=at.phase,
        nodeid=at.nodeid,
        when=when,
        attempt=attempt.index,
        diagnosis=diagnosis,
        classification="unknown",
        reruns=[],
        repro=repro_text,
        issue=None,
        deadline=deadline if at.kind == "timeout" else None,
    )
