"""The rows of a project's matrix as nox sessions: one call in its ``noxfile.py`` (#20).

    import device_matrix.nox

    device_matrix.nox.sessions()

defines one session per configured row (``nox -s cpu``), tagged ``rows`` (``nox -t rows``).
A row whose device is absent here is a session that skips with the reason before any venv
is made. A present row's session makes its venv (``--system-site-packages``, so a row's
image or a TPU VM with torch_xla installed system-wide is used as it is) and installs, once:
the row's packages (``install``, ``install_args``), this very device-matrix (the wheel,
source tree or version nox imported this module from, never a name on an index that may
serve another) with the project (``project_install``); then it runs ``python -m
device_matrix run --device ROW`` with the venv's interpreter, so the repro lines name it.
Arguments after ``--`` go to ``device-matrix run``. Under ``nox --no-venv`` the row runs
with the interpreter nox runs in and installs nothing.

Only this module imports nox: a project that does not use nox never needs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import nox
import nox.registry
from nox.virtualenv import PassthroughEnv

from device_matrix import config as config_mod
from device_matrix import tomlfile
from device_matrix.config import Config
from device_matrix.devices import detect
from device_matrix.errors import ConfigError, DeviceMatrixError, EnvironmentProblem

__all__ = ["INSTALL_STAMP", "TAG", "device_matrix_requirement", "install_once", "run_row", "sessions"]

TAG = "rows"
INSTALL_STAMP = ".device-matrix-install.json"
DISTRIBUTION = "device-matrix"
# backends whose venv takes virtualenv's --system-site-packages (conda's do not)
_SYSTEM_SITE_BACKENDS = (None, "virtualenv", "venv", "uv")


def sessions(
    rows: Iterable[str] | None = None,
    *,
    python: str | Mapping[str, str] | None = None,
    venv_backend: str | None = None,
    project: str | os.PathLike[str] | None = None,
) -> list[str]:
    """Define one nox session per row and return their names.

    ``rows``: the rows to define (default: every configured row). ``python``: the
    interpreter of the rows' venvs, one for all or per row (``{"cuda": "3.10"}``; default:
    the one nox runs with). ``venv_backend``: nox's (``"uv"``, ``"virtualenv"``...).
    ``project``: the project whose configuration is read (default: the noxfile's folder,
    where nox runs it). An invalid configuration ends nox with the error, a TIP and exit 3.
    """
    _no_uv_here()
    try:
        root = _project_folder(project)
        cfg = config_mod.load(root)
        names = _chosen_rows(cfg, rows, python)
    except DeviceMatrixError as exc:
        sys.stderr.write(f"ERROR {exc.message}\n" + (f"TIP   {exc.tip}\n" if exc.tip else ""))
        raise SystemExit(exc.exit_code) from None
    for name in names:
        interpreter = python.get(name) if isinstance(python, Mapping) else python
        _define(cfg, name, interpreter, venv_backend)
    return names


def _no_uv_here() -> None:
    """Tell nox up front that uv is nowhere here, where it is not: nox asks for uv for every
    session it runs, whatever the backend (even ``--no-venv``), and logs "uv binary not found."
    before each row (#30). What nox itself would find: no $UV, no ``uv`` on PATH, no ``uv``
    package beside nox; anywhere else nox looks for itself."""
    import nox.virtualenv
    from packaging.version import Version

    if os.environ.get("UV") is None and shutil.which("uv") is None and find_spec("uv") is None:
        nox.virtualenv.HAS_UV, nox.virtualenv.UV, nox.virtualenv.UV_VERSION = False, "uv", Version("0.0")


def _project_folder(project: str | os.PathLike[str] | None) -> Path:
    """The folder whose configuration is read: one that is there (#30)."""
    if project is None:
        return Path.cwd()
    root = Path(project)
    if not root.is_dir():
        raise ConfigError(
            f"sessions(project={str(project)!r}): " + ("not a folder" if root.exists() else "no such folder"),
            tip="Pass the folder of the project's pyproject.toml, or leave project out (the noxfile's folder).",
        )
    return root


def _chosen_rows(cfg: Config, rows: Iterable[str] | None, python: str | Mapping[str, str] | None) -> list[str]:
    """The rows to define: each a row of the project, a session name the noxfile does not
    already use, and every row the ``python`` mapping names among them (#30)."""
    if isinstance(rows, str):
        raise ConfigError(
            f"sessions(rows={rows!r}): rows is a list of row names, not one string",
            tip=f"Write sessions([{json.dumps(rows)}]).",
        )
    names = list(cfg.rows) if rows is None else [cfg.row(name).name for name in rows]
    if isinstance(python, Mapping):
        unknown = [name for name in python if name not in names]
        if unknown:
            raise ConfigError(
                f"sessions(python=...) names {', '.join(map(repr, unknown))}, not a row this call defines",
                allowed=", ".join(names),
                tip="Name the rows of the project (device-matrix list), or add the row to rows=.",
            )
    taken = [name for name in names if name in nox.registry.get()]
    if taken:
        raise ConfigError(
            f"the noxfile already has a session named {', '.join(map(repr, taken))}: a row's session would replace it",
            tip="Rename that session, or leave the row out: sessions(rows=[...]) with the other rows.",
        )
    return names


def _define(cfg: Config, name: str, python: str | None, venv_backend: str | None) -> None:
    presence = detect(cfg.row(name))
    if not presence.present:
        # decided before nox makes a venv: an absent device costs no install (#20)
        reason = f"{name} unavailable here: {presence.reason}"

        def absent(session: nox.Session) -> None:
            session.skip(reason)

        absent.__doc__ = f"Run the {name} row of the device matrix (absent here)."
        nox.session(name=name, venv_backend="none", tags=[TAG])(absent)
        return

    def row(session: nox.Session) -> None:
        run_row(session, cfg, name)

    row.__doc__ = f"Run the {name} row of the device matrix."
    params = ["--system-site-packages"] if venv_backend in _SYSTEM_SITE_BACKENDS else []
    nox.session(name=name, python=python, venv_backend=venv_backend, venv_params=params, reuse_venv=True, tags=[TAG])(
        row
    )


def run_row(session: nox.Session, cfg: Config, name: str) -> None:
    """The body of a row's session: plan, install once into the venv, run the row."""
    from device_matrix.run.plan import plan_row

    row = cfg.row(name)
    try:
        plan = plan_row(cfg, row)
        own = device_matrix_requirement()
    except DeviceMatrixError as exc:
        session.error(f"{exc.message}" + (f"\nTIP   {exc.tip}" if exc.tip else ""))
    if plan.mode == "unavailable":
        session.skip(f"{name} unavailable here: {plan.reason}")
    passthrough = isinstance(session.virtualenv, PassthroughEnv)
    env: dict[str, str] = {}
    if passthrough:
        # no venv: the interpreter nox runs in has device-matrix (it imported this module)
        command = [sys.executable, "-m", "device_matrix"]
        if own[:1] == ["-e"]:
            # a checkout (on sys.path, or installed editable): the child imports the same one
            tree = str(Path(__file__).resolve().parent.parent)
            env["PYTHONPATH"] = os.pathsep.join(x for x in (tree, os.environ.get("PYTHONPATH", "")) if x)
    else:
        steps: list[list[str]] = []
        if plan.mode == "local" and row.install:
            steps.append([*row.install, *row.install_args])  # its index options apply to it alone
        # device-matrix and the project in one resolution: a project that lists device-matrix
        # gets this one; but an option of the first step is the whole command's (#42: its
        # --no-deps kept device-matrix's own dependencies out), so then device-matrix goes alone
        project = cfg.project_install if plan.mode == "local" else ()
        first, *rest = project or ((),)
        if requirements_only(first):
            steps.append([*own, *first])
        else:
            steps += [own, list(first)]
        steps.extend(list(step) for step in rest)  # each on its own: a step pip cannot resolve here is one (#30)
        install_once(session, steps, cfg.project_root)
        command = ["python", "-m", "device_matrix"]
    session.run(
        *command,
        "--project",
        str(cfg.project_root),
        "run",
        "--device",
        name,
        *session.posargs,
        external=passthrough,
        env=env,
    )


# pip's options that name requirements, each for its own argument (the rest apply to the whole command)
_REQUIREMENT_OPTIONS = ("-e", "--editable", "-r", "--requirement", "-c", "--constraint")
# the same, joined to their argument: "-e.", "--editable=."
_JOINED = ("-e", "-r", "-c", "--editable=", "--requirement=", "--constraint=")


def requirements_only(step: Sequence[str]) -> bool:
    """Whether ``step`` holds requirements alone (with ``-e``, ``-r``, ``-c``): no option that
    changes how pip installs everything on its command line (``--no-deps``, ``--index-url``)."""
    args = iter(step)
    for arg in args:
        if arg in _REQUIREMENT_OPTIONS:
            next(args, None)
        elif arg.startswith("-") and not arg.startswith(_JOINED):
            return False
    return True


# --- installing, once per venv -------------------------------------------------------


def install_once(session: nox.Session, steps: Sequence[Sequence[str]], project_root: Path) -> None:
    """Run each step's ``pip install`` in the session's venv, unless the stamp says it is done.

    The venv is reused between runs; the stamp records the steps and the metadata of the
    local folders and files they install (a pyproject's [project] table, a wheel's size and
    time), so a changed requirement or project installs again. It is written only after an
    install that ran: ``--no-install`` / ``-R`` on a reused venv never marks one installed.
    """
    local = _local_metadata(steps, project_root)
    wanted = {"steps": [list(s) for s in steps], "local": local}
    digest = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()
    stamp = Path(session.virtualenv.location) / INSTALL_STAMP
    previous = _stamp_digest(stamp)
    if previous == digest:
        session.log("row packages already installed (" + "; ".join(" ".join(s) for s in steps) + ")")
        return
    if _install_skipped(session):
        session.log("--no-install: row packages left as they are")
        return
    if previous is not None:
        # pip keeps an installed version over a wheel file of the same version (a wheel
        # built again at the same path): its files go in first, then each step resolves
        for path in (arg for arg in local if _is_file(arg, project_root)):
            session.install("--force-reinstall", "--no-deps", path)
    for step in steps:
        session.install(*step)
    stamp.write_text(json.dumps({"digest": digest, **wanted}, indent=1), encoding="utf-8")


def _stamp_digest(stamp: Path) -> str | None:
    try:
        data = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    digest = data.get("digest") if isinstance(data, dict) else None
    return digest if isinstance(digest, str) else None


def _is_file(arg: str, project_root: Path) -> bool:
    path = Path(arg)
    return (path if path.is_absolute() else project_root / path).is_file()


def _install_skipped(session: nox.Session) -> bool:
    """--no-install / -R on a reused venv: nox's install does nothing, so no stamp either."""
    no_install = bool(getattr(session._runner.global_config, "no_install", False))
    return no_install and bool(getattr(session.virtualenv, "_reused", False))


def _local_metadata(steps: Sequence[Sequence[str]], project_root: Path) -> dict[str, str]:
    """What a local requirement's install depends on: a folder's packaging metadata, a file's size and time."""
    out: dict[str, str] = {}
    for step in steps:
        for arg in step:
            if arg.startswith("-") or "://" in arg or " @ " in arg:
                continue
            path = Path(arg.split("[", 1)[0])
            path = path if path.is_absolute() else project_root / path
            if path.is_dir():
                out[arg] = _folder_metadata(path)
            elif path.is_file():
                st = path.stat()
                out[arg] = f"{st.st_size}:{st.st_mtime_ns}"
    return out


def _folder_metadata(folder: Path) -> str:
    """A digest of what pip reads to install a folder: [project] and [build-system], setup.py, setup.cfg."""
    parts: list[Any] = []
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file():
        data = tomlfile.read(pyproject)
        parts.append({key: data.get(key) for key in ("project", "build-system")})
    for name in ("setup.py", "setup.cfg"):
        if (folder / name).is_file():
            parts.append((folder / name).read_text(encoding="utf-8", errors="replace"))
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


# --- where this device-matrix comes from ----------------------------------------------


def device_matrix_requirement() -> list[str]:
    """pip arguments that install this very device-matrix into another environment.

    From its installation record (PEP 610 ``direct_url.json``): the local folder
    (editable or not), the wheel file, the VCS commit or the URL it was installed from;
    from an index, its version. Imported from a source tree that is not installed (a
    checkout on ``sys.path``), that tree, editable.
    """
    package = Path(__file__).resolve().parent
    dist = _distribution_of(package)
    tree = package.parent
    # a checkout's own metadata (an .egg-info beside the package) is the checkout too
    beside = dist is not None and Path(str(dist.locate_file(""))).resolve() == tree
    if (dist is None or beside) and _is_source_tree(tree):
        return ["-e", str(tree)]
    if dist is None:
        raise EnvironmentProblem(
            f"device-matrix at {package} is neither installed nor in its source tree",
            tip="Install it into the environment nox runs in: python -m pip install device-matrix "
            "(a wheel, or the repository URL at a tag).",
        )
    return _requirement_of(dist)


def _requirement_of(dist: metadata.Distribution) -> list[str]:
    pinned = [f"{DISTRIBUTION}=={dist.version}"]
    text = dist.read_text("direct_url.json")
    if not text:
        return pinned  # from an index
    try:
        info = json.loads(text)
        url = str(info["url"])
    except (ValueError, KeyError, TypeError):
        return pinned
    if isinstance(info.get("dir_info"), dict):
        path = _file_path(url)
        return ["-e", path] if info["dir_info"].get("editable") else [path]
    vcs = info.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id"):
        sub = info.get("subdirectory")
        return [f"{DISTRIBUTION} @ {vcs['vcs']}+{url}@{vcs['commit_id']}" + (f"#subdirectory={sub}" if sub else "")]
    if isinstance(info.get("archive_info"), dict):
        if url.startswith("file:"):
            path = _file_path(url)
            # the wheel it came from, while it is there; else the same version from an index
            return [path] if Path(path).is_file() else pinned
        return [f"{DISTRIBUTION} @ {url}"]
    return pinned


def _distribution_of(package: Path) -> metadata.Distribution | None:
    """The installed distribution whose files are this package (not another copy of it)."""
    for dist in metadata.distributions(name=DISTRIBUTION):
        located = Path(str(dist.locate_file("device_matrix/__init__.py")))
        if located.is_file() and located.resolve().parent == package:
            return dist
        text = dist.read_text("direct_url.json")
        info = _json(text) if text else None
        if not (isinstance(info, dict) and isinstance(info.get("dir_info"), dict) and "url" in info):
            continue
        # an editable install: its files stay in the folder it was installed from
        if package.is_relative_to(Path(_file_path(str(info["url"]))).resolve()):
            return dist
    return None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _file_path(url: str) -> str:
    parts = urlsplit(url)
    return unquote(parts.path) if parts.scheme == "file" else url


def _is_source_tree(folder: Path) -> bool:
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file():
        return False
    try:
        project = tomlfile.read(pyproject).get("project", {})
    except ConfigError:
        return False
    return isinstance(project, dict) and project.get("name") == DISTRIBUTION
