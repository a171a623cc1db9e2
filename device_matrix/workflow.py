"""The GitHub Actions matrices the workflow's plan job emits, from the configuration.

Which rows get a CI job for an event, and what kind of job:

- ``ci = "off"`` rows never get one (their nox session stays); ``"schedule"`` rows only on
  ``schedule`` and ``workflow_dispatch``; ``"always"`` rows on every event.
- A row on self-hosted runners runs for a pull request only with the gate label
  (``ciflow/devices``): a pull request from a fork only on the event of a maintainer adding
  it (one approved run of the head that was reviewed), one from the repository itself
  while the label is on it. Fork code never reaches a self-hosted runner unapproved. The
  labelling event runs only the rows the label unlocks.
- #34: with ``select_pull_requests = true`` a pull request's row runs ``--select changed``
  (the tests its change can break, docs/selection.md), unless it carries the
  ``select_full_label`` label (adding that label runs the rows again, in full); pushes,
  schedules and manual runs always run every test, as does a row split into shards.
- A row gets a job container only when GitHub accepts every one of its options there;
  otherwise (``--net=host``, host globs) its job runs on the runner, which starts the
  row's container itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from device_matrix.config import Config, Row

# GitHub documents --network and --entrypoint as unsupported in jobs.<id>.container.options
# (the runner sets both itself); --net is docker's alias of --network.
JOB_CONTAINER_REJECTED = ("--network", "--net", "--entrypoint")
GATE_LABEL = "ciflow/devices"
SCHEDULED_EVENTS = ("schedule", "workflow_dispatch")


def rejected_job_container_options(options: Sequence[str]) -> list[str]:
    """The options GitHub would refuse in a job container's ``options`` (``--net=host``, ``--network x``)."""
    return [opt for opt in options if opt.split("=", 1)[0] in JOB_CONTAINER_REJECTED]


def job_container_ok(row: Row) -> bool:
    # a glob in --device=/dev/neuron* is expanded on the runner itself, not by GitHub
    static = not any(c in opt for opt in row.container_options for c in "*?[")
    allowed = not rejected_job_container_options(row.container_options)
    return row.run_in != "host" and bool(row.image) and static and allowed


def self_hosted(row: Row) -> bool:
    return "self-hosted" in row.runner_labels


@dataclass(frozen=True, kw_only=True)
class Event:
    """What the plan needs from the GitHub event (``GITHUB_EVENT_NAME`` and its payload)."""

    name: str
    action: str = ""
    labels: tuple[str, ...] = ()
    added_label: str = ""
    from_fork: bool = False

    @classmethod
    def from_payload(cls, name: str, payload: Mapping[str, Any]) -> Event:
        pr = payload.get("pull_request") or {}
        head_repo = ((pr.get("head") or {}).get("repo") or {}).get("full_name")
        base_repo = ((pr.get("base") or {}).get("repo") or {}).get("full_name")
        return cls(
            name=name,
            action=str(payload.get("action") or ""),
            labels=tuple(str(lb.get("name", "")) for lb in pr.get("labels") or ()),
            added_label=str((payload.get("label") or {}).get("name") or ""),
            # a deleted fork has no head repository: treat it as a fork
            from_fork=bool(pr) and (head_repo is None or head_repo != base_repo),
        )


def row_runs(row: Row, event: Event, gate_label: str = GATE_LABEL) -> tuple[bool, str]:
    """Whether the row gets a CI job for this event, and why not."""
    if row.ci == "off":
        return False, "ci = off"
    if row.ci == "schedule" and event.name not in SCHEDULED_EVENTS:
        return False, "ci = schedule"
    if event.name.startswith("pull_request") and self_hosted(row):
        if event.from_fork and not (event.action == "labeled" and event.added_label == gate_label):
            return False, f"self-hosted row, a fork's pull request: a maintainer adds {gate_label!r} to run it"
        if not event.from_fork and gate_label not in event.labels:
            return False, f"self-hosted row on a pull request: add the {gate_label!r} label to run it"
    return True, ""


