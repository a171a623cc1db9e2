"""Secrets never leave the process: values are redacted before they are encoded (#22).

A string is redacted by what it is, never after it was serialized (a rule run over JSON
ate the ``\\`` of ``\\"``; one run over a nodeid ate its ``]`` and merged two tests):

- **free text** (:meth:`Redactor.text`): output, messages, tracebacks, reasons. Every rule
  of :data:`RULES` applies, and what a rule finds becomes ``[redacted]``.
- **an identifier** (:meth:`Redactor.ident`): a nodeid, a crash id, a fingerprint, a path,
  a variable's name, a command. Only the known secret values and the token shapes apply
  (the rules marked ``everywhere``), and each value found becomes a placeholder of its own,
  ``[redacted:1a2b3c]``: two tests stay two, and a test keeps its name from run to run.
  A rule that guesses (``key=value``) never rewrites an identifier.

:meth:`Redactor.data` redacts a JSON-like value string by string, each by its key
(:data:`FREE_TEXT_KEYS` hold free text; everything else, keys included, is an identifier).
The files of a run are written from values redacted so (records/atomic.py), so every file
the tool writes parses whatever the tests printed or were called.

The known secret values are those of the environment's variables whose names look secret
(:data:`SECRET_NAME_RE`), at least :data:`MIN_LITERAL` characters long, the ones a process
was told of (:func:`remember_secrets`, :func:`remember_values`), and their encoded forms
(URL-quoted, base64 at each alignment, JSON-escaped). Every process redacts with its own
environment: a Ray node, a container, the driver (docs/redaction.md).

A placeholder is a short keyed hash. The key is ``DEVICE_MATRIX_REDACTION_KEY`` when set
(the same on every host of a run, else their placeholders differ), mixed into a salt; a
known value is hashed with scrypt (16 MiB, about 60 ms, once per value and process) so that
with no key set a guess at a short secret still costs that much to check, and 24 bits of
the hash are shown. A token shape is long and random: HMAC-SHA256, 32 bits shown.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import os
import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal, TypeVar
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
# a placeholder of an identifier: the hash of the value, and "+form" for an encoded one
PLACEHOLDER_RE = re.compile(r"\[redacted:[0-9a-f]{6,64}(?:\+[a-z0-9]+)?\]")
KEY_VARIABLE = "DEVICE_MATRIX_REDACTION_KEY"
_SALT = b"device-matrix/redact/1:"
# the characters a URL quoted again keeps as they are (RFC 3986's reserved, and ~)
URL_RESERVED = "!#$&'()*+,/:;=?@[]~"

SECRET_NAME_RE = re.compile(
    r"(TOKEN|SECRET|PASSW(OR)?D|PASSPHRASE|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|AUTH|COOKIE|SESSION_?ID|_KEY$|^KEY$)",
    re.IGNORECASE,
)

# A value shorter than this is never searched for: a 7-character value ("hunter2",
# "default", "1234567") is a word or a number of ordinary text, and replacing it everywhere
# would destroy the evidence it sits in. docs/redaction.md says so to the user.
MIN_LITERAL = 8
# how many hex digits of a hash a placeholder shows (known values / token shapes)
_KNOWN_DIGITS = 6
_SHAPE_DIGITS = 8
# #30: a text cut short says so with a mark: pytest ends a summary line cut to the
# terminal's width with "...", and cuts a long repr's middle so; other tools and views "…"
_CUT_MARK_RE = re.compile(r"\.\.\.|…")
# the shortest piece of a known value beside a cut mark that is redacted: a start or end
# of a secret this long still gives most of it away ("token is Sup3rS3cretValue4...")
MIN_CUT = 4

Where = Literal["everywhere", "free text"]


@dataclass(frozen=True)
class Rule:
    """One rule: what it matches, where it applies, and the part of a match it replaces.

    ``pattern``'s group ``secret`` is replaced; the rest of a match stays as it was.
    ``triggers``: lower-case text that every match contains, so that a text without any of
    them is never scanned (logs are mostly clean).
    """

    name: str
    where: Where
    matches: str
    pattern: re.Pattern[str]
    triggers: tuple[str, ...]
    requires: tuple[str, ...] = ()  # text every match contains besides a trigger
    # #30: (how every token of the shape starts, what follows): a token cut shorter than its
    # shape, with a cut mark right after it, is still a token
    cut: tuple[str, str] | None = None


def _may_match(rule: Rule, lower: str) -> bool:
    return any(t in lower for t in rule.triggers) and all(r in lower for r in rule.requires)


RULES: tuple[Rule, ...] = (
    Rule(
        "GitHub token",
        "everywhere",
        "ghp_, gho_, ghu_, ghs_ or ghr_ and 20-255 letters or digits",
        re.compile(r"\b(?P<secret>gh[pousr]_[A-Za-z0-9]{20,255})\b"),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        cut=(r"gh[pousr]_", "[A-Za-z0-9]"),
    ),
    Rule(
        "GitHub fine-grained token",
        "everywhere",
        "github_pat_ and 20-255 letters, digits or _",
        re.compile(r"\b(?P<secret>github_pat_[A-Za-z0-9_]{20,255})\b"),
        ("github_pat_",),
        cut=(r"github_pat_", "[A-Za-z0-9_]"),
    ),
    Rule(
        "GitLab token",
        "everywhere",
        "glpat- and 20 or more letters, digits, _ or -",
        re.compile(r"\b(?P<secret>glpat-[A-Za-z0-9_-]{20,})(?![A-Za-z0-9_-])"),
        ("glpat-",),
        cut=(r"glpat-", "[A-Za-z0-9_-]"),
    ),
    Rule(
        "AWS access key id",
        "everywhere",
        "AKIA or ASIA and 16 capitals or digits",
        re.compile(r"\b(?P<secret>(?:AKIA|ASIA)[0-9A-Z]{16})\b"),
        ("akia", "asia"),
        cut=(r"(?:AKIA|ASIA)", "[0-9A-Z]"),
    ),
    Rule(
        "Slack token",
        "everywhere",
        "xoxa-, xoxb-, xoxp-, xoxo-, xoxs- or xoxr- and 10 or more letters, digits or -",
        re.compile(r"\b(?P<secret>xox[abposr]-[A-Za-z0-9-]{10,})(?![A-Za-z0-9-])"),
        ("xox",),
        cut=(r"xox[abposr]-", "[A-Za-z0-9-]"),
    ),
    Rule(
        "Hugging Face token",
        "everywhere",
        "hf_ and 30 or more letters or digits",
        re.compile(r"\b(?P<secret>hf_[A-Za-z0-9]{30,})\b"),
        ("hf_",),
        cut=(r"hf_", "[A-Za-z0-9]"),
    ),
    Rule(
        "OpenAI-style key",
        "everywhere",
        "sk- and 20 or more letters, digits, _ or -",
        re.compile(r"\b(?P<secret>sk-[A-Za-z0-9_-]{20,})(?![A-Za-z0-9_-])"),
        ("sk-",),
        cut=(r"sk-", "[A-Za-z0-9_-]"),
    ),
    Rule(
        "Google OAuth token",
        "everywhere",
        "ya29. and 20 or more letters, digits, _ or -",
        re.compile(r"\b(?P<secret>ya29\.[A-Za-z0-9_-]{20,})(?![A-Za-z0-9_-])"),
        ("ya29.",),
        cut=(r"ya29\.", "[A-Za-z0-9_-]"),
    ),
    Rule(
        "private key",
        "everywhere",
        "the body of a -----BEGIN ... PRIVATE KEY----- block, to its END line or, cut off, to the end of the text",
        re.compile(
            r"(?s)-----BEGIN [A-Z ]*PRIVATE KEY-----(?!\[redacted)(?P<secret>.+?)"
            r"(?=-----END [A-Z ]*PRIVATE KEY-----|\Z)"
        ),
        ("private key-----",),
    ),
    Rule(
        "password in a URL",
        "everywhere",
        "the password of scheme://user:password@host",
        re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s:@]+:(?!\[redacted)(?P<secret>[^@\s/]+)@"),
        ("://",),
        ("@",),
    ),
    Rule(
        "Authorization header",
        "free text",
        "the credential after Authorization: Bearer, Token or Basic",
        re.compile(r"(?i)\bauthorization\s*[:=]\s*(?:bearer|token|basic)\s+(?!\[redacted)(?P<secret>[^\s'\"]+)"),
        ("authorization",),
    ),
    Rule(
        "key = value",
        "free text",
        "the value after a name that ends in token, secret, password, passwd, api_key or access_key and = or :"
        " (quoted names and values too), up to a space, quote, comma, semicolon, closing bracket or &",
        re.compile(
            r"(?i)\b[a-z0-9_]*?(?:token|secret|password|passwd|api[_-]?key|access[_-]?key)['\"]?\s*[=:]\s*['\"]?"
            r"(?!\[redacted)(?P<secret>[^\s'\",;)\]}>&]+)"
        ),
        ("token", "secret", "passw", "apikey", "api_key", "api-key", "accesskey", "access_key", "access-key"),
    ),
)
_EVERYWHERE = tuple(rule for rule in RULES if rule.where == "everywhere")
# #30: a token of a rule's shape cut shorter than the shape before a cut mark (free text)
_CUT_SHAPE_RE = re.compile(
    r"\b(?:"
    + "|".join(f"{rule.cut[0]}{rule.cut[1]}{{{MIN_CUT},}}" for rule in RULES if rule.cut is not None)
    + r")(?=\.\.\.|…)"
)


# one search of the lower-cased text for every trigger of the rules: most strings hold none
_TRIGGERS_ALL, _TRIGGERS_EVERYWHERE = (
    re.compile("|".join(re.escape(t) for rule in rules for t in rule.triggers)) for rules in (RULES, _EVERYWHERE)
)
# strings up to this long are remembered with their redaction: a record's nodeids,
# outcomes and phases come back in every file built from it
_CACHED_LEN = 2048
_CACHE_SIZE = 200_000
# the keys of a record (and of a journal event, a report, the triage) whose strings are free text
FREE_TEXT_KEYS = frozenset(
    {
        "message",
        "reason",
        "longrepr",
        "wasxfail",
        "hint",
        "fatal_error",
        "fatal",
        "python_stack",
        "native_stack",
        "fatal_lines",
        "terminate",
        "gdb_backtrace",
        "last_output",
        "problem",
    }
)
# a key of the formats' own (duration, last_output): never rewritten, so that a secret that is
# also a word of them ("duration") leaves every file readable by its schema
_FIELD_NAME = re.compile(r"[a-z][a-z_]*")
_PRIVATE_KEY_START = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")
_PRIVATE_KEY_END = re.compile(rb"-----END [A-Z ]*PRIVATE KEY-----")
_T = TypeVar("_T")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME_RE.search(name))


# secrets this process learned besides its environment (a row's own variables in the
# configuration, a child's own values): every Redactor scrubs them, whenever it was made
_REMEMBERED: set[str] = set()


def remember_secrets(environ: Mapping[str, str]) -> None:
    """Scrub the secret-looking values of ``environ`` everywhere from now on."""
    remember_values(v for k, v in environ.items() if is_secret_name(k))


def remember_values(values: Iterable[str]) -> None:
    """Scrub these values everywhere from now on: text of MIN_LITERAL characters or more (a
    child names its values in its journal, where anything else may stand; that is left out)."""
    _REMEMBERED.update(v for v in values if isinstance(v, str) and len(v) >= MIN_LITERAL)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of secret-looking variables, to be scrubbed wherever they appear."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_LITERAL}
    return sorted(values, key=len, reverse=True)


def encodings(value: str) -> dict[str, str]:
    """``value`` as it may appear inside other text -> a short name of the form ("" as is).

    URL-quoted (``u``; ``q`` keeping ``/`` as urllib's ``quote`` does, ``r`` keeping every
    reserved character of a URL, ``p`` with + for spaces), JSON-escaped (``j``), and the base64 of
    its UTF-8 at each of the three alignments it can sit at inside a longer base64 string
    (``b0``-``b2``; ``s0``-``s2`` in the URL-safe alphabet): the characters that depend on
    the value alone. Forms shorter than MIN_LITERAL are left out.
    """
    forms = {value: ""}
    data = value.encode(errors="surrogatepass")  # a lone surrogate (a name not UTF-8) never fails
    quoted = (
        ("u", quote(data, safe="")),
        ("q", quote(data)),  # urllib's default keeps "/": the value's path stands readable in it
        ("r", quote(data, safe=URL_RESERVED)),  # a URL quoted again keeps its reserved characters
        ("p", quote_plus(data)),
        ("j", json.dumps(value)[1:-1]),
    )
    for tag, form in quoted:
        forms.setdefault(form, tag)
    # after `align` bytes of something else, the first character that holds only the value's
    # bits is the 0th, 2nd or 3rd; the last ends where the value's bits end
    for align, first in ((0, 0), (1, 2), (2, 3)):
        last = 8 * (align + len(data)) // 6
        for tag, encode in (("b", base64.b64encode), ("s", base64.urlsafe_b64encode)):
            forms.setdefault(encode(bytes(align) + data)[first:last].decode(), f"{tag}{align}")
    return {form: tag for form, tag in forms.items() if len(form) >= MIN_LITERAL}


@functools.lru_cache(maxsize=4096)
def _slow_digest(value: str, key: bytes) -> str:
    """A known value's hash: scrypt, so that a guess at it costs what computing it did."""
    return hashlib.scrypt(value.encode(errors="surrogatepass"), salt=_SALT + key, n=1 << 14, r=8, p=1).hex()


