"""The GitHub workflows: the rules GitHub applies beyond the schema, on both files.

device-matrix.yml calls reusable.yml as an adopting repository would; every job lives in
the reusable one.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from device_matrix import config
from device_matrix.config import Row
from device_matrix.workflow import (
    GATE_LABEL,
    JOB_CONTAINER_REJECTED,
    Event,
    job_container_ok,
    plan_jobs,
    rejected_job_container_options,
)
from tests.conftest import REPO

WORKFLOWS = REPO / ".github" / "workflows"
CALLER = WORKFLOWS / "device-matrix.yml"
REUSABLE = WORKFLOWS / "reusable.yml"

# Current majors (node24 runtime) and the commits their release tags point to.
PINS = {
    "actions/checkout": ("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": ("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "actions/upload-artifact": ("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "actions/download-artifact": ("3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
    "actions/cache": ("27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
}


def load(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict)
    return data


def triggers(wf: dict[Any, Any]) -> Any:
    return wf[True] if True in wf else wf["on"]  # YAML 1.1 reads `on` as true


def jobs() -> dict[str, Any]:
    return load(REUSABLE)["jobs"]


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list(job.get("steps", []))


# --- a small evaluator of GitHub expressions, enough for the workflows' `if:` ----------

_TOKEN = re.compile(r"\s*(?:(\|\||&&|==|!=|[()!,])|'((?:[^']|'')*)'|([A-Za-z_][\w.-]*)|(\d+(?:\.\d+)?))")


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m, f"cannot read {text[pos:]!r}"
        op, string, name, number = m.groups()
        if op:
            out.append(("op", op))
        elif string is not None:
            out.append(("str", string.replace("''", "'")))
        elif name:
            out.append(("name", name))
        else:
            out.append(("num", float(number)))
        pos = m.end()
    return out


def _num(v: Any) -> float:
    if v is None:
        return 0.0
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    try:
        return float(v) if str(v).strip() else 0.0
    except ValueError:
        return math.nan


def _eq(a: Any, b: Any) -> bool:
    # GitHub: strings compare ignoring case; other mixed types compare as numbers
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is type(b):
        return bool(a == b)
    return _num(a) == _num(b)


def evaluate(expr: str, context: dict[str, Any]) -> Any:
    return _truthy(value(expr, context))


def _truthy(v: Any) -> bool:
    return v not in (None, False, 0, "", 0.0)


def interpolate(text: str, context: dict[str, Any]) -> str:
    """A string with ``${{ ... }}`` in it, as GitHub fills it in."""
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: _text(value(m.group(1), context)), text)


def _text(v: Any) -> str:
    return "" if v is None else str(v)


def value(expr: str, context: dict[str, Any]) -> Any:
    toks = _tokens(expr.removeprefix("${{").removesuffix("}}"))
    pos = 0

    def peek() -> tuple[str, Any] | None:
        return toks[pos] if pos < len(toks) else None

    def take() -> tuple[str, Any]:
        nonlocal pos
        pos += 1
        return toks[pos - 1]

    def lookup(path: str) -> Any:
        value: Any = context
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value

    def primary() -> Any:
        kind, value = take()
        if (kind, value) == ("op", "("):
            v = or_()
            assert take() == ("op", ")")
            return v
        if kind in ("str", "num"):
            return value
        assert kind == "name", value
        if value in ("true", "false"):
            return value == "true"
        if value == "null":
            return None
        if peek() == ("op", "("):
            take()
            args = []
            while peek() != ("op", ")"):
                args.append(or_())
                if peek() == ("op", ","):
                    take()
            take()
            return call(value, args)
        return lookup(value)

    def call(name: str, args: list[Any]) -> Any:
        if name in ("always", "success"):
            return True
        if name == "format":
            text = str(args[0])
            for i, a in enumerate(args[1:]):
                text = text.replace("{" + str(i) + "}", "" if a is None else str(a))
            return text
        raise AssertionError(f"function {name} not modelled")

    def not_() -> Any:
        if peek() == ("op", "!"):
            take()
            return not truthy(not_())
        left = primary()
        if peek() in (("op", "=="), ("op", "!=")):
            op = take()[1]
            right = primary()
            return _eq(left, right) if op == "==" else not _eq(left, right)
        return left

    def truthy(v: Any) -> bool:
        return v not in (None, False, 0, "", 0.0)

    def and_() -> Any:
        v = not_()
        while peek() == ("op", "&&"):
            take()
            right = not_()
            v = right if truthy(v) else v
        return v

    def or_() -> Any:
        v = and_()
        while peek() == ("op", "||"):
            take()
            right = and_()
            v = v if truthy(v) else right
        return v

    result = or_()
    assert pos == len(toks), f"left over: {toks[pos:]}"
    return result


def context(event_name: str, ref: str, event: dict[str, Any], **github: Any) -> dict[str, Any]:
    return {
        "github": {"event_name": event_name, "ref": ref, "event": event, **github},
        "inputs": {"file-issues": True, "tracker": "github"},
        "needs": {"plan": {"result": "success"}},
    }


PUSH = {"repository": {"default_branch": "main", "full_name": "o/r"}}


def test_the_evaluator_reads_github_semantics() -> None:
    ctx = context("push", "refs/heads/main", PUSH)
    assert evaluate("github.ref == format('refs/heads/{0}', github.event.repository.default_branch)", ctx)
    assert not evaluate("github.ref == format('refs/heads/{0}', github.event.nothing)", ctx)
    assert evaluate("github.event.nothing == ''", ctx)  # null and '' are both 0
    assert not evaluate("!always() || github.event_name == 'schedule'", ctx)


@pytest.mark.parametrize(
    ("event_name", "ref", "event", "files"),
    [
        # schedule payloads carry no repository object; schedules run on the default branch
        ("schedule", "refs/heads/main", {"schedule": "17 3 * * *"}, True),
        ("push", "refs/heads/main", PUSH, True),
        ("push", "refs/heads/feature", PUSH, False),
        ("pull_request", "refs/pull/7/merge", {**PUSH, "pull_request": {}}, False),
        ("workflow_dispatch", "refs/heads/main", PUSH, False),
    ],
)
def test_issues_are_filed_on_schedules_and_default_branch_pushes_only(
    event_name: str, ref: str, event: dict[str, Any], files: bool
) -> None:
    condition = jobs()["issues"]["if"]
    assert evaluate(condition, context(event_name, ref, event)) is files


def test_shape_and_least_privilege() -> None:
    caller, reusable = load(CALLER), load(REUSABLE)
    for wf in (caller, reusable):
        assert "pull_request_target" not in triggers(wf)
        assert wf["permissions"] == {"contents": "read"}
    assert set(triggers(reusable)) == {"workflow_call"}
    j = reusable["jobs"]
    assert set(j) == {"plan", "rows-host", "rows-container", "issues", "triage"}
    writers = {name for name, job in j.items() if (job.get("permissions") or {}).get("issues") == "write"}
    assert writers == {"issues"}
    commenters = {name for name, job in j.items() if (job.get("permissions") or {}).get("pull-requests") == "write"}
    assert commenters == {"triage"}  # the one comment of verdicts (#25)
    assert j["triage"]["permissions"] == {"contents": "read", "issues": "read", "pull-requests": "write"}
    assert "github.ref" in caller["concurrency"]["group"]
    assert j["triage"]["if"].startswith("always()")


def test_triage_runs_after_the_issues_job_and_reads_its_links() -> None:
    j = jobs()
    assert "issues" in j["triage"]["needs"]
    assert any(s.get("with", {}).get("name") == "issue-links" for s in steps(j["issues"]))
    downloads = [s["with"]["pattern"] for s in steps(j["triage"]) if "download-artifact" in s.get("uses", "")]
    assert downloads == ["results-*", "issue-links"]
    run = next(s for s in steps(j["triage"]) if s.get("name") == "Triage")
    assert run["run"].index("ci collect") < run["run"].index("--dry-run") < run["run"].index("triage results")


def test_the_caller_is_ten_lines_of_jobs() -> None:
    caller = load(CALLER)
    (job,) = caller["jobs"].values()
    assert job["uses"] == "./.github/workflows/reusable.yml"
    assert set(job["with"]) <= set(triggers(load(REUSABLE))["workflow_call"]["inputs"])
    assert job["permissions"] == {"contents": "read", "issues": "write", "pull-requests": "write"}
    text = CALLER.read_text()
    jobs_block = text[text.index("jobs:") :].strip().splitlines()
    assert len(jobs_block) <= 10, jobs_block
    # a labelling run gets its own concurrency group: labels do not cancel the PR's run
    assert "labeled" in triggers(caller)["pull_request"]["types"]
    assert "github.event.label.name" in caller["concurrency"]["group"]


def test_reusable_inputs() -> None:
    inputs = triggers(load(REUSABLE))["workflow_call"]["inputs"]
    expected = {"package", "install", "rows", "tracker", "file-issues", "gate-label", "python-version", "fail-on"}
    assert expected <= set(inputs)
    assert inputs["fail-on"]["default"] == ""  # no gate unless the caller asks for one
    assert inputs["gate-label"]["default"] == GATE_LABEL
    # #20: no package name that no index serves; no tracker other than the configuration's
    assert inputs["package"]["default"] == "" and inputs["install"]["default"] == ""
    assert inputs["tracker"]["default"] == ""


def installing_jobs() -> dict[str, dict[str, Any]]:
    return {
        name: job
        for name, job in jobs().items()
        if any("pip install" in s.get("run", "") and "PACKAGE" in s.get("run", "") for s in steps(job))
    }


def test_every_job_installs_device_matrix_from_the_repository_and_commit_it_was_called_from() -> None:
    # #20: the called workflow's own repository and commit (job.workflow_*), not the
    # caller's (github.* is the caller's in a called workflow), unless `package` says otherwise
    assert set(installing_jobs()) == {"plan", "rows-host", "rows-container", "issues", "triage"}
    for name, job in installing_jobs().items():
        all_steps = steps(job)
        (own,) = [s for s in all_steps if s.get("with", {}).get("path") == ".device-matrix-src"]
        assert own["uses"].startswith("actions/checkout@")
        # GitHub's job context decides wherever it has them, whatever env says (#43: act's
        # job context lacks them, the offline run names them in env)
        github = {"job": {"workflow_repository": "acme/device-matrix", "workflow_sha": "a" * 40}}
        github["env"] = {"DEVICE_MATRIX_WORKFLOW_REPOSITORY": "x/y", "DEVICE_MATRIX_WORKFLOW_SHA": "b" * 40}
        assert interpolate(own["with"]["repository"], github) == "acme/device-matrix"
        assert interpolate(own["with"]["ref"], github) == "a" * 40
        assert own["with"]["repository"].startswith("${{ job.workflow_repository ||")
        assert own["with"]["ref"].startswith("${{ job.workflow_sha ||")
        act = {"job": {}, "env": github["env"]}
        assert (interpolate(own["with"]["repository"], act), interpolate(own["with"]["ref"], act)) == ("x/y", "b" * 40)
        assert own["with"]["persist-credentials"] is False
        ctx = {"inputs": {"package": ""}}
        assert evaluate(own["if"], ctx) is True
        assert evaluate(own["if"], {"inputs": {"package": "."}}) is False
        (install,) = [s for s in all_steps if "pip install" in s.get("run", "")]
        assert all_steps.index(own) < all_steps.index(install), name
        assert 'python -m pip install --quiet "${PACKAGE:-./.device-matrix-src}"' in install["run"], name
        assert install["env"]["PACKAGE"] == "${{ inputs.package }}"
        # the caller's own checkout comes first: the second checkout must not clean it away
        assert all_steps.index(own) > next(i for i, s in enumerate(all_steps) if "checkout" in s.get("uses", ""))


def test_row_jobs_install_the_row_the_project_and_the_callers_command_before_the_run() -> None:
    for name in ("rows-host", "rows-container"):
        (step,) = [s for s in steps(jobs()[name]) if s.get("name") == "Run the row"]
        script = step["run"]
        assert step["env"]["INSTALL"] == "${{ inputs.install }}"
        steps_in_order = ("pip install", "device-matrix ci install", '"$INSTALL"', "device-matrix run")
        order = [script.index(x) for x in steps_in_order]
        assert order == sorted(order), name


def test_the_tracker_is_the_configurations_unless_the_caller_names_one() -> None:
    issues = next(s for s in steps(jobs()["issues"]) if s.get("name") == "File or link issues")
    triage = next(s for s in steps(jobs()["triage"]) if s.get("name") == "Triage")
    for step in (issues, triage):
        assert step["env"]["TRACKER"] == "${{ inputs.tracker }}"
        assert '${TRACKER:+--tracker "$TRACKER"}' in step["run"]
    # the read-only lookup of cited issues runs whatever the tracker, when the issues job did not
    assert triage["env"]["LOOKUP"] == "${{ needs.issues.result != 'success' }}"


def test_no_expression_is_interpolated_into_a_script() -> None:
    for path in (CALLER, REUSABLE):
        for job in load(path)["jobs"].values():
            for step in steps(job):
                assert "${{" not in step.get("run", ""), step


def test_uploads_overwrite_and_run_always() -> None:
    uploads = [(name, s) for name, job in jobs().items() for s in steps(job) if "upload-artifact" in s.get("uses", "")]
    assert {name for name, _ in uploads} == {"rows-host", "rows-container", "issues", "triage"}
    for _, s in uploads:
        assert s["if"] == "always()"
        assert s["with"]["overwrite"] is True


def test_row_jobs_are_named_by_the_row() -> None:
    # stable check names: the row (and its shard, for a split row), never the image
    for name in ("rows-host", "rows-container"):
        title = jobs()[name]["name"]
        assert set(re.findall(r"matrix\.(\w+)", title)) == {"row", "shard"}, title


def test_plan_is_made_from_the_base_branch_on_a_pull_request() -> None:
    checkout = steps(jobs()["plan"])[0]
    assert checkout["with"]["ref"] == "${{ github.event.pull_request.base.sha || github.sha }}"


def test_container_job_leaves_nothing_root_owned() -> None:
    last = steps(jobs()["rows-container"])[-1]
    assert last["if"] == "always()"
    assert last["run"].startswith('chown -R "$(stat -c') and "$GITHUB_WORKSPACE" in last["run"]


def test_actions_are_on_current_majors_pinned_by_commit() -> None:
    seen = set()
    for path in (CALLER, REUSABLE):
        for line in path.read_text().splitlines():
            # an action, or one of its sub-actions (actions/cache/restore): pinned as the action
            m = re.search(r"uses: ([\w.-]+/[\w.-]+)(?:/[\w./-]+)?@(\S+)(?: # (\S+))?", line)
            if not m or "uses: ./" in line or line.lstrip().startswith("#"):
                continue
            action, ref, comment = m.groups()
            assert action in PINS, action
            assert (ref, comment) == PINS[action], line
            seen.add(action)
    assert seen == set(PINS)


# --- the history cache (#25) ----------------------------------------------------------------

PULL = {**PUSH, "pull_request": {"number": 7, "base": {"ref": "main"}}}
EVENTS = {
    "push": context("push", "refs/heads/main", PUSH, ref_name="main", base_ref="", run_id="11", run_attempt="1"),
    "release push": context(
        "push", "refs/heads/release-2", PUSH, ref_name="release-2", base_ref="", run_id="12", run_attempt="1"
    ),
    "schedule": context("schedule", "refs/heads/main", {}, ref_name="main", base_ref="", run_id="13", run_attempt="2"),
    "pull request": context(
        "pull_request", "refs/pull/7/merge", PULL, ref_name="7/merge", base_ref="main", run_id="14", run_attempt="1"
    ),
}


def test_a_branch_prefix_never_matches_another_branchs_cache() -> None:
    """main's prefix must not restore main-2's history (a cache is restored by key prefix)."""
    restore, store = _cache_steps("triage")
    for event in ("push", "release push"):
        saved = interpolate(store["with"]["key"], EVENTS[event])
        for other in ("push", "release push"):
            first = interpolate(restore["with"]["restore-keys"], EVENTS[other]).split()[0]
            assert saved.startswith(first) is (event == other), (saved, first)
    main_2 = interpolate(
        store["with"]["key"], context("push", "refs/heads/main-2", PUSH, ref_name="main-2", run_id="9")
    )
    assert not main_2.startswith(interpolate(restore["with"]["restore-keys"], EVENTS["push"]).split()[0])


def _cache_steps(job: str) -> list[dict[str, Any]]:
    return [s for s in steps(jobs()[job]) if "actions/cache" in s.get("uses", "")]


@pytest.mark.parametrize("event", sorted(EVENTS))
def test_triage_restores_its_branch_history_and_a_pull_request_its_base_branch(event: str) -> None:
    """Issue 25: keyed by ref_name, a pull request ("7/merge") never saw its base's history."""
    ctx = EVENTS[event]
    restore, store = _cache_steps("triage")
    assert restore["uses"].startswith("actions/cache/restore@") and store["uses"].startswith("actions/cache/save@")
    branch = "main" if event != "release push" else "release-2"
    prefix = f"device-matrix-history-{branch}~"
    # the branch's own caches first; a cache of the form before "~" while none of these exists
    assert interpolate(restore["with"]["restore-keys"], ctx).split() == [prefix, f"device-matrix-history-{branch}-"]
    assert interpolate(restore["with"]["key"], ctx).startswith(prefix)
    saved = "if" not in store or evaluate(store["if"], ctx)
    assert saved is (event != "pull request")  # a pull request never writes its base's history
    if saved:
        key = interpolate(store["with"]["key"], ctx)
        # a new key per run and attempt (a cache is never overwritten), found by the prefix
        assert key == f"{prefix}{ctx['github']['run_id']}-{ctx['github']['run_attempt']}"
    assert restore["with"]["path"] == store["with"]["path"] == ".device-matrix/history.sqlite"


