"""``device-matrix ci``: the steps of the GitHub workflow, so a caller needs no scripts.

device-matrix ci matrix --output "$GITHUB_OUTPUT"    # the plan job
device-matrix ci install --device cpu                # a row job: its packages and the project
device-matrix ci collect artifacts results           # triage and issues jobs
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from device_matrix import config as config_mod
from device_matrix.cli.commands import a_file, a_folder
from device_matrix.errors import EXIT_OK, EnvironmentProblem
from device_matrix.output import Output
from device_matrix.workflow import GATE_LABEL, Event, plan_jobs


def _event(args: argparse.Namespace) -> Event:
    name = args.event_name or os.environ.get("GITHUB_EVENT_NAME", "workflow_dispatch")
    path = args.event_path or os.environ.get("GITHUB_EVENT_PATH")
    payload: dict[str, Any] = {}
    if path:
        try:
            payload = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise EnvironmentProblem(
                f"cannot read the event payload {path}: {exc}",
                tip="Pass --event-path to a GitHub event JSON file, or leave GITHUB_EVENT_PATH unset.",
            ) from exc
    return Event.from_payload(name, payload)


def cmd_ci_matrix(args: argparse.Namespace, out: Output) -> int:
    cfg = config_mod.load(Path(args.project) if args.project else None)
    rows = [r for part in args.rows or () for r in part.split(",") if r.strip()]
    plan = plan_jobs(cfg, _event(args), [r.strip() for r in rows], gate_label=args.label)
    for name, why in plan.skipped.items():
        out.command("notice", why, title=f"row {name} not run")  # escaped: an event names labels (#22)
    for e in plan.host + plan.container:
        # a host-only row never starts its image
        if e["image"] and not e["image_pinned"] and cfg.row(e["row"]).run_in != "host":
            out.command(
                "warning",
                f"row {e['row']} uses {e['image']}; pin it by digest (image@sha256:...) in pyproject.toml",
                title="unpinned image",
            )
    lines = "".join(f"{k}={v}\n" for k, v in plan.outputs().items())
    if args.output:
        with Path(args.output).open("a", encoding="utf-8") as fh:
            fh.write(lines)
    else:
        out.line(lines.rstrip("\n"))
    return EXIT_OK


def cmd_ci_collect(args: argparse.Namespace, out: Output) -> int:
    """artifacts/results-<row>/ -> results/<row>/ (results-<row>@K -> results/<row>/shards/K);
    the issues job's links go to results/."""
    from device_matrix.records.merge import artifact_folder

    src, dest = Path(args.artifacts), Path(args.results)
    dest.mkdir(parents=True, exist_ok=True)
    if not src.is_dir():
        out.line(f"no artifacts in {src}: every row job may have failed before uploading")
        return EXIT_OK
    for folder in sorted(p for p in src.iterdir() if p.is_dir()):
        target = artifact_folder(dest, folder.name)
        if target is not None:
            if target.exists():
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(folder, target)
            out.line(f"{folder} -> {target}")
        elif folder.name == "issue-links":
            # the issues job's links and states, read by triage
            for f in folder.iterdir():
                if f.is_file():
                    shutil.copy2(f, dest / f.name)
                    out.line(f"{f} -> {dest / f.name}")
    return EXIT_OK


def cmd_ci_install(args: argparse.Namespace, out: Output) -> int:
    """pip-install what a row job needs here: the row's packages and the project itself.

    The row's packages (``install``, ``install_args``) when the row runs on this host
    without its image; in the row's image (a container job) the image has them. The
    project's ``project_install`` wherever the row runs here.
    """
    from device_matrix.run.plan import plan_row

    cfg = config_mod.load(Path(args.project) if args.project else None)
    plan = plan_row(cfg, cfg.row(args.device))
    if plan.mode != "local":
        out.line(f"{args.device}: nothing to install ({plan.mode}: {plan.reason})")
        return EXIT_OK
    in_image = os.environ.get("DEVICE_MATRIX_IN_IMAGE") in (args.device, plan.row.image)
    steps = []
    if plan.row.install and not in_image:
        steps.append(("the row's packages", [*plan.row.install, *plan.row.install_args]))
    for k, step in enumerate(cfg.project_install, 1):
        which = f" step {k}" if len(cfg.project_install) > 1 else ""
        steps.append((f"the project (project_install{which})", list(step)))
    if not steps:
        out.line(f"{args.device}: nothing to install ({plan.reason})")
    for what, pip_args in steps:
        argv = [sys.executable, "-m", "pip", "install", *pip_args]
        out.line("$ " + " ".join(argv))
        # relative paths (".", "-e .[test]") are the project's
        if subprocess.run(argv, check=False, cwd=cfg.project_root).returncode != 0:
            raise EnvironmentProblem(
                f"installing {what} of the {args.device} row failed",
                tip="Read pip's error above; the row's `install` and `install_args`, and `project_install`, "
                "are in the configuration.",
            )
    return EXIT_OK


def add_ci_commands(sub: Any) -> None:
    ci = sub.add_parser("ci", help="steps of the GitHub workflow: matrix, install, collect")
    ci_sub = ci.add_subparsers(dest="ci_command", required=True)
    m = ci_sub.add_parser("matrix", help="the row jobs for this event, as GITHUB_OUTPUT lines")
    m.add_argument("--output", type=a_file, help="append to this file (the job's $GITHUB_OUTPUT) instead of stdout")
    m.add_argument("--rows", action="append", help="only these rows (comma-separated; default: every row)")
    m.add_argument("--label", default=GATE_LABEL, help=f"pull request label that runs self-hosted rows ({GATE_LABEL})")
    m.add_argument("--event-name", help="default $GITHUB_EVENT_NAME")
    m.add_argument("--event-path", type=a_file, help="default $GITHUB_EVENT_PATH")
    m.set_defaults(func=cmd_ci_matrix)
    i = ci_sub.add_parser(
        "install", help="install a row's packages (unless in its image) and the project (project_install)"
    )
    i.add_argument("--device", "-d", required=True)
    i.set_defaults(func=cmd_ci_install)
    c = ci_sub.add_parser("collect", help="lay downloaded artifacts out as a results folder")
    c.add_argument("artifacts", type=a_folder)
    c.add_argument("results", type=a_folder)
    c.set_defaults(func=cmd_ci_collect)
