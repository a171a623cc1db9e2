"""Secrets never leave the process; redaction never corrupts what it redacts (#22)."""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import xml.etree.ElementTree as ET
from urllib.parse import quote, quote_plus

import pytest

import device_matrix.redact as redact
from device_matrix.redact import (
    FREE_TEXT_KEYS,
    MIN_LITERAL,
    REDACTED,
    RULES,
    URL_RESERVED,
    Redactor,
    encodings,
    redact_env,
    redact_file,
    redact_text,
    secret_values,
    unterminated_block,
)
from device_matrix.wanted import selected

TOKEN = "ghp_" + "Zz09" * 9
OPAQUE = "opaque-value-1234"

# every rule: a free text it redacts, and that text afterwards (only the secret goes)
RULE_EXAMPLES = {
    "GitHub token": (f"push with {TOKEN} now", f"push with {REDACTED} now"),
    "GitHub fine-grained token": ("t=github_pat_" + "A1" * 20 + ".", f"t={REDACTED}."),
    "GitLab token": ("glpat-" + "x_y-" * 5 + " ok", f"{REDACTED} ok"),
    "AWS access key id": ("key AKIAABCDEFGHIJKLMNOP.", f"key {REDACTED}."),
    "Slack token": ("xoxb-12345-67890-abcdefghij!", f"{REDACTED}!"),
    "Hugging Face token": ("(hf_" + "a1" * 17 + ")", f"({REDACTED})"),
    "OpenAI-style key": ("sk-" + "ab_-" * 6, REDACTED),
    "Google OAuth token": ("ya29." + "Q" * 24 + " x", f"{REDACTED} x"),
    "private key": (
        "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAKC\n-----END RSA PRIVATE KEY-----\nb",
        f"a\n-----BEGIN RSA PRIVATE KEY-----{REDACTED}-----END RSA PRIVATE KEY-----\nb",
    ),
    "password in a URL": ("fetch https://user:s3cret@example.com/x", f"fetch https://user:{REDACTED}@example.com/x"),
    "Authorization header": ("Authorization: Bearer abc.def ok", f"Authorization: Bearer {REDACTED} ok"),
    "key = value": ("password=hunter2hunter2 next", f"password={REDACTED} next"),
}

# what the issue saw rewritten: identifiers a pattern must never touch
IDENTIFIERS = [
    'suites/x/test_x.py::test_quoted_id[say "token=q"]',
    "suites/x/test_x.py::test_parse_header[token=good]",
    "suites/x/test_x.py::test_parse_header[token=bad]",
    "suites/x/test_x.py::test_header[password:x]",
    "suites/x/test_x.py::test_auth[Authorization: Bearer abc]",
    "suites/x/test_x.py::test_cfg[api_key=1-secret=2]",
]

# free text the key = value rule must leave alone: names that only contain a keyword
NOT_CREDENTIALS = [
    "max_tokens=512",
    "num_tokens: 3",
    "tokenizer=bert-base",
    "the secretary: Ann",
    "access_log=/var/log/x",
    "passwords: 3 tried",
    "api_version=2",
    "token",
]


def test_every_rule_has_an_example_and_redacts_only_its_secret() -> None:
    assert set(RULE_EXAMPLES) == {rule.name for rule in RULES}
    for rule in RULES:
        text, redacted = RULE_EXAMPLES[rule.name]
        assert redact_text(text) == redacted, rule.name
        assert any(t in text.lower() for t in rule.triggers), rule.name  # a text without a trigger is skipped


def test_token_shapes_become_placeholders_in_identifiers_and_guesses_do_not() -> None:
    r = Redactor({})
    for rule in RULES:
        text, _ = RULE_EXAMPLES[rule.name]
        ident = r.ident(text)
        if rule.where == "everywhere":
            assert re.search(r"\[redacted:[0-9a-f]{8}\]", ident), rule.name
            assert ident != text and r.ident(ident) == ident  # stable, and no second pass changes it
        else:
            assert ident == text, rule.name


