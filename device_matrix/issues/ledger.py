"""The embedded tracker: a SQLite ledger in the results folder, seeded from the repo.

Works offline and is what a fresh machine uses. Issue ids are stable local numbers,
cited as ``ledger:N``. The project's known issues live in a reviewable TOML file in the
repository (``device-matrix-issues.toml``), which seeds the ledger: its ids and states
win, so closing a seeded issue is an edit to that file. Issues filed later get the next
free id in the SQLite file.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from device_matrix.config import read_array_of_tables
from device_matrix.errors import ConfigError
from device_matrix.issues.base import FINGERPRINT_MARKER, Issue, IssueState

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
        seen.add(entry["id"])
    return entries


class Ledger:
    name = "ledger"

    def __init__(self, path: Path, seed: Path | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path)
        self.db.executescript(SCHEMA)
        if seed is not None:
            self._apply_seed(load_seed(seed))

    def close(self) -> None:
        self.db.close()

    def _apply_seed(self, entries: Sequence[dict[str, Any]]) -> None:
        now = _now()
        with self.db:
            for e in entries:
                body = str(e.get("body", "")).rstrip()
                if e.get("fingerprint"):
                    body += "\n\n" + FINGERPRINT_MARKER.format(e["fingerprint"])
                self.db.execute(
                    """INSERT INTO issues (id, title, body, state, labels, seeded, created, updated)
                       VALUES (?, ?, ?, ?, ?, 1, ?, ?)
                       ON CONFLICT(id) DO UPDATE SET title=excluded.title, body=excluded.body,
                         state=excluded.state, labels=excluded.labels, seeded=1, updated=excluded.updated""",
                    (
                        e["id"],
                        e["title"],
                        body,
                        e.get("state", "open"),
                        json.dumps(e.get("labels", [])),
                        now,
                        now,
                    ),
                )

    def _issue(self, row: tuple[Any, ...]) -> Issue:
        id_, title, body, state, labels = row
        state_value: IssueState = "closed" if state == "closed" else "open"
        return Issue(
            key=f"ledger:{id_}",
            number=int(id_),
            title=title,
            body=body,
            state=state_value,
            url=f"ledger:{id_}",
            labels=json.loads(labels),
        )

    def list_issues(self) -> list[Issue]:
        rows = self.db.execute("SELECT id, title, body, state, labels FROM issues ORDER BY id").fetchall()
        return [self._issue(r) for r in rows]

    def get(self, ref: str) -> Issue | None:
        if not ref.startswith("ledger:"):
            return None
        row = self.db.execute(
            "SELECT id, title, body, state, labels FROM issues WHERE id = ?",
            (int(ref.split(":", 1)[1]),),
        ).fetchone()
        return self._issue(row) if row else None

    def create(self, title: str, body: str, labels: Sequence[str]) -> Issue:
        now = _now()
        with self.db:
            cur = self.db.execute(
                "INSERT INTO issues (title, body, state, labels, created, updated) VALUES (?, ?, 'open', ?, ?, ?)",
                (title, body, json.dumps(list(labels)), now, now),
            )
        new_id = cur.lastrowid
        assert new_id is not None
        issue = self.get(f"ledger:{new_id}")
        assert issue is not None
        return issue

    def comment(self, issue: Issue, body: str) -> None:
        with self.db:
            self.db.execute(
                "INSERT INTO comments (issue_id, body, created) VALUES (?, ?, ?)",
                (issue.number, body, _now()),
            )

    def comments(self, issue: Issue) -> list[str]:
        return [
            r[0]
            for r in self.db.execute("SELECT body FROM comments WHERE issue_id = ? ORDER BY rowid", (issue.number,))
        ]

    def set_state(self, ref: str, state: IssueState) -> None:
        with self.db:
            self.db.execute(
                "UPDATE issues SET state = ?, updated = ? WHERE id = ?",
                (state, _now(), int(ref.split(":", 1)[1])),
            )