def _fast_digest(value: str, key: bytes) -> str:
    """A token shape's hash: long and random, nothing to guess."""
    return hmac.new(_SALT + key, value.encode(errors="surrogatepass"), hashlib.sha256).hexdigest()


@functools.lru_cache(maxsize=256)
def _alternation(needles: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(n) for n in needles))


def _shaped(value: str) -> bool:
    """Whether ``value`` is, as a whole, what a token rule matches."""
    for rule in _EVERYWHERE:
        m = rule.pattern.fullmatch(value)
        if m is not None and m.group("secret") == value:
            return True
    return False


def _apply(text: str, rules: Sequence[Rule], triggers: re.Pattern[str], replace: Callable[[str], str]) -> str:
    lower = text.lower()
    if triggers.search(lower) is None:
        return text
    for rule in rules:
        if not _may_match(rule, lower):
            continue

        def keep_around(m: re.Match[str]) -> str:
            start, end = m.span("secret")
            return m.string[m.start() : start] + replace(m.string[start:end]) + m.string[end : m.end()]

        new = rule.pattern.sub(keep_around, text)
        if new != text:
            text, lower = new, new.lower()
    return text


class Redactor:
    """Redaction with the secrets of one environment (and all this process remembers)."""

    def __init__(
        self, environ: Mapping[str, str] | None = None, *, values: Iterable[str] = (), remembered: bool = True
    ) -> None:
        env = os.environ if environ is None else environ
        self._own = {*secret_values(env), *(v for v in values if len(v) >= MIN_LITERAL)}
        self._key = env.get(KEY_VARIABLE, "").encode(errors="surrogatepass")
        self._remembered = remembered
        self._hex: dict[str, str] = {}  # known value -> the hex its placeholders show
        # threads of one run (the journal's copy, the record, the terminal) name values at
        # once: a value hashed by two of them is one value, never a collision with itself
        self._hex_lock = threading.Lock()
        self._build()

    def _count(self) -> int:
        """How many remembered values this redactor takes (all, or none)."""
        return len(_REMEMBERED) if self._remembered else 0

    def _build(self) -> None:
        self._seen = self._count()
        values = self._own | _REMEMBERED if self._remembered else self._own
        form: dict[str, tuple[str, str]] = {}  # needle -> (value, form)
        for value in sorted(values):
            for needle, tag in encodings(value).items():
                form.setdefault(needle, (value, tag))
        self._form = form
        # every form of every value; at one place the longest is the one replaced
        self._needles = sorted(form, key=lambda n: (-len(n), n))
        self._needle_re = _alternation(tuple(self._needles)) if self._needles else None
        self._json_needles = {json.dumps(n)[1:-1] for n in self._needles}  # as they read in a JSON string
        # a piece of a form beside a cut mark is found by its first (or last) MIN_CUT characters:
        # a start of a form before a mark, an end of one after a mark
        self._by_head: dict[str, list[str]] = {}
        self._by_tail: dict[str, list[str]] = {}
        for needle in self._needles:
            self._by_head.setdefault(needle[:MIN_CUT], []).append(needle)
            self._by_tail.setdefault(needle[-MIN_CUT:], []).append(needle)
        self._head_re, self._tail_re = (
            re.compile("(?=(" + "|".join(map(re.escape, ends)) + "))") for ends in (self._by_head, self._by_tail)
        )
        self._longest = max(map(len, self._needles), default=0)
        self._cache: dict[tuple[bool, str], str] = {}  # (free text?, string) -> its redaction

    def _refresh(self) -> None:
        if self._count() != self._seen:  # learned more since: scrub those too
            self._build()

    # --- the two policies --------------------------------------------------------------

    def text(self, text: str) -> str:
        """Free text (output, messages, tracebacks): every rule; secrets become ``[redacted]``."""
        return self._redact(text, True)

    def ident(self, text: str) -> str:
        """An identifier: known values and token shapes become placeholders of their own value."""
        return self._redact(text, False)

    def _redact(self, text: str, free: bool) -> str:
        if not text:
            return text
        self._refresh()
        cached = self._cache.get((free, text))
        if cached is not None:
            return cached
        out = text
        if self._needle_re is not None:
            out = self._needle_re.sub(REDACTED if free else self._known, out)
            if free:
                out = self._cut_pieces(out)
        if free:
            out = _CUT_SHAPE_RE.sub(REDACTED, _apply(out, RULES, _TRIGGERS_ALL, lambda _secret: REDACTED))
        else:
            out = _apply(out, _EVERYWHERE, _TRIGGERS_EVERYWHERE, self._shape)
        if len(text) <= _CACHED_LEN:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            self._cache[(free, text)] = self._cache[(free, out)] = out  # a redaction redacts to itself
        return out

    def _cut_pieces(self, text: str) -> str:
        """Free text with the piece of a known value beside each cut mark redacted (#30)."""
        found: list[tuple[int, int]] = []
        for before, start, end, after in self._beside_cuts(text):
            found += [(before, start), (end, after)]
        out, at = [], 0
        for start, end in found:  # in order; an end after one mark may be the start before the next
            if end > start:
                out += [text[at:start], REDACTED] if start >= at else []
                at = max(at, end)
        return "".join([*out, text[at:]])

    def _beside_cuts(self, text: str) -> Iterator[tuple[int, int, int, int]]:
        """Each cut mark (its start and end) between the pieces of known values beside it:
        (where the piece before it starts, start, end, where the piece after it ends)."""
        for mark in _CUT_MARK_RE.finditer(text):
            start, end = mark.span()
            yield start - self._piece_before(text, start), start, end, end + self._piece_after(text, end)

    def _piece_before(self, text: str, start: int) -> int:
        """How long the longest start of a form (not all of it) is that ends at ``start``."""
        for m in self._head_re.finditer(text, max(0, start - self._longest), start):
            piece = text[m.start() : start]
            if any(len(n) > len(piece) and n.startswith(piece) for n in self._by_head[m.group(1)]):
                return len(piece)  # the first from the left is the longest
        return 0

    def _piece_after(self, text: str, end: int) -> int:
        """How long the longest end of a form (not all of it) is that starts at ``end``."""
        longest = 0
        for m in self._tail_re.finditer(text, end, end + self._longest):
            piece = text[end : m.start() + MIN_CUT]
            if any(len(n) > len(piece) and n.endswith(piece) for n in self._by_tail[m.group(1)]):
                longest = len(piece)  # the last from the left is the longest
        return longest

    def data(self, value: _T) -> _T:
        """A JSON-like value with each string redacted by its key (see :data:`FREE_TEXT_KEYS`).

        ``value`` itself when no string of it could hold anything to redact (most records:
        one test of their JSON text, not a walk over thousands of tests).
        """
        self._refresh()
        try:
            clean = self.clean_json(json.dumps(value))
        except (TypeError, ValueError):  # not JSON as it is (a tuple for a key): walked
            clean = False
        if clean:
            return value
        redacted: _T = self._walk(value, False)
        return redacted

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """Variables: a secret-looking name's value is ``[redacted]``, any other value free text."""
        return {self.ident(k): (REDACTED if is_secret_name(k) else self.text(v)) for k, v in sorted(env.items())}

    # --- around the policies ------------------------------------------------------------

    def clean_json(self, serialized: str) -> bool:
        """Whether no string of this JSON text could hold anything a rule or value matches.

        Only a test (a JSON text is never rewritten): a file whose text passes is written as
        it is, any other from its redacted values. An escape (``\\u``) can hide any letter.
        """
        self._refresh()
        if "\\u" in serialized or any(n in serialized for n in self._json_needles):
            return False
        if self._needle_re is not None and self._cut_pieces(serialized) != serialized:
            return False  # #30: a piece of a value beside a cut mark
        lower = serialized.lower()
        return _TRIGGERS_ALL.search(lower) is None or not any(_may_match(rule, lower) for rule in RULES)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where secrets sit in ``text`` (start, end): a cut there would leave halves unredacted."""
        self._refresh()
        found: list[tuple[int, int]] = []
        for needle in self._needles:
            start = text.find(needle)
            while start != -1:
                found.append((start, start + len(needle)))
                start = text.find(needle, start + 1)
        for rule in RULES:
            found.extend(m.span() for m in rule.pattern.finditer(text))
        if self._needle_re is not None:  # #30: a piece of one and the cut mark beside it
            found.extend((a, b) for a, start, end, b in self._beside_cuts(text) if a < start or b > end)
        return sorted(found)

    def _walk(self, value: Any, free: bool) -> Any:
        if isinstance(value, str):
            return self._redact(value, free)
        if isinstance(value, dict):
            return {
                (self.ident(k) if isinstance(k, str) and not _FIELD_NAME.fullmatch(k) else k): self._walk(
                    v, k in FREE_TEXT_KEYS
                )
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self._walk(x, free) for x in value]
        if isinstance(value, tuple):
            return tuple(self._walk(x, free) for x in value)
        return value

    def _known(self, m: re.Match[str]) -> str:
        value, tag = self._form[m.group()]
        return f"[redacted:{self._hex_of(value)}{'+' + tag if tag else ''}]"

    def _hex_of(self, value: str) -> str:
        """The hex a known value's placeholders show: the same for the same value and key,
        and never another value's (a collision of the short form takes a longer one)."""
        with self._hex_lock:
            if value not in self._hex:
                if _shaped(value):
                    digest, digits = _fast_digest(value, self._key), _SHAPE_DIGITS
                else:
                    digest, digits = _slow_digest(value, self._key), _KNOWN_DIGITS
                taken = set(self._hex.values())
                while digest[:digits] in taken:
                    digits += 2
                self._hex[value] = digest[:digits]
            return self._hex[value]

    def _shape(self, secret: str) -> str:
        return f"[redacted:{_fast_digest(secret, self._key)[:_SHAPE_DIGITS]}]"