def test_identifiers_are_never_rewritten_by_a_pattern() -> None:
    r = Redactor({})
    for nodeid in IDENTIFIERS:
        assert r.ident(nodeid) == nodeid
        record = {"nodeid": nodeid, "tests": [nodeid], nodeid: 1}
        assert r.data(record) == record


def test_the_key_value_rule_keeps_the_texts_own_syntax() -> None:
    assert redact_text("test_parse_header[token=bad]") == f"test_parse_header[token={REDACTED}]"
    assert redact_text("f(token=abc, x)") == f"f(token={REDACTED}, x)"
    assert redact_text("{'password': 'hunter2', 'n': 1}") == f"{{'password': '{REDACTED}', 'n': 1}}"
    assert redact_text('{"api_key": "k123"}') == f'{{"api_key": "{REDACTED}"}}'
    assert redact_text("GET /x?token=abc&page=2") == f"GET /x?token={REDACTED}&page=2"
    assert redact_text("assert 'token=bad' == ''") == f"assert 'token={REDACTED}' == ''"
    for text in NOT_CREDENTIALS:
        assert redact_text(text) == text


def test_free_text_redaction_is_idempotent() -> None:
    r = Redactor({"A_TOKEN": OPAQUE})
    for text in [*(t for t, _ in RULE_EXAMPLES.values()), f"x {OPAQUE} y", "password: [redacted]"]:
        once = r.text(text)
        assert r.text(once) == once


def test_a_known_value_in_an_identifier_is_a_placeholder_of_its_own() -> None:
    r = Redactor({"A_TOKEN": OPAQUE, "B_SECRET": "another-secret-99"})
    a, b = r.ident(f"t.py::test[{OPAQUE}]"), r.ident("t.py::test[another-secret-99]")
    assert OPAQUE not in a and a != b
    match = re.fullmatch(r"t\.py::test\[\[redacted:([0-9a-f]{6})\]\]", a)
    assert match is not None
    # stable: another process with the same secrets names it the same
    assert Redactor({"X_TOKEN": OPAQUE}).ident(f"t.py::test[{OPAQUE}]") == a
    # the key changes every placeholder (the same key on every host of a run)
    keyed = Redactor({"A_TOKEN": OPAQUE, redact.KEY_VARIABLE: "k" * 32}).ident(f"t.py::test[{OPAQUE}]")
    assert keyed != a and OPAQUE not in keyed and "k" * 32 not in keyed
    # free text shows no hash at all
    assert r.text(f"saw {OPAQUE}") == f"saw {REDACTED}"


def test_a_known_token_has_the_placeholder_its_shape_gives() -> None:
    # a node that knows the token and one that does not name the test the same
    known = Redactor({"GH_TOKEN": TOKEN}).ident(f"t[{TOKEN}]")
    assert known == Redactor({}).ident(f"t[{TOKEN}]")
    assert re.fullmatch(r"t\[\[redacted:[0-9a-f]{8}\]\]", known)


def test_a_collision_of_short_placeholders_takes_a_longer_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_slow_digest", lambda value, key: "abcdef" + ("11" if "one" in value else "22") * 13)
    r = Redactor({"A_TOKEN": "value-one-1", "B_TOKEN": "value-two-2"})
    first, second = r.ident("value-one-1"), r.ident("value-two-2")
    assert first == "[redacted:abcdef]" and second == "[redacted:abcdef22]"
    assert r.ident("value-one-1") == first  # asked again: the same


