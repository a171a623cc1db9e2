#!/usr/bin/env python3
"""This repository's entry point for `device-matrix ci collect` (artifacts -> results folder).

python tools/collect_artifacts.py artifacts results
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from device_matrix.cli import main

if __name__ == "__main__":
    sys.exit(main(["ci", "collect", *sys.argv[1:]]))
