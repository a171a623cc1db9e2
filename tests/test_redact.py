"""Secrets never leave the process."""

from __future__ import annotations

import pytest

from device_matrix.redact import MIN_LITERAL, REDACTED, Redactor, redact_env, redact_text, secret_values

TOKEN = "ghp_" + "Zz09" * 9


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


def test_spans_are_every_occurrence_of_every_secret_in_order() -> None:
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
