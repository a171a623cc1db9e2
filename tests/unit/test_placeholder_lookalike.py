"""No raw identifier can equal a placeholder (#30): a parametrize id that copies another
test's placeholder (public in every artifact) is escaped where nodeids are first read, so
two tests stay two, in the record and for a run that selects them by their recorded names."""

from __future__ import annotations

from device_matrix.redact import KEY_VARIABLE, PLACEHOLDER_RE, Redactor
from device_matrix.wanted import escape_ident, selected

SECRET = "Sup3rS3cretValue4XYZW"
KEY = "lookalike-test-key"
ENV = {"PROBE_TOKEN": SECRET, KEY_VARIABLE: KEY}


def _placeholder() -> str:
    return Redactor(ENV).ident(SECRET)


def test_an_escaped_raw_identifier_holds_no_placeholder_and_stays_distinct() -> None:
    lookalike = f"t.py::test[{_placeholder()}]"
    assert PLACEHOLDER_RE.search(escape_ident(lookalike)) is None
    raws = [lookalike, "t.py::test[[redacted\\:1042b4]]", "t.py::test[[redacted]]", "t.py::test[[redacted\\]"]
    escaped = [escape_ident(r) for r in raws]
    assert len(set(escaped)) == len(raws)  # one to one: no two raw names become one
    assert escape_ident("t.py::test[plain]") == "t.py::test[plain]"
    r = Redactor(ENV)
    # the test named by a secret and the one named by its placeholder: two names recorded
    assert r.ident(escape_ident(f"t.py::test[{SECRET}]")) != r.ident(escape_ident(lookalike))


def test_selection_by_recorded_names_tells_the_two_apart() -> None:
    r = Redactor(ENV)
    secret_id, lookalike = f"t.py::test[{SECRET}]", f"t.py::test[{_placeholder()}]"
    recorded = {raw: r.ident(escape_ident(raw)) for raw in (secret_id, lookalike)}
    assert selected([secret_id, lookalike], [recorded[secret_id]], r) == {secret_id: 0}
    assert selected([secret_id, lookalike], [recorded[lookalike]], r) == {lookalike: 0}
    assert selected([secret_id, lookalike], [recorded[lookalike], recorded[secret_id]], r) == {
        lookalike: 0,
        secret_id: 1,
    }
