"""Issue trackers: the embedded ledger (default) and GitHub."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from device_matrix.config import Config
from device_matrix.errors import TrackerError
from device_matrix.issues.base import Tracker
from device_matrix.issues.home import ledger_file


def open_tracker(
    cfg: Config,
    results_dir: Path,
    *,
    kind: str | None = None,
    environ: Mapping[str, str] | None = None,
    note: Callable[[str], None] | None = None,
) -> Tracker:
    """The configured tracker (or ``kind``). The ledger is the project's, whatever
    ``results_dir`` is: one there from before is moved to it, and ``note`` told (#42)."""
    env = os.environ if environ is None else environ
    choice = kind or cfg.tracker.kind
    if choice == "ledger":
        from device_matrix.issues.ledger import Ledger

        path = ledger_file(cfg, results=results_dir, note=note)
        return Ledger(path, seed=cfg.project_root / cfg.tracker.ledger_seed)
    from device_matrix.issues.github import GitHubTracker

    if "/" not in cfg.tracker.repository:
        raise TrackerError(
            "the github tracker needs a repository",
            tip="Set repository = 'owner/name' under [tool.device-matrix.tracker].",
        )
    token = env.get(cfg.tracker.token_env)
    if not token:
        raise TrackerError(
            f"no token in ${cfg.tracker.token_env}",
            tip=f"Export {cfg.tracker.token_env} "
            f"(in Actions: env: {cfg.tracker.token_env}: ${{{{ secrets.GITHUB_TOKEN }}}}).",
        )
    if not token.isascii() or not token.isprintable() or any(c.isspace() for c in token):
        # a pasted token with a newline or a quote character would fail inside the HTTP library
        raise TrackerError(
            f"the token in ${cfg.tracker.token_env} holds spaces, line breaks or non-ASCII characters",
            tip=f"Set {cfg.tracker.token_env} to the token alone, without quotes or a trailing newline.",
        )
    return GitHubTracker(
        cfg.tracker.repository,
        token,
        api_url=cfg.tracker.api_url,
        labels=cfg.tracker.labels,
        write_interval=cfg.tracker.write_interval,
        writes_per_hour=cfg.tracker.writes_per_hour,
    )