def test_a_pull_requests_triage_reads_the_history_read_only_and_comments() -> None:
    run = next(s for s in steps(jobs()["triage"]) if s.get("name") == "Triage")["run"]
    pr_branch = run[run.index('if [ "$GITHUB_EVENT_NAME" = pull_request ]') : run.index("else")]
    assert "--history-read-only" in pr_branch and "--pr-comment" in pr_branch and '--fail-on "$FAIL_ON"' in pr_branch
    assert run.rstrip().endswith('device-matrix triage results --label "run ${GITHUB_RUN_ID}" "$@"')
    names = [s.get("name", s.get("uses", "")) for s in steps(jobs()["triage"])]
    assert names.index("Triage") < next(i for i, n in enumerate(names) if n.startswith("Store the run history"))


def test_the_issues_job_reads_the_history_and_never_stores_it() -> None:
    (restore,) = _cache_steps("issues")
    assert restore["uses"].startswith("actions/cache/restore@")
    ctx = EVENTS["push"]
    assert interpolate(restore["with"]["restore-keys"], ctx).split()[0] == "device-matrix-history-main~"
    names = [s.get("name") for s in steps(jobs()["issues"])]
    assert names.index(restore["name"]) < names.index("File or link issues")


def test_dependabot_keeps_the_actions_current() -> None:
    data = load(REPO / ".github" / "dependabot.yml")
    assert data["version"] == 2
    assert any(u["package-ecosystem"] == "github-actions" and u["directory"] == "/" for u in data["updates"])


