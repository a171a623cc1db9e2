"""Container rows against a real engine: podman, with images built here (tests/engine_images.py).

They skip where podman cannot run a container, and fail instead where the engine is meant
to be there (``DEVICE_MATRIX_REQUIRE_ENGINE=1``, which ``.ci/run`` sets once it installed
podman). ``DEVICE_MATRIX_ROOTLESS_USER`` names a user whose rootless podman runs one row.
"""

from __future__ import annotations

import io
import json
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from device_matrix import config
from device_matrix.executors.container import ContainerExecutor
from device_matrix.output import Output
from device_matrix.run import runner
from device_matrix.run.context import RunOptions
from device_matrix.run.plan import plan_row
from tests import engine_images
from tests.conftest import REPO, Project, clean_env, make_project
from tests.runs import plan_state, watch_plans, write_suite

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("podman")]

SECRETS = {
    "GITHUB_TOKEN": "ghp_" + "HostOnlyPodmanSecret" * 2,
    "AWS_SECRET_ACCESS_KEY": "HostOnly/AwsSecretKey" * 2,
    "HF_TOKEN": "hf_" + "HostOnlyHuggingFace" * 2,
}
# a test that writes into the project and says what the container's environment holds
PROBE_SUITE = """
import json, os, pathlib

def test_writes_into_the_project():
    pathlib.Path("written-in-the-container.txt").write_text("x")
    pathlib.Path("environment-in-the-container.json").write_text(json.dumps(dict(os.environ)))
"""


def unavailable(reason: str) -> None:
    if os.environ.get("DEVICE_MATRIX_REQUIRE_ENGINE") == "1":
        pytest.fail(f"a container engine is required here (DEVICE_MATRIX_REQUIRE_ENGINE=1): {reason}")
    pytest.skip(f"{reason}; .ci/run installs podman and sets DEVICE_MATRIX_REQUIRE_ENGINE=1")


@pytest.fixture(scope="session")
def images() -> engine_images.Images:
    if shutil.which("podman") is None:
        unavailable("podman is not installed")
    check = subprocess.run(
        ["podman", "info", "--format", "{{json .}}"], capture_output=True, text=True, check=False, timeout=60
    )
    if check.returncode != 0:
        unavailable(f"podman does not answer `info`: {check.stderr.strip()[:300]}")
    try:
        return engine_images.ensure(log=lambda line: print(line, file=sys.stderr))
    except engine_images.CannotBuild as exc:
        unavailable(str(exc))
    raise AssertionError("unreachable")


def podman_project(
    root: Path,
    suites: list[str],
    image: str,
    *,
    row: str = "",
    top: str = "",
    options: list[str] = engine_images.ULIMITS,
) -> Project:
    keys = f'run_in = "container"\nimage = "{image}"\ncontainer_options = {json.dumps(options)}\n{row}'
    return make_project(root, suites, row=keys, top=f'container_engine = "podman"\n{top}')


