"""No raw identifier can equal a placeholder (#30): a parametrize id that copies another
test's placeholder (public in every artifact) is escaped where nodeids are first read, so
two tests stay two, in the record and for a run that selects them by their recorded names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from device_matrix.redact import KEY_VARIABLE, PLACEHOLDER_RE, Redactor
from device_matrix.wanted import escape_ident, selected
from tests.conftest import clean_env

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


@pytest.mark.slow
def test_a_test_named_as_another_tests_placeholder_is_a_test_of_its_own(tmp_path: Path) -> None:
    suite = tmp_path / "suites" / "s"
    suite.mkdir(parents=True)
    # the test named by the secret fails; the one named as its placeholder crashes, and is
    # rerun alone by the name it was read by
    (suite / "test_ids.py").write_text(
        "import os\n\nimport pytest\n\n\n"
        f'@pytest.mark.parametrize("x", [1, 2], ids=[os.environ["PROBE_TOKEN"], {_placeholder()!r}])\n'
        "def test_named(x):\n    if x == 2:\n        os.abort()\n    assert x == 2\n\n\n"
        "def test_after():\n    pass\n"
    )
    (tmp_path / "pyproject.toml").write_text(
        "[tool.device-matrix]\ncrash_reruns = 1\n\n[tool.device-matrix.devices.fixture]\n"
        'pjrt_device = "CPU"\nrun_in = "host"\nsuites = ["s"]\npresence = ["always"]\ntest_timeout = 60\n'
    )
    run = subprocess.run(
        [sys.executable, "-m", "device_matrix", "--project", str(tmp_path), "run", "--device", "fixture", "--no-gdb"],
        cwd=tmp_path,
        env={**clean_env(), **ENV},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode != 0, run.stdout + run.stderr
    record = json.loads((tmp_path / "results" / "fixture" / "run.json").read_text())
    outcomes = {t["nodeid"]: t["outcome"] for t in record["tests"]}
    assert len(record["tests"]) == 3 and len(outcomes) == 3, outcomes
    base = "suites/s/test_ids.py::test_named"
    lookalike = f"{base}[{escape_ident(_placeholder())}]"
    assert outcomes == {
        f"{base}[{_placeholder()}]": "failed",  # the one named by the secret
        lookalike: "crashed",
        "suites/s/test_ids.py::test_after": "passed",
    }
    assert record["summary"]["failed"] == 1 and record["summary"]["crashed"] == 1
    (crash,) = record["crashes"]
    assert crash["nodeid"] == lookalike and crash["classification"] == "deterministic", crash
    assert len(crash["reruns"]) == 1
