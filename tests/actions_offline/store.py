"""The offline run's stand-ins for the actions act cannot fetch (docs/github-actions.md,
"What the offline run replaces"): each does what its action does, with local files.

Every job container of the run has the run's store mounted at ``STORE`` (this file too): the artifacts of
each run, the caches, and the repositories' trees by commit (exported on the host). Each
action.yml beside this file calls one function here with its inputs in ``INPUT_*``.
The store's ``log.jsonl`` records what each stand-in did, for the run's checks.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import sys
import tarfile
import time
from pathlib import Path

STORE = Path("/var/run/device-matrix-offline")


def _input(name: str) -> str:
    return os.environ.get(f"INPUT_{name.upper().replace('-', '_')}", "").strip()


def _lines(name: str) -> list[str]:
    return [line.strip() for line in _input(name).splitlines() if line.strip()]


def _log(action: str, **fields: object) -> None:
    entry = {
        "action": action,
        "job": os.environ.get("GITHUB_JOB", ""),
        "run": os.environ.get("GITHUB_RUN_ID", ""),
        **fields,
    }
    with (STORE / "log.jsonl").open("a") as fh:
        fh.write(json.dumps(entry) + "\n")


def _output(name: str, value: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a") as fh:
        fh.write(f"{name}={value}\n")


def _fail(message: str) -> None:
    print(f"::error::{message}")
    sys.exit(1)


def _workspace() -> Path:
    return Path(os.environ["GITHUB_WORKSPACE"])


def _artifacts() -> Path:
    return STORE / "artifacts" / os.environ["GITHUB_RUN_ID"]


def checkout() -> None:
    """actions/checkout of a repository and commit act does not copy itself: the tree
    exported on the host for that commit (``repos/OWNER/NAME/refs.json`` names them)."""
    repository = _input("repository")
    if not repository:
        _fail("repository is empty: the expression given for it evaluated to nothing")
    ref = _input("ref") or os.environ["GITHUB_SHA"]
    refs_file = STORE / "repos" / repository / "refs.json"
    refs = json.loads(refs_file.read_text()) if refs_file.is_file() else {}
    if ref not in refs:
        _fail(f"{repository}@{ref} is not in the offline store (known: {', '.join(sorted(refs)) or 'none'})")
    dest = _workspace() / _input("path")
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(refs_file.parent / refs[ref], dest, dirs_exist_ok=True, symlinks=True)
    _log("checkout", repository=repository, ref=ref, path=_input("path"))


def setup_python() -> None:
    """actions/setup-python: the image's Python when it is the version asked for, as a
    virtual environment in the tool cache put first on PATH (pip installs into it)."""
    wanted = _input("python-version")
    have = "{}.{}".format(*sys.version_info[:2])
    if wanted and wanted != have:
        _fail(f"python-version {wanted} asked for; the offline runner image has {have} only")
    import venv

    location = Path(os.environ.get("RUNNER_TOOL_CACHE", "/opt/hostedtoolcache")) / "Python" / have / "x64"
    venv.create(location, system_site_packages=True, with_pip=False)
    with open(os.environ["GITHUB_PATH"], "a") as fh:
        fh.write(f"{location / 'bin'}\n")
    with open(os.environ["GITHUB_ENV"], "a") as fh:
        fh.write(f"pythonLocation={location}\n")
    _output("python-version", have)
    _output("python-path", str(location / "bin" / "python"))
    _log("setup-python", version=have)


def upload() -> None:
    """actions/upload-artifact (v4+): one path, a file or a folder; a folder's content is
    the artifact's root, a file is stored by its name; a name uploaded twice in a run is
    refused unless ``overwrite``."""
    name, path = _input("name") or "artifact", _workspace() / _input("path")
    dest = _artifacts() / name
    if not path.exists():
        how = _input("if-no-files-found") or "warn"
        message = f"No files were found with the provided path: {_input('path')}. No artifacts will be uploaded."
        if how == "error":
            _fail(message)
        if how == "warn":
            print(f"::warning::{message}")
        _log("upload", name=name, files=[])
        return
    if dest.exists():
        if _input("overwrite") != "true":
            _fail(f"an artifact named {name} was uploaded before in this run (overwrite: true replaces it)")
        shutil.rmtree(dest)
    if path.is_dir():
        shutil.copytree(path, dest, symlinks=False)
    else:
        dest.mkdir(parents=True)
        shutil.copy2(path, dest / path.name)
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    _log("upload", name=name, files=files)
    print(f"artifact {name}: {len(files)} file(s)")


def download() -> None:
    """actions/download-artifact (v4+): ``name`` into ``path``; else every artifact of the
    run whose name matches ``pattern``, each into ``path/NAME`` (``merge-multiple``: all into ``path``)."""
    path = _workspace() / _input("path")
    stored = sorted(p.name for p in _artifacts().iterdir()) if _artifacts().is_dir() else []
    name = _input("name")
    if name:
        if name not in stored:
            _fail(f"Unable to download artifact(s): Artifact not found for name: {name}")
        chosen, into = [name], {name: path}
    else:
        chosen = [n for n in stored if fnmatch.fnmatchcase(n, _input("pattern") or "*")]
        merge = _input("merge-multiple") == "true"
        into = {n: path if merge else path / n for n in chosen}
    for n in chosen:
        shutil.copytree(_artifacts() / n, into[n], dirs_exist_ok=True)
    _log("download", pattern=_input("pattern"), name=name, artifacts=chosen)
    print(f"downloaded {len(chosen)} artifact(s): {', '.join(chosen) or 'none'}")


def _cache_file(key: str) -> Path:
    return STORE / "cache" / f"{key.replace('/', '%2F')}.tar"


def restore() -> None:
    """actions/cache/restore: the exact key, else the newest cache whose key starts with the
    first restore key that has one; ``cache-hit`` only on the exact key."""
    key = _input("key")
    _output("cache-primary-key", key)
    found = _cache_file(key) if _cache_file(key).is_file() else None
    if found is None:
        for prefix in _lines("restore-keys"):
            stored = sorted(
                (p for p in (STORE / "cache").glob("*.tar") if p.stem.startswith(prefix.replace("/", "%2F"))),
                key=lambda p: p.stat().st_mtime,
            )
            if stored:
                found = stored[-1]
                break
    if found is None:
        if _input("fail-on-cache-miss") == "true":
            _fail(f"Failed to restore cache entry. Exiting as fail-on-cache-miss is set. Input key: {key}")
        print(f"Cache not found for input keys: {key}")
        _log("cache-restore", key=key, matched="")
        return
    matched = found.stem.replace("%2F", "/")
    with tarfile.open(found) as tar:
        if hasattr(tarfile, "data_filter"):  # 3.11.4 and later, and Debian's backport
            tar.extractall(_workspace(), filter="data")
        else:
            tar.extractall(_workspace())
    _output("cache-hit", "true" if matched == key else "false")
    _output("cache-matched-key", matched)
    _log("cache-restore", key=key, matched=matched)
    print(f"Cache restored from key: {matched}")


def save() -> None:
    """actions/cache/save: the paths under ``key``; a key that exists is kept (a warning)."""
    key, target = _input("key"), _cache_file(_input("key"))
    paths = [p for p in _lines("path") if (_workspace() / p).exists()]
    if not paths:
        print(
            "::warning::Path Validation Error: Path(s) specified in the action for caching do(es) not exist,"
            " hence no cache is being saved."
        )
        _log("cache-save", key=key, saved=False)
        return
    if target.exists():
        print(
            f"::warning::Failed to save: Unable to reserve cache with key {key},"
            " another job may be creating this cache."
        )
        _log("cache-save", key=key, saved=False)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.part")
    with tarfile.open(partial, "w") as tar:
        for p in paths:
            tar.add(_workspace() / p, arcname=p)
    os.replace(partial, target)
    time.sleep(0.01)  # mtimes order the caches of one prefix
    _log("cache-save", key=key, saved=True)
    print(f"Cache saved with key: {key}")


if __name__ == "__main__":
    {
        "checkout": checkout,
        "setup-python": setup_python,
        "upload": upload,
        "download": download,
        "restore": restore,
        "save": save,
    }[sys.argv[1]]()