def containers_of(row: str) -> list[str]:
    """Every container of the row the engine still knows, running or not."""
    out = subprocess.run(
        ["podman", "ps", "-a", "--format", "{{.Names}}", "--filter", f"name=device-matrix-{row}-"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    assert containers_of("fixture") == []
    yield
    assert containers_of("fixture") == []  # --rm, and nothing the runner ended stays behind


def test_a_row_is_green_in_an_image_with_only_python3(
    images: engine_images.Images, tmp_path: Path, no_leftovers: None
) -> None:
    # Seen (#21): podman's info (1) and an image without `python` (2), for real
    p = podman_project(tmp_path, ["passing"], images.pytest8)
    (p.root / "suites" / "passing" / "test_in_the_container.py").write_text(PROBE_SUITE)
    proc = p.run("run", "--device", "fixture", env=SECRETS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = p.record()
    assert rec["mode"] == "container" and rec["status"] == "passed"
    assert rec["summary"]["passed"] == 41 and rec["summary"]["total"] == 41
    env = rec["environment"]
    version = subprocess.run(
        ["podman", "version", "--format", "{{.Client.Version}}"], capture_output=True, text=True, check=True
    )
    assert (env["container_engine"], env["container_engine_version"]) == ("podman", version.stdout.strip())
    assert env["container_python"] == "python3" and env["in_container"] is True
    # the child's own snapshot: the image's interpreter and pytest, not this host's
    assert env["python"] == "3.11.2" and env["packages"]["pytest"] == "8.0.0"
    # files it wrote into the project are the invoking user's (root here: rootful podman)
    written = p.root / "written-in-the-container.txt"
    assert (written.stat().st_uid, written.stat().st_gid) == (os.getuid(), os.getgid())
    assert (p.results / "fixture" / "run.json").stat().st_uid == os.getuid()
    # the host's secrets never reached it, by name or by value
    inside = json.loads((p.root / "environment-in-the-container.json").read_text())
    assert not set(SECRETS) & set(inside)
    assert not [k for k, v in inside.items() if any(s in v for s in SECRETS.values())]
    assert inside["DEVICE_MATRIX_IN_IMAGE"] == "fixture" and inside["PJRT_DEVICE"] == "CPU"


def test_a_segfault_is_diagnosed_natively_rerun_and_its_repro_reproduces(
    images: engine_images.Images, tmp_path: Path, no_leftovers: None
) -> None:
    p = podman_project(tmp_path, ["segv"], images.pytest8)
    proc = p.run("run", "--device", "fixture", env=SECRETS, gdb=True)  # the test reads what gdb says
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rec = p.record()
    (crash,) = rec["crashes"]
    diagnosis = crash["diagnosis"]
    assert (diagnosis["signal_name"], diagnosis["exit_code"]) == ("SIGSEGV", 139)
    assert "in test_c_dies" in diagnosis["python_stack"]
    # the native stack, read from the core with the image's own binaries and libraries
    assert diagnosis["gdb_frames"] and "strlen" in diagnosis["gdb_frames"][0], diagnosis
    assert diagnosis.get("gdb_frames_missing") is None  # the files matched the core: gdb believed
    assert "ffi_call" in diagnosis["gdb_frames"]
    backtrace = diagnosis["gdb_backtrace"]
    assert "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so" in backtrace
    assert "device-matrix-image-files-" not in backtrace  # the image's paths, not the copy's
    assert diagnosis["core_file"].endswith("(deleted after reading)")
    assert not list(p.root.glob("core*"))
    # rerun alone in the container: the same crash
    assert crash["classification"] == "deterministic"
    assert [(r["outcome"], r["signal_name"]) for r in crash["reruns"]] == [("crashed", "SIGSEGV")]
    assert {t["nodeid"].rsplit("::", 1)[1]: t["outcome"] for t in rec["tests"]} == {
        "test_a_before": "passed",
        "test_b_before": "passed",
        "test_c_dies": "crashed",
        "test_d_after": "passed",
        "test_e_after_fails": "failed",
    }
    # Seen (#21): the repro is the run's command, options and all, and it reproduces
    line = crash["repro"].splitlines()[0]
    argv = shlex.split(line)
    assert argv[:4] == ["podman", "run", "--rm", "--init"]
    assert "nofile=1024:1024" in argv and "nproc=1024:1024" in argv
    assert argv[argv.index(images.pytest8) + 1] == "python3"
    repro = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env={**clean_env(), **SECRETS}, check=False
    )
    assert repro.returncode == 139, repro.stdout + repro.stderr
    assert "Fatal Python error: Segmentation fault" in repro.stderr
    assert 'ctypes/__init__.py", line' in repro.stderr and "test_c_dies" in repro.stderr


def test_a_crash_and_its_rerun_each_keep_their_own_core(
    images: engine_images.Images, tmp_path: Path, no_leftovers: None
) -> None:
    # Seen: in a full CI run gdb_frames were ['??', 'initgroups@plt', 'log10@plt', ...]: the
    # rerun crashed in the same folder, and the kernel replaced the file `core` with its own
    # while the crash's was still to be read (or deleted it, or gdb read it half written)
    p = podman_project(tmp_path, ["segv"], images.pytest8)
    proc = p.run("run", "--device", "fixture", "--keep-cores", gdb=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (crash,) = p.record()["crashes"]
    diagnosis = crash["diagnosis"]
    assert [r["outcome"] for r in crash["reruns"]] == ["crashed"]
    kept = Path(diagnosis["core_file"])
    rerun = p.root / "core"  # the rerun's core took the name
    assert kept != rerun and kept.parent == p.root and kept.exists() and rerun.exists()
    assert kept.stat().st_mtime < rerun.stat().st_mtime
    assert "strlen" in diagnosis["gdb_frames"][0] and "ffi_call" in diagnosis["gdb_frames"], diagnosis
    assert diagnosis.get("gdb_frames_missing") is None


def test_a_hang_is_killed_at_its_deadline(images: engine_images.Images, tmp_path: Path, no_leftovers: None) -> None:
    p = podman_project(tmp_path, ["hang"], images.pytest8)
    started = time.monotonic()
    proc = p.run("run", "--device", "fixture", "--test-timeout", "3", "--reruns", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rec = p.record()
    (crash,) = rec["crashes"]
    assert crash["kind"] == "timeout" and crash["nodeid"].endswith("::test_c_dies") and crash["deadline"] == 3
    # the stacks were asked for through the engine (SIGUSR1 to the container) before the kill
    assert "in test_c_dies" in crash["diagnosis"]["python_stack"]
    outcomes = {t["nodeid"].rsplit("::", 1)[1]: t["outcome"] for t in rec["tests"]}
    assert outcomes["test_c_dies"] == "timeout" and outcomes["test_d_after"] == "passed"
    assert time.monotonic() - started < 90


def test_sigterm_to_the_runner_ends_the_container(
    images: engine_images.Images, tmp_path: Path, no_leftovers: None
) -> None:
    p = podman_project(tmp_path, ["hang"], images.pytest8, row="test_timeout = 600")
    runner = subprocess.Popen(
        [sys.executable, "-m", "device_matrix", "--project", str(p.root), "run", "--device", "fixture"],
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
    time.sleep(0.5)
    assert containers_of("fixture"), "the row's container should be running"
    inside = [pid for pid in _pids() if str(p.root) in _cmdline(pid) and "pytest" in _cmdline(pid)]
    assert inside  # rootful: the container's processes are this host's too
    runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 128 + signal.SIGTERM, out + err
    assert containers_of("fixture") == []
    assert [pid for pid in inside if Path(f"/proc/{pid}").exists() and _state(pid) != "Z"] == []
    rec = p.record()
    assert rec["status"] == "interrupted"
    outcomes = {t["nodeid"].rsplit("::", 1)[1]: t["outcome"] for t in rec["tests"]}
    assert outcomes["test_a_before"] == "passed" and outcomes["test_c_dies"] == "not_run"


def test_an_image_that_cannot_run_the_row_is_refused_before_any_test(
    images: engine_images.Images, tmp_path: Path, no_leftovers: None
) -> None:
    # Seen (#21): Debian's pytest 7.2 ended in INTERNALERROR (no pytest.Directory)
    p = podman_project(tmp_path, ["passing"], images.pytest7)
    proc = p.run("run", "--device", "fixture")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert images.pytest7 in proc.stderr
    assert "python3: Python 3.11.2 with pytest 7.2.1" in proc.stderr and "pytest >= 8.0" in proc.stderr
    assert "python: not found" in proc.stderr
    assert "INTERNALERROR" not in proc.stdout + proc.stderr
    rec = p.record()
    assert rec["status"] == "error" and rec["reason"].startswith("refused: ") and rec["attempts"] == []
    assert rec["environment"]["container_engine"] == "podman"
    # an image without pytest at all, and an interpreter the row names that is not there
    (p.root / "pyproject.toml").write_text(
        (p.root / "pyproject.toml").read_text().replace(images.pytest7, images.python3_only)
    )
    no_pytest = p.run("run", "--device", "fixture")
    assert no_pytest.returncode == 5 and "without pytest (ModuleNotFoundError" in no_pytest.stderr
    named = podman_project(tmp_path / "named", ["passing"], images.pytest8, row='container_python = "python3.12"')
    missing = named.run("run", "--device", "fixture")
    assert missing.returncode == 5 and "python3.12: not found" in missing.stderr, missing.stderr


def test_rootless_podman_writes_as_the_invoking_user(images: engine_images.Images) -> None:
    user = os.environ.get("DEVICE_MATRIX_ROOTLESS_USER")
    if not user:
        unavailable("no DEVICE_MATRIX_ROOTLESS_USER (a user with subordinate ids for rootless podman)")
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        unavailable("no /usr/bin/python3 for the rootless user to run device-matrix with")
    # the tests' own interpreter may sit where the user cannot reach (a home directory); the
    # system one runs the checkout with this environment's dependencies, of the same version
    theirs = subprocess.run(
        [python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True, check=True
    )
    assert theirs.stdout.split() == [str(n) for n in sys.version_info[:2]], f"{python} is not this Python version"
    paths = sysconfig.get_paths()
    pythonpath = os.pathsep.join(dict.fromkeys([str(REPO), paths["purelib"], paths["platlib"]]))
    engine_images.share_with(user, images.pytest8)
    who = pwd.getpwnam(user)
    root = Path(tempfile.mkdtemp(prefix="device-matrix-rootless-"))
    try:
        # rootless networking (slirp4netns) needs /dev/net/tun, which this host may not give
        p = podman_project(root, ["passing"], images.pytest8, options=["--network=none", *engine_images.ULIMITS])
        (p.root / "suites" / "passing" / "test_in_the_container.py").write_text(PROBE_SUITE)
        for path in [root, *root.rglob("*")]:
            os.chown(path, who.pw_uid, who.pw_gid)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": who.pw_dir, "PYTHONPATH": pythonpath, **SECRETS}
        argv = ["runuser", "-u", user, "--", "env", *(f"{k}={v}" for k, v in env.items())]
        argv += [python, "-m", "device_matrix", "--project", str(root), "run", "--device", "fixture"]
        proc = subprocess.run(argv, cwd="/", capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        written = root / "written-in-the-container.txt"
        assert (written.stat().st_uid, written.stat().st_gid) == (who.pw_uid, who.pw_gid)
        assert (root / "results" / "fixture" / "run.json").stat().st_uid == who.pw_uid
        # the container's root is the user already: no --user to a subordinate id
        log = (root / "results" / "fixture" / "output.log").read_text()
        assert "podman run" in log and "--user" not in log
        inside = json.loads((root / "environment-in-the-container.json").read_text())
        assert not set(SECRETS) & set(inside)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _pids() -> list[int]:
    return [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def test_the_image_check_leaves_the_runs_plan_as_made(
    images: engine_images.Images, tmp_path: Path, no_leftovers: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # #41: what the image's check found (python3, in an image without `python`) was kept on the
    # plan's executor: it is the run's state; the plan, to the bottom, ends as its maker made it
    p = podman_project(tmp_path, ["passing"], images.pytest8)
    write_suite(p, "one", {"test_one.py": "def test_one():\n    pass\n"})
    plans = watch_plans(monkeypatch)
    cfg = config.load(p.root)
    record = runner.run_row(cfg, plan_row(cfg, cfg.row("fixture")), RunOptions(), Output(io.StringIO()))
    [(setup, born)] = plans
    assert plan_state(setup) == born
    assert isinstance(setup.executor, ContainerExecutor) and setup.executor.found is None
    # the children ran with what the check found: the image has no `python`
    assert (record["status"], record["environment"]["container_python"]) == ("passed", "python3")
