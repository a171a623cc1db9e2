"""Secrets that only a row's container knows reach no file, no output and no request (#22).

The canary suite plants credentials in every channel a test reaches (a parametrize id, an
assertion message, a skip and an xfail reason, a 2 MiB line, native stderr, the output of
a segfault). Here their values live only in the container's image, never in the runner's
environment: the child tells the runner its own secret values over the journal, so the
runner scrubs them from what it writes, and the tracker and the triage get none of them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, Project

pytestmark = pytest.mark.slow

IMAGE_CANARIES = {
    "CANARY_HF": "hf_" + "ImageOnlyHuggingFace" * 2,
    "CANARY_AWS": "AKIA" + "IMAGEONLYKEY0123",
    "CANARY_URL": "https://image-user:image-pass-6y2@example.invalid/x",
    # an opaque value: caught only because its variable's name says token
    "CANARY_OPAQUE_TOKEN": "opaque-image-value-16180",
}
CONTAINER_ROW = 'run_in = "container"\nimage = "registry.example/xla:r2.9@sha256:abc"\n'


def planted(canaries: Mapping[str, str]) -> list[str]:
    """The values to look for: each canary, and the password of the URL on its own."""
    url = canaries["CANARY_URL"]
    return [*canaries.values(), url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]]


def leaks(root: Path, secrets: Sequence[str], texts: Mapping[str, str], requests: Sequence[str] = ()) -> list[str]:
    """Where any of ``secrets`` is found: a file under ``root`` (its suites aside), an output, a request."""
    found = [f"{name}: {s[:12]}..." for name, text in texts.items() for s in secrets if s in text]
    found += [f"request {r[:80]}: {s[:12]}..." for r in requests for s in secrets if s in r]
    for f in root.rglob("*"):
        if f.is_file() and "suites" not in f.relative_to(root).parts:
            data = f.read_bytes()
            found += [f"{f}: {s[:12]}..." for s in secrets if s.encode() in data]
    return found


def with_github(p: Project, url: str, repo: str) -> None:
    (p.root / "pyproject.toml").write_text(
        (p.root / "pyproject.toml").read_text()
        + f"\n[tool.device-matrix.tracker]\nkind = 'github'\nrepository = '{repo}'\napi_url = '{url}'\n"
        "write_interval = 0\n"
    )


@pytest.fixture
def engine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The fake engine, its image carrying the canaries in its own environment (its files,
    which hold them, are the engine's: outside the project)."""
    folder = tmp_path_factory.mktemp("engine")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").symlink_to(FIXTURES / "fake_engine.py")
    settings = {"log": str(folder / "engine.log"), "state": str(folder / "engine-state")}
    (bin_dir / "fake-engine.json").write_text(json.dumps({**settings, "image_env": IMAGE_CANARIES}))
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def test_a_containers_own_secrets_reach_no_file_and_no_request(
    project: Callable[..., Project], engine: dict[str, str]
) -> None:
    from tests.github_server import serve

    p = project("canary", row=CONTAINER_ROW)
    with serve() as gh:
        with_github(p, gh.url, gh.repo)
        env = {**engine, "GITHUB_TOKEN": gh.token}
        run = p.run("run", "--device", "fixture", "--reruns", "1", env=env)
        assert run.returncode == 1, run.stdout + run.stderr
        record = p.record()
        assert record["mode"] == "container"
        assert {t["outcome"] for t in record["tests"]} >= {"passed", "failed", "skipped", "xfailed", "crashed"}
        # the parametrize id named the image's token: a placeholder of its own, the test once
        (param,) = [t for t in record["tests"] if "test_parametrize_id_carries_a_token" in t["nodeid"]]
        assert "[id-[redacted:" in param["nodeid"] and param["nodeid"].endswith("]]")
        assert param["outcome"] == "passed"
        sync = p.run("issues", "sync", "--apply", env=env)
        assert sync.returncode == 0, sync.stdout + sync.stderr
        tri = p.run("triage", env=env)
        assert tri.returncode in (0, 1), tri.stdout + tri.stderr
        sent = [f"{r.method} {r.path} {r.headers} {r.body}" for r in gh.received]
    assert gh.received  # the sync did talk to the tracker
    outputs = {"run": run.stdout + run.stderr, "sync": sync.stdout + sync.stderr, "triage": tri.stdout + tri.stderr}
    assert leaks(p.root, planted(IMAGE_CANARIES), outputs, sent) == []