def test_threads_that_name_one_value_at_once_get_one_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    # the journal's copy and the record are redacted by threads of one run at the same time:
    # a value hashed by both must not look like a collision with itself (two names, one test)
    def slow(value: str, key: bytes) -> str:
        time.sleep(0.05)
        return "abcdef12" * 8

    monkeypatch.setattr(redact, "_slow_digest", slow)
    r = Redactor({"A_TOKEN": "value-one-1"})
    start = threading.Barrier(4)
    names: list[str] = []

    def name() -> None:
        start.wait()
        names.append(r.ident("t.py::test[value-one-1]"))

    threads = [threading.Thread(target=name) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert names == ["t.py::test[[redacted:abcdef]]"] * 4
    assert r.ident("t.py::test[value-one-1]") == names[0]


def test_encoded_forms_of_a_known_value_are_found_and_stay_distinct() -> None:
    secret = 'p@ss "word"/with+signs&more???'  # a quote JSON escapes; ??? base64 writes with / (s: -_)
    r = Redactor({"DB_PASSWORD": secret})
    data = secret.encode()
    texts = {
        "u": quote(secret, safe=""),
        "q": quote(secret),
        "r": quote(secret, safe=URL_RESERVED),
        "p": quote_plus(secret, safe=""),
        "j": json.dumps(secret)[1:-1],
        **{f"b{k}": base64.b64encode(b"x" * k + data + b"tail").decode() for k in range(3)},
        **{f"s{k}": base64.urlsafe_b64encode(b"?" * k + data + b"~~~").decode() for k in range(3)},
    }
    forms = encodings(secret)
    assert set(forms.values()) == {"", *texts}
    for tag, text in texts.items():
        needle = next(f for f, t in forms.items() if t == tag)
        assert needle in text, tag
        assert needle not in r.text(f"got {text} back"), tag
        assert r.ident(f"t[{text}]").count(f"+{tag}]") == 1, tag
    idents = {r.ident(f"t[{text}]") for text in texts.values()} | {r.ident(f"t[{secret}]")}
    assert len(idents) == len(texts) + 1  # every form of the value names its own test


def test_values_shorter_than_eight_characters_are_never_searched_for() -> None:
    # "default" or "hunter2" is a word of ordinary text: redacting it would destroy the text
    r = Redactor({"DB_PASSWORD": "default", "API_TOKEN": "hunter2", "LONG_TOKEN": "hunter22"})
    assert r.text("the default device ran hunter2") == "the default device ran hunter2"
    assert r.text("x hunter22 y") == f"x {REDACTED} y"
    assert r.ident("t[hunter2]") == "t[hunter2]"
    assert encodings("short") == {}


def test_a_variables_name_is_an_identifier_too() -> None:
    r = Redactor({"A_TOKEN": OPAQUE})
    env = r.env({f"MY_{OPAQUE}": "1", "HOME_PASSWORD": "x", "NOTE": f"has {OPAQUE}", "PLAIN": "token=abc"})
    assert not [k for k in env if OPAQUE in k] and OPAQUE not in json.dumps(env)
    assert env["HOME_PASSWORD"] == REDACTED and env["NOTE"] == f"has {REDACTED}"
    assert env["PLAIN"] == f"token={REDACTED}"  # a value is free text


def test_data_redacts_free_text_keys_as_text_and_everything_else_as_identifiers() -> None:
    r = Redactor({"A_TOKEN": OPAQUE})
    nodeid = f"t.py::test[token=abc-{OPAQUE}]"
    record = {
        "nodeid": nodeid,
        "message": "token=abc failed",
        "tests": [nodeid, ("pair", "token=abc")],
        "diagnosis": {"last_output": [f"print {OPAQUE}", "password: x"], "fingerprint": "ab" * 8},
        "count": 3,
        "none": None,
        nodeid: {"reason": f"why {OPAQUE}"},
    }
    out = r.data(record)
    placeholder = r.ident(nodeid)
    assert placeholder.startswith("t.py::test[token=abc-[redacted:") and OPAQUE not in placeholder
    assert out == {
        "nodeid": placeholder,
        "message": f"token={REDACTED} failed",
        "tests": [placeholder, ("pair", "token=abc")],
        "diagnosis": {"last_output": [f"print {REDACTED}", f"password: {REDACTED}"], "fingerprint": "ab" * 8},
        "count": 3,
        "none": None,
        placeholder: {"reason": f"why {REDACTED}"},
    }
    assert r.data(out) == out
    # a value alone is an identifier; a tuple under a key of free text is free text
    assert r.data(TOKEN) == r.ident(TOKEN) and r.data(["t[token=abc]"]) == ["t[token=abc]"]
    assert r.data({"message": ("token=abc",)}) == {"message": (f"token={REDACTED}",)}
    assert {"message", "reason", "longrepr", "last_output"} <= FREE_TEXT_KEYS


def test_clean_json_passes_only_text_no_rule_or_value_could_match() -> None:
    r = Redactor({"A_TOKEN": 'quo"ted-value', "B_TOKEN": "caf\u00e9-value-1"})
    assert r.clean_json(json.dumps({"nodeid": "t.py::test_a", "outcome": "passed"}))
    assert not r.clean_json(json.dumps({"m": 'x quo"ted-value'}))  # escaped in JSON as quo\"ted
    assert not r.clean_json(json.dumps({"m": "caf\u00e9-value-1"}))
    assert not r.clean_json(json.dumps({"m": "\u00e9"}))  # an escape may hide any letter
    for text, _ in RULE_EXAMPLES.values():
        assert not r.clean_json(json.dumps({"message": text}))


def test_selected_finds_a_test_by_its_raw_or_its_recorded_nodeid() -> None:
    r = Redactor({"A_TOKEN": OPAQUE})
    raw = f"t.py::test[{OPAQUE}]"
    wanted = ["t.py::test_b", r.ident(raw)]
    assert selected([raw, "t.py::test_b", "t.py::test_c"], wanted, r) == {raw: 1, "t.py::test_b": 0}
    assert selected([raw, "t.py::test_b"], [raw], r) == {raw: 0}
    assert selected(["t.py::x"], [], r) == {}


def test_selected_redacts_nothing_when_no_nodeid_was_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Redactor, text: str) -> str:
        raise AssertionError("redacted")

    monkeypatch.setattr(Redactor, "ident", refuse)
    assert selected(["a", "b"], ["b"]) == {"b": 0}