def test_nothing_sets_force_color() -> None:
    # any non-empty FORCE_COLOR, "0" included, turns colour on in pytest and others
    shipped = [*WORKFLOWS.glob("*.yml"), REPO / "noxfile.py", *(REPO / "device_matrix").rglob("*.py")]
    shipped += [*(REPO / "device_matrix").rglob("*.toml"), *(REPO / "tools").glob("*.py")]
    for path in shipped:
        text = path.read_text()
        for m in re.finditer(r"FORCE_COLOR", text):
            line = text[text.rfind("\n", 0, m.start()) + 1 : text.find("\n", m.end())]
            # reading it (colour detection) is allowed; setting it is not
            assert not re.search(r"FORCE_COLOR\W*[:=]\s*\S|\[.FORCE_COLOR.\]\s*=", line), f"{path}: {line}"


# --- the rows' jobs ---------------------------------------------------------------------


def test_no_job_container_gets_an_option_github_rejects() -> None:
    cfg = config.load(REPO)
    every = Event(name="schedule")
    plan = plan_jobs(cfg, every, list(cfg.rows))
    for e in plan.container:
        assert not rejected_job_container_options(e["container_options"].split()), e
    for name in cfg.rows:
        row = cfg.row(name)
        if job_container_ok(row):
            assert not rejected_job_container_options(row.container_options)
    # literal options in any workflow file
    for path in (CALLER, REUSABLE):
        for job in load(path)["jobs"].values():
            options = str((job.get("container") or {}).get("options", ""))
            if "${{" not in options:
                assert not rejected_job_container_options(options.split()), options


