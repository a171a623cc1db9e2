"""Run the pytest child in the row's container image (docker or podman).

The project is mounted at the same path inside, so nodeids, paths in stacks and the
results folder are the same on both sides and results are written straight back to the
host. The container gets the row's variables, the runner's ``DEVICE_MATRIX_*`` ones and
an allowlist of host variables: never the whole host environment, so tokens stay out.
Inside, ``DEVICE_MATRIX_IN_IMAGE`` names the row, so a nested call runs locally.

Before the first attempt the image is asked, in a container started as the row's are,
which interpreter it has (the row's ``container_python``, or the first of ``python``,
``python3`` that can run the row) and which pytest: an image that cannot run the row is
refused up front with what it has and what it needs (#21), not at the first test. The
same check says what the container's environment holds: the image's own secret-looking
values (``ENV ..._TOKEN=``) are scrubbed from then on, so output of a child that dies
before its plugin names them is redacted too (#30).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import glob
import json
import os
import re
import secrets
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import device_matrix
from device_matrix.config import Row
from device_matrix.diagnostics.core import GDB_TIMEOUT, mapped_files
from device_matrix.errors import EnvironmentProblem
from device_matrix.executors.base import FAULTHANDLER_FROM_START, ExecutorName, LaunchSpec, PopenChild, spawn
from device_matrix.executors.engine import ENGINE_CHECK_TIMEOUT, Engine
from device_matrix.redact import is_secret_name, remember_secrets
from device_matrix.wire import PLUGIN

# the interpreters looked for when the row names none: Debian's, Ubuntu's and most CUDA
# base images' apt Python is python3 only (#21)
CONTAINER_PYTHONS = ("python", "python3")
# this package, mounted read-only so the plugin loads in images that lack device-matrix
PACKAGE_MOUNT = "/opt/device-matrix"
PACKAGE_DIR = Path(device_matrix.__file__).resolve().parent
# what the mounted package needs of the image: requires-python, and pytest.Directory
# (pytest 8.0), which the plugin's collection hooks use
MIN_PYTHON = (3, 10)
MIN_PYTEST = (8, 0)
PYTEST_REQUIREMENT = "pytest>=8"
PYTEST_NEED = "pytest >= 8.0, for pytest.Directory"
# the engine answers 127 when the command is not in the image (docker and podman alike)
NOT_FOUND = 127
# the check may pull the image first: it gets what starting pytest gets, at least this
PROBE_MIN_TIMEOUT = 60.0
PROBE_MARK = "@@device-matrix-image@@"
PROBE_ENV_MARK = "@@device-matrix-image-environment@@"
# what the image's interpreter says about itself; it may be any Python, even 2.7
PROBE = (
    r"""
import json, os, sys
found = {"python": "%d.%d.%d" % tuple(sys.version_info[:3]), "executable": os.path.realpath(sys.executable)}
try:
    import pytest
    found["pytest"] = str(getattr(pytest, "__version__", "unknown"))
except Exception as exc:
    found["pytest_error"] = "%s: %s" % (type(exc).__name__, exc)
errors = {}
if sys.version_info[:2] >= (%(major)d, %(minor)d):
    for name in sys.argv[1:]:
        try:
            __import__(name)
        except Exception as exc:
            errors[name] = "%s: %s" % (type(exc).__name__, exc)
found["import_errors"] = errors
sys.stdout.write("\n%(mark)s" + json.dumps(found) + "\n")
sys.stdout.write("%(envmark)s" + json.dumps(dict(os.environ)) + "\n")
""".replace("%(major)d", str(MIN_PYTHON[0]))
    .replace("%(envmark)s", PROBE_ENV_MARK)
    .replace("%(minor)d", str(MIN_PYTHON[1]))
    .replace("%(mark)s", PROBE_MARK)
)
# copies the files a core maps out of the image, with the links a loader resolves through
# (/lib -> usr/lib, libz.so.1 -> libz.so.1.2.13, the executable's loader by the name it
# gives: /lib64 -> usr/lib64, ld-linux-x86-64.so.2 -> ../lib/...), so gdb reads the image's
# own binaries; a file it cannot copy fails it (exit 1): gdb would read the core without it
COPY_FILES = r"""
import os, shutil, struct, sys
dest, wanted = sys.argv[1], sys.argv[2:]
real = {os.path.realpath(p) for p in wanted}
def link(path):
    target = os.readlink(path)
    if os.path.isabs(target):
        target = os.path.relpath(target, os.path.dirname(path))
    at = dest + path
    if not os.path.lexists(at):
        os.makedirs(os.path.dirname(at), exist_ok=True)
        os.symlink(target, at)