def redact_text(text: str, extra_secrets: Iterable[str] = ()) -> str:
    """Free text redacted by the rules and ``extra_secrets`` alone (no environment)."""
    return Redactor({}, values=extra_secrets, remembered=False).text(text)


def redact_env(env: Mapping[str, str], extra_secrets: Iterable[str] = ()) -> dict[str, str]:
    """Variables redacted by their names, the rules and ``extra_secrets`` alone (see Redactor.env)."""
    return Redactor({}, values=extra_secrets, remembered=False).env(env)


# --- what other processes and files need -------------------------------------------------


def unterminated_block(data: bytes) -> int | None:
    """Where a private key block starts that ``data`` does not end: a stream holds it back."""
    starts = list(_PRIVATE_KEY_START.finditer(data))
    if not starts or _PRIVATE_KEY_END.search(data, starts[-1].end()):
        return None
    return starts[-1].start()


def redact_file(name: str, data: bytes, redactor: Redactor | None = None) -> bytes:
    """A results file another process wrote (a Ray node's shard), redacted again by its kind.

    JSON, JSON lines and XML are parsed and written back from redacted values (an XML
    attribute ``message`` and every text are free text, other attributes identifiers);
    anything else, and a file that does not parse, is free text.
    """
    r = redactor or Redactor()
    text = data.decode(errors="replace")
    kind = PurePosixPath(name).suffix
    if kind in (".json", ".jsonl"):
        docs = text.split("\n") if kind == ".jsonl" else [text]
        try:
            out = [json.dumps(r.data(json.loads(doc)), separators=(",", ":")) for doc in docs if doc.strip()]
        except ValueError:
            return r.text(text).encode()
        return "".join(line + "\n" for line in out).encode()
    # ours has no DTD: one (the only place entities are declared) is read as text, never expanded
    if kind == ".xml" and b"<!DOCTYPE" not in data:
        try:
            root = ET.fromstring(data)  # noqa: S314 - no DTD (above): nothing to expand
        except ET.ParseError:
            return r.text(text).encode()
        for element in root.iter():
            element.attrib = {k: (r.text(v) if k == "message" else r.ident(v)) for k, v in element.attrib.items()}
            element.text = element.text and r.text(element.text)
            element.tail = element.tail and r.text(element.tail)
        return ('<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode")).encode()
    return r.text(text).encode()
