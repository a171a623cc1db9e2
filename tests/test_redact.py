"""Secrets never leave the process."""

from __future__ import annotations

from device_matrix.redact import REDACTED, Redactor, redact_env, redact_text

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