@pytest.mark.parametrize("opt", ["--net=host", "--network=host", "--network", "--entrypoint=/bin/sh", "--net"])
def test_rejected_options_make_a_host_job(opt: str) -> None:
    assert rejected_job_container_options([opt]) == [opt]
    row = Row(name="x", pjrt_device="TPU", image="img", container_options=("--privileged", opt))
    assert not job_container_ok(row)
    assert job_container_ok(Row(name="x", pjrt_device="TPU", image="img", container_options=("--privileged",)))
    assert {o.split("=")[0] for o in JOB_CONTAINER_REJECTED} == {"--network", "--net", "--entrypoint"}


def test_packaged_rows_as_they_run_in_the_field() -> None:
    cfg = config.load(REPO)
    plan = plan_jobs(cfg, Event(name="schedule"), ["cpu"])
    assert [e["row"] for e in plan.host] == ["cpu"]
    # every self-hosted row is off until a project says it has the runners
    assert {n: r.ci for n, r in cfg.rows.items()} == {"cpu": "always", "tpu": "off", "cuda": "off", "neuron": "off"}
    tpu, cuda = cfg.row("tpu"), cfg.row("cuda")
    assert "--net=host" in tpu.container_options and not job_container_ok(tpu)  # a host job, as pytorch/xla runs TPU
    # torch_xla 2.7 is the last release with CUDA
    assert cuda.image.endswith("/xla:r2.7.0_3.10_cuda_12.6")
    assert cuda.image.startswith("us-central1-docker.pkg.dev/tpu-pytorch-releases/docker/")
    assert "torch==2.7.0" in cuda.install and any("torch_xla-2.7.0-cp310" in r for r in cuda.install)
    assert cuda.env["PJRT_DEVICE"] == "CUDA" and job_container_ok(cuda)