def test_an_unterminated_private_key_block_is_found() -> None:
    begin, end = b"-----BEGIN EC PRIVATE KEY-----", b"-----END EC PRIVATE KEY-----"
    assert unterminated_block(b"x\n" + begin + b"\nMHcC\n") == 2
    assert unterminated_block(b"x\n" + begin + b"\nMHcC\n" + end + b"\n") is None
    assert unterminated_block(begin + b"\n" + end + b"\nmore\n" + begin + b"\nAA") == len(begin + end) + 7
    assert unterminated_block(b"no key here") is None
    assert redact_text("k\n-----BEGIN EC PRIVATE KEY-----\nMHcC\nAwEH") == (
        f"k\n-----BEGIN EC PRIVATE KEY-----{REDACTED}"
    )


def test_a_file_from_another_node_is_redacted_by_its_kind() -> None:
    r = Redactor({"NODE_TOKEN": OPAQUE})
    nodeid = f't.py::test["token=q" {OPAQUE}]'
    record = json.dumps({"tests": [{"nodeid": nodeid, "message": f"token=abc {OPAQUE}"}]})
    out = json.loads(redact_file("run.json", record.encode(), r))
    assert out["tests"][0] == {"nodeid": r.ident(nodeid), "message": f"token={REDACTED} {REDACTED}"}
    lines = redact_file("attempts/01/journal.jsonl", f'{{"nodeid":"{OPAQUE}"}}\n{{"e":"end"}}\n'.encode(), r)
    assert [json.loads(line) for line in lines.decode().splitlines()] == [{"nodeid": r.ident(OPAQUE)}, {"e": "end"}]
    xml = (
        "<?xml version='1.0' encoding='UTF-8'?>\n<testsuites><testsuite>"
        f'<testcase name="test[{OPAQUE}]" classname="t"><failure message="token=a {OPAQUE}">'
        f"log {OPAQUE}</failure></testcase></testsuite></testsuites>"
    )
    tree = ET.fromstring(redact_file("junit.xml", xml.encode(), r))
    case = tree.find("./testsuite/testcase")
    assert case is not None and case.get("name") == r.ident(f"test[{OPAQUE}]")
    failure = case.find("failure")
    assert failure is not None and failure.get("message") == f"token={REDACTED} {REDACTED}"
    assert failure.text == f"log {REDACTED}"
    assert redact_file("output.log", f"out {OPAQUE}\n".encode(), r) == f"out {REDACTED}\n".encode()
    broken = f'{{"nodeid": "{OPAQUE}'.encode()  # cut off: redacted as text, never left as it was
    assert OPAQUE.encode() not in redact_file("run.json", broken, r)
    assert OPAQUE.encode() not in redact_file("junit.xml", f"<a>{OPAQUE}".encode(), r)


