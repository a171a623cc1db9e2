"""The rule of a row's name, below both the configuration that declares rows and the
results format that records them (#31: the record's reader never loads the configuration).

A row's name is the name of its folder under the results folder, so it is a safe file name:
a letter or digit first, then letters, digits, ``_``, ``.`` and ``-``, 64 at most.
"""

from __future__ import annotations

import re

ROW_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
