"""The embedded tracker: a SQLite ledger in the project's state folder (``.device-matrix/``,
beside the run history, whatever the results folder is: #42), seeded from the repo.

Works offline and is what a fresh machine uses. Issue ids are stable local numbers,
cited as ``ledger:N``. The project's known issues live in a reviewable TOML file in the
repository (``device-matrix-issues.toml``), which seeds the ledger: its ids and states
win, so closing a seeded issue is an edit to that file. Issues filed later get the next
free id in the SQLite file.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from device_matrix.config import make_state_dir
from device_matrix.errors import ConfigError, TrackerError
from device_matrix.issues.base import FINGERPRINT_MARKER, Cited, Issue, IssueState
from device_matrix.records.atomic import storable_text
from device_matrix.tomlfile import read_array_of_tables

T = TypeVar("T")
BUSY_TIMEOUT = 120.0  # seconds a sync waits for another sync holding the ledger

SCHEMA = """
CREATE TABLE IF NOT EXISTS issues (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('open', 'closed')),
    labels TEXT NOT NULL DEFAULT '[]',
    seeded INTEGER NOT NULL DEFAULT 0,
    created TEXT NOT NULL,
    updated TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS comments (
    issue_id INTEGER NOT NULL REFERENCES issues(id),
    body TEXT NOT NULL,
    created TEXT NOT NULL
);
"""

FINGERPRINT_OK = re.compile(r"[A-Za-z0-9:_-]+")
SEED_KEYS = {"id", "title", "body", "state", "fingerprint", "labels"}


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def load_seed(path: Path) -> list[dict[str, Any]]:
    entries = read_array_of_tables(path, "issue")
    seen: set[int] = set()
    for i, entry in enumerate(entries):
        where = f"{path} [[issue]] #{i + 1}"
        if not isinstance(entry, dict) or set(entry) - SEED_KEYS:
            raise ConfigError("unknown key(s)", source=where, allowed=", ".join(sorted(SEED_KEYS)))
        if not isinstance(entry.get("id"), int) or entry["id"] < 1 or entry["id"] in seen:
            raise ConfigError("needs a unique whole-number id >= 1", source=where, key="id")
        if not isinstance(entry.get("title"), str) or not entry["title"].strip():
            raise ConfigError("needs a title", source=where, key="title")
        if entry.get("state", "open") not in ("open", "closed"):
            raise ConfigError("bad state", source=where, key="state", allowed="open | closed")
        for key in ("body", "fingerprint"):
            if not isinstance(entry.get(key, ""), str):
                raise ConfigError("must be a string", source=where, key=key)
        if entry.get("fingerprint") and not FINGERPRINT_OK.fullmatch(entry["fingerprint"]):
            raise ConfigError("bad fingerprint", source=where, key="fingerprint", allowed="letters, digits, : _ -")
        labels = entry.get("labels", [])
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise ConfigError("must be a list of strings", source=where, key="labels")
        seen.add(entry["id"])
    return entries


def known_ids(seed: Path, ledger: Path) -> tuple[frozenset[int], str]:
    """The ids a ``ledger:N`` may cite, and where they were read from (for a message).

    The seed file in the repository is what every clone knows; the project's ledger adds
    what was filed on this machine, when there is one. Read only: checking a
    reference creates no ledger.
    """
    ids = {int(e["id"]) for e in load_seed(seed)}
    if not ledger.is_file():
        return frozenset(ids), f"{seed.name} (no ledger in {ledger.parent.name}/ yet)"
    try:
        db = sqlite3.connect(ledger.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            ids.update(int(row[0]) for row in db.execute("SELECT id FROM issues"))
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise TrackerError(
            f"{ledger}: the issue ledger cannot be read ({exc})",
            tip=f"Move {ledger} aside: the next run rebuilds it from {seed.name}.",
        ) from None
    return frozenset(ids), f"{seed.name} or {ledger.parent.name}/{ledger.name}"


@dataclass(frozen=True)
class Kept:
    """An issue a ``ledger:N`` may cite, its comments, and whether the seed file holds it."""

    issue: Issue
    comments: list[str]
    seeded: bool
    created: str | None = None  # when the ledger filed it; None: the seed's alone


def read_issues(seed: Path | None, ledger: Path) -> list[Kept]:
    """The seed's issues and those filed in the project's ledger, by id. Read only:
    no ledger is created or seeded (#20)."""
    found: dict[int, Kept] = {}
    for e in load_seed(seed) if seed is not None else []:
        issue = Issue(
            key=f"ledger:{e['id']}",
            number=int(e["id"]),
            title=str(e["title"]),
            body=str(e.get("body", "")),
            state="closed" if e.get("state") == "closed" else "open",
            url=f"ledger:{e['id']}",
            labels=[str(x) for x in e.get("labels", [])],
        )
        found[issue.number] = Kept(issue, [], seeded=True)
    if ledger.is_file():
        try:
            db = sqlite3.connect(ledger.resolve().as_uri() + "?mode=ro", uri=True)
            try:
                rows = db.execute("SELECT id, title, body, state, labels, created FROM issues ORDER BY id").fetchall()
                notes: dict[int, list[str]] = {}
                for issue_id, body in db.execute("SELECT issue_id, body FROM comments ORDER BY rowid"):
                    notes.setdefault(int(issue_id), []).append(str(body))
            finally:
                db.close()
        except sqlite3.Error as exc:
            raise TrackerError(
                f"{ledger}: the issue ledger cannot be read ({exc})",
                tip=f"Move {ledger} aside: the next run rebuilds it from the seed file.",
            ) from None
        for row in rows:
            issue = _issue_of(row[:5])
            seeded = found.get(issue.number)
            # the seed is authoritative for what it holds; the ledger adds the comments and the date
            found[issue.number] = Kept(
                seeded.issue if seeded else issue,
                notes.get(issue.number, []),
                seeded=seeded is not None,
                created=str(row[5]),
            )
    return [found[k] for k in sorted(found)]


def _issue_of(row: Sequence[Any]) -> Issue:
    id_, title, body, state, labels = row
    try:
        label_list = json.loads(labels)
    except (TypeError, ValueError):
        label_list = []
    return Issue(
        key=f"ledger:{id_}",
        number=int(id_),
        title=str(title),
        body=str(body),
        state="closed" if state == "closed" else "open",
        url=f"ledger:{id_}",
        labels=[str(x) for x in label_list] if isinstance(label_list, list) else [],
    )


class Ledger:
    """The SQLite ledger. A sync holds it in one ``BEGIN IMMEDIATE`` transaction, so two
    syncs at once run one after the other and the second links what the first filed."""

    name = "ledger"

    def __init__(self, path: Path, seed: Path | None = None) -> None:
        self.path = path
        self._depth = 0
        entries = load_seed(seed) if seed is not None else []
        try:
            make_state_dir(path.parent)
        except OSError as exc:
            raise TrackerError(
                f"{path.parent}: cannot create the ledger's folder ({exc.strerror})",
                tip=f"Make {path.parent.parent} writable: the ledger is kept in the project's {path.parent.name}/.",
            ) from None
        self.db = self._guard(lambda: sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None))
        self._guard(lambda: self.db.executescript(SCHEMA))
        if entries:
            with self.transaction():
                self._apply_seed(entries)

    def _guard(self, op: Callable[[], T]) -> T:
        """SQLite errors (a corrupt or unreadable file) as a TrackerError naming the file."""
        try:
            return op()
        except sqlite3.Error as exc:
            raise TrackerError(
                f"{self.path}: the issue ledger cannot be used ({exc})",
                tip=f"Move {self.path} aside and run again: it is rebuilt from the seed file "
                "(device-matrix-issues.toml); issues filed only in the ledger are in the moved file.",
            ) from None

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._guard(lambda: self.db.execute("BEGIN IMMEDIATE"))
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self._guard(lambda: self.db.execute("ROLLBACK"))
            raise
        self._depth = 0
        self._guard(lambda: self.db.execute("COMMIT"))

    def _execute(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Cursor:
        # text with a lone surrogate (a nodeid from a file name that is not UTF-8) is kept
        # as its escape: SQLite takes UTF-8 only, and every query goes through here alike
        values = [storable_text(a) if isinstance(a, str) else a for a in args]
        return self._guard(lambda: self.db.execute(sql, values))

    def _apply_seed(self, entries: Sequence[dict[str, Any]]) -> None:
        now = _now()
        for e in entries:
            body = str(e.get("body", "")).rstrip()
            if e.get("fingerprint"):
                body += "\n\n" + FINGERPRINT_MARKER.format(e["fingerprint"])
            self._execute(
                """INSERT INTO issues (id, title, body, state, labels, seeded, created, updated)
                   VALUES (?, ?, ?, ?, ?, 1, ?, ?)
                   ON CONFLICT(id) DO UPDATE SET title=excluded.title, body=excluded.body,
                     state=excluded.state, labels=excluded.labels, seeded=1, updated=excluded.updated""",
                (e["id"], e["title"], body, e.get("state", "open"), json.dumps(e.get("labels", [])), now, now),
            )

    def list_issues(self) -> list[Issue]:
        rows = self._execute("SELECT id, title, body, state, labels FROM issues ORDER BY id").fetchall()
        return [_issue_of(r) for r in rows]

    def find(self, fingerprints: Collection[str]) -> dict[str, list[Issue]]:
        wanted = set(fingerprints)
        out: dict[str, list[Issue]] = {}
        for issue in self.list_issues():
            fp = issue.fingerprint
            if fp in wanted:
                out.setdefault(fp, []).append(issue)
        return out

    def recheck(self, fingerprint: str) -> Issue | None:
        # inside the sync's transaction nobody else can have filed anything
        return None

    def settle(self, issue: Issue) -> Issue:
        return issue  # filed inside the sync's transaction: nobody else can have filed it

    def get(self, ref: str) -> Issue | None:
        if not ref.startswith("ledger:") or not ref[7:].isdigit():
            return None
        row = self._execute(
            "SELECT id, title, body, state, labels FROM issues WHERE id = ?", (int(ref[7:]),)
        ).fetchone()
        return _issue_of(row) if row else None

    def lookup(self, refs: Sequence[str]) -> dict[str, Cited]:
        out: dict[str, Cited] = {}
        for ref in refs:
            if not ref.startswith("ledger:"):
                out[ref] = Cited(ref, "unknown")  # a GitHub issue: the offline ledger cannot say
                continue
            issue = self.get(ref)
            out[ref] = Cited(ref, issue.state, title=issue.title, url=issue.url) if issue else Cited(ref, "missing")
        return out

    def create(self, title: str, body: str, labels: Sequence[str]) -> Issue:
        now = _now()
        with self.transaction():
            cur = self._execute(
                "INSERT INTO issues (title, body, state, labels, created, updated) VALUES (?, ?, 'open', ?, ?, ?)",
                (title, body, json.dumps(list(labels)), now, now),
            )
            issue = self.get(f"ledger:{cur.lastrowid}")
        if issue is None:  # pragma: no cover - the row was inserted in this transaction
            raise TrackerError(f"{self.path}: the new issue vanished")
        return issue

    def comment(self, issue: Issue, body: str) -> None:
        with self.transaction():
            self._execute(
                "INSERT INTO comments (issue_id, body, created) VALUES (?, ?, ?)",
                (issue.number, body, _now()),
            )

    def comments(self, issue: Issue) -> list[str]:
        rows = self._execute("SELECT body FROM comments WHERE issue_id = ? ORDER BY rowid", (issue.number,))
        return [str(r[0]) for r in rows.fetchall()]

    def reopen(self, issue: Issue) -> Issue:
        self.set_state(issue.key, "open")
        return self.get(issue.key) or issue

    def set_state(self, ref: str, state: IssueState) -> None:
        with self.transaction():
            self._execute("UPDATE issues SET state = ?, updated = ? WHERE id = ?", (state, _now(), int(ref[7:])))