def test_placeholders_are_the_same_in_every_run() -> None:
    # pinned: a test that runs again, anywhere, with the same secret and key has this name
    assert Redactor({"A_TOKEN": OPAQUE}).ident(OPAQUE) == "[redacted:c8d92d]"
    assert Redactor({"A_TOKEN": OPAQUE, redact.KEY_VARIABLE: "k" * 32}).ident(OPAQUE) == "[redacted:b4582b]"
    assert Redactor({}).ident(TOKEN) == "[redacted:eb556a6a]"
    assert Redactor({redact.KEY_VARIABLE: "k" * 32}).ident(TOKEN) == "[redacted:4cc2db08]"
    # a key or a URL's password from bytes that are not UTF-8 (a lone surrogate) is hashed too
    odd = Redactor({redact.KEY_VARIABLE: "k\udce9" * 8}).ident("https://u:p\udce9ss@h/x")
    assert re.fullmatch(r"https://u:\[redacted:[0-9a-f]{8}\]@h/x", odd)


def test_the_longest_value_at_a_place_is_the_one_replaced() -> None:
    short, long = "abcdefgh", "abcdefgh-tail-1234"
    r = Redactor({"A_TOKEN": short, "B_TOKEN": long})
    assert r.text(f"<{long}> <{short}>") == f"<{REDACTED}> <{REDACTED}>"
    assert r.ident(f"<{long}>") == f"<{r.ident(long)}>" != f"<{r.ident(short)}-tail-1234>"
    assert "tail" not in r.ident(long)


def test_remembered_values_reach_every_redactor_that_takes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redact, "_REMEMBERED", set())
    early = Redactor({})
    redact.remember_secrets({"ROW_TOKEN": "row-secret-1", "ROW_NAME": "not-a-secret-1"})
    redact.remember_values(["x" * 8, "y" * 7, 12345678, "child-secret-1"])  # type: ignore[list-item]
    assert {"row-secret-1", "x" * 8, "child-secret-1"} == redact._REMEMBERED
    for r in (early, Redactor({})):  # made before or after: both scrub them
        assert r.text("row-secret-1 child-secret-1 not-a-secret-1") == f"{REDACTED} {REDACTED} not-a-secret-1"
    alone = Redactor({}, remembered=False)
    assert alone.text("row-secret-1") == "row-secret-1"
    assert redact_text("row-secret-1") == "row-secret-1" and redact_env({"A": "row-secret-1"}) == {"A": "row-secret-1"}


def test_the_environment_is_this_process_unless_one_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DM_TEST_TOKEN", "from-the-environment")
    monkeypatch.setenv(redact.KEY_VARIABLE, "k" * 32)
    assert "from-the-environment" in redact.secret_values()
    r = Redactor()
    assert r.text("x from-the-environment y") == f"x {REDACTED} y"
    assert r.ident(TOKEN) == "[redacted:4cc2db08]"  # the key came from there too
    assert Redactor({}).text("from-the-environment") == "from-the-environment"
    # the functions of a given list leave the environment out
    assert redact_text("from-the-environment") == "from-the-environment"
    assert redact_env({"NOTE": "from-the-environment"}) == {"NOTE": "from-the-environment"}


def test_secret_values_are_of_secret_names_long_enough_longest_first() -> None:
    env = {"A_TOKEN": "b" * 8, "B_TOKEN": "a" * 12, "SHORT_TOKEN": "z" * 7, "HOME": "/home/somebody-long"}
    assert redact.secret_values(env) == ["a" * 12, "b" * 8]
    r = Redactor({}, values=["w" * 8, "v" * 7])
    assert r.text("wwwwwwww vvvvvvv") == f"{REDACTED} vvvvvvv"
    assert redact_text("a abcdefgh b", ["abcdefgh"]) == f"a {REDACTED} b"
    assert redact_env({"NOTE": "has abcdefgh"}, ["abcdefgh"]) == {"NOTE": f"has {REDACTED}"}


