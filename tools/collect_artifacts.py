#!/usr/bin/env python3
"""Lay downloaded row artifacts out as a results folder: artifacts/results-<row>/ -> results/<row>/.

python tools/collect_artifacts.py artifacts results
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: collect_artifacts.py ARTIFACTS RESULTS", file=sys.stderr)
        return 2
    src, dest = Path(argv[0]), Path(argv[1])
    dest.mkdir(parents=True, exist_ok=True)
    if not src.is_dir():
        print(
            f"no artifacts in {src}: every row job may have failed before uploading",
            file=sys.stderr,
        )
        return 0
    for folder in sorted(src.iterdir()):
        if folder.is_dir() and folder.name.startswith("results-"):
            row = folder.name.removeprefix("results-")
            target = dest / row
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(folder, target)
            print(f"{folder} -> {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
