"""A container row's secrets stay out of every file and the terminal, against a real engine
(#30 items 4 and 9): the image's own secret-looking variables are scrubbed even when the
child dies before its plugin names them, and a row's secret value never stands on the
engine's command line."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests import engine_images
from tests.conftest import Project, clean_env
from tests.integration.test_container_podman import containers_of, images, no_leftovers, podman_project

__all__ = ["images", "no_leftovers"]  # fixtures, used by name

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("podman")]

IMAGE_SECRET = "ImageOnly" + "Sup3rS3cretValue" * 2
ROW_SECRET = "RowOnly" + "Sup3rS3cretValue" * 2
DIES_AT_START = """
import os, sys
print("the image says", os.environ["IMG_SECRET_TOKEN"], flush=True)
print("the image says", os.environ["IMG_SECRET_TOKEN"], file=sys.stderr, flush=True)
raise RuntimeError("conftest dies: " + os.environ["IMG_SECRET_TOKEN"])
"""


@pytest.fixture(scope="session")
def secret_image(images: engine_images.Images) -> str:
    """The pytest 8 image with a secret of its own in its environment (``ENV``)."""
    recipe = f"FROM {images.pytest8}\nENV IMG_SECRET_TOKEN={IMAGE_SECRET}\n"
    tag = f"localhost/device-matrix-test-secret-env:{hashlib.sha256(recipe.encode()).hexdigest()[:16]}"
    known = subprocess.run(["podman", "image", "exists", tag], check=False, timeout=60)
    if known.returncode != 0:
        subprocess.run(
            ["podman", "build", "-q", "-t", tag, "-f", "-", "."],
            input=recipe,
            text=True,
            capture_output=True,
            check=True,
            timeout=300,
            cwd=Path(__file__).parents[1],
        )
    return tag


def everything_written(p: Project) -> str:
    folder = p.results / "fixture"
    return "\n".join(f.read_text(errors="replace") for f in sorted(folder.rglob("*")) if f.is_file())


def test_an_image_secret_printed_by_a_conftest_that_dies_at_start_is_redacted(
    secret_image: str, tmp_path: Path, no_leftovers: None
) -> None:
    p = podman_project(tmp_path, ["passing"], secret_image)
    (p.root / "conftest.py").write_text(DIES_AT_START)
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    rec = p.record()
    assert rec["status"] == "error", rec["reason"]
    log = (p.results / "fixture" / "output.log").read_text()
    assert "the image says" in log  # the child did print it
    assert IMAGE_SECRET not in proc.stdout + proc.stderr
    assert IMAGE_SECRET not in log
    assert IMAGE_SECRET not in (p.results / "fixture" / "run.json").read_text()
    assert IMAGE_SECRET not in (p.results / "fixture" / "junit.xml").read_text()
    assert IMAGE_SECRET not in everything_written(p)


def test_a_row_secret_is_never_on_the_engine_command_line(
    images: engine_images.Images, tmp_path: Path, no_leftovers: None
) -> None:
    p = podman_project(
        tmp_path, ["hang"], images.pytest8, row=f'test_timeout = 600\nenv = {{ ROW_API_TOKEN = "{ROW_SECRET}" }}'
    )
    (p.root / "suites" / "hang" / "test_aa_sees_it.py").write_text(
        f"import os\n\ndef test_a_sees_the_row_secret():\n    assert os.environ['ROW_API_TOKEN'] == {ROW_SECRET!r}\n"
    )
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        # every command line on this host, while the row runs: `ps` shows them all
        while not stop.is_set():
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    try:
                        seen.append(entry.joinpath("cmdline").read_bytes().decode(errors="replace"))
                    except OSError:
                        continue
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    runner = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--no-gdb", "--device", "fixture"],
        cwd=p.root,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert runner.stdout is not None
    for line in runner.stdout:
        if "test_b_before" in line:
            break
    time.sleep(1.0)
    assert containers_of("fixture")
    runner.terminate()
    out, err = runner.communicate(timeout=120)
    stop.set()
    watcher.join()
    rec = p.record()
    outcomes = {t["nodeid"].rsplit("::", 1)[1]: t["outcome"] for t in rec["tests"]}
    assert outcomes["test_a_sees_the_row_secret"] == "passed", out + err
    assert any("podman" in c and " run " in c.replace("\0", " ") for c in seen)
    assert not [c for c in seen if ROW_SECRET in c]
