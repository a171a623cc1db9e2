"""The tests of this concept that start a process; the rest are in tests/unit/test_redact_property.py (#41)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings

from tests.unit.test_redact_property import SECRETS, SUITE, assert_clean, json_strings, suites


@pytest.mark.slow
@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(suites())
@example(
    [
        {"id": ["token=", "<A>", "]"], "message": ['"', "<B>", "\\"], "output": ["::", "<C>"], "fail": False},
        {"id": ["token=", "<B>", "]"], "message": ["password:", "<A>"], "output": ["<B>", "\n"], "fail": True},
        {"id": ['"', "<C>", '"'], "message": [], "output": [], "fail": False},
    ]
)
def test_any_suite_through_parallel_shards_triage_and_the_tracker(
    tmp_path_factory: pytest.TempPathFactory, cases: list[dict[str, Any]]
) -> None:
    from tests.conftest import make_project
    from tests.github_server import serve

    p = make_project(tmp_path_factory.mktemp("suite"), ["passing"])
    folder = p.root / "suites" / "generated"
    folder.mkdir()
    (folder / "cases.json").write_text(json.dumps(cases))
    (folder / "test_generated.py").write_text(SUITE)
    pyproject = (p.root / "pyproject.toml").read_text().replace('suites = ["passing"]', 'suites = ["generated"]')
    with serve() as gh:
        tracker = f"\n[tool.device-matrix.tracker]\nkind = 'github'\nrepository = '{gh.repo}'\napi_url = '{gh.url}'\n"
        (p.root / "pyproject.toml").write_text(pyproject + tracker + "write_interval = 0\n")
        env = {**SECRETS, "GITHUB_TOKEN": gh.token}
        run = p.run("run", "--device", "fixture", "--shards", "2", "--parallel", env=env)
        assert run.returncode in (0, 1), run.stdout + run.stderr
        record = json.loads((p.results / "fixture" / "run.json").read_text())
        outcomes = [t["outcome"] for t in record["tests"] if "test_case[" in t["nodeid"]]
        # every test selected by a shard ran: none lost, none twice, none merged
        assert len(outcomes) == len(cases) and "not_run" not in outcomes, record["reason"]
        assert outcomes.count("failed") == sum(c["fail"] for c in cases)
        assert len({t["nodeid"] for t in record["tests"]}) == len(record["tests"])
        sync = p.run("issues", "sync", "--apply", env=env)
        assert sync.returncode == 0, sync.stdout + sync.stderr
        tri = p.run("triage", env=env)
        assert tri.returncode == 0, tri.stdout + tri.stderr
        sent = [f"{r.method} {r.path} {r.body}" for r in gh.received]
        sent += [v for r in gh.received if r.body for v in json_strings(json.loads(r.body))]
    assert any(r.method == "POST" for r in gh.received)  # the uncited skip was filed
    texts = {"run": run.stdout + run.stderr, "sync": sync.stdout, "triage": tri.stdout, "requests": "\n".join(sent)}
    assert_clean(p.root, texts)