def _cfg(tmp_path: Path, rows: str) -> config.Config:
    # the packaged rows' suites exist here (a row without them gets no job: tested apart)
    for suite in ("accumulation", "mlp", "collectives"):
        (tmp_path / "suites" / suite).mkdir(parents=True, exist_ok=True)
    (tmp_path / "pyproject.toml").write_text("[tool.device-matrix]\n" + rows)
    return config.load(tmp_path)


ROWS = """
[tool.device-matrix.devices.tpu]
ci = "always"
[tool.device-matrix.devices.cuda]
ci = "schedule"
[tool.device-matrix.devices.neuron]
ci = "off"
"""


def _planned(cfg: config.Config, event: Event) -> set[str]:
    plan = plan_jobs(cfg, event)
    return {e["row"] for e in plan.host + plan.container}


def _pr(*, fork: bool, labels: tuple[str, ...] = (), action: str = "synchronize", added: str = "") -> Event:
    payload: dict[str, Any] = {
        "action": action,
        "pull_request": {
            "head": {"repo": {"full_name": "someone/r" if fork else "o/r"}},
            "base": {"repo": {"full_name": "o/r"}},
            "labels": [{"name": n} for n in labels],
        },
    }
    if added:
        payload["label"] = {"name": added}
    return Event.from_payload("pull_request", payload)


