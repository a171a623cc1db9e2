#!/usr/bin/env python3
"""Write the workflow's two matrices (host rows, container rows) as GITHUB_OUTPUT lines.

    python tools/emit_matrix.py --output "$GITHUB_OUTPUT"

Without --output the lines go to stdout. Warnings (images not pinned by digest) go to
stdout as workflow annotations.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from device_matrix import config  # noqa: E402
from device_matrix.workflow import actions_matrix  # noqa: E402


def main(argv: list[str]) -> int:
    output = Path(argv[argv.index("--output") + 1]) if "--output" in argv else None
    cfg = config.load(ROOT)
    full = actions_matrix(cfg, list(cfg.rows))["include"]
    host = {"include": [e for e in full if not e["in_container"]]}
    container = {"include": [e for e in full if e["in_container"]]}
    for e in full:
        if e["image"] and not e["image_pinned"]:
            # an annotation in the plan job: the image is a tag, not a digest
            print(
                f"::warning title=unpinned image::row {e['row']} uses {e['image']}; "
                "pin it by digest (image@sha256:...) in pyproject.toml"
            )
    lines = (
        f"host={json.dumps(host, separators=(',', ':'))}\ncontainer={json.dumps(container, separators=(',', ':'))}\n"
    )
    if output is None:
        sys.stdout.write(lines)
    else:
        with output.open("a", encoding="utf-8") as fh:
            fh.write(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
