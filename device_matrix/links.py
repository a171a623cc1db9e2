"""The links the last issue sync recorded (``results/issues.json``): each finding's issue
and each issue's state. Written by the sync; read by the reports and ``diagnose`` from
here, below both, so the reports never import the tracker (#31).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LINKS_FILE = "issues.json"
LINKS_VERSION = 1


def read_links(path: Path) -> dict[str, Any]:
    """The last sync's links; an unreadable or foreign file counts as none (it is a cache)."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("version") != LINKS_VERSION:
        return {}
    for key in ("links", "issues"):
        if not isinstance(data.get(key, {}), dict):
            data[key] = {}
    return data


def load_links(results_dir: Path) -> dict[str, Any]:
    """What the last sync recorded, for the triage report."""
    return read_links(results_dir / LINKS_FILE)