def test_a_redaction_is_remembered_for_the_next_file(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = redact._apply

    def counting(text: str, *args: object) -> str:
        calls.append(text)
        return real(text, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(redact, "_apply", counting)
    r = Redactor({})
    edge = "t" * redact._CACHED_LEN
    for text in ("token=abc", "token=abc", f"token={REDACTED}", edge, edge, edge + "t", edge + "t"):
        r.text(text)
    # the second time, the redacted form, and a string at the limit come from memory
    assert calls == ["token=abc", edge, edge + "t", edge + "t"]
    monkeypatch.setattr(redact, "_CACHE_SIZE", 2)
    r = Redactor({})
    for text in ("aaa1", "aaa2", "aaa3"):
        r.ident(text)
    assert len(r._cache) == 1  # full: emptied before the third went in


def test_data_is_the_value_itself_when_nothing_in_it_can_match() -> None:
    r = Redactor({"A_TOKEN": OPAQUE})
    clean = {"tests": [{"nodeid": "t.py::test_a", "outcome": "passed"}]}
    assert r.data(clean) is clean
    dirty = {"tests": [{"nodeid": f"t.py::test_a[{OPAQUE}]"}]}
    assert r.data(dirty) is not dirty and OPAQUE not in json.dumps(r.data(dirty))
    # not JSON as it is (a tuple for a key, a number for a key): walked all the same
    odd = {("k", OPAQUE): OPAQUE, 3: [OPAQUE]}
    assert r.data(odd) == {("k", OPAQUE): r.ident(OPAQUE), 3: [r.ident(OPAQUE)]}


def test_clean_json_needs_all_a_rule_requires() -> None:
    # a run's URL has :// but no @: nothing a URL's password could be
    assert Redactor({}).clean_json(json.dumps({"run_url": "https://github.com/a/b/actions/runs/1"}))
    assert not Redactor({}).clean_json(json.dumps({"run_url": "https://u:p@github.com/a"}))


def test_every_rule_of_a_text_applies_after_another_has() -> None:
    text = f"Authorization: Bearer abc.def then {TOKEN} then password=hunter2 then hf_{'a' * 30}"
    assert (
        redact_text(text)
        == f"Authorization: Bearer {REDACTED} then {REDACTED} then password={REDACTED} then {REDACTED}"
    )


def test_clean_json_looks_for_each_value_exactly_as_json_escapes_it() -> None:
    r = Redactor({"A_TOKEN": 'ab"cdefgh'})
    assert not r.clean_json(json.dumps({"m": 'x ab"cdefgh y'}))
    # an escaped value's neighbours alone are not it
    assert r.clean_json(json.dumps({"m": 'xb"cdefgh'}))
    assert r.clean_json(json.dumps({"m": 'ab"cdefg'}))


def test_each_encoded_form_is_exactly_the_value_encoded() -> None:
    secret = '~~~???>>>"ab c/'  # every alignment's base64 writes + or /: the URL-safe forms differ
    forms = encodings(secret)
    assert forms[quote(secret, safe="")] == "u" and forms[quote_plus(secret)] == "p"
    assert forms[quote(secret)] == "q" and forms[quote(secret, safe=URL_RESERVED)] == "r"
    assert forms[json.dumps(secret)[1:-1]] == "j"
    data = secret.encode()
    for align, first in ((0, 0), (1, 2), (2, 3)):
        last = 8 * (align + len(data)) // 6
        assert forms[base64.b64encode(bytes(align) + data)[first:last].decode()] == f"b{align}"
        assert forms[base64.urlsafe_b64encode(bytes(align) + data)[first:last].decode()] == f"s{align}"
    assert len(forms) == 12
    # a name from a file that is not UTF-8 holds a lone surrogate: still a value, still found
    lone = "caf\udce9-secret-1"
    assert lone in encodings(lone) and Redactor({"A_TOKEN": lone}).text(f"x {lone}") == f"x {REDACTED}"


def test_spans_are_every_occurrence_of_every_secret_in_order() -> None:
    r = Redactor({"MY_TOKEN": "secret-value-1"})
    text = f"a secret-value-1 b secret-value-1 c {TOKEN}"
    first = text.index("secret-value-1")
    second = text.index("secret-value-1", first + 1)
    tok = text.index(TOKEN)
    assert r.spans(text) == [
        (first, first + len("secret-value-1")),
        (second, second + len("secret-value-1")),
        (tok, tok + len(TOKEN)),
    ]
    assert Redactor({"MY_TOKEN": "aaaaaaaa"}).spans("a" * 10) == [(0, 8), (1, 9), (2, 10)]
    assert r.spans("nothing here") == []


def test_a_file_of_each_kind_is_written_back_exactly() -> None:
    r = Redactor({"NODE_TOKEN": OPAQUE})
    pretty = json.dumps({"message": f"m {OPAQUE}", "n": 1}, indent=2)  # lines that are no JSON alone
    assert redact_file("shard.json", pretty.encode(), r) == b'{"message":"m [redacted]","n":1}\n'
    lines = b'{"a": "x y"}\n\n{"message": "token=1"}\n'
    assert redact_file("j.jsonl", lines, r) == b'{"a":"x y"}\n{"message":"token=[redacted]"}\n'
    assert redact_file("bad.log", b"\xff" + OPAQUE.encode(), r) == "\ufffd[redacted]".encode()
    xml = f"<a><b>{OPAQUE}</b>tail {OPAQUE}</a>".encode()
    assert redact_file("r.xml", xml, r) == (
        b'<?xml version="1.0" encoding="utf-8"?>\n<a><b>[redacted]</b>tail [redacted]</a>'
    )
    dtd = f"<!DOCTYPE a [<!ENTITY e '{OPAQUE}'>]><a>&e;</a>".encode()
    assert redact_file("r.xml", dtd, r) == b"<!DOCTYPE a [<!ENTITY e '[redacted]'>]><a>&e;</a>"  # never expanded


def test_a_secret_that_is_a_word_of_the_record_leaves_its_fields_alone() -> None:
    r = Redactor({"ODD_TOKEN": "duration"})
    record = {"duration": 1.5, "message": "took a duration of 2s", "tests": {"t.py::duration": 1}}
    out = r.data(record)
    assert out["duration"] == 1.5 and out["message"] == f"took a {REDACTED} of 2s"
    assert list(out["tests"]) == [r.ident("t.py::duration")] != ["t.py::duration"]


# --- as it was ---------------------------------------------------------------------------


def test_value_patterns() -> None:
    for secret in (
        TOKEN,
        "github_pat_" + "A1" * 20,
        "AKIA" + "ABCDEFGHIJKLMNOP",
        "xoxb-12345-67890-abcdefghij",
        "hf_" + "a" * 34,
    ):
        out = redact_text(f"before {secret} after")
        assert secret not in out and REDACTED in out and out.startswith("before ")


def test_key_value_and_authorization_forms() -> None:
    out = redact_text("password=hunter2hunter2 api_key: abcdef123456 Authorization: token abc.def")
    assert "hunter2" not in out and "abcdef123456" not in out and "abc.def" not in out
    assert "password=" in out


def test_url_credentials() -> None:
    out = redact_text("fetching https://user:s3cretpass@example.com/x")
    assert "s3cretpass" not in out and "https://user:" in out and "@example.com" in out


def test_env_by_name_and_known_values() -> None:
    env = {
        "GITHUB_TOKEN": "opaque-value-1234",
        "PJRT_DEVICE": "CPU",
        "NOTE": "uses opaque-value-1234",
    }
    r = Redactor(env)
    cleaned = r.env(env)
    assert cleaned["GITHUB_TOKEN"] == REDACTED
    assert cleaned["PJRT_DEVICE"] == "CPU"
    assert "opaque-value-1234" not in cleaned["NOTE"]
    assert "opaque-value-1234" not in r.text("log line: opaque-value-1234")
    assert redact_env({"AWS_SECRET_ACCESS_KEY": "x"})["AWS_SECRET_ACCESS_KEY"] == REDACTED


def test_secrets_come_from_the_process_environment_when_none_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DM_TEST_TOKEN", "from-the-environment")
    assert "from-the-environment" in secret_values()
    assert Redactor().text("x from-the-environment y") == f"x {REDACTED} y"
    # an explicit mapping replaces the environment, it does not add to it
    assert "from-the-environment" not in secret_values({"OTHER_TOKEN": "explicit-value"})


def test_only_secret_names_with_long_enough_values_count() -> None:
    env = {
        "API_TOKEN": "x" * MIN_LITERAL,  # exactly the minimum: searched for
        "SHORT_TOKEN": "y" * (MIN_LITERAL - 1),  # one less: too short to search for literally
        "HOME": "/home/somebody-long",  # not a secret name
    }
    assert secret_values(env) == ["x" * MIN_LITERAL]


def test_longer_secrets_are_replaced_first_so_no_tail_is_left() -> None:
    short, long = "abcdefgh", "abcdefgh-tail-1234"
    env = {"A_TOKEN": short, "B_TOKEN": long, "C_TOKEN": "mid-length-1"}
    assert secret_values(env) == [long, "mid-length-1", short]
    assert Redactor(env).text(f"<{long}> <{short}>") == f"<{REDACTED}> <{REDACTED}>"


def test_extra_secrets_need_the_minimum_length() -> None:
    assert redact_text("a abcdefgh b", ["abcdefgh"]) == f"a {REDACTED} b"
    assert redact_text("a abcdefg b", ["abcdefg"]) == "a abcdefg b"
    assert redact_text("a b", [""]) == "a b"
    assert redact_text("", ["abcdefgh"]) == ""


def test_prefix_and_suffix_around_a_secret_are_kept_exactly() -> None:
    assert redact_text("password=hunter2hunter2 next") == f"password={REDACTED} next"
    assert redact_text("Authorization: Bearer abc.def ok") == f"Authorization: Bearer {REDACTED} ok"
    assert redact_text("see https://user:s3cret@example.com/x") == f"see https://user:{REDACTED}@example.com/x"
    assert redact_text(f"tok {TOKEN} end") == f"tok {REDACTED} end"


def test_environment_redaction_by_name_and_by_value() -> None:
    env = {"Z_PASSWORD": "short", "NOTE": "has opaque-value-1 and password=abc", "A": "plain"}
    out = redact_env(env, ["opaque-value-1"])
    assert out == {"A": "plain", "NOTE": f"has {REDACTED} and password={REDACTED}", "Z_PASSWORD": REDACTED}
    assert list(out) == ["A", "NOTE", "Z_PASSWORD"]


def test_spans_of_an_environments_secret_and_a_token_are_in_order() -> None:
    env = {"MY_TOKEN": "secret-value-1"}
    text = f"a secret-value-1 b secret-value-1 c {TOKEN}"
    first = text.index("secret-value-1")
    second = text.index("secret-value-1", first + 1)
    tok = text.index(TOKEN)
    assert Redactor(env).spans(text) == [
        (first, first + len("secret-value-1")),
        (second, second + len("secret-value-1")),
        (tok, tok + len(TOKEN)),
    ]


def test_spans_find_overlapping_occurrences() -> None:
    env = {"MY_TOKEN": "aaaaaaaa"}
    assert Redactor(env).spans("a" * 10) == [(0, 8), (1, 9), (2, 10)]
    assert Redactor(env).spans("nothing here") == []


def test_a_known_value_url_quoted_as_urllib_and_requests_leave_slashes_is_found() -> None:
    # urllib.parse.quote keeps "/" by default and a URL re-quoted keeps its reserved
    # characters: the value stands there, readable, with only its other characters escaped
    secret = 's3cr3t/Valu"e!9 x:y@z'
    r = Redactor({"PROBE_TOKEN": secret})
    for text in (quote(secret), quote(secret, safe="!#$&'()*+,/:;=?@[]~")):
        assert "/" in text and secret not in text
        assert r.text(f"GET http://h/?q={text} 200") == f"GET http://h/?q={REDACTED} 200", text
        assert text not in r.ident(f"test_url[{text}]")
    assert r.ident(f"t[{quote(secret)}]") != r.ident(f"t[{secret}]")  # a form of its own, as every form