def chain(path):
    for _ in range(40):
        parts = path.strip("/").split("/")
        for k in range(1, len(parts) + 1):
            at = "/" + "/".join(parts[:k])
            if os.path.islink(at):
                link(at)
                path = os.path.normpath(os.path.join(os.path.dirname(at), os.readlink(at), *parts[k:]))
                break
        else:
            return
def loader(path):
    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:6] != b"\x7fELF\x02\x01":
            return None
        (phoff,) = struct.unpack_from("<Q", head, 0x20)
        size, count = struct.unpack_from("<HH", head, 0x36)
        fh.seek(phoff)
        table = fh.read(size * count)
        for k in range(len(table) // size if size else 0):
            kind, _, offset, _, _, length = struct.unpack_from("<IIQQQQ", table, k * size)
            if kind == 3:
                fh.seek(offset)
                return fh.read(length).split(b"\0")[0].decode("utf-8", "surrogateescape")
    return None
for top in os.listdir("/"):
    if os.path.islink("/" + top):
        link("/" + top)
failed = 0
for path in wanted:
    try:
        os.makedirs(os.path.dirname(dest + path), exist_ok=True)
        shutil.copy2(path, dest + path)
        folder = os.path.dirname(path)
        for name in os.listdir(folder):
            other = os.path.join(folder, name)
            if os.path.islink(other) and os.path.realpath(other) in real:
                link(other)
        interp = loader(path)
        if interp:
            chain(interp)
    except (OSError, struct.error) as exc:
        failed += 1
        print("not copied: %s (%s)" % (path, exc), file=sys.stderr)
sys.exit(1 if failed else 0)
"""
# the folder, in a run's results folder, of the names of its running containers (#30)
KEPT_NAMES = ".containers"
VERSION_RE = re.compile(r"(\d+)\.(\d+)")
NOT_COPIED_SHOWN = 3  # of the files a copy could not copy, named in the record


@dataclass(frozen=True)
class ImagePython:
    """An interpreter of the image, as it describes itself."""

    name: str  # as the row gives it, or as found: python, python3, /opt/conda/bin/python
    version: str
    executable: str  # its real path inside the image (gdb reads it from there)
    pytest: str | None
    pytest_error: str | None = None
    import_errors: Mapping[str, str] = field(default_factory=dict)

    def problem(self, *, needs_pytest: bool) -> str | None:
        """Why this interpreter cannot run the row, or None."""
        if _version(self.version) < MIN_PYTHON:
            return f"Python {self.version} (device-matrix needs Python >= {'.'.join(map(str, MIN_PYTHON))})"
        if needs_pytest and self.pytest is None:
            return f"Python {self.version} without pytest ({self.pytest_error}; needs {PYTEST_NEED})"
        if needs_pytest and self.pytest is not None and _version(self.pytest) < MIN_PYTEST:
            return f"Python {self.version} with pytest {self.pytest} (needs {PYTEST_NEED})"
        failed = next(iter(self.import_errors.items()), None)
        if failed is not None:
            return f"Python {self.version}: {failed[0]} does not import ({failed[1]})"
        return None


def _image_python(name: str, text: str) -> ImagePython | str:
    try:
        data = json.loads(text)
        return ImagePython(
            name=name,
            version=str(data["python"]),
            executable=str(data["executable"]),
            pytest=None if data.get("pytest") is None else str(data["pytest"]),
            pytest_error=None if data.get("pytest_error") is None else str(data["pytest_error"]),
            import_errors={str(k): str(v) for k, v in dict(data.get("import_errors") or {}).items()},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return f"answered the check with something unreadable: {text[:200]!r}"


def _remember_environment(text: str) -> None:
    """The container's environment, as the check found it: its secret-looking values are
    scrubbed everywhere from now on (#30: a conftest that prints one, then dies)."""
    with contextlib.suppress(ValueError):
        environ = json.loads(text)
        if isinstance(environ, dict):
            remember_secrets({str(k): v for k, v in environ.items() if isinstance(v, str)})


def _version(text: str) -> tuple[int, int]:
    m = VERSION_RE.match(text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def expand_options(options: Sequence[str]) -> list[str]:
    """Expand globs in ``--device=`` options on the host (``/dev/neuron*`` -> one per match)."""
    out: list[str] = []
    for opt in options:
        if opt.startswith("--device=") and any(c in opt for c in "*?["):
            pattern = opt.split("=", 1)[1]
            host_part = pattern.split(":", 1)[0]
            matches = sorted(glob.glob(host_part))  # noqa: PTH207 - absolute patterns
            out.extend(f"--device={m}" for m in matches)
        else:
            out.append(opt)
    return out


def user_options(engine: Engine, options: Sequence[str], uid: int, gid: int) -> list[str]:
    """Run as the invoking user, so files written into the mounted project are not root's.

    Nothing when the invoking user is root, when the row sets its own ``--user``/``-u``, or
    when the engine is rootless (as its ``info`` says): there the container's root already
    is the invoking user, and ``--user`` would map to a subordinate id that owns the files
    instead. HOME points somewhere writable, since the image has no home for an unknown id.
    """
    if uid == 0 or any(o in ("--user", "-u") or o.startswith(("--user=", "-u=")) for o in options):
        return []
    if engine.rootless:
        return []
    return ["--user", f"{uid}:{gid}", "-e", "HOME=/tmp"]


def engine_command(engine: str, args: Sequence[str], client_env: Mapping[str, str]) -> None:
    """``ENGINE ARGS`` (kill, rm) for its effect; an engine that fails or hangs is let be."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run(
            [engine, *args],
            capture_output=True,
            timeout=ENGINE_CHECK_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
            env=client_env,
        )


class ContainerExecutor:
    name: ExecutorName = "container"

    def __init__(
        self,
        engine: Engine,
        row: Row,
        *,
        env_allowlist: Sequence[str] = (),
        extra_mounts: Sequence[Path] = (),
        host_env: Mapping[str, str] | None = None,
        folder: Path | None = None,
    ) -> None:
        # a row without an image is refused by the run's check (run/executor.py:refuse, #41)
        self.engine = engine
        self.row = row
        self.env_allowlist = tuple(env_allowlist)
        self.extra_mounts = tuple(extra_mounts)
        self.host_env = dict(os.environ if host_env is None else host_env)
        self.python = row.container_python or CONTAINER_PYTHONS[0]
        self.found: ImagePython | None = None  # what the image check found (set on the copy checked() gives)
        # #30: each running container's name is kept in the results folder until it ended,
        # so the next run that holds the folder's lock removes those a killed runner left
        self.kept = folder / KEPT_NAMES if folder is not None else None

    def interpreter(self) -> str:
        """The interpreter's real path in the image once known (gdb reads it from the image)."""
        return self.found.executable if self.found else self.python

    def facts(self) -> dict[str, str]:
        """What the record's environment says about the engine and the image's interpreter."""
        out = {"container_engine": self.engine.name, "container_engine_version": self.engine.version}
        if self.found is not None:
            out["container_python"] = self.found.name
        return out

    # --- the check before the first attempt ------------------------------------------

    def checked(self, spec: LaunchSpec, imports: Sequence[str]) -> ContainerExecutor:
        """This executor with the interpreter that runs the row in the image; an image that has
        none is refused. A new executor: this one, a run's plan's, stays as it was made (#41).

        ``imports`` are the modules the row's children start with (the plugin, the script
        launcher): they are imported in the image, with pytest's version checked when the
        plugin is among them.
        """
        candidates = (self.row.container_python,) if self.row.container_python else CONTAINER_PYTHONS
        seen: list[str] = []
        for index, candidate in enumerate(candidates):
            found = self._probe(spec, candidate, imports, name=f"{self._new_name()}-check{index}")
            if isinstance(found, str):
                seen.append(f"{candidate}: {found}")
                continue
            problem = found.problem(needs_pytest=PLUGIN in imports)
            if problem is None:
                ready = copy.copy(self)
                ready.python, ready.found = candidate, found
                return ready
            seen.append(f"{candidate}: {problem}")
        key = f"[tool.device-matrix.devices.{self.row.name}] container_python"
        raise EnvironmentProblem(
            f"image {self.row.image} cannot run row {self.row.name!r}: " + "; ".join(seen),
            tip=f"Use an image with Python >= {'.'.join(map(str, MIN_PYTHON))} and pytest (pip install "
            f"'{PYTEST_REQUIREMENT}'), or set {key} to an interpreter of the image that has them.",
        )

    def _probe(self, spec: LaunchSpec, candidate: str, imports: Sequence[str], *, name: str) -> ImagePython | str:
        """The candidate as it describes itself, or why it did not (``not found``)."""
        variables = self._variables(spec.env, spec.project_root)
        argv = [*self._run_options(spec, variables, name=name, init=False), candidate]
        argv += ["-c", PROBE, *imports]
        timeout = max(self.row.test_timeout, PROBE_MIN_TIMEOUT)
        # an anonymous file (mode 0600, gone when closed): the answer holds the container's environment
        client_env = self._client_env()
        with tempfile.TemporaryFile() as answer:
            child = spawn(
                argv,
                env=self._client_env(variables),
                cwd=spec.workdir,
                output=answer,
                token=name,
                death_signal=None,
                adopt=False,
                carry_token=False,
                wrap=lambda proc: ContainerChild(proc, name, self.engine.path, name, client_env),
            )
            try:
                code = child.wait(timeout)
            except BaseException as exc:
                # an interrupt or the timeout: the container goes with the client (end: rm -f)
                child.end()
                if isinstance(exc, subprocess.TimeoutExpired):
                    raise EnvironmentProblem(
                        f"{self.engine.command} did not start image {self.row.image} in {timeout:.0f} s",
                        tip=f"Pull it first (`{self.engine.command} pull {self.row.image}`), or raise the row's "
                        "test_timeout.",
                    ) from None
                raise
            child.end()
            answer.seek(0)
            out = answer.read().decode("utf-8", "replace")
        for line in out.splitlines():
            if line.startswith(PROBE_ENV_MARK):
                _remember_environment(line[len(PROBE_ENV_MARK) :])
        for line in reversed(out.splitlines()):
            if line.startswith(PROBE_MARK):
                return _image_python(candidate, line[len(PROBE_MARK) :])
        said = next(iter(out.strip().splitlines()[-1:]), f"exit {code}")
        if code == NOT_FOUND:
            return "not found"
        if code in (0, 1, 2):
            # the interpreter ran but said nothing of itself: not a Python
            return f"not a Python that runs `-c` (exit {code}: {said})"
        raise EnvironmentProblem(
            f"{self.engine.command} could not run {candidate} in image {self.row.image} (exit {code}): {said}",
            tip="Check the image name and the row's container_options (try the command by hand: "
            f"`{self.engine.command} run --rm {self.row.image} {candidate} -V`).",
        )

    # --- the command ------------------------------------------------------------------

    def _variables(
        self, env: Mapping[str, str | None], project_root: Path | None = None, *, allowlist_by_name: bool = False
    ) -> list[tuple[str, str | None]]:
        """The container's variables, sorted; a value of None passes the host's by name."""
        out: dict[str, str | None] = {}
        for name in self.env_allowlist:
            if allowlist_by_name:
                out[name] = None
            elif name in self.host_env:
                out[name] = self.host_env[name]
        out.update(env)
        out["DEVICE_MATRIX_IN_IMAGE"] = self.row.name
        out["DEVICE_MATRIX_IMAGE"] = self.row.image
        if project_root is not None:
            # the plugin and the project first, then the row's own entries (a src layout): the
            # project is mounted, not installed in the image
            own = out.get("PYTHONPATH")
            out["PYTHONPATH"] = ":".join([PACKAGE_MOUNT, str(project_root), *([own] if own else [])])
        return sorted(out.items())

    def _mounts(self, project_root: Path) -> list[tuple[str, str, str]]:
        """(host, container, options) of every mount: the project, this package, the rest."""
        root = str(project_root)
        mounts = [(root, root, ""), (str(PACKAGE_DIR), f"{PACKAGE_MOUNT}/device_matrix", "ro")]
        mounts += [(str(m), str(m), "") for m in self.extra_mounts]
        return mounts

    def _run_options(
        self,
        spec: LaunchSpec,
        variables: Sequence[tuple[str, str | None]],
        *,
        name: str | None,
        init: bool = True,
        mounts: Sequence[tuple[str, str, str]] | None = None,
    ) -> list[str]:
        """``ENGINE run`` and every option, through the image: the command follows."""
        argv = [self.engine.path, "run", "--rm", *(["--init"] if init else [])]
        if name:
            argv += ["--name", name]
        argv += expand_options(self.row.container_options)
        argv += user_options(self.engine, self.row.container_options, os.getuid(), os.getgid())
        if spec.core_limit is not None:
            argv += ["--ulimit", f"core={spec.core_limit}"]
        for host, inside, opts in self._mounts(spec.project_root) if mounts is None else mounts:
            argv += ["-v", f"{host}:{inside}" + (f":{opts}" if opts else "")]
        argv += ["-w", str(spec.workdir)]
        for key, value in variables:
            # #30: a secret-looking value is passed by name, from the engine client's own
            # environment (_client_env): a command line is anyone's to read in `ps`
            argv += ["-e", key if value is None or is_secret_name(key) else f"{key}={value}"]
        argv.append(self.row.image)
        return argv

    def argv(self, spec: LaunchSpec, *, name: str | None = None) -> list[str]:
        """The engine's command line; the secret-looking variables by name (:meth:`_client_env`)."""
        variables = self._variables(spec.env, spec.project_root)
        argv = [*self._run_options(spec, variables, name=name), self.python, *FAULTHANDLER_FROM_START]
        argv += ["-m", spec.module]
        if spec.module == "pytest":
            # the image may lack device-matrix: the mounted package's plugin, by name
            argv += ["-p", PLUGIN]
        argv += list(spec.pytest_args)
        return argv

    def repro_prefix(self, env: Mapping[str, str | None], spec: LaunchSpec) -> list[str]:
        """The command a repro line runs, through the interpreter: the run's own engine
        options, mounts and image, its variables (the host's allowlisted ones by name)."""
        variables = self._variables(env, spec.project_root, allowlist_by_name=True)
        argv = self._run_options(spec, variables, name=None)
        argv[0] = self.engine.command
        return [*argv, self.python]

    def _client_env(self, variables: Sequence[tuple[str, str | None]] = ()) -> dict[str, str]:
        # only what the engine client itself needs from the host, and the secret-looking
        # values of the container's ``variables``, which -e passes by name (#30); the rest
        # of the container's environment is given explicitly with -e
        secret = {k: v for k, v in variables if v is not None and is_secret_name(k)}
        wanted = (
            "PATH",
            "HOME",
            "DOCKER_HOST",
            "DOCKER_CONFIG",
            "DOCKER_CONTEXT",
            "XDG_RUNTIME_DIR",
            "CONTAINER_HOST",
            "CONTAINERS_CONF",
            "TMPDIR",
            "LANG",
        )
        return {**{k: v for k, v in self.host_env.items() if k in wanted}, **secret}

    def _new_name(self) -> str:
        # one per container: an ended one may still be being removed when the next starts
        return f"device-matrix-{self.row.name}-{secrets.token_hex(4)}"

    def remove_leftovers(self) -> list[str]:
        """Remove the containers a killed run in this results folder left, and name them.

        Called with the folder's lock held: no live run owns one of the names kept there.
        """
        if self.kept is None or not self.kept.is_dir():
            return []
        names = sorted(f.name for f in self.kept.iterdir())
        if names:
            engine_command(self.engine.path, ["rm", "-f", *names], self._client_env())
            for name in names:
                (self.kept / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.kept.rmdir()
        return names

    def launch(self, spec: LaunchSpec, output: BinaryIO) -> ContainerChild:
        spec.workdir.mkdir(parents=True, exist_ok=True)
        name = self._new_name()
        if self.kept is not None:
            self.kept.mkdir(exist_ok=True)
            (self.kept / name).touch()  # before it starts: a runner killed now still left its name
        client_env = self._client_env()
        child = spawn(
            self.argv(spec, name=name),
            env=self._client_env(self._variables(spec.env, spec.project_root)),
            cwd=spec.workdir,
            output=output,
            token=spec.token,
            # the engine's helpers (conmon) outlive the client by design: the container is
            # ended through the engine, by name, never by the client's death or the token
            death_signal=None,
            adopt=False,
            carry_token=False,
            wrap=lambda proc: ContainerChild(proc, spec.token, self.engine.path, name, client_env, kept=self.kept),
        )
        assert isinstance(child, ContainerChild)
        return child

    def command_for(self, spec: LaunchSpec) -> list[str]:
        argv = self.argv(spec)
        argv[0] = self.engine.command
        return argv

    # --- cores ------------------------------------------------------------------------

    @contextlib.contextmanager
    def image_files(self, core: Path, spec: LaunchSpec) -> Iterator[Path | str]:
        """A folder that holds, at their paths in the image, the files ``core`` maps (gdb's
        sysroot); or why they could not all be copied. Removed afterwards."""
        mounts = self._mounts(spec.project_root)
        wanted = []
        with tempfile.TemporaryDirectory(prefix="device-matrix-image-files-") as tmp:
            root = Path(tmp)
            for path in mapped_files(core):
                host = next((h + path[len(c) :] for h, c, _ in mounts if path == c or path.startswith(c + "/")), None)
                if host is None:
                    wanted.append(path)
                    continue
                # a mounted file (the project's own extension) is the host's: linked, not copied
                at = root / path.lstrip("/")
                at.parent.mkdir(parents=True, exist_ok=True)
                with contextlib.suppress(OSError):
                    at.symlink_to(host)
            in_tmp = dataclasses.replace(spec, workdir=root)
            name = f"{self._new_name()}-files"
            argv = self._run_options(in_tmp, [], name=name, init=False, mounts=[(tmp, tmp, "")])
            argv += [self.python, "-c", COPY_FILES, tmp, *wanted]
            failed = self._not_copied(argv, name, root)
            yield root if failed is None else failed

    def _not_copied(self, argv: Sequence[str], name: str, cwd: Path) -> str | None:
        """Why the container ``argv`` runs (named ``name``) did not copy every file of the
        core in time, or None when it did. A partial copy is a failure: gdb would unwind
        through a library it lacks. #31: started as every child is (base.spawn); a copy that
        hangs or is interrupted goes with its container (its end: rm -f), as an image check does."""
        client_env = self._client_env()
        with tempfile.TemporaryFile() as said:
            try:
                child = spawn(
                    argv,
                    env=client_env,
                    cwd=cwd,
                    output=said,
                    token=name,
                    death_signal=None,
                    adopt=False,
                    carry_token=False,
                    wrap=lambda proc: ContainerChild(proc, name, self.engine.path, name, client_env),
                )
            except OSError as exc:
                return f"{self.engine.command} could not start: {exc}"
            try:
                code = child.wait(GDB_TIMEOUT)
            except subprocess.TimeoutExpired:
                return f"the copy did not end in {GDB_TIMEOUT:.0f} s"
            finally:
                child.end()
            if code == 0:
                return None
            said.seek(0)
            lines = said.read().decode("utf-8", "replace").strip().splitlines()
        shown = [line for line in lines if line.startswith("not copied: ")] or lines[-1:]
        return "; ".join(shown[:NOT_COPIED_SHOWN]) or f"exit {code}"


class ContainerChild(PopenChild):
    """The engine client in its own group; signals also go to the container by name."""

    # the engine's own helpers (podman's conmon leaves the client's session) outlive the
    # client by design, and the engine ends what ran inside the container
    sweeps_adopted = False

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        token: str,
        engine: str,
        name: str,
        client_env: Mapping[str, str],
        *,
        kept: Path | None = None,
    ) -> None:
        super().__init__(proc, token)
        self.engine = engine
        self.name = name
        self.client_env = dict(client_env)
        self.kept = kept  # the folder that keeps its name while it runs (#30)

    def _engine_kill(self, sig: int) -> None:
        engine_command(self.engine, ["kill", "--signal", signal.Signals(sig).name, self.name], self.client_env)

    def end(self) -> int:
        code = super().end()
        if self.ended_alive:
            # the client was ended with its container: the engine's --rm may not have run
            # yet (podman leaves it to conmon), and nothing the runner ended stays behind
            engine_command(self.engine, ["rm", "-f", self.name], self.client_env)
        if self.kept is not None:
            (self.kept / self.name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.kept.rmdir()  # only when no other container of the run still runs
        return code

    def send(self, sig: int) -> None:
        if self.proc.poll() is None:
            self._engine_kill(sig)

    def kill_group(self, sig: int) -> None:
        if self.proc.poll() is None:
            self._engine_kill(sig)
        super().kill_group(sig)
