"""A secret a run meets (the host's variables, the row's own) reaches no file, no terminal and no request."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.slow


CANARIES = {
    "CANARY_HF": "hf_" + "CanaryHuggingFaceToken" * 2,
    "CANARY_AWS": "AKIA" + "CANARYKEY0123456",
    "CANARY_URL": "https://canary-user:canary-pass-9x7@example.invalid/x",
    # an opaque value: caught only because its variable's name says token
    "CANARY_OPAQUE_TOKEN": "opaque-canary-value-31337",
}


def test_a_planted_secret_reaches_no_file_and_no_request(project: Callable[..., Project]) -> None:
    from tests.github_server import serve

    p = project("canary")
    with serve() as gh:
        (p.root / "pyproject.toml").write_text(
            (p.root / "pyproject.toml").read_text()
            + f"\n[tool.device-matrix.tracker]\nkind = 'github'\nrepository = '{gh.repo}'\n"
            f"api_url = '{gh.url}'\nwrite_interval = 0\n"
        )
        env = {**CANARIES, "GITHUB_TOKEN": gh.token}
        run = p.run("run", "--device", "fixture", "--reruns", "1", env=env)
        assert run.returncode == 1, run.stdout + run.stderr
        record = p.record()
        assert {t["outcome"] for t in record["tests"]} >= {"passed", "failed", "skipped", "xfailed", "crashed"}
        # a token in an identifier is a placeholder of its own value (#22)
        assert any("[id-[redacted:" in t["nodeid"] and t["nodeid"].endswith("]]") for t in record["tests"])
        assert "id-[redacted:" in run.stdout
        sync = p.run("issues", "sync", "--apply", env=env)
        assert sync.returncode == 0, sync.stdout + sync.stderr
        tri = p.run("triage", env=env)
        assert tri.returncode in (0, 1), tri.stdout + tri.stderr
        sent = [f"{r.method} {r.path} {r.headers} {r.body}" for r in gh.received]
    assert gh.received  # the sync did talk to the tracker
    secrets = [*list(CANARIES.values()), "canary-pass-9x7"]
    outputs = {"run stdout": run.stdout + run.stderr, "sync": sync.stdout + sync.stderr, "triage": tri.stdout}
    for name, text in outputs.items():
        assert [s for s in secrets if s in text] == [], name
    for request in sent:
        assert [s for s in secrets if s in request] == [], request[:200]
    leaked = []
    for f in p.root.rglob("*"):
        if f.is_file() and "suites" not in f.relative_to(p.root).parts:
            data = f.read_bytes()
            leaked += [f"{f}: {s[:12]}..." for s in secrets if s.encode() in data]
    assert leaked == []


def test_a_secret_in_the_rows_own_variables_is_redacted(project: Callable[..., Project]) -> None:
    secret = "Zq8hunter2hunter2xyz"
    p = project("abort", row=f'env = {{ SERVICE_AUTH = "{secret}" }}')
    (p.root / "suites" / "abort" / "test_print.py").write_text(
        "import os\n\ndef test_prints():\n    print(os.environ['SERVICE_AUTH'])\n    assert False\n"
    )
    proc = p.run("run", "--device", "fixture", "--reruns", "0")
    assert proc.returncode == 1
    assert secret not in proc.stdout + proc.stderr
    leaked = [str(f) for f in p.results.rglob("*") if f.is_file() and secret.encode() in f.read_bytes()]
    assert leaked == []


GANG_SECRET = "gang-only-value-8080"  # a gang's own variable, in the configuration alone


@pytest.mark.parametrize("spread", [[], ["--shards", "2"]])
def test_a_local_gang_ranks_own_secret_reaches_no_file(project: Callable[..., Project], spread: list[str]) -> None:
    # a rank that prints its gang's FOO_TOKEN and segfaults, run here (#22, #23): its log, the
    # gang's record and the row's last_output hold the placeholder, never the value
    env = f'env = {{ FOO_TOKEN = "{GANG_SECRET}" }}'
    gang = f'{{ name = "leak", module = "suites.node_secrets.worker", world_size = 1, {env} }}'
    p = project("node_secrets", row=f"gangs = [{gang}]")
    (p.root / "suites" / "__init__.py").touch()  # `-m suites.node_secrets.worker` finds this one
    run = p.run("run", "--device", "fixture", *spread)
    assert run.returncode == 1, run.stdout + run.stderr
    record = p.record()
    (test,) = [t for t in record["tests"] if t["nodeid"] == "gang::leak"]
    assert test["outcome"] == "crashed"
    (crash,) = [c for c in record["crashes"] if c["nodeid"] == "gang::leak"]
    assert any("holds [redacted]" in line for line in crash["diagnosis"]["last_output"])
    logs = list(p.results.rglob("gangs/leak/rank0.log"))
    assert len(logs) == 1 and "holds [redacted]" in logs[0].read_text()
    assert GANG_SECRET not in run.stdout + run.stderr
    leaked = [f for f in p.results.rglob("*") if f.is_file() and GANG_SECRET.encode() in f.read_bytes()]
    assert leaked == []