def relabel_skip(row: Row, event: Event, gate_label: str = GATE_LABEL, full_label: str = "") -> str:
    """Why a ``labeled`` event leaves the row out ('' when it does not).

    Labelling runs only what the label unlocks: the self-hosted rows for the gate label,
    every row for ``full_label`` (#34: the full run a selecting pull request asked for),
    nothing for any other label; the pull request's own run has the rest.
    """
    if event.action != "labeled":
        return ""
    if full_label and event.added_label == full_label:
        return ""
    if event.added_label != gate_label:
        return f"labeled {event.added_label!r}, not {gate_label!r}"
    return "" if self_hosted(row) else "runs in the pull request's own run"


def entry(name: str, row: Row) -> dict[str, Any]:
    return {
        "row": name,
        "runs_on": list(row.runner_labels),
        "image": row.image,
        "container_options": " ".join(row.container_options),
        "in_container": job_container_ok(row),
        "image_pinned": "@sha256:" in row.image,
        "timeout_minutes": int(row.run_timeout // 60) + 15,
    }


def entries(name: str, row: Row) -> list[dict[str, Any]]:
    """The row's jobs: one, or with ``shards = N`` one per shard.

    Each shard runs ``--shard K/N`` and uploads ``results/<row>/shards/K`` as
    ``results-<row>@K``, which the triage job lays out again under
    ``results/<row>/shards/K`` and merges.
    """
    job = entry(name, row)
    if row.shards <= 1:
        return [{**job, "shard": "", "run_args": "", "results_path": f"results/{name}", "artifact": f"results-{name}"}]
    return [
        {
            **job,
            "shard": f"{k}/{row.shards}",
            "run_args": f"--shard {k}/{row.shards}",
            "results_path": f"results/{name}/shards/{k}",
            "artifact": f"results-{name}@{k}",
        }
        for k in range(1, row.shards + 1)
    ]


def select_args(cfg: Config, event: Event) -> str:
    """#34: the selection arguments of this event's row jobs when ``select_pull_requests`` is
    on: ``--select changed`` on a pull request that lacks ``select_full_label`` (every test
    with it), and on every other event every test with ``--record-map``, the map the pull
    requests select by (triage keeps it with the branch's history). '' when it is off."""
    if not cfg.select_pull_requests:
        return ""
    if not event.name.startswith("pull_request"):
        return "--record-map"
    return "" if cfg.select_full_label in event.labels else "--select changed"


def actions_matrix(cfg: Config, names: Sequence[str]) -> dict[str, Any]:
    """``{"include": [...]}``: one entry per row (and shard)."""
    return {"include": [e for name in names for e in entries(name, cfg.row(name))]}


@dataclass(frozen=True)
class Plan:
    host: list[dict[str, Any]]
    container: list[dict[str, Any]]
    skipped: dict[str, str]

    def outputs(self) -> dict[str, str]:
        """GITHUB_OUTPUT values: two matrices and whether anything runs."""

        def dump(v: object) -> str:
            return json.dumps(v, separators=(",", ":"))

        return {
            "host": dump({"include": self.host}),
            "container": dump({"include": self.container}),
            "has_host": dump(bool(self.host)),
            "has_container": dump(bool(self.container)),
        }


def plan_jobs(cfg: Config, event: Event, rows: Sequence[str] = (), gate_label: str = GATE_LABEL) -> Plan:
    """The row jobs for this event: host jobs, container jobs, and the rows left out with why."""
    names = list(rows) or list(cfg.rows)
    host: list[dict[str, Any]] = []
    container: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    selecting = select_args(cfg, event)
    full_label = cfg.select_full_label if cfg.select_pull_requests else ""
    for name in names:
        row = cfg.row(name)
        runs, why = row_runs(row, event, gate_label)
        if runs and (relabelled := relabel_skip(row, event, gate_label, full_label)):
            runs, why = False, relabelled
        if not runs:
            skipped[name] = why
            continue
        for e in entries(name, row):
            if selecting and not e["shard"]:  # a row split into shards runs every test for now
                e["run_args"] = selecting
            (container if e["in_container"] else host).append(e)
    return Plan(host=host, container=container, skipped=skipped)
