"""Subcommands beyond running rows: skips, issues, triage."""

from __future__ import annotations

from typing import Any


def add_more_commands(sub: Any) -> None:
    from device_matrix.issues_cli import add_issues_commands
    from device_matrix.skips_cli import add_skips_commands
    from device_matrix.triage_cli import add_triage_command

    add_skips_commands(sub)
    add_issues_commands(sub)
    add_triage_command(sub)