def test_the_ci_switch(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, ROWS)
    assert _planned(cfg, Event(name="push")) == {"cpu", "tpu"}
    assert _planned(cfg, Event(name="schedule")) == {"cpu", "tpu", "cuda"}
    assert _planned(cfg, Event(name="workflow_dispatch")) == {"cpu", "tpu", "cuda"}
    # off: no job, but the row is still there for `nox -s neuron`
    assert "neuron" in cfg.rows
    assert plan_jobs(cfg, Event(name="push")).skipped["neuron"] == "ci = off"


def test_self_hosted_rows_are_gated_on_pull_requests(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, ROWS)
    assert _planned(cfg, _pr(fork=False)) == {"cpu"}
    assert _planned(cfg, _pr(fork=False, labels=(GATE_LABEL,))) == {"cpu", "tpu"}
    # a fork: only the maintainer's act of labelling runs them, never a later push
    assert _planned(cfg, _pr(fork=True, labels=(GATE_LABEL,))) == {"cpu"}
    # labelling runs what the label unlocks; the PR's own run has the rest
    assert _planned(cfg, _pr(fork=True, labels=(GATE_LABEL,), action="labeled", added=GATE_LABEL)) == {"tpu"}
    assert _planned(cfg, _pr(fork=False, labels=(GATE_LABEL,), action="labeled", added=GATE_LABEL)) == {"tpu"}
    # another label: nothing to run again
    assert _planned(cfg, _pr(fork=False, action="labeled", added="documentation")) == set()
    deleted_fork = Event.from_payload("pull_request", {"pull_request": {"head": {"repo": None}, "base": {}}})
    assert deleted_fork.from_fork


