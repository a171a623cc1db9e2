"""The rules the documentation lists are the code's (docs/redaction.md, #22)."""

from __future__ import annotations

from pathlib import Path

from device_matrix.redact import FREE_TEXT_KEYS, RULES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "redaction.md"


def test_the_docs_list_every_rule_where_it_applies_and_what_it_matches() -> None:
    lines = DOCS.read_text().splitlines()
    rows = [line for line in lines if line.startswith("| ") and not line.startswith(("| rule", "| known value"))]
    # the docs may set a term in code type; the words are the code's
    assert [row.replace("`", "") for row in rows] == [f"| {r.name} | {r.where} | {r.matches} |" for r in RULES]


def test_the_docs_name_every_key_of_free_text() -> None:
    text = DOCS.read_text()
    assert all(f"`{key}`" in text for key in FREE_TEXT_KEYS)
