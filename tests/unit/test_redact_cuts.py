"""A known secret cut short is still the secret (#30): the part of it beside a cut goes too.

pytest cuts its short summary to the terminal's width with ``...``, its reprs in the middle
with ``...``; other tools and our own views cut with ``…``. Whatever stands of a known
value on either side of such a mark is redacted with the rest of the text.
"""

from __future__ import annotations

import json

import pytest

from device_matrix.redact import MIN_CUT, REDACTED, RULES, Redactor, encodings

SECRET = "Sup3rS3cretValue4XYZW"
ENV = {"PROBE_TOKEN": SECRET}


def _pieces(secret: str) -> list[str]:
    """Every piece of ``secret`` of MIN_CUT characters or more (its starts and its ends)."""
    return [secret[:k] for k in range(MIN_CUT, len(secret))] + [secret[-k:] for k in range(MIN_CUT, len(secret))]


@pytest.mark.parametrize("mark", ["...", "…"])
@pytest.mark.parametrize("k", [MIN_CUT, 9, 17, len(SECRET) - 1])
def test_the_start_of_a_known_value_before_a_cut_is_redacted(mark: str, k: int) -> None:
    text = f"FAILED t.py::test_x - AssertionError: token is {SECRET[:k]}{mark}"
    assert Redactor(ENV).text(text) == f"FAILED t.py::test_x - AssertionError: token is {REDACTED}{mark}"


@pytest.mark.parametrize("mark", ["...", "…"])
def test_the_end_of_a_known_value_after_a_cut_is_redacted(mark: str) -> None:
    # reprlib (and pytest's saferepr) keep both ends of a long string and cut its middle
    text = f"assert '{SECRET[:7]}{mark}{SECRET[-6:]}' == 'x'"
    assert Redactor(ENV).text(text) == f"assert '{REDACTED}{mark}{REDACTED}' == 'x'"
    assert Redactor(ENV).text(f"{mark}{SECRET[-MIN_CUT:]}") == f"{mark}{REDACTED}"


def test_an_encoded_form_cut_short_is_redacted() -> None:
    secret = "s3cret/with spaces+and=signs"
    r = Redactor({"PROBE_TOKEN": secret})
    for form in encodings(secret):
        out = r.text(f"url={form[: len(form) - 3]}...")
        assert out == f"url={REDACTED}...", form


def test_a_piece_too_short_or_away_from_a_cut_is_kept() -> None:
    r = Redactor(ENV)
    short = SECRET[: MIN_CUT - 1]
    assert r.text(f"token is {short}...") == f"token is {short}..."
    assert r.text(f"...{SECRET[-(MIN_CUT - 1) :]}") == f"...{SECRET[-(MIN_CUT - 1) :]}"
    # not beside a mark: the start of a secret may be an ordinary word of the text
    assert r.text(f"{SECRET[:9]} . . . x") == f"{SECRET[:9]} . . . x"
    assert r.text(f"{SECRET[:9]}x...") == f"{SECRET[:9]}x..."
    assert r.text("collecting ... 3 items") == "collecting ... 3 items"


def test_the_longest_piece_beside_a_cut_is_the_one_replaced() -> None:
    # the start of another, shorter secret also ends where this one's piece does
    r = Redactor({"A_TOKEN": SECRET, "B_TOKEN": "ValueXYZ4-other"})
    assert r.text(f"is {SECRET[:15]}...") == f"is {REDACTED}..."


def test_a_cut_redaction_redacts_to_itself() -> None:
    r = Redactor(ENV)
    once = r.text(f"{SECRET[:12]}... and ...{SECRET[-8:]}")
    assert once == f"{REDACTED}... and ...{REDACTED}"
    assert r.text(once) == once


def test_identifiers_keep_their_identity() -> None:
    # an identifier is never cut by pytest; two tests named by pieces stay two
    r = Redactor(ENV)
    assert r.ident(f"t.py::test[{SECRET[:9]}...]") == f"t.py::test[{SECRET[:9]}...]"


