"""Secrets never leave the process: redact by variable name and by value pattern.

Everything the tool writes (run records, logs copied into reports, issue bodies) or
sends (issue tracker requests) goes through :func:`redact_text` or
:func:`redact_env` first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

REDACTED = "[redacted]"

SECRET_NAME_RE = re.compile(
    r"(TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|AUTH|COOKIE|SESSION_?ID|_KEY$|^KEY$)",
    re.IGNORECASE,
)

# Value shapes of well-known credentials, and key=value / Authorization forms, each with
# the literal text (lower case) that any match contains: a pattern whose every trigger is
# absent from a text cannot match it, and the scan is skipped (logs are mostly clean).
SECRET_VALUE_RULES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = (
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,255}\b"), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,255}\b"), ("github_pat_",)),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b"), ("glpat-",)),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), ("akia", "asia")),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"), ("xox",)),
    (re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"), ("hf_",)),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{20,}\b"), ("sk-",)),
    (re.compile(r"\bya29\.[A-Za-z0-9_-]{20,}\b"), ("ya29.",)),
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL),
        ("private key-----",),
    ),
    (re.compile(r"(?i)\b(authorization\s*:\s*(?:bearer|token|basic)\s+)[^\s'\"]+"), ("authorization",)),
    (
        re.compile(
            r"(?i)\b((?:[A-Z0-9_]*(?:token|secret|password|passwd|api[_-]?key|access[_-]?key))\s*[=:]\s*)"
            r"(?!\[redacted\])[^\s'\",;]+"
        ),
        ("token", "secret", "password", "passwd", "api", "access"),
    ),
    (re.compile(r"(?i)(https?://[^/\s:@]+:)[^@\s/]+(@)"), ("://",)),
)
SECRET_VALUE_RES: tuple[re.Pattern[str], ...] = tuple(pattern for pattern, _ in SECRET_VALUE_RULES)

# Values shorter than this are not searched for literally (too many false hits).
MIN_LITERAL = 8


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME_RE.search(name))


# secrets this process learned besides its environment (a row's own variables in the
# configuration): every Redactor scrubs them, whenever it was made
_REMEMBERED: set[str] = set()


def remember_secrets(environ: Mapping[str, str]) -> None:
    """Scrub the secret-looking values of ``environ`` everywhere from now on."""
    _REMEMBERED.update(v for k, v in environ.items() if is_secret_name(k) and len(v) >= MIN_LITERAL)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables, to be scrubbed wherever they appear."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_LITERAL}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, extra_secrets: Iterable[str] = ()) -> str:
    """Remove credentials from free text (logs, stacks, messages)."""
    if not text:
        return text
    out = text
    for value in extra_secrets:
        if value and len(value) >= MIN_LITERAL:
            out = out.replace(value, REDACTED)
    lower = out.lower()
    for pattern, triggers in SECRET_VALUE_RULES:
        if not any(t in lower for t in triggers):
            continue
        if pattern.groups:
            out = pattern.sub(
                lambda m: (m.group(1) or "") + REDACTED + (m.group(2) if m.lastindex and m.lastindex >= 2 else ""),
                out,
            )
        else:
            out = pattern.sub(REDACTED, out)
    return out


def redact_env(env: Mapping[str, str], extra_secrets: Iterable[str] = ()) -> dict[str, str]:
    extra = list(extra_secrets)
    return {k: (REDACTED if is_secret_name(k) else redact_text(v, extra)) for k, v in sorted(env.items())}


class Redactor:
    """Redaction with the secrets of one environment remembered."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._secrets = secret_values(environ)
        self._remembered = -1

    def _refresh(self) -> None:
        if len(_REMEMBERED) != self._remembered:  # learned more since: scrub those too
            self._remembered = len(_REMEMBERED)
            self._secrets = sorted(set(self._secrets) | _REMEMBERED, key=len, reverse=True)

    def text(self, text: str) -> str:
        self._refresh()
        return redact_text(text, self._secrets)

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        return redact_env(env, self._secrets)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where secrets sit in ``text`` (start, end): a cut there would leave halves unredacted."""
        self._refresh()
        found: list[tuple[int, int]] = []
        for value in self._secrets:
            start = text.find(value)
            while start != -1:
                found.append((start, start + len(value)))
                start = text.find(value, start + 1)
        for pattern in SECRET_VALUE_RES:
            found.extend(m.span() for m in pattern.finditer(text))
        return sorted(found)
