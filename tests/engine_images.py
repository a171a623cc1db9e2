"""Images for the tests against a real container engine, built here, never pulled.

    python3 -m tests.engine_images     # build what is missing, print the images

A Debian system from Debian's packages (debootstrap, minbase, with python3 and nothing
called ``python``), imported into podman, then one layer per pytest version of wheels
fetched with pip on this host (pip inside a container has no index to reach). Each
image's tag is a hash of what it is built from, so a machine builds each once; a changed
input is a new tag.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypedDict

ENGINE = "podman"


class BaseSystem(TypedDict):
    """What the base image is built from (its tag hashes this, as written)."""

    suite: str
    mirror: str
    variant: str
    include: list[str]
    python: str
    recipe: int


BASE: BaseSystem = {
    "suite": "bookworm",
    "mirror": "http://deb.debian.org/debian",
    "variant": "minbase",
    "include": ["python3"],
    "python": "python3.11",  # bookworm's; checked after debootstrap
    "recipe": 1,  # raised when the way the images are built changes: new tags, built again
}
# the oldest pytest the plugin supports, and Debian bookworm's own (python3-pytest 7.2),
# with the versions of their dependencies pinned so the tag says what is inside
LAYERS = {
    "pytest8": ["pytest==8.0.0", "pluggy==1.4.0", "iniconfig==2.0.0", "packaging==23.2"],
    "pytest7": ["pytest==7.2.1", "pluggy==1.0.0", "iniconfig==2.0.0", "packaging==23.0", "attrs==22.2.0"],
}
# The runner image of the offline GitHub Actions run (tests/actions_run.py, docs/github-actions.md),
# in two layers. ACTIONS_ROW: the cpu row's `install` packages already installed, so
# `ci install --device cpu` finds them satisfied instead of installing 7 GB in every row job
# (no container reaches an index here), and the libpython they link to; built once, when
# they change. ACTIONS on top (seconds): pip, and a folder of wheels that stands in for PyPI
# (/etc/pip.conf: no index, these wheels) with the build backend and device-matrix's
# dependencies (tests/unit/test_actions_image.py holds it to pyproject.toml).
ACTIONS_ROW = {
    "installed": ["torch==2.9.0", "torch_xla==2.9.0"],
    "libpython": "Debian's, of the base image's python",
}
ACTIONS = {
    "pip": "pip==26.3",
    "wheelhouse": [
        "setuptools==84.2.1",
        "pytest==9.1.1",
        "pluggy==1.7.0",
        "iniconfig==2.3.1",
        "packaging==26.4",
        "pygments==2.21.0",
        "requests==2.34.2",
        "urllib3==2.8.0",
        "idna==3.20",
        "certifi==2026.10.19.post1",
        "charset-normalizer==3.5.3",
        "pystack==1.7.2",
    ],
}
WHEELHOUSE = "/opt/device-matrix-wheelhouse"
# the limits every container here runs under: the sandbox lacks CAP_SYS_RESOURCE, so an
# engine default above these fails in setrlimit; any --ulimit given replaces the engine's
# default_ulimits (the runner gives core=)
ULIMITS = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
LOCK = Path(tempfile.gettempdir()) / "device-matrix-test-images.lock"
WORK = Path("/var/tmp") if Path("/var/tmp").is_dir() else Path(tempfile.gettempdir())


class CannotBuild(Exception):
    """Why the images cannot be built on this machine."""


@dataclass(frozen=True)
class Images:
    python3_only: str  # Debian's python3 without pytest, and no `python`
    pytest8: str  # the same with pytest 8.0.0
    pytest7: str  # the same with pytest 7.2.1


def _tag(inputs: object) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def actions_names() -> tuple[str, str]:
    """The runner image's two layers: the row's packages, and the runner on top of them."""
    row = f"localhost/device-matrix-actions-row:{_tag([BASE, ACTIONS_ROW])}"
    return row, f"localhost/device-matrix-actions-runner:{_tag([BASE, ACTIONS_ROW, ACTIONS])}"


def names() -> Images:
    base = f"localhost/device-matrix-test-debian:{_tag(BASE)}"
    layers = {name: f"localhost/device-matrix-test-{name}:{_tag([BASE, pins])}" for name, pins in LAYERS.items()}
    return Images(python3_only=base, pytest8=layers["pytest8"], pytest7=layers["pytest7"])


def exists(image: str, *, user: str | None = None) -> bool:
    argv = [ENGINE, "image", "exists", image]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    return subprocess.run(argv, capture_output=True, check=False, cwd="/").returncode == 0


def _run(argv: list[str], what: str, *, stdin: IO[bytes] | None = None) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=stdin, cwd="/")
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise CannotBuild(f"{what} failed (exit {proc.returncode}): {' | '.join(tail)}")


@contextlib.contextmanager
def locked(path: Path = LOCK) -> Iterator[None]:
    """``path`` held exclusively: the test workers, and other test sessions on this machine,
    build one at a time (and run act one at a time: tests/actions_run.py)."""
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build_base(image: str, log: Callable[[str], None]) -> None:
    if os.geteuid() != 0:
        raise CannotBuild(f"{image} is not built yet, and debootstrap needs root")
    if shutil.which("debootstrap") is None:
        raise CannotBuild(f"{image} is not built yet, and debootstrap is not installed (apt-get install debootstrap)")
    with tempfile.TemporaryDirectory(prefix="device-matrix-debootstrap-", dir=WORK) as tmp:
        root = Path(tmp) / "root"
        log(f"debootstrap {BASE['suite']} into {root} (a few minutes, once per machine)")
        options = [f"--variant={BASE['variant']}", f"--include={','.join(BASE['include'])}"]
        _run(["debootstrap", *options, BASE["suite"], str(root), BASE["mirror"]], "debootstrap")
        if not (root / "usr" / "lib" / BASE["python"]).is_dir():
            raise CannotBuild(f"{BASE['suite']}'s python3 is not {BASE['python']} any more: update BASE")
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        try:
            _run([ENGINE, "import", "-", image], f"{ENGINE} import", stdin=tar.stdout)
        finally:
            if tar.stdout is not None:
                tar.stdout.close()
            tar.wait()


def _build_layer(base: str, image: str, pins: list[str], log: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="device-matrix-layer-", dir=WORK) as tmp:
        wheels, site = Path(tmp) / "wheels", Path(tmp) / "site"
        log(f"{image}: {' '.join(pins)} from wheels")
        version = BASE["python"].removeprefix("python")
        options = ["-q", "--no-deps", "--only-binary=:all:", "--python-version", version, "-d", str(wheels)]
        _run([sys.executable, "-m", "pip", "download", *options, *pins], "pip download")
        # pure-Python wheels: unpacked where Debian's python3 looks (dist-info and all,
        # so importlib.metadata sees the versions)
        for wheel in sorted(wheels.glob("*.whl")):
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(site)
        (Path(tmp) / "Containerfile").write_text(
            f"FROM {base}\nCOPY site/ /usr/local/lib/{BASE['python']}/dist-packages/\n"
        )
        _run([ENGINE, "build", "--pull=never", "-q", "-t", image, "-f", str(Path(tmp) / "Containerfile"), tmp], "build")


def _build_actions_row(base: str, image: str, log: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="device-matrix-actions-", dir=WORK) as tmp:
        context = Path(tmp)
        log(f"{image}: {' '.join(ACTIONS_ROW['installed'])} installed (minutes, once per machine)")
        # the row's packages with their dependencies, for the image's python (same minor version)
        version = BASE["python"].removeprefix("python")
        target = ["--no-compile", "--only-binary=:all:", "--python-version", version, "--target", str(context / "site")]
        _run([sys.executable, "-m", "pip", "install", "-q", *target, *ACTIONS_ROW["installed"]], "pip install --target")
        _libpython(base, context / "libpython")
        (context / "Containerfile").write_text(
            f"FROM {base}\n"
            f"COPY site/ /usr/local/lib/{BASE['python']}/dist-packages/\n"
            "COPY libpython/ /usr/lib/x86_64-linux-gnu/\n"
        )
        _run([ENGINE, "build", "--pull=never", "-q", "-t", image, "-f", str(context / "Containerfile"), tmp], "build")


def _build_actions(row: str, image: str, log: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="device-matrix-actions-", dir=WORK) as tmp:
        context = Path(tmp)
        log(f"{image}: pip and a wheelhouse of {len(ACTIONS['wheelhouse'])} wheels on {row}")
        binary = ["--only-binary=:all:", "--python-version", BASE["python"].removeprefix("python")]
        # the wheelhouse (no dependencies: the list is whole) and pip itself, each into its folder
        for folder, wanted in (("wheels", list(ACTIONS["wheelhouse"])), ("pip", [str(ACTIONS["pip"])])):
            download = ["download", "-q", "--no-deps", *binary, "-d", str(context / folder), *wanted]
            _run([sys.executable, "-m", "pip", *download], "pip download")
        for wheel in (context / "pip").glob("*.whl"):
            with zipfile.ZipFile(wheel) as zf:
                zf.extractall(context / "site")
        (context / "pip.conf").write_text(f"[global]\nno-index = true\nfind-links = {WHEELHOUSE}\n")
        (context / "Containerfile").write_text(
            f"FROM {row}\n"
            f"COPY site/ /usr/local/lib/{BASE['python']}/dist-packages/\n"
            f"COPY wheels/ {WHEELHOUSE}/\n"
            "COPY pip.conf /etc/pip.conf\n"
        )
        _run([ENGINE, "build", "--pull=never", "-q", "-t", image, "-f", str(context / "Containerfile"), tmp], "build")


def _libpython(base: str, dest: Path) -> None:
    """The image's libpython, as setup-python's Pythons have one (torch_xla links to it):
    Debian's package of the very version of the image's python, fetched by the host's apt."""
    python = BASE["python"]
    query = [ENGINE, "run", "--rm", *ULIMITS, base, "dpkg-query", "-W", "-f", "${Version}", python]
    version = subprocess.run(query, capture_output=True, text=True, check=False, cwd="/").stdout.strip()
    if not version or shutil.which("apt-get") is None:
        raise CannotBuild(f"the lib{python} of {base}'s {python} {version or '?'} needs apt-get here")
    debs = dest.parent / "debs"
    debs.mkdir()
    proc = subprocess.run(
        ["apt-get", "download", f"lib{python}={version}"], cwd=debs, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise CannotBuild(
            f"apt-get download lib{python}={version} failed (apt-get update first?): {proc.stderr.strip()}"
        )
    (deb,) = debs.glob("*.deb")
    unpacked = dest.parent / "unpacked"
    _run(["dpkg-deb", "-x", str(deb), str(unpacked)], "dpkg-deb -x")
    shutil.copytree(unpacked / "usr" / "lib" / "x86_64-linux-gnu", dest, symlinks=True)


def ensure_actions(log: Callable[[str], None] = print) -> str:
    """The offline Actions run's runner image, built where missing."""
    base = ensure(log).python3_only
    row, image = actions_names()
    with locked():
        if not exists(row):
            _build_actions_row(base, row, log)
        if not exists(image):
            _build_actions(row, image, log)
    return image


def ensure(log: Callable[[str], None] = print) -> Images:
    """Every image, built where missing; CannotBuild says why one cannot be."""
    if shutil.which(ENGINE) is None:
        raise CannotBuild(f"{ENGINE} is not installed")
    images = names()
    with locked():
        started = time.monotonic()
        if not exists(images.python3_only):
            _build_base(images.python3_only, log)
        for name, pins in LAYERS.items():
            image = getattr(images, name)
            if not exists(image):
                _build_layer(images.python3_only, image, pins, log)
        log(f"images ready in {time.monotonic() - started:.1f} s")
    return images


def share_with(user: str, image: str) -> None:
    """Give a rootless user's own engine storage the image (rootless podman has its own)."""
    with locked():
        if exists(image, user=user):
            return
        save = subprocess.Popen([ENGINE, "save", image], stdout=subprocess.PIPE)
        try:
            _run(["runuser", "-u", user, "--", ENGINE, "load"], f"{ENGINE} load as {user}", stdin=save.stdout)
        finally:
            if save.stdout is not None:
                save.stdout.close()
            save.wait()


if __name__ == "__main__":
    try:
        built = ensure()
    except CannotBuild as exc:
        print(f"cannot build the test images: {exc}", file=sys.stderr)
        sys.exit(1)
    for value in vars(built).values():
        print(value)