def test_every_piece_of_the_secret_before_a_cut_goes() -> None:
    r = Redactor(ENV)
    for piece in _pieces(SECRET):
        for mark in ("...", "…"):
            text = f"x {piece}{mark} y" if SECRET.startswith(piece) else f"x {mark}{piece} y"
            assert piece not in r.text(text), (piece, mark)


def test_a_piece_between_two_cuts_is_one_redaction() -> None:
    # the end of the secret after one mark is also the start of it before the next
    r = Redactor({"PROBE_TOKEN": "abcdabcdabcd"})
    assert r.text("x...abcdabcd...y") == f"x...{REDACTED}...y"


def test_a_record_with_a_cut_secret_is_not_written_as_it_is() -> None:
    # no rule's trigger in it ("token"): only the cut piece tells that it holds a secret
    r = Redactor(ENV)
    record = {"nodeid": "t.py::test_x", "last_output": [f"value is {SECRET[:10]}..."]}
    assert r.clean_json(json.dumps(record)) is False
    assert r.data(record) == {"nodeid": "t.py::test_x", "last_output": [f"value is {REDACTED}..."]}
    assert r.clean_json(json.dumps({"last_output": [f"value is {SECRET[:10]}. . ."]})) is True
    assert Redactor({}).clean_json(json.dumps({"last_output": ["collecting ..."]})) is True


def test_a_piece_and_its_cut_mark_are_a_span_no_line_is_split_in() -> None:
    r = Redactor(ENV)
    text = f"x {SECRET[:10]}... y ...{SECRET[-5:]} z ... w"
    assert r.spans(text) == [(2, 15), (18, 26)]
    assert Redactor({}).spans(text) == []


def test_a_whole_value_beside_a_mark_is_a_span_of_its_own() -> None:
    # a value found whole is its own span; the mark beside it adds none
    r = Redactor(ENV)
    assert r.spans(f"{SECRET}...") == [(0, len(SECRET))]
    assert r.spans(f"...{SECRET}") == [(3, 3 + len(SECRET))]


# a token of each shape cut right after MIN_CUT characters of what follows its start
CUT_TOKENS = {
    "GitHub token": "ghp_Zz09",
    "GitHub fine-grained token": "github_pat_A1_b",
    "GitLab token": "glpat-x_y-",
    "AWS access key id": "ASIAABC1",
    "Slack token": "xoxb-12-4",
    "Hugging Face token": "hf_a1B2",
    "OpenAI-style key": "sk-ab_-",
    "Google OAuth token": "ya29.Q-_q",
}


def test_every_token_shape_says_how_a_cut_token_of_it_starts() -> None:
    assert {rule.name for rule in RULES if rule.cut is not None} == set(CUT_TOKENS)
    assert {rule.name for rule in RULES if rule.where == "everywhere" and rule.cut is None} == {
        "private key",
        "password in a URL",
    }


@pytest.mark.parametrize("name", sorted(CUT_TOKENS))
def test_a_token_cut_shorter_than_its_shape_before_a_mark_is_redacted(name: str) -> None:
    token = CUT_TOKENS[name]
    r = Redactor({})
    for mark in ("...", "…"):
        assert r.text(f"key is {token}{mark} more") == f"key is {REDACTED}{mark} more"
        assert r.text(f"key is {token}{token[-1] * 12}{mark}") == f"key is {REDACTED}{mark}"
        assert r.text(f"key is {token[:-1]}{mark}") == f"key is {token[:-1]}{mark}"  # too short to tell
        assert r.text(f"key is x{token}{mark}") == f"key is x{token}{mark}"  # inside a word
    assert r.text(f"key is {token} ...") == f"key is {token} ..."  # no cut right after it
    assert r.ident(f"t.py::test[{token}...]") == f"t.py::test[{token}...]"
