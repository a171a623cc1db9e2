"""The row's results folder: where each file of a run goes, and what a test took from it.

``results/<row>/`` (or a shard's ``results/<row>/shards/K/``) holds ``run.json``,
``junit.xml``, ``report.json``, ``output.log`` and ``attempts/NN/`` (each attempt's
journal copy and faulthandler file). A write that fails is an
:class:`~device_matrix.errors.EnvironmentProblem` (exit 5), never a traceback. Tests run
in the same file system: one may delete the folder, its log or an attempt's folder
while the run goes on; the run takes its lock again and the record says what was lost.

The folder is part of a run's plan, a value (:class:`RowFolder`: where each file goes); what
the run holds of it as it goes (its lock, its attempts' folders, the evidence lost) is the
run's state (:class:`FolderState`, #41).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from device_matrix.errors import EnvironmentProblem
from device_matrix.records import jsonreport
from device_matrix.records.atomic import redacted_json, write_text_atomic
from device_matrix.records.junit import junit_xml
from device_matrix.records.schema import RunRecord
from device_matrix.redact import Redactor
from device_matrix.run.journal import thin_copies
from device_matrix.run.lock import RowLock, identity
from device_matrix.run.state import RunState

RUN_FILE = "run.json"
LOG_FILE = "output.log"
ATTEMPTS_DIR = "attempts"
REPORT_FILES = ("junit.xml", "report.json")  # written from the record at the end of a run

Identities = tuple[tuple[int, int] | None, tuple[int, int] | None]


@dataclass(frozen=True)
class RowFolder:
    """Where the files of one run of a row go (a value of the run's plan: nothing changes it)."""

    path: Path
    row: str

    @property
    def log(self) -> Path:
        return self.path / LOG_FILE

    def unwritable(self, exc: OSError) -> EnvironmentProblem:
        """The row's results folder refused a write (exit 5)."""
        return EnvironmentProblem(
            f"cannot write the results of row {self.row!r} in {self.path}: {exc.strerror or exc}",
            tip="Free space or make the results folder writable, or pick another with --results.",
        )

    def attempt(self, index: int) -> Path:
        """Attempt ``index``'s own folder (made by the attempt)."""
        return self.path / ATTEMPTS_DIR / f"{index:02d}"

    def clear_reports(self) -> None:
        """The last run's junit.xml and report.json: a run that has not ended has none."""
        for name in REPORT_FILES:
            (self.path / name).unlink(missing_ok=True)

    def clear_files(self, *, keep_attempts: bool) -> None:
        """The last run's files, but its record; its attempts and log too unless resumed."""
        try:
            self.clear_reports()
            if not keep_attempts:
                shutil.rmtree(self.path / ATTEMPTS_DIR, ignore_errors=True)
                self.log.write_bytes(b"")
        except OSError as exc:
            raise self.unwritable(exc) from exc

    def write(
        self, record: RunRecord, state: RunState, project_root: Path, redactor: Redactor, *, final: bool
    ) -> RunRecord:
        """``run.json``; with ``final``, junit.xml and report.json first (a run that ended).

        The record's values are redacted once (#22) and every file is built from them: what
        a report cuts out of a nodeid is what the record's nodeid shows. Returns that record.
        """
        record, text = redacted_json(record, redactor)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            if final:
                locations = redactor.data(state.locations)
                write_text_atomic(self.path / "junit.xml", junit_xml(record, locations))
                jsonreport.write(
                    self.path / "report.json",
                    jsonreport.build(record, redactor.data(state.phases), locations, project_root),
                )
            write_text_atomic(self.path / RUN_FILE, text + "\n")
        except OSError as exc:
            raise self.unwritable(exc) from exc
        if final:
            # #32: each traceback once: the journal copies keep what the record does not hold
            thin_copies(self.path / ATTEMPTS_DIR, record)
        return record

    def identities(self) -> Identities:
        """The folder's and the log's identities before an attempt, for :meth:`FolderState.check`."""
        return identity(self.path), identity(self.log)


@dataclass(eq=False)
class FolderState:
    """What a run holds of its folder as it goes (#41: the run's state, never its plan): the
    lock, its attempts' folders by index, and the evidence a test deleted while it ran."""

    folder: RowFolder
    lock: RowLock | None = None  # held by the run while it runs
    lost: list[str] = field(default_factory=list)  # evidence a test deleted while the run went on
    attempts: dict[int, Path] = field(default_factory=dict)  # this run's attempt folders, by index

    def attempt(self, index: int) -> Path:
        """Attempt ``index``'s own folder (made by the attempt), watched from now on."""
        self.attempts[index] = folder = self.folder.attempt(index)
        return folder

    def lost_reason(self, reason: str | None) -> str | None:
        """``reason`` with what the record cannot show any more said after it."""
        if not self.lost:
            return reason
        lost = "evidence " + "; ".join(self.lost)
        return f"{reason}; {lost}" if reason else lost

    def check(self, index: int, before: Identities) -> str | None:
        """What a test deleted while attempt ``index`` ran (None: nothing); the lock is taken again.

        The lock first, before a second run can start beside this one.
        """
        folder, log = before
        folder_path = self.folder.path
        lost = []
        try:
            if folder is not None and identity(folder_path) != folder:
                lost.append(f"the results folder {folder_path.name}/")
            if self.lock is not None and not self.lock.held():
                self.lock.take()
                lost.append("its lock (taken again)")
            if log is not None and identity(self.folder.log) != log:
                lost.append("output.log (the output until then)")
            for k, path in self.attempts.items():
                name = f"{ATTEMPTS_DIR}/{k:02d}"
                if not path.is_dir() and not any(name in note for note in self.lost):
                    lost.append(f"{name} (journal copy, faulthandler stacks)")
            folder_path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self.folder.unwritable(exc) from exc
        if not lost:
            return None
        note = f"deleted while attempt {index} ran: {', '.join(lost)}"
        self.lost.append(note)
        return note