DM = [sys.executable, "-m", "device_matrix"]


def test_packaged_rows_in_a_project_without_suites_get_their_jobs(tmp_path: Path) -> None:
    # #20: a packaged row runs the project's own tests; it is not left out for lack of suites/
    from device_matrix.run.plan import plan_row
    from device_matrix.workflow import actions_matrix

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\ntestpaths = ['tests']\n")
    cfg = config.load(tmp_path)
    plan = plan_jobs(cfg, Event(name="schedule"), list(cfg.rows))
    assert [e["row"] for e in plan.host + plan.container] == ["cpu"]
    assert set(plan.skipped) == {"tpu", "cuda", "neuron"}
    assert all(why == "ci = off" for why in plan.skipped.values())
    assert [e["row"] for e in actions_matrix(cfg, list(cfg.rows))["include"]] == list(cfg.rows)
    assert plan_row(cfg, cfg.row("cpu")).mode == "local"
    assert cfg.row_tests(cfg.row("cpu")) == ("tests",)


def test_the_readme_caller_is_a_valid_call_at_this_release() -> None:
    import device_matrix

    text = (REPO / "README.md").read_text()
    section = text[text.index("## Use it in your project") :]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block
    (job,) = yaml.safe_load(block.group(1))["jobs"].values()
    assert job["uses"] == f"OWNER/device-matrix/.github/workflows/reusable.yml@v{device_matrix.__version__}"
    assert set(job.get("with", {})) <= set(triggers(load(REUSABLE))["workflow_call"]["inputs"])
    # a called workflow's jobs get at most what the caller grants: the README's caller grants
    # every permission a job of the reusable workflow asks for, and nothing more
    asked: dict[str, str] = {}
    for reusable_job in load(REUSABLE)["jobs"].values():
        for scope, level in reusable_job.get("permissions", {}).items():
            if asked.get(scope) != "write":
                asked[scope] = level
    assert job["permissions"] == asked
    assert load(CALLER)["jobs"]["devices"]["permissions"] == asked


def test_the_readme_caller_is_a_whole_workflow_file_as_docs_adopt_it() -> None:
    # the README showed `jobs:` alone: copied as it was, a workflow with no `on` is refused
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Use it in your project") :]
    readme = re.search(r"```yaml\n(.*?)```", section, re.S)
    docs_text = (REPO / "docs" / "github-actions.md").read_text()
    adopting = docs_text[docs_text.index("## Adopting it from another repository") :]
    docs = re.search(r"```yaml\n(.*?)```", adopting, re.S)
    assert readme and docs
    assert readme.group(1) == docs.group(1)
    caller = yaml.safe_load(readme.group(1))
    on = triggers(caller)
    # pushes and schedules file issues; a label runs the self-hosted rows of a pull request
    assert {"push", "pull_request", "schedule"} <= set(on)
    assert "labeled" in on["pull_request"]["types"]
    assert caller["permissions"] == {"contents": "read"}
